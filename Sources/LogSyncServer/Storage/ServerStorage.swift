import Foundation
import LogStore
import SyncModel
import Synchronization

/// Where a server keeps its logs and their indexes: LMDB environments on the server's own disk
/// (``LMDBStorage``, the default), or a database several server nodes share (the PostgreSQL
/// store of `LogSyncPostgres`).
///
/// The server's rules (validation, conflicts, feeds, tokens, request-ID replay, sharing, quotas)
/// are written once against ``ServerLog`` and ``IndexReader``; a storage only keeps entries at
/// dense offsets, applies the log's projection to its tables in the transaction that appends,
/// and serialises the writers of one log, whichever node they run on.
public protocol ServerStorage: Sendable {
    /// Opens the log `name`, creating it empty if it is not there, with `projection` as its
    /// index (rebuilt from the entries when the stored index is of another version).
    func openLog(_ name: ServerLogName, projection: any Projection) throws -> any ServerLog

    /// Deletes every log of the user with registry number `number` (their databases of every
    /// scope, with their indexes), every asset content and partial upload kept for them, and
    /// the support bundles they uploaded (``bundles``):
    /// what deleting a user leaves behind (`SyncServer.deleteUser(_:)`). Nothing of another
    /// user is touched. Deleting what is not there does nothing. A log of theirs still open is
    /// not to be used again.
    func deleteLogs(ofUser number: UInt64) throws

    /// Runs `body`, which may block on the storage (a disk sync, a database round trip), where
    /// blocking is harmless, and returns its result to the calling task.
    func perform<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R

    /// Runs `body` while holding the storage-wide lock `name`, so that no other holder of it on
    /// any node that shares this storage runs at the same time.
    func withExclusiveLock<R>(_ name: String, _ body: () throws -> R) throws -> R

    /// Sends `notice` to the push listeners of every node sharing this storage, this one
    /// included: each node's `deliver` handler (``startNotifications(_:missed:)``) gets it.
    func publish(_ notice: PushNotice)

    /// Starts delivering the notices published on any node to `deliver`, and calls `missed`
    /// when notices may have been lost (the storage's connection was lost and made again), so
    /// that the node can tell its devices to fetch.
    func startNotifications(_ deliver: @escaping @Sendable (PushNotice) -> Void, missed: @escaping @Sendable () -> Void)

    /// Stops notifications and closes connections. Committed data is already stored.
    func shutdown()

    /// The bearer tokens this storage keeps, so that every node sharing it accepts the same
    /// ones; `nil` when tokens live in a file beside the data (the LMDB store).
    var tokens: (any StoredTokens)? { get }

    /// Every user's database log that holds entries, with its last offset, read at once without
    /// creating or keeping open any database (the admin change stream's catalogue); `nil` when
    /// the storage cannot list them so, and the server opens each registered user's databases
    /// instead.
    func databaseLogEnds() throws -> [DatabaseLogEnd]?

    /// Where asset contents are kept: files beside the LMDB environments, or the database.
    var assets: any ServerAssetStore { get }

    /// Where uploaded support bundles are kept (Docs/Privacy.md, "Uploaded bundles"); `nil` for
    /// a storage that keeps none, whose server refuses uploads.
    var bundles: (any ServerBundleStore)? { get }

    /// Whether this node hears the notices of the other nodes sharing the storage (push hints,
    /// revocations) now; `nil` for a storage no other node shares (the LMDB store), which needs
    /// none. A node that does not hear them serves, but is not ready (`/health/ready`).
    var hearsOtherNodes: Bool? { get }

    /// The store's name in metrics (the `store` label): `lmdb` unless the storage says.
    var metricsStoreName: String { get }

    /// What the store holds, as cheaply as the storage can tell it (each scrape of `GET
    /// /metrics` asks): never by reading entries. `nil` when the storage cannot tell.
    func storedSize() throws -> StoredSize?
}

/// What a storage holds (``ServerStorage/storedSize()``): its bytes on disk and, when the storage
/// keeps every log's end in one place, the entries of all its logs.
public struct StoredSize: Sendable, Hashable {
    /// The bytes the store takes: the files of the LMDB environments and assets, or the
    /// PostgreSQL database.
    public var bytes: UInt64
    /// The entries of every log (the registry's, the sessions' and every database's), when the
    /// storage can count them without opening each log; `nil` otherwise.
    public var entries: UInt64?

