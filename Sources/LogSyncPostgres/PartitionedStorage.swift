import Foundation
import LogStore
import LogSyncServer
import Logging
import PostgresNIO
import SyncModel
import Synchronization

/// One PostgreSQL cluster of a ``PartitionedStorage``: the name the directory knows it by, and
/// its store.
public struct PostgresCluster: Sendable {
    /// The cluster's name in the directory (`logsync_directory.cluster`): letters, digits, `-`
    /// and `_`, at most 63 characters.
    public var name: String
    /// The cluster's store.
    public var storage: PostgresStorage

    /// A cluster named `name`.
    public init(name: String, storage: PostgresStorage) {
        self.name = name
        self.storage = storage
    }

    /// Whether `name` may name a cluster.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 63
            && name.unicodeScalars.allSatisfy {
                ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || $0 == "-" || $0 == "_"
            }
    }
}

/// A cluster configuration or a move that cannot be carried out, saying why.
public struct ClusterError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

/// Users partitioned across several PostgreSQL clusters, each user's logs, asset contents and
/// support bundles on one of them.
///
/// The first cluster is the *directory*: it keeps what is global (the registry of users, the
/// devices' sessions, bearer tokens, the storage-wide locks, push notices and revocations) and
/// the table `logsync_directory`, which says which cluster holds each user (by registry
/// number). It holds users too, like any other cluster.
///
/// A user is placed when their first log is opened: on the cluster that already holds logs of
/// theirs (a store that had one cluster before keeps its users where they are), else on the
/// cluster with the fewest users in the directory, ties going to the first listed. Every node
/// keeps what it read of the directory in memory; a user moved to another cluster
/// (``UserMove``) leaves a fence on the old one (`logsync_user_fences`), which every read and
/// write of the user's logs there checks in its own transaction (writes under the fence's lock),
/// and the asset and bundle tables refuse by trigger. A node that meets a fence reads the
/// directory again and goes to the user's new cluster; while a move holds its fence and has not
/// yet switched the directory, requests of that user fail with a retryable
/// `SyncError(.serviceUnavailable)`.
public final class PartitionedStorage: ServerStorage {
    /// The clusters, the directory first.
    public let clusters: [PostgresCluster]
    /// The directory cluster's store.
    public var directory: PostgresStorage { clusters[0].storage }
    private let cache = Mutex<[UInt64: String]>([:])

    /// The storage over `clusters`, the first of which is the directory.
    ///
    /// - Throws: ``ClusterError`` for no cluster, a malformed name, or a name given twice.
    public init(clusters: [PostgresCluster]) throws {
        guard !clusters.isEmpty else { throw ClusterError("a partitioned store needs at least one cluster") }
        var seen: Set<String> = []
        for cluster in clusters {
            guard PostgresCluster.isValidName(cluster.name) else {
                throw ClusterError(
                    "\"\(cluster.name)\" cannot name a cluster: use letters, digits, - and _ (at most 63)")
            }
            guard seen.insert(cluster.name).inserted else {
                throw ClusterError("the cluster name \"\(cluster.name)\" is given twice")
            }
        }
        self.clusters = clusters
    }

    /// The store of the cluster `name`.
    ///
    /// - Throws: ``ClusterError`` when this node has no cluster of that name.
    public func storage(named name: String) throws -> PostgresStorage {
        guard let cluster = clusters.first(where: { $0.name == name }) else {
            throw ClusterError(
                "no cluster is named \"\(name)\" here (known: \(clusters.map(\.name).joined(separator: ", ")))")
        }
        return cluster.storage
    }

    // MARK: The directory

    /// The name of the cluster holding user `number`: from memory unless `fresh`, else from the
    /// directory, placing the user when the directory has no row for them.
    public func clusterName(ofUser number: UInt64, fresh: Bool = false) throws -> String {
        if !fresh, let known = cache.withLock({ $0[number] }) { return known }
        let name = try directoryRow(of: number)?.cluster ?? place(number)
        cache.withLock { $0[number] = name }
        return name
    }

    /// Forgets what this node read of the directory about `number`.
    func forget(_ number: UInt64) {
        _ = cache.withLock { $0.removeValue(forKey: number) }
    }

    /// The user's row of `logsync_directory`, or `nil`.
    public func directoryRow(of number: UInt64) throws -> DirectoryRow? {
        try directory.pool.withSession { session in
            try Self.directoryRow(of: number, locking: false, session)
        }
    }

