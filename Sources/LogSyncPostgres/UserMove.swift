import Foundation
import LogStore
import LogSyncServer
import PostgresNIO
import SyncModel

/// Moves one user from the cluster that holds them to another, online
/// (`logsync-server user move USER --to CLUSTER`).
///
/// The steps (``Step``), each of which may be cut short by a crash and is done again, or
/// found done, by running the move again:
///
/// 1. ``Step/begin``: the directory row says `moving_to` the target; the target gets a fence
///    naming the source (no node uses the target's rows yet), and anything of the user left
///    there by an earlier stint is deleted, unless a cut-short run of this move already
///    prepared it.
/// 2. ``Step/copy``: while the user keeps working on the source, every log's entries after the
///    target's last offset are appended on the target at the same offsets, kinds, times and
///    payloads (so change tokens mean the same), with the log's projection applied there, a
///    batch per transaction; stored asset contents and bundles missing on the target are
///    copied.
/// 3. ``Step/fence``: the source gets the user's fence, under the fence's lock taken alone:
///    it waits for every commit of the user in flight on the source, and every later read or
///    write of the user there is refused (a node then reads the directory, which still names
///    the source, and answers with a retryable `serviceUnavailable`).
/// 4. ``Step/tail``: what was committed since the copy is copied, and the contents, partial
///    uploads and bundles made equal to the source's; every log's last offset is checked
///    equal on both.
/// 5. ``Step/switchDirectory``: the directory names the target (`moved_from` the source), and
///    the target's fence is dropped.
/// 6. ``Step/cleanup``: the user's rows on the source are deleted
///    (its fence stays, so a node that still thinks the user is there goes to the target), and
///    `moved_from` cleared.
///
/// Until step 5 commits, the user is on the source, with everything acknowledged there; from
/// then on, on the target, with everything acknowledged copied.
public struct UserMove: Sendable {
    /// A step of a move, in order.
    public enum Step: String, Sendable, CaseIterable, CustomStringConvertible {
        case begin, copy, fence, tail
        case switchDirectory = "switch"
        case cleanup
        public var description: String { rawValue }
    }

    /// What a move did.
    public struct Report: Sendable, Hashable {
        /// The cluster the user was on, and the one they are on now.
        public var from: String
        public var to: String
        /// The entries appended on the target, in all logs.
        public var entries: UInt64
        /// The asset contents and bundles copied.
        public var contents: Int
        public var bundles: Int
    }

    public let storage: PartitionedStorage
    public let user: UInt64
    public let target: String
    /// Entries per transaction on the target.
    public var batchSize = 1_000

    /// A move of user `user` (their registry number) to the cluster `target`.
    public init(storage: PartitionedStorage, user: UInt64, to target: String) {
        self.storage = storage
        self.user = user
        self.target = target
    }

    /// The registry number of `user`, read from the registry on the directory, or `nil` for a
    /// user never registered.
    public static func number(of user: UserID, in storage: PartitionedStorage) throws -> UInt64? {
        let log = try storage.directory.openLog(.registry, projection: ServerLogName.registry.serverProjection)
        return try log.read { index in
            try index.value(forKey: Array(user.rawValue.utf8), in: "byID").map { bytes in
                bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            }
        }
    }

    /// Runs the move to its end, calling `after` once each step is done (a test drives writes
    /// between steps there, or stops the move by throwing). Running it again after a failure
    /// finishes it.
    ///
    /// - Throws: ``ClusterError`` for an unknown target or when another move of the user to
    ///   another cluster is unfinished; `SyncError(.serviceUnavailable)` when a cluster cannot be
    ///   reached; whatever `after` throws.
    @discardableResult
    public func run(after: (Step) throws -> Void = { _ in }) throws -> Report {
        let targetStore = try storage.storage(named: target)
        var report = Report(from: target, to: target, entries: 0, contents: 0, bundles: 0)
        // An earlier move's unfinished cleanup comes first.
        if let row = try storage.directoryRow(of: user), let movedFrom = row.movedFrom {
            try cleanup(from: movedFrom, to: row.cluster)
        }
        let source = try begin()
        report.from = source
        guard source != target else {
            try after(.begin)
            try after(.cleanup)
            return report
        }
        let sourceStore = try storage.storage(named: source)
        try prepareTarget(source: source, targetStore)
        try after(.begin)
        report.entries += try copyLogs(sourceStore, targetStore)
        report.contents += try copyStoredContents(sourceStore, targetStore)
        report.bundles += try copyStoredBundles(sourceStore, targetStore)
        try after(.copy)
        try fence(sourceStore)
        try after(.fence)
        report.entries += try copyLogs(sourceStore, targetStore)
        report.contents += try copyStoredContents(sourceStore, targetStore)
        report.bundles += try copyStoredBundles(sourceStore, targetStore)
        try finishTail(sourceStore, targetStore)
        try after(.tail)
        try switchDirectory(from: source)
        try after(.switchDirectory)
        try cleanup(from: source, to: target)
        try after(.cleanup)
        return report
    }