    /// Creates a size.
    ///
    /// - Parameters:
    ///   - bytes: The bytes the store takes.
    ///   - entries: The entries of every log, if known.
    public init(bytes: UInt64, entries: UInt64?) {
        self.bytes = bytes
        self.entries = entries
    }
}

extension ServerStorage {
    public var hearsOtherNodes: Bool? { nil }
    public var metricsStoreName: String { "lmdb" }
    public var tokens: (any StoredTokens)? { nil }
    public func databaseLogEnds() throws -> [DatabaseLogEnd]? { nil }
    public func storedSize() throws -> StoredSize? { nil }
    public var bundles: (any ServerBundleStore)? { nil }
}

/// Where one user's database log ends (``ServerStorage/databaseLogEnds()``).
public struct DatabaseLogEnd: Sendable, Hashable {
    /// The user's registry number.
    public var user: UInt64
    public var scope: DatabaseScope
    public var lastOffset: LogOffset

    public init(user: UInt64, scope: DatabaseScope, lastOffset: LogOffset) {
        self.user = user
        self.scope = scope
        self.lastOffset = lastOffset
    }
}

extension ServerLogName {
    /// The log a name such as `u12/private` names (``description``), or `nil`.
    public init?(_ description: String) {
        switch description {
        case "registry": self = .registry
        case "sessions": self = .sessions
        default:
            let parts = description.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].hasPrefix("u"), let user = UInt64(parts[0].dropFirst()),
                "u\(user)" == parts[0], let scope = DatabaseScope.allCases.first(where: { "\($0)" == parts[1] })
            else { return nil }
            self = .database(user: user, scope: scope)
        }
    }
}

/// Bearer tokens kept by a storage: only each token's digest (`sha256:<64 hex digits>`) and its
/// user.
///
/// Every node sharing the storage keeps the tokens it looked up in memory, so a deletion must
/// reach them all: ``revoke(_:)`` deletes and tells every node, and each node hears of it through
/// ``observeRevocations(_:)``.
public protocol StoredTokens: Sendable {
    /// The user of the token with this digest, or `nil`.
    func user(forDigest digest: String) throws -> UserID?
    /// The users of the tokens with these digests that are kept (the others are missing), in one
    /// round trip where the storage allows.
    func users(forDigests digests: [String]) throws -> [String: UserID]
    /// Records that the token with this digest stands for `user`.
    ///
    /// - Throws: `SyncError(.invalidArguments)` if the digest stands for a user already.
    func add(digest: String, user: UserID) throws
    /// How many tokens are kept.
    func count() throws -> Int
    /// Deletes the tokens `revocation` names and, in the same commit, tells every node sharing
    /// the storage (this one included): each node's ``observeRevocations(_:)`` handler gets
    /// `.revoked(revocation)`, even when nothing was deleted (a row deleted by other means is
    /// then dropped from the nodes' memory too). Returns how many tokens were deleted.
    func revoke(_ revocation: Revocation) throws -> Int
    /// Starts telling `handler` of the revocations committed on any node, and of whether it can
    /// be told of them (``RevocationEvent``). Until the first `.listening`, and after each
    /// `.interrupted`, revocations may go unheard: a node must not trust what it keeps in memory.
    func observeRevocations(_ handler: @escaping @Sendable (RevocationEvent) -> Void)
}

extension StoredTokens {
    /// One ``user(forDigest:)`` per digest.
    public func users(forDigests digests: [String]) throws -> [String: UserID] {
        var users: [String: UserID] = [:]
        for digest in digests { users[digest] = try user(forDigest: digest) }
        return users
    }
}

