import SyncModel
import Synchronization

/// How the rules of one database reach the other databases of its server: the small interface
/// that sharing (acceptance, propagation to participants' shared databases, a participant's
/// requests decided in the owner's database), change feeds and zone keys use, in place of the
/// server itself.
protocol DatabaseDirectory: Sendable {
    /// The database of `user` and `scope`, opened on first use.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for a user ID that breaks the rules; storage
    ///   errors.
    func open(_ user: UserID, _ scope: DatabaseScope) throws -> OpenDatabase

    /// Runs `body` holding the lock that serialises the writes to the shared database of the
    /// participant with registry number `participant` (acceptance, propagation) on every node of
    /// the storage, so that two of them never decide on one participant's zones at once. Each
    /// participant has a lock of their own: sharing with different participants runs in
    /// parallel.
    func withSharingLock<R>(of participant: UInt64, _ body: () throws -> R) throws -> R
}

/// One (user, scope) database as its server keeps it open: whose it is, its log, and what the
/// server remembers of it between requests. The rules that run on it are `ServerDatabase`'s.
final class OpenDatabase: Sendable {
    let user: UserID
    /// The user's number in the registry (their record name is `_user<number>`).
    let userNumber: UInt64
    /// The record ID that stands for the user (`_user<number>`).
    let userRecordID: Record.ID
    let scope: DatabaseScope
    let log: any ServerLog
    /// The operation groups its log is known to have started (F69).
    let operationGroups = OperationGroups()

    init(user: UserID, userNumber: UInt64, scope: DatabaseScope, log: any ServerLog) {
        self.user = user
        self.userNumber = userNumber
        self.userRecordID = UserRegistry.recordID(ofNumber: userNumber)
        self.scope = scope
        self.log = log
    }
}

/// What the lock of ``DatabaseDirectory/withSharingLock(of:_:)`` covers.
package enum SharingLockScope: Sendable {
    /// One lock per participant: sharing with different participants runs in parallel.
    case perParticipant
    /// One lock for every participant on every node, as in earlier versions: all sharing takes
    /// turns. Kept to measure the first against.
    case wholeStorage
}

/// The databases open in this process, each opened once, on first use, from the storage.
final class OpenDatabases: DatabaseDirectory {
    private let storage: any ServerStorage
    private let users: UserRegistry
    private let sharingLock: SharingLockScope
    private let open = Mutex<[PushHub.Key: OpenDatabase]>([:])

    init(storage: any ServerStorage, users: UserRegistry, sharingLock: SharingLockScope = .perParticipant) {
        self.storage = storage
        self.users = users
        self.sharingLock = sharingLock
    }

    func open(_ user: UserID, _ scope: DatabaseScope) throws -> OpenDatabase {
        let key = PushHub.Key(user: user, scope: scope)
        if let open = open.withLock({ $0[key] }) { return open }
        let number = try users.number(of: user)
        let name = ServerLogName.database(user: number, scope: scope)
        let log = try storage.openLog(name, projection: name.serverProjection)
        let database = OpenDatabase(user: user, userNumber: number, scope: scope, log: log)
        return open.withLock { open in
            if let existing = open[key] { return existing }
            open[key] = database
            return database
        }
    }

    func withSharingLock<R>(of participant: UInt64, _ body: () throws -> R) throws -> R {
        switch sharingLock {
        case .perParticipant: try storage.withExclusiveLock(Self.sharingLockName(of: participant), body)
        case .wholeStorage: try storage.withExclusiveLock("sharing", body)
        }
    }

    /// The name of participant `number`'s sharing lock in ``ServerStorage/withExclusiveLock(_:_:)``.
    static func sharingLockName(of number: UInt64) -> String { "sharing:u\(number)" }

    /// Forgets `user`'s open databases: the user was deleted, and their logs with them.
    func forget(_ user: UserID) {
        open.withLock { open in
            for scope in DatabaseScope.allCases { open[PushHub.Key(user: user, scope: scope)] = nil }
        }
    }

    /// Runs `body` on the table of open databases: what a test uses to forget them all, as a
    /// restarted process would.
    func withLock<R: Sendable>(_ body: (inout [PushHub.Key: OpenDatabase]) -> R) -> R {
        open.withLock { body(&$0) }
    }
}