    private var owner: PostgresValue { .int64(Int64(bitPattern: user)) }

    /// Marks the move in the directory (placing a user not yet placed) and returns the source.
    private func begin() throws -> String {
        _ = try storage.clusterName(ofUser: user, fresh: true)
        return try storage.directory.pool.withSession { session in
            try session.transaction { session in
                guard let row = try PartitionedStorage.directoryRow(of: user, locking: true, session) else {
                    throw ClusterError("user \(user) has no row in the directory")
                }
                if let movingTo = row.movingTo, movingTo != target {
                    throw ClusterError(
                        "user \(user) is being moved to cluster \(movingTo): run the move to \(movingTo) again to finish it first"
                    )
                }
                if row.cluster != target, row.movingTo == nil {
                    try session.query(
                        "UPDATE logsync_directory SET moving_to = $2 WHERE user_number = $1", [owner, .string(target)])
                }
                return row.cluster
            }
        }
    }

    /// Fences the user on the target (naming the source), deleting what an earlier stint left
    /// there, unless a cut-short run of this move did it already.
    private func prepareTarget(source: String, _ target: PostgresStorage) throws {
        try target.pool.withSession { session in
            try session.transaction { session in
                try session.query("SET LOCAL logsync.mover = 'on'")
                let fence = try session.query(
                    "SELECT moved_to FROM logsync_user_fences WHERE user_number = $1 FOR UPDATE", [owner]
                ).first?.decode(String.self)
                if fence == source { return }
                try Self.deleteRows(of: user, session)
                try session.query(
                    """
                    INSERT INTO logsync_user_fences (user_number, moved_to) VALUES ($1, $2)
                    ON CONFLICT (user_number) DO UPDATE SET moved_to = EXCLUDED.moved_to, fenced_at = now()
                    """, [owner, .string(source)])
            }
        }
    }

    /// Deletes the user's logs, index rows, contents and bundles (not their fence) through
    /// `session`, inside a transaction that passes the fence triggers.
    static func deleteRows(of user: UInt64, _ session: PostgresSession) throws {
        let pattern = PostgresValue.string("u\(user)/%")
        let owner = PostgresValue.int64(Int64(bitPattern: user))
        let logs = "SELECT log_id FROM logsync_logs WHERE name LIKE $1"
        try session.query("DELETE FROM logsync_index WHERE log_id IN (\(logs))", [pattern])
        try session.query("DELETE FROM logsync_entries WHERE log_id IN (\(logs))", [pattern])
        try session.query("DELETE FROM logsync_logs WHERE name LIKE $1", [pattern])
        for table in [
            "logsync_asset_chunks", "logsync_asset_partials", "logsync_assets", "logsync_bundle_chunks",
            "logsync_bundle_partials", "logsync_bundles",
        ] {
            try session.query("DELETE FROM \(table) WHERE owner = $1", [owner])
        }
    }

    /// Appends on the target every entry of the user's logs that follows the target's last
    /// offset, a batch per transaction; returns how many.
    private func copyLogs(_ source: PostgresStorage, _ target: PostgresStorage) throws -> UInt64 {
        let logs = try source.pool.withSession { session in
            try session.query(
                "SELECT log_id, name FROM logsync_logs WHERE name LIKE $1 ORDER BY name", [.string("u\(user)/%")]
            ).map { try $0.decode((Int64, String).self) }
        }
        var copied: UInt64 = 0
        for (sourceID, text) in logs {
            guard let name = ServerLogName(text) else { continue }
            let projection = name.serverProjection
            while true {
                let count = try target.pool.withSession { session in
                    try session.transaction { session -> Int in
                        let row = try PostgresStorage.lockRow(of: name, session)
                        let entries = try source.pool.withSession { sourceSession in
                            try PostgresIndexReader.entries(
                                logID: sourceID, from: row.lastOffset + 1, limit: batchSize, sourceSession)
                        }
                        guard !entries.isEmpty else { return 0 }
                        guard entries.first?.offset.rawValue == row.lastOffset + 1 else {
                            throw ClusterError(
                                "log \(name) on the target ends at \(row.lastOffset) but the source's next entry is at \(entries.first?.offset.rawValue ?? 0)"
                            )
                        }
                        if row.lastOffset == 0 {
                            try session.query("DELETE FROM logsync_index WHERE log_id = $1", [.int64(row.logID)])
                            try session.query(
                                "UPDATE logsync_logs SET projection = $2, projection_version = $3 WHERE log_id = $1",
                                [.int64(row.logID), .string(projection.name), .int32(Int32(projection.version))])
                        }
                        _ = try PostgresServerLog.append(
                            entries, to: row.logID, projection: projection,
                            tables: PostgresIndexTables(session: session, logID: row.logID), session)
                        return entries.count
                    }
                }
                copied += UInt64(count)
                if count < batchSize { break }
            }
        }
        return copied
    }