/// What a revocation takes away: one credential, every bearer token of a user, or a device's
/// session.
///
/// A credential is what a request authenticates with, named so that every node can tell it
/// apart without holding it: a bearer token or a session's access token by its digest
/// (`sha256:<64 hex digits>`). A user's data is untouched: only the way in goes.
public enum Revocation: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The credential with this name: a bearer token's digest, or the digest of a session's
    /// access token that a refresh replaced (the session itself goes on, and so do its push
    /// channels).
    case credential(String)
    /// Every bearer token of the user (not their sessions: ``SessionStore/revokeAll(of:)``).
    case user(UserID)
    /// The session with this ID (``SessionStore``): its access and refresh tokens, and its
    /// push channels.
    case session(String)

    /// Whether this revocation takes away `credential`, a credential of `user`.
    public func covers(credential: String, of user: UserID) -> Bool {
        switch self {
        case .credential(let revoked): revoked == credential
        case .user(let revoked): revoked == user
        case .session: false
        }
    }

    /// Whether this revocation ends the session `session` (its channels and every token of it).
    public func covers(session: String) -> Bool {
        if case .session(let revoked) = self { return revoked == session }
        return false
    }

    public var description: String {
        switch self {
        case .credential(let credential): "credential \(credential)"
        case .user(let user): "every credential of user \"\(user.rawValue)\""
        case .session(let session): "session \(session)"
        }
    }

    private enum CodingKeys: String, CodingKey {
        case credential, user, session
    }

    /// `{"credential": "sha256:…"}`, `{"user": "alice"}` or `{"session": "…"}`: what travels
    /// between nodes.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let credential = try container.decodeIfPresent(String.self, forKey: .credential) {
            self = .credential(credential)
        } else if let session = try container.decodeIfPresent(String.self, forKey: .session) {
            self = .session(session)
        } else {
            self = .user(UserID(rawValue: try container.decode(String.self, forKey: .user)))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .credential(let credential): try container.encode(credential, forKey: .credential)
        case .user(let user): try container.encode(user.rawValue, forKey: .user)
        case .session(let session): try container.encode(session, forKey: .session)
        }
    }
}

/// What a node hears about revocations (``StoredTokens/observeRevocations(_:)``).
public enum RevocationEvent: Sendable, Hashable {
    /// A revocation was committed, on this node or another.
    case revoked(Revocation)
    /// From now on every revocation is heard; those before may not have been.
    case listening
    /// Revocations may go unheard from now on, until the next `.listening`.
    case interrupted
}

/// The name of one of a server's logs.
public enum ServerLogName: Sendable, Hashable, CustomStringConvertible {
    /// The registry of users and their numbers.
    case registry
    /// The devices' sessions (``SessionStore``).
    case sessions
    /// The database of `scope` of the user with registry number `user`.
    case database(user: UInt64, scope: DatabaseScope)

    /// `registry`, or `u<number>/<scope>` (`u12/private`).
    public var description: String {
        switch self {
        case .registry: "registry"
        case .sessions: "sessions"
        case .database(let user, let scope): "u\(user)/\(scope)"
        }
    }
}

extension ServerLogName {
    /// The projection the server keeps as this log's index: the registry's users, or a
    /// database's ``ServerIndex``. What a copy of the log into another store applies.
    package var serverProjection: any Projection {
        switch self {
        case .registry: UserRegistry.Index()
        case .sessions: SessionStore.Index()
        case .database: ServerIndex()
        }
    }
}

/// One log of a server's storage and its index, as the server's rules read and write it.
public protocol ServerLog: AnyObject, Sendable {
    /// Runs `body` on a consistent snapshot of the log and its index.
    func read<R>(_ body: (any IndexReader) throws -> R) throws -> R

    /// Runs `body` on a consistent snapshot of the log and its index that reaches offset `offset`
    /// at least, but may be older than ``read(_:)``'s: a fetch with a change token at `offset`,
    /// which a storage may answer from a copy of the log that lags (a streaming replica of a
    /// database), since any snapshot from the token on is an answer the log once gave. `body`
    /// must have no effect but its result: it may run twice (on the copy, then on the log
    /// itself when the copy fails or the answer is an error).
    func read<R>(notOlderThan offset: LogOffset, _ body: (any IndexReader) throws -> R) throws -> R

    /// Runs `body` in a write transaction, alone among the writers of this log on every node,
    /// with the index as of its start; the entries it returns are appended at the next offsets
    /// and applied to the index in the same transaction, so a request commits whole or not at
    /// all. Returns the body's result and the offsets appended.
    func write<R>(_ body: (any IndexReader) throws -> (entries: [NewEntry], result: R)) throws -> (R, Range<LogOffset>)