    /// One row of `logsync_directory`: where a user is, and a move under way or unfinished.
    public struct DirectoryRow: Sendable, Hashable {
        /// The cluster that holds the user.
        public var cluster: String
        /// The cluster a move under way copies the user to.
        public var movingTo: String?
        /// The cluster a finished move left the user's old rows on, until they are deleted.
        public var movedFrom: String?
    }

    static func directoryRow(of number: UInt64, locking: Bool, _ session: PostgresSession) throws -> DirectoryRow? {
        try session.query(
            "SELECT cluster, moving_to, moved_from FROM logsync_directory WHERE user_number = $1"
                + (locking ? " FOR UPDATE" : ""),
            [.int64(Int64(bitPattern: number))]
        ).first.map { row in
            let (cluster, movingTo, movedFrom) = try row.decode((String, String?, String?).self)
            return DirectoryRow(cluster: cluster, movingTo: movingTo, movedFrom: movedFrom)
        }
    }

    /// Places user `number` (a row of `logsync_directory`) and returns the cluster's name: the
    /// cluster that holds logs of theirs with entries and no fence, else the one with the
    /// fewest users, ties to the first listed. Another node placing the same user at the same
    /// time wins or loses as one: both return the row that was inserted.
    private func place(_ number: UInt64) throws -> String {
        let owner = PostgresValue.int64(Int64(bitPattern: number))
        var chosen: String? = nil
        for cluster in clusters {
            let holds = try cluster.storage.pool.withSession { session in
                try session.query(
                    """
                    SELECT 1 FROM logsync_logs WHERE name LIKE $1 AND last_offset > 0
                    AND NOT EXISTS (SELECT 1 FROM logsync_user_fences WHERE user_number = $2) LIMIT 1
                    """, [.string("u\(number)/%"), owner]
                ).count > 0
            }
            if holds {
                chosen = cluster.name
                break
            }
        }
        return try directory.pool.withSession { session in
            if chosen == nil {
                var counts: [String: Int64] = [:]
                for row in try session.query("SELECT cluster, count(*) FROM logsync_directory GROUP BY cluster") {
                    let (name, count) = try row.decode((String, Int64).self)
                    counts[name] = count
                }
                chosen = clusters.min { (counts[$0.name] ?? 0) < (counts[$1.name] ?? 0) }?.name
            }
            try session.query(
                "INSERT INTO logsync_directory (user_number, cluster) VALUES ($1, $2) ON CONFLICT (user_number) DO NOTHING",
                [owner, .string(chosen ?? clusters[0].name)])
            guard let row = try Self.directoryRow(of: number, locking: false, session) else {
                throw ClusterError("user \(number) has no row in the directory after placing them")
            }
            return row.cluster
        }
    }

    /// How many users the directory places on each cluster, every cluster of this node listed.
    public func userCounts() throws -> [String: Int] {
        var counts = Dictionary(uniqueKeysWithValues: clusters.map { ($0.name, 0) })
        try directory.pool.withSession { session in
            for row in try session.query("SELECT cluster, count(*) FROM logsync_directory GROUP BY cluster") {
                let (name, count) = try row.decode((String, Int64).self)
                counts[name] = Int(count)
            }
        }
        return counts
    }

    /// Every user the directory places, and their cluster.
    func placements() throws -> [UInt64: String] {
        try directory.pool.withSession { session in
            var placements: [UInt64: String] = [:]
            for row in try session.query("SELECT user_number, cluster FROM logsync_directory") {
                let (number, cluster) = try row.decode((Int64, String).self)
                placements[UInt64(bitPattern: number)] = cluster
            }
            return placements
        }
    }

    // MARK: Fences and routing

    /// The fence of a user on a cluster: the user is held elsewhere (`moved_to`).
    struct UserMovedError: Error, CustomStringConvertible {
        var user: UInt64
        var movedTo: String
        var description: String { "user \(user) is no longer on this cluster (moved to \(movedTo))" }
    }

    /// Whether `error` says the user is fenced on the cluster it ran on.
    static func isFence(_ error: any Error) -> Bool {
        if error is UserMovedError { return true }
        if let error = error as? PostgresStoreError { return error.sqlState == "LS001" }
        return false
    }

    /// The retryable error of a request for a user whose move holds its fence.
    static func moving(_ number: UInt64) -> SyncError {
        SyncError(
            .serviceUnavailable, "user \(number) is being moved to another cluster; try again shortly",
            retryAfter: .seconds(1))
    }