    /// Copies the rows of `table` that `condition` selects (with `binds`) from `source` to the
    /// target's `session` (its transaction), a few at a time, as JSON rows.
    private static func copyRows(
        _ table: String, where condition: String, _ binds: [PostgresValue], from source: PostgresStorage,
        into session: PostgresSession
    ) throws {
        try source.pool.withSession { sourceSession in
            try sourceSession.transaction { sourceSession in
                try sourceSession.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                try sourceSession.query(
                    "DECLARE logsync_copy NO SCROLL CURSOR FOR SELECT row_to_json(t)::text FROM \(table) t WHERE \(condition)",
                    binds)
                while true {
                    let rows = try sourceSession.query("FETCH 4 FROM logsync_copy").map { try $0.decode(String.self) }
                    if rows.isEmpty { break }
                    try session.query(
                        "INSERT INTO \(table) SELECT * FROM json_populate_recordset(NULL::\(table), $1::json)",
                        [.string("[" + rows.joined(separator: ",") + "]")])
                }
            }
        }
    }

    /// The keys (a digest in hexadecimal, or an ID) of the user's rows of `table` on `storage`.
    private func keys(_ column: String, of table: String, on storage: PostgresStorage) throws -> Set<String> {
        try storage.pool.withSession { session in
            Set(
                try session.query("SELECT \(column) FROM \(table) WHERE owner = $1", [owner]).map {
                    try $0.decode(String.self)
                })
        }
    }

    /// What is stored whole and copied whole by a move: asset contents, support bundles.
    private struct StoredKind {
        /// The table of the stored things and the table of their chunks.
        let table: String
        let chunks: String
        /// The key column as text (selected) and its match against `$2` (in `WHERE`).
        let key: String
        let keyMatch: String

        static let contents = StoredKind(
            table: "logsync_assets", chunks: "logsync_asset_chunks", key: "encode(digest, 'hex')",
            keyMatch: "digest = decode($2, 'hex')")
        static let bundles = StoredKind(
            table: "logsync_bundles", chunks: "logsync_bundle_chunks", key: "id", keyMatch: "id = $2")
    }

    /// Copies the stored contents the target lacks, each in one transaction; returns how many.
    private func copyStoredContents(_ source: PostgresStorage, _ target: PostgresStorage) throws -> Int {
        try copyStored(.contents, source, target)
    }

    /// Copies the stored bundles the target lacks, each in one transaction; returns how many.
    private func copyStoredBundles(_ source: PostgresStorage, _ target: PostgresStorage) throws -> Int {
        try copyStored(.bundles, source, target)
    }

    /// Copies the stored things of `kind` the target lacks, each with its chunks in one
    /// transaction; returns how many.
    private func copyStored(_ kind: StoredKind, _ source: PostgresStorage, _ target: PostgresStorage) throws -> Int {
        let missing = try keys(kind.key, of: kind.table, on: source).subtracting(
            keys(kind.key, of: kind.table, on: target))
        let match = "owner = $1 AND \(kind.keyMatch)"
        for name in missing.sorted() {
            try target.pool.withSession { session in
                try session.transaction { session in
                    try session.query("SET LOCAL logsync.mover = 'on'")
                    let key: [PostgresValue] = [owner, .string(name)]
                    try session.query("DELETE FROM \(kind.chunks) WHERE \(match) AND stored", key)
                    try Self.copyRows(kind.chunks, where: "\(match) AND stored", key, from: source, into: session)
                    try Self.copyRows(kind.table, where: match, key, from: source, into: session)
                }
            }
        }
        return missing.count
    }

    /// Fences the user on the source, once every commit of theirs in flight there has ended.
    private func fence(_ source: PostgresStorage) throws {
        try source.pool.withSession { session in
            try session.transaction { session in
                try session.query(
                    "SELECT pg_advisory_xact_lock(1819113009, ($1::bigint % 2147483647)::int)", [owner])
                try session.query(
                    """
                    INSERT INTO logsync_user_fences (user_number, moved_to) VALUES ($1, $2)
                    ON CONFLICT (user_number) DO UPDATE SET moved_to = EXCLUDED.moved_to, fenced_at = now()
                    """, [owner, .string(target)])
            }
        }
    }