    /// The offset of the last entry (`0` for an empty log).
    var lastOffset: LogOffset { get throws }

    /// The log as LogStore keeps it on this machine's disk, for inspection (logtool, time-travel
    /// tests, `ServerAdmin.log(of:scope:)`), or `nil` for a log kept elsewhere (a database server).
    var inspectableLog: Log? { get }
}

extension ServerLog {
    /// A storage without copies of its logs reads the log itself.
    public func read<R>(notOlderThan offset: LogOffset, _ body: (any IndexReader) throws -> R) throws -> R {
        try read(body)
    }

    /// A log kept elsewhere than in an LMDB environment on this machine has none to inspect.
    public var inspectableLog: Log? { nil }
}

/// What the server's rules read of a log: its index's tables and its entries.
public protocol IndexReader {
    /// The value at `key` in the index table `table`.
    func value(forKey key: [UInt8], in table: String) throws -> [UInt8]?
    /// Visits the keys of `table` from `start` (or the first) in byte order while `body` returns
    /// `true`.
    func forEach(
        in table: String, from start: [UInt8]?,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws
    /// The entry at `offset`, if the log has one.
    func entry(at offset: LogOffset) throws -> LogEntry?
    /// The offset of the last entry (`0` for an empty log).
    var lastOffset: LogOffset { get throws }

    /// Whether reading ahead pays: a store across a network answers many keys or entries in
    /// one round trip, so the rules announce what they are about to read (``prefetch(keys:in:)``,
    /// ``prefetch(entries:)``). Reading without announcing gives the same answers.
    var readsAhead: Bool { get }
    /// Announces reads of `keys` of `table`.
    func prefetch(keys: [[UInt8]], in table: String) throws
    /// Announces reads of `rows`, keys of several tables: one round trip for all of them on a
    /// store that reads ahead.
    func prefetch(rows: [(table: String, key: [UInt8])]) throws
    /// Announces reads of the entries at `offsets`.
    func prefetch(entries offsets: [LogOffset]) throws
}

extension IndexReader {
    /// A store on this machine's disk reads as fast one key at a time.
    public var readsAhead: Bool { false }
    public func prefetch(keys: [[UInt8]], in table: String) throws {}
    public func prefetch(rows: [(table: String, key: [UInt8])]) throws {
        var keys: [String: [[UInt8]]] = [:]
        for (table, key) in rows { keys[table, default: []].append(key) }
        for (table, keysOfTable) in keys { try prefetch(keys: keysOfTable, in: table) }
    }
    public func prefetch(entries offsets: [LogOffset]) throws {}

    func forEach(
        in table: String, _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try forEach(in: table, from: nil, body)
    }
}

/// A push hint on its way to the devices listening to one database, on whichever node they are
/// connected: what a storage carries between nodes.
public struct PushNotice: Sendable, Hashable, Codable {
    /// The user whose database changed.
    public var user: String
    /// The device whose commit caused the hint: it gets none unless it asked (F114).
    public var origin: String?
    public var hint: PushHint
    /// Whether the devices listening to the database get the hint: `false` for a commit no
    /// subscription covers, which only the admin change stream hears of (`nil`, from a node
    /// that predates the field, is `true`).
    public var devices: Bool?
    /// When the commit behind it published it, by the publishing node's clock, for the push
    /// fan-out and LISTEN/NOTIFY lag metrics (`nil` from a node that predates the field).
    public var sentAt: Date?

    init(hint: PushHint, user: UserID, origin: DeviceID?, devices: Bool = true, sentAt: Date? = Date()) {
        self.user = user.rawValue
        self.origin = origin?.rawValue
        self.hint = hint
        self.devices = devices ? nil : false
        self.sentAt = sentAt
    }

    var key: PushHub.Key { PushHub.Key(user: UserID(rawValue: user), scope: hint.databaseScope) }
    var originDevice: DeviceID? { origin.map(DeviceID.init(rawValue:)) }
}

// MARK: LMDB

/// The embedded storage: the registry and each user's databases as LMDB environments under one
/// directory (`registry`, `users/u<number>`); locks and push notices stay in this process.
public final class LMDBStorage: ServerStorage {
    public let directory: URL
    public let durability: Durability
    /// Asset contents, as files beside each user's environment.
    public let assets: any ServerAssetStore
    /// Uploaded support bundles, as files beside each user's environment.
    public let bundles: (any ServerBundleStore)?
    private let locks = NamedLocks()
    private let deliver = Mutex<(@Sendable (PushNotice) -> Void)?>(nil)

