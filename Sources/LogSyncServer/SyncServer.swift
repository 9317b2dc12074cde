import Foundation
import LogStore
import Synchronization
import SyncModel

/// A LogSync server: users' databases as logs, change tokens as offsets, CloudKit's rules.
///
/// ```swift
/// let server = try SyncServer(.init(directory: dataDirectory))
/// let database = server.database(for: "alice", device: "phone")   // any CloudDatabase
/// _ = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
/// ```
///
/// Each user's databases live in an LMDB environment of their own under
/// `directory/users/u<number>` (numbers from the registry in `directory/registry`), so one user's requests can never read or write another's data. Within
/// it, each database (private, shared) is a log whose offsets are its change tokens; the
/// indexes the server answers from are a projection of that log (Docs/Protocol.md, Server data
/// layout).
public final class SyncServer: Sendable {
    /// How a server stores its data and tells time.
    public struct Configuration: Sendable {
        /// The directory holding every user's databases.
        public var directory: URL
        /// `.durable` commits each request to disk before answering; `.fast` is for tests.
        public var durability: Durability
        /// The server's clock, for creation and modification dates.
        public var now: @Sendable () -> Date
        /// The most changes one fetch returns, whatever the client asks for (F141).
        public var maxChangesPerPage: Int
        /// About the most record bytes one fetch returns, counted as the records are stored
        /// (encoded); at least one record is always returned.
        public var maxBytesPerPage: Int

        public init(
            directory: URL, durability: Durability = .durable, now: @escaping @Sendable () -> Date = { Date() },
            maxChangesPerPage: Int = 400, maxBytesPerPage: Int = 4_000_000
        ) {
            self.directory = directory
            self.durability = durability
            self.now = now
            self.maxChangesPerPage = maxChangesPerPage
            self.maxBytesPerPage = maxBytesPerPage
        }
    }

    public let configuration: Configuration
    /// Where the logs are kept: `configuration.directory` in LMDB unless another storage was given.
    public let storage: any ServerStorage
    let pushHub = PushHub()
    let databases = Mutex<[PushHub.Key: ServerDatabase]>([:])
    let injectedFailures = Mutex<[UserID: [SyncError]]>([:])
    let quotas = Mutex<[UserID: Int]>([:])
    /// The asset contents being uploaded in this process, for a zone each, and the hold of the
    /// upload writing each, so two requests never write one.
    let activeUploads = Mutex<[AssetUpload.Key: UploadHold]>([:])
    let users: UserRegistry
    /// The production schema, read from the registry when the server starts and replaced by each
    /// deployment through it; `nil` in development mode (F137).
    let productionSchema: Mutex<RecordSchema?>

    /// Opens (creating it if needed) the server's data directory, its logs in LMDB.
    ///
    /// - Throws: `LogStoreError` if the directory cannot be created.
    public convenience init(_ configuration: Configuration) throws {
        try self.init(
            configuration, storage: LMDBStorage(directory: configuration.directory, durability: configuration.durability))
    }

    /// A server whose logs are kept in `storage` (several servers may share a PostgreSQL store);
    /// `configuration.directory` is then unused.
    public init(_ configuration: Configuration, storage: any ServerStorage) throws {
        self.configuration = configuration
        self.storage = storage
        users = try UserRegistry(storage: storage)
        productionSchema = Mutex(try users.deployedSchema()?.schema)
        let hub = pushHub
        storage.startNotifications(
            { notice in hub.publish(notice.hint, to: notice.key, from: notice.originDevice) },
            missed: { hub.publishToEveryone() })
    }

    /// Serialises the writes to participants' shared databases (acceptance, propagation) on
    /// every node of the storage, so that two of them never decide on one participant's zone at
    /// once.
    func withSharingLock<R>(_ body: () throws -> R) throws -> R {
        try storage.withExclusiveLock("sharing", body)
    }

    /// A device's view of `user`'s database of `scope`: what an embedded app and the tests use.
    public func database(for user: UserID, scope: DatabaseScope = .private, device: DeviceID? = nil) -> InProcessDatabase {
        InProcessDatabase(server: self, user: user, scope: scope, device: device)
    }

    /// The record ID that stands for `user` (what `currentUserRecordID()` returns), registering
    /// the user on first use.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for a user ID that breaks the rules of
    ///   `Identifier.userID` (empty, over 511 bytes, a control character…).
    public func userRecordID(for user: UserID) throws -> Record.ID {
        Record.ID(recordName: "_user\(try users.number(of: user))", zoneID: .default)
    }

    /// Test and operations hooks: injected failures, quotas, purges, tombstone compaction.
    public var admin: ServerAdmin { ServerAdmin(server: self) }

    /// Ends every push stream and stops the storage's notifications. Committed data is already
    /// stored.
    public func shutdown() {
        storage.shutdown()
        pushHub.finishAll()
    }

    // MARK: Internals

    /// The open database of `user` and `scope`, opened on first use.
    func store(_ user: UserID, _ scope: DatabaseScope) throws -> ServerDatabase {
        let key = PushHub.Key(user: user, scope: scope)
        if let open = databases.withLock({ $0[key] }) { return open }
        let number = try users.number(of: user)
        let name = ServerLogName.database(user: number, scope: scope)
        let log = try storage.openLog(name, projection: name.serverProjection)
        let database = ServerDatabase(
            server: self, user: user, userNumber: number, userRecordID: try userRecordID(for: user), scope: scope,
            log: log)
        return databases.withLock { open in
            if let existing = open[key] { return existing }
            open[key] = database
            return database
        }
    }

    /// Throws the next failure injected for `user`, if any (F152).
    func takeInjectedFailure(for user: UserID) throws(SyncError) {
        let failure = injectedFailures.withLock { failures -> SyncError? in
            guard var queue = failures[user], !queue.isEmpty else { return nil }
            let first = queue.removeFirst()
            failures[user] = queue.isEmpty ? nil : queue
            return first
        }
        if let failure { throw failure }
    }
}