    /// Throws ``UserMovedError`` when user `number` has a fence on the cluster `session` is
    /// connected to; with `locking`, takes the fence's lock shared first, until the transaction
    /// ends, so that a move's fence waits for this transaction.
    static func checkFence(of number: UInt64, locking: Bool, _ session: PostgresSession) throws {
        let sql =
            locking
            ? "SELECT logsync_user_fence($1)" : "SELECT moved_to FROM logsync_user_fences WHERE user_number = $1"
        if let movedTo = try session.query(sql, [.int64(Int64(bitPattern: number))]).first?.decode(String?.self) {
            throw UserMovedError(user: number, movedTo: movedTo)
        }
    }

    /// Runs `body` on the cluster holding user `number`; when that cluster fences the user,
    /// reads the directory again and runs it on the new cluster, or throws a retryable
    /// `serviceUnavailable` while a move is under way.
    func routed<R>(_ number: UInt64, _ body: (PostgresStorage) throws -> R) throws -> R {
        var name = try clusterName(ofUser: number)
        for _ in 0..<3 {
            do {
                return try body(try storage(named: name))
            } catch  where Self.isFence(error) {
                let now = try clusterName(ofUser: number, fresh: true)
                guard now != name else { throw Self.moving(number) }
                name = now
            }
        }
        throw Self.moving(number)
    }

    /// ``routed(_:_:)`` for a read of asset or bundle rows, which no trigger guards: the
    /// cluster's fence on the user is checked first, so a read of a moved user goes on to their
    /// new cluster. (A change meets the fence by trigger.)
    func routedRead<R>(_ number: UInt64, _ body: (PostgresPool) throws -> R) throws -> R {
        try routed(number) { cluster in
            try cluster.pool.withSession { try Self.checkFence(of: number, locking: false, $0) }
            return try body(cluster.pool)
        }
    }

    // MARK: ServerStorage

    /// The registry and the sessions on the directory; a user's database on their cluster,
    /// through a log that follows the user when they move.
    public func openLog(_ name: ServerLogName, projection: any Projection) throws -> any ServerLog {
        switch name {
        case .registry, .sessions:
            return try directory.openLog(name, projection: projection)
        case .database(let user, _):
            let cluster = try clusterName(ofUser: user)
            let log = try storage(named: cluster).openLog(name, projection: projection)
            return PartitionedLog(
                storage: self, name: name, user: user, projection: projection, cluster: cluster, log: log)
        }
    }

    /// Deletes the user's logs, contents and bundles on their cluster, and their row of the
    /// directory.
    public func deleteLogs(ofUser number: UInt64) throws {
        try routed(number) { try $0.deleteLogs(ofUser: number) }
        try directory.pool.withSession { session in
            try session.query(
                "DELETE FROM logsync_directory WHERE user_number = $1 AND moving_to IS NULL",
                [.int64(Int64(bitPattern: number))])
        }
        forget(number)
    }

    public func perform<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await directory.perform(body)
    }

    /// The directory's advisory locks: one holder across every node.
    public func withExclusiveLock<R>(_ name: String, _ body: () throws -> R) throws -> R {
        try directory.withExclusiveLock(name, body)
    }

    /// On the directory's channel.
    public func publish(_ notice: PushNotice) {
        directory.publish(notice)
    }

    public func startNotifications(
        _ deliver: @escaping @Sendable (PushNotice) -> Void, missed: @escaping @Sendable () -> Void
    ) {
        directory.startNotifications(deliver, missed: missed)
    }

    public func shutdown() {
        for cluster in clusters { cluster.storage.shutdown() }
    }

    public var tokens: (any StoredTokens)? { directory.tokens }

    public var hearsOtherNodes: Bool? { directory.hearsOtherNodes }

    public var metricsStoreName: String { "postgres" }

    /// Every cluster's database logs, each user's taken from the cluster the directory names.
    public func databaseLogEnds() throws -> [DatabaseLogEnd]? {
        let placements = try placements()
        var ends: [DatabaseLogEnd] = []
        for cluster in clusters {
            for end in try cluster.storage.databaseLogEnds() ?? [] where placements[end.user] == cluster.name {
                ends.append(end)
            }
        }
        return ends
    }

    /// The sum of every cluster's.
    public func storedSize() throws -> StoredSize? {
        var total = StoredSize(bytes: 0, entries: 0)
        for cluster in clusters {
            guard let size = try cluster.storage.storedSize() else { continue }
            total.bytes += size.bytes
            total.entries = (total.entries ?? 0) + (size.entries ?? 0)
        }
        return total
    }

    public var assets: any ServerAssetStore { PartitionedAssetStore(storage: self) }

    public var bundles: (any ServerBundleStore)? { PartitionedBundleStore(storage: self) }
}