    /// Storage under `directory`, created if missing.
    public init(directory: URL, durability: Durability = .durable) throws {
        self.directory = directory
        self.durability = durability
        assets = LMDBAssetStore(directory: directory, syncs: durability == .durable)
        bundles = LMDBBundleStore(directory: directory, syncs: durability == .durable)
        try FileManager.default.createDirectory(
            at: Self.usersDirectory(in: directory), withIntermediateDirectories: true)
    }

    /// The sizes of the files under ``directory`` (every environment's and every asset's), from
    /// the directory's listing: no environment is opened. The entries are not counted, as that
    /// would open every user's environment.
    public func storedSize() throws -> StoredSize? {
        var bytes: UInt64 = 0
        let files = FileManager.default.enumerator(
            at: directory, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey])
        while let file = files?.nextObject() as? URL {
            let values = try file.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey])
            if values.isRegularFile == true { bytes += UInt64(values.fileSize ?? 0) }
        }
        return StoredSize(bytes: bytes, entries: nil)
    }

    public func openLog(_ name: ServerLogName, projection: any Projection) throws -> any ServerLog {
        switch name {
        case .registry:
            return LMDBServerLog(
                log: try Log.open(
                    at: Self.registryDirectory(in: directory), named: Self.registryLogName,
                    options: .init(durability: durability), projections: [projection]))
        case .sessions:
            // In the registry's environment, beside the users it names.
            return LMDBServerLog(
                log: try Log.open(
                    at: Self.registryDirectory(in: directory), named: Self.sessionsLogName,
                    options: .init(durability: durability), projections: [projection]))
        case .database(let user, let scope):
            let environment = try LogEnvironment.open(
                at: Self.userDirectory(in: directory, number: user), options: .init(durability: durability))
            return LMDBServerLog(log: try environment.openLog(named: scope.description, projections: [projection]))
        }
    }

    /// Removes the user's environment directory, `users/u<number>`, which holds their logs and
    /// asset contents, then syncs the directory that held it.
    public func deleteLogs(ofUser number: UInt64) throws {
        let userDirectory = Self.userDirectory(in: directory, number: number)
        guard FileManager.default.fileExists(atPath: userDirectory.path) else { return }
        // Renamed first, so that a crash leaves either the whole environment or a directory no
        // user is named by; then removed.
        let doomed = Self.usersDirectory(in: directory).appendingPathComponent(
            "deleted-u\(number)-\(UInt64.random(in: 0...UInt64.max))", isDirectory: true)
        try FileManager.default.moveItem(at: userDirectory, to: doomed)
        try FileManager.default.removeItem(at: doomed)
        if durability == .durable { try LMDBAssetStore.syncDirectory(Self.usersDirectory(in: directory).path) }
    }

    // The layout of a store's directory, which `logsync-server migrate` reads too.

    /// The registry's environment.
    package static func registryDirectory(in directory: URL) -> URL {
        directory.appendingPathComponent("registry", isDirectory: true)
    }

    /// The name of the registry's log in its environment.
    package static let registryLogName = "users"

    /// The name of the sessions' log in the registry's environment.
    package static let sessionsLogName = "sessions"

    /// The directory holding one environment per user, `u<number>`.
    package static func usersDirectory(in directory: URL) -> URL {
        directory.appendingPathComponent("users", isDirectory: true)
    }

    /// The environment of user `number`, whose logs are named by their database scope.
    package static func userDirectory(in directory: URL, number: UInt64) -> URL {
        usersDirectory(in: directory).appendingPathComponent("u\(number)", isDirectory: true)
    }

    /// The end of every database log under `users/`, without creating any: each user's
    /// environment is opened (or the open one taken) for the time of the reading, and only its
    /// logs that exist are read.
    public func databaseLogEnds() throws -> [DatabaseLogEnd]? {
        var ends: [DatabaseLogEnd] = []
        let users = Self.usersDirectory(in: directory)
        for name in try FileManager.default.contentsOfDirectory(atPath: users.path).sorted() {
            guard name.hasPrefix("u"), let number = UInt64(name.dropFirst()), "u\(number)" == name else { continue }
            let environment = try LogEnvironment.open(
                at: Self.userDirectory(in: directory, number: number), options: .init(durability: durability))
            for logName in try environment.logNames() {
                guard let scope = DatabaseScope.allCases.first(where: { $0.description == logName }) else { continue }
                let log = try environment.openLog(
                    named: logName,
                    projections: [ServerLogName.database(user: number, scope: scope).serverProjection])
                let last = try log.lastOffset
                if last.rawValue > 0 { ends.append(DatabaseLogEnd(user: number, scope: scope, lastOffset: last)) }
            }
        }
        return ends
    }

    /// Runs `body` on the calling thread: an LMDB transaction blocks only for its disk sync.
    public func perform<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try body()
    }

    public func withExclusiveLock<R>(_ name: String, _ body: () throws -> R) throws -> R {
        try locks.withLock(named: name, body)
    }

    public func publish(_ notice: PushNotice) {
        deliver.withLock { $0 }?(notice)
    }

    /// Notices never leave this process, so none is missed.
    public func startNotifications(
        _ deliver: @escaping @Sendable (PushNotice) -> Void, missed: @escaping @Sendable () -> Void
    ) {
        self.deliver.withLock { $0 = deliver }
    }

    public func shutdown() {
        deliver.withLock { $0 = nil }
    }
}

