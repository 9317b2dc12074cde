import Foundation
import LogStore
import ModelEntries
import SyncModel

/// Operations hooks of a server, used by tests and operators: injected failures, quotas,
/// purges, encrypted-data resets, tombstone compaction and schema deployment.
public struct ServerAdmin: Sendable {
    let server: SyncServer

    /// The next `count` requests of `user` (any database operation, any scope; not the account
    /// query `currentUserRecordID`) fail with `error` — for example `requestRateLimited` with a
    /// `retryAfter`, `serviceUnavailable` or `zoneBusy` (F152).
    public func failNextRequests(of user: UserID, count: Int = 1, with error: SyncError) {
        server.context.requestHooks.hook(InjectedFailures.init).add(error, count: count, for: user)
    }

    /// Installs `hook`, which then runs before each request of any user, after the hooks installed
    /// before it: how a test kit makes requests fail its own way (F152).
    package func install(_ hook: any RequestHook) {
        server.context.requestHooks.install(hook)
    }

    /// Sets `user`'s storage quota in bytes of record data (`nil`: unlimited). Saves that would
    /// exceed it fail per item with `quotaExceeded` (F153).
    public func setQuota(_ bytes: Int?, for user: UserID) {
        server.context.limits.setQuota(bytes, for: user)
    }

    /// Purges a zone as its user would from their account settings: the database feed reports
    /// it deleted with reason `purged`, and record writes to it fail with `userDeletedZone`
    /// until the zone is saved again (F150).
    public func purgeZone(_ zoneID: RecordZone.ID, of user: UserID) throws {
        try zoneID.validate()  // a name that breaks the rules names no zone, and no LMDB key
        try server.store(user, .private).deleteZonesByServer([zoneID], reason: .purged)
    }

    /// Resets the user's encrypted data: every custom zone is deleted with reason
    /// `encryptedDataReset`; operations on those zones fail with `zoneNotFound` carrying that
    /// reason until they are re-created (F150).
    public func resetEncryptedData(of user: UserID) throws {
        let store = try server.store(user, .private)
        try store.deleteZonesByServer(try store.liveCustomZones(), reason: .encryptedDataReset)
    }

    /// Drops the tombstones of changes up to `token`; fetches from older tokens then fail with
    /// `changeTokenExpired` (F144).
    public func compactTombstones(
        of user: UserID, scope: DatabaseScope = .private, before token: DatabaseChangeToken
    ) throws {
        let store = try server.store(user, scope)
        guard token.database == store.databaseID else {
            throw SyncError(
                .invalidArguments, "the token was issued by another database, not \(user)'s \(scope) database")
        }
        try store.compactTombstones(through: token.offset.rawValue)
    }

    /// Deletes `user`'s asset contents that no live record has referenced since before `cutoff`,
    /// then contents and partial uploads no log entry accounts for (see
    /// ``SyncServer/collectAssets(of:unreferencedBefore:)``).
    @discardableResult
    public func collectAssets(of user: UserID, unreferencedBefore cutoff: Date) async throws -> AssetCollection {
        try await server.collectAssets(of: user, unreferencedBefore: cutoff)
    }

    /// The database's current change token: the end of its log.
    public func currentToken(of user: UserID, scope: DatabaseScope = .private) throws -> DatabaseChangeToken {
        let store = try server.store(user, scope)
        return DatabaseChangeToken(offset: ChangeOffset(try store.log.lastOffset), database: store.databaseID)
    }

    /// Registers `user`, with an e-mail address by which owners can invite them to shares (what
    /// `logsync-server user add USER --email ADDRESS` does).
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an invalid user ID or address, or an address
    ///   another user has.
    public func registerUser(_ user: UserID, emailAddress: String? = nil) throws {
        try server.registerUser(user, emailAddress: emailAddress)
    }

    /// Deploys a production schema (what `logsync-server schema deploy` does): see
    /// ``SyncServer/deploySchema(_:)`` (F137).
    @discardableResult
    public func deploySchema(_ schema: RecordSchema) throws -> SchemaDeployment {
        try server.deploySchema(schema)
    }

    /// The development schema `user`'s database of `scope` has grown from its saved records (F137).
    public func developmentSchema(of user: UserID, scope: DatabaseScope = .private) throws -> RecordSchema {
        try server.developmentSchema(of: user, scope: scope)
    }

    /// The log of `user`'s database of `scope`, for inspection (logtool, time-travel tests).
    ///
    /// - Throws: `SyncError(.invalidArguments)` when the server keeps its logs outside LMDB
    ///   (``ServerLog/inspectableLog`` is `nil`).
    public func log(of user: UserID, scope: DatabaseScope = .private) throws -> Log {
        guard let log = try server.store(user, scope).log.inspectableLog else {
            throw SyncError(.invalidArguments, "\(user)'s \(scope) database is not an LMDB log on this server's disk")
        }
        return log
    }
}