    /// With the source fenced: removes the contents and bundles the source no longer has, makes
    /// the partial uploads the source's, and checks every log ends at the same offset on both.
    private func finishTail(_ source: PostgresStorage, _ target: PostgresStorage) throws {
        let goneContents = try keys("encode(digest, 'hex')", of: "logsync_assets", on: target).subtracting(
            keys("encode(digest, 'hex')", of: "logsync_assets", on: source))
        let goneBundles = try keys("id", of: "logsync_bundles", on: target).subtracting(
            keys("id", of: "logsync_bundles", on: source))
        try target.pool.withSession { session in
            try session.transaction { session in
                try session.query("SET LOCAL logsync.mover = 'on'")
                for digest in goneContents {
                    for table in ["logsync_asset_chunks", "logsync_assets"] {
                        try session.query(
                            "DELETE FROM \(table) WHERE owner = $1 AND digest = decode($2, 'hex')"
                                + (table == "logsync_asset_chunks" ? " AND stored" : ""), [owner, .string(digest)])
                    }
                }
                for id in goneBundles {
                    try session.query(
                        "DELETE FROM logsync_bundle_chunks WHERE owner = $1 AND id = $2 AND stored",
                        [owner, .string(id)])
                    try session.query("DELETE FROM logsync_bundles WHERE owner = $1 AND id = $2", [owner, .string(id)])
                }
                try session.query("DELETE FROM logsync_asset_chunks WHERE owner = $1 AND NOT stored", [owner])
                try session.query("DELETE FROM logsync_asset_partials WHERE owner = $1", [owner])
                try session.query("DELETE FROM logsync_bundle_chunks WHERE owner = $1 AND NOT stored", [owner])
                try session.query("DELETE FROM logsync_bundle_partials WHERE owner = $1", [owner])
                for (table, condition) in [
                    ("logsync_asset_partials", "owner = $1"), ("logsync_asset_chunks", "owner = $1 AND NOT stored"),
                    ("logsync_bundle_partials", "owner = $1"), ("logsync_bundle_chunks", "owner = $1 AND NOT stored"),
                ] {
                    try Self.copyRows(table, where: condition, [owner], from: source, into: session)
                }
            }
        }
        let pattern = PostgresValue.string("u\(user)/%")
        let query = "SELECT name, last_offset FROM logsync_logs WHERE name LIKE $1 AND last_offset > 0"
        func ends(_ storage: PostgresStorage) throws -> [String: Int64] {
            try storage.pool.withSession { session in
                Dictionary(
                    uniqueKeysWithValues: try session.query(query, [pattern]).map {
                        try $0.decode((String, Int64).self)
                    })
            }
        }
        let (sourceEnds, targetEnds) = (try ends(source), try ends(target))
        guard sourceEnds == targetEnds else {
            throw ClusterError(
                "user \(user)'s logs do not end alike after the copy: source \(sourceEnds), target \(targetEnds)")
        }
    }

    /// Names the target in the directory, the source as `moved_from` until the cleanup.
    private func switchDirectory(from source: String) throws {
        try storage.directory.pool.withSession { session in
            try session.query(
                """
                UPDATE logsync_directory SET cluster = $2, moving_to = NULL, moved_from = $3
                WHERE user_number = $1 AND moving_to = $2
                """, [owner, .string(target), .string(source)])
        }
        storage.forget(user)
        try dropTargetFence(source: source, destination: target)
    }

    /// Drops the fence that kept nodes off the destination while it was being filled.
    private func dropTargetFence(source: String, destination: String) throws {
        try storage.storage(named: destination).pool.withSession { session in
            try session.query(
                "DELETE FROM logsync_user_fences WHERE user_number = $1 AND moved_to = $2", [owner, .string(source)])
        }
    }

    /// Drops the target's fence (again), deletes the user's rows on the source (keeping its fence), and
    /// clears `moved_from`.
    private func cleanup(from source: String, to destination: String) throws {
        try dropTargetFence(source: source, destination: destination)
        try storage.storage(named: source).pool.withSession { session in
            try session.transaction { session in
                try session.query("SET LOCAL logsync.mover = 'on'")
                try Self.deleteRows(of: user, session)
            }
        }
        try storage.directory.pool.withSession { session in
            try session.query(
                "UPDATE logsync_directory SET moved_from = NULL WHERE user_number = $1 AND moved_from = $2",
                [owner, .string(source)])
        }
    }
}