/// A user's database log on the cluster that holds them: each read and write first checks the
/// user's fence on that cluster, in its own transaction, and after a move goes on to the new
/// cluster, so that the server may keep it open across moves.
final class PartitionedLog: ServerLog {
    let storage: PartitionedStorage
    let name: ServerLogName
    let user: UInt64
    let projection: any Projection
    private let current: Mutex<(cluster: String, log: any ServerLog)>

    init(
        storage: PartitionedStorage, name: ServerLogName, user: UInt64, projection: any Projection, cluster: String,
        log: any ServerLog
    ) {
        self.storage = storage
        self.name = name
        self.user = user
        self.projection = projection
        self.current = Mutex((cluster, log))
    }

    /// The cluster this log reads and writes now.
    var cluster: String { current.withLock { $0.cluster } }

    /// The log's row is gone from its cluster: the user moved away and back while this log was
    /// open, and the log has a new row there.
    struct LogReplacedError: Error {}

    /// What the log's cluster says of it after a statement failed there.
    private enum Verdict { case fenced, replaced, other }

    /// Runs `body` on the log of the user's cluster, following the user after a fence, and
    /// opening the log again when its row was replaced. A statement error on a cluster that
    /// fences the user or lost the log's row (a move deleted it under a write) counts as such.
    private func routed<R>(_ body: (any ServerLog) throws -> R) throws -> R {
        for _ in 0..<3 {
            let (cluster, log) = current.withLock { $0 }
            let verdict: Verdict
            do {
                return try body(log)
            } catch {
                verdict = self.verdict(on: error, cluster: cluster, log: log)
                if verdict == .other { throw error }
            }
            let now = try storage.clusterName(ofUser: user, fresh: true)
            guard now != cluster || verdict == .replaced else { throw PartitionedStorage.moving(user) }
            let reopened = try storage.storage(named: now).openLog(name, projection: projection)
            current.withLock { $0 = (now, reopened) }
        }
        throw PartitionedStorage.moving(user)
    }

    /// Whether `error` came from `cluster` fencing the user, or from the log's row missing there.
    private func verdict(on error: any Error, cluster: String, log: any ServerLog) -> Verdict {
        if PartitionedStorage.isFence(error) { return .fenced }
        if error is LogReplacedError { return .replaced }
        guard error is PostgresStoreError, let store = try? storage.storage(named: cluster),
            let logID = (log as? PostgresServerLog)?.logID
        else { return .other }
        do {
            try store.pool.withSession { session in try Self.check(user: user, logID: logID, locking: false, session) }
            return .other
        } catch {
            return PartitionedStorage.isFence(error) ? .fenced : error is LogReplacedError ? .replaced : .other
        }
    }

    /// Throws the user's fence on the cluster of `session`, or ``LogReplacedError`` when log
    /// `logID` has no row there; with `locking`, takes the fence's lock shared first.
    static func check(user: UInt64, logID: Int64, locking: Bool, _ session: PostgresSession) throws {
        let fence =
            locking
            ? "logsync_user_fence($1)" : "(SELECT moved_to FROM logsync_user_fences WHERE user_number = $1)"
        guard
            let row = try session.query(
                "SELECT \(fence), EXISTS (SELECT 1 FROM logsync_logs WHERE log_id = $2)",
                [.int64(Int64(bitPattern: user)), .int64(logID)]
            ).first
        else { return }
        let (movedTo, exists) = try row.decode((String?, Bool).self)
        if let movedTo { throw PartitionedStorage.UserMovedError(user: user, movedTo: movedTo) }
        if !exists { throw LogReplacedError() }
    }

    func read<R>(_ body: (any IndexReader) throws -> R) throws -> R {
        try routed { log in
            try log.read { reader in
                try Self.checkFence(reader, user: user, locking: false)
                return try body(reader)
            }
        }
    }

    func write<R>(_ body: (any IndexReader) throws -> (entries: [NewEntry], result: R)) throws -> (R, Range<LogOffset>)
    {
        try routed { log in
            try log.write { reader in
                try Self.checkFence(reader, user: user, locking: true)
                return try body(reader)
            }
        }
    }

    var lastOffset: LogOffset {
        get throws { try read { try $0.lastOffset } }
    }

    private static func checkFence(_ reader: any IndexReader, user: UInt64, locking: Bool) throws {
        guard let reader = reader as? PostgresIndexReader else { return }
        try check(user: user, logID: reader.logID, locking: locking, reader.session)
    }
}
