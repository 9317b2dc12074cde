import Foundation
import SyncModel

/// A registered user as the registry keeps them (``SyncServer/users(after:limit:)``).
public struct RegisteredUser: Sendable, Hashable {
    public var user: UserID
    /// The address by which share owners invite them, if one was given.
    public var emailAddress: String?

    public init(user: UserID, emailAddress: String?) {
        self.user = user
        self.emailAddress = emailAddress
    }
}

extension SyncServer {
    /// Up to `limit` registered users whose IDs come after `after` (from the first without it),
    /// in the order of their IDs' UTF-8 bytes: one read of the registry's index, never of any
    /// user's records. A user is registered by `registerUser(_:emailAddress:)`, a sign-in, or
    /// their first request.
    public func users(after: UserID? = nil, limit: Int) throws -> [RegisteredUser] {
        try users.users(after: after, limit: limit).map { RegisteredUser(user: $0.user, emailAddress: $0.email) }
    }

    /// Whether `user` is registered, without registering them.
    public func isRegistered(_ user: UserID) throws -> Bool {
        try users.registeredNumber(of: user) != nil
    }

    /// `user` as the registry keeps them, or `nil` if they are not registered. Registers nobody.
    public func registeredUser(_ user: UserID) throws -> RegisteredUser? {
        guard let number = try users.registeredNumber(of: user) else { return nil }
        return RegisteredUser(user: user, emailAddress: try users.email(ofNumber: number))
    }

    /// Deletes `user` and all their data; returns whether they were registered.
    ///
    /// In order, so that a failure part way leaves a user to delete again, never data no user is
    /// named by:
    /// 1. the shares they own end for their participants, as when an owner deletes a share (each
    ///    participant's shared database reports the zone deleted, F124);
    /// 2. they leave the shares of others, as a participant deleting the share does (F124): the
    ///    owner's share lists them as removed;
    /// 3. their push streams on this node end;
    /// 4. their logs (private, shared and public databases: zones, records, tombstones, device and
    ///    zone keys, asset references) and asset contents are deleted from the storage;
    /// 5. their registration (ID and e-mail address) is deleted: registering the ID again gives
    ///    a new user with empty databases.
    ///
    /// Credentials are not the server's: the caller revokes the user's tokens and sessions
    /// first (`AdminOperations` in LogSyncHTTPServer does). Another node sharing a PostgreSQL
    /// store forgets the user when it hears the revocation of their tokens.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an invalid user ID; a share that could not be
    ///   ended or left (nothing of the user's data is deleted then); storage errors.
    @discardableResult
    public func deleteUser(_ user: UserID) throws -> Bool {
        try user.validate()
        guard let number = try users.registeredNumber(of: user) else {
            forgetUser(user)
            return false
        }
        try endOwnedShares(of: user)
        try leaveShares(of: user)
        pushHub.finish(user: user)
        forgetUser(user)
        try storage.deleteLogs(ofUser: number)
        _ = try users.delete(user)
        forgetUser(user)
        // Anything that opened a log of theirs meanwhile (a participant's propagation reading
        // the owner's zone) made an empty one, which goes too.
        try storage.deleteLogs(ofUser: number)
        return true
    }

    /// Forgets what this process keeps of `user` (their number, their open databases): another
    /// node deleted them, or may have.
    public func forgetUser(_ user: UserID) {
        databases.forget(user)
        users.forget(user)
    }

    /// Deletes every share `user` owns, as the owner would: their participants' shared
    /// databases report the zones gone (F124).
    private func endOwnedShares(of user: UserID) throws {
        let owner = try store(user, .private)
        let shares: [Record.ID] = try owner.read { snapshot in
            var ids: [Record.ID] = []
            try snapshot.index.forEach(in: "zones") { key, value in
                let state = try ZoneState(decoding: Array(value))
                guard state.isLive else { return true }
                let zoneID = IndexKey.zoneID(from: Array(key))
                guard zoneID != .default else { return true }
                for (name, _) in try snapshot.shares(incarnation: state.incarnation) {
                    ids.append(Record.ID(recordName: name, zoneID: zoneID))
                }
                return true
            }
            return ids
        }
        guard !shares.isEmpty else { return }
        let answer = try owner.modifyRecords(
            ModifyRecordsRequest(recordIDsToDelete: shares, atomically: false), from: nil)
        for (id, result) in answer.deleteResults {
            if case .failure(let error) = result, error.code != .unknownItem {
                throw SyncError(
                    error.code, "the share \(id.recordName) of \(user) could not be ended: \(error.message)")
            }
        }
    }

    /// Takes `user` out of every share of others they joined, as their deleting the share would
    /// (F124).
    private func leaveShares(of user: UserID) throws {
        let shared = try store(user, .shared)
        let zones = try shared.read { snapshot in try snapshot.sharedZones() }
        guard !zones.isEmpty else { return }
        let answer = try SharedDatabase(shared).modifyRecords(
            ModifyRecordsRequest(
                recordIDsToDelete: zones.map { zoneID, state in Record.ID(recordName: state.share, zoneID: zoneID) },
                atomically: false),
            from: nil)
        for (id, result) in answer.deleteResults {
            // A share already gone, or a zone no longer shared with them, is left already.
            if case .failure(let error) = result, ![.unknownItem, .zoneNotFound].contains(error.code) {
                throw SyncError(
                    error.code, "\(user) could not leave the share \(id.recordName): \(error.message)")
            }
        }
    }
}

extension SyncServer {
    /// The name of `user`'s sharing lock in the storage's `withExclusiveLock(_:_:)`: what sharing
    /// with them holds (acceptance, propagation). For tests that hold it.
    package func sharingLockName(of user: UserID) throws -> String {
        OpenDatabases.sharingLockName(of: try context.users.number(of: user))
    }
}