/// A log in an LMDB environment, its index the log's projection.
public final class LMDBServerLog: ServerLog {
    /// The log itself, for inspection (logtool, time-travel tests).
    public let log: Log
    private let projection: String

    init(log: Log) {
        self.log = log
        self.projection = log.projections.first?.name ?? ""
    }

    public func read<R>(_ body: (any IndexReader) throws -> R) throws -> R {
        try log.read { reader in try body(Reader(reader: reader, projection: projection)) }
    }

    public func write<R>(
        _ body: (any IndexReader) throws -> (entries: [NewEntry], result: R)
    ) throws -> (R, Range<LogOffset>) {
        try log.environment.write { transaction in
            let (entries, result) = try body(
                Reader(reader: LogReader(log: log, transaction: transaction), projection: projection))
            return (result, try log.append(entries, in: transaction))
        }
    }

    public var lastOffset: LogOffset { get throws { try log.lastOffset } }

    /// The log itself.
    public var inspectableLog: Log? { log }

    /// The index tables and entries inside one LMDB transaction.
    struct Reader: IndexReader {
        let reader: LogReader
        let projection: String

        func value(forKey key: [UInt8], in table: String) throws -> [UInt8]? {
            try reader.transaction.value(forKey: key, in: reader.table(table, of: projection))
        }

        func forEach(
            in table: String, from start: [UInt8]?,
            _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            try reader.transaction.forEach(in: reader.table(table, of: projection), from: start, body)
        }

        func entry(at offset: LogOffset) throws -> LogEntry? { try reader.entry(at: offset) }

        var lastOffset: LogOffset { get throws { try reader.lastOffset } }
    }
}

/// This process's locks of ``ServerStorage/withExclusiveLock(_:_:)``, one per name while someone
/// holds or waits for it: names are per user (a participant's sharing lock, an owner's asset
/// uploads), so a lock is dropped again when its last user leaves.
package final class NamedLocks: Sendable {
    private struct Held {
        let lock: NSLock
        /// The threads holding or waiting for the lock.
        var users: Int
    }

    private let locks = Mutex<[String: Held]>([:])

    package init() {}

    /// Runs `body` holding the lock named `name`.
    package func withLock<R>(named name: String, _ body: () throws -> R) rethrows -> R {
        let lock = locks.withLock { locks in
            var held = locks[name] ?? Held(lock: NSLock(), users: 0)
            held.users += 1
            locks[name] = held
            return held.lock
        }
        defer {
            locks.withLock { locks in
                guard var held = locks[name] else { return }
                held.users -= 1
                locks[name] = held.users == 0 ? nil : held
            }
        }
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// How many names have a lock now: the ones held or waited for.
    package var count: Int { locks.withLock { $0.count } }
}
