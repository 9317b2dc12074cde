import Foundation
import LogStore
import LogSyncServer
import Logging
import Metrics
import PostgresNIO
import SyncModel
import Synchronization

/// A server's logs in PostgreSQL, shared by every `logsync-server` node that names the same
/// database (`--store postgres://…`).
///
/// Each log is still a log: rows of `logsync_entries` keyed by (log, offset), offsets dense and
/// allocated inside the committing transaction, which holds the log's row of `logsync_logs`
/// locked (`SELECT … FOR UPDATE`), so two nodes committing to one database take turns and
/// neither loses the other's write. The log's projection (the server's index) is applied by the
/// same code as on LMDB to `logsync_index` rows in that transaction. Change tokens are the same
/// offsets, so a device cannot tell the stores apart.
///
/// Push hints travel between nodes by `NOTIFY` on ``channel``; each node `LISTEN`s and hands
/// them to its own devices, and after a lost connection tells its devices to fetch, since hints
/// sent meanwhile are gone. Token revocations travel the same way on ``revocationChannel``
/// (``tokens``), on the same listening connection.
///
/// Asset contents are rows of the same database (``assets``, `PostgresAssetStore`), so any
/// node serves any content and resumes any cut upload; `pg_dump` backs them up with the logs.
public final class PostgresStorage: ServerStorage {
    /// The channel push notices travel on.
    public static let channel = "logsync_push"
    /// The channel token revocations travel on.
    public static let revocationChannel = "logsync_revocations"

    let pool: PostgresPool
    let url: PostgresURL
    /// The streaming replica fetches read when it has caught up (`replicaURL`), if any.
    let replica: PostgresReplica?
    private let logger: Logger
    private let notifications: PostgresNotifications
    private let localLocks = NamedLocks()

    /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/database`),
    /// creating or migrating its schema (`schema`).
    ///
    /// - Parameters:
    ///   - url: The database, as `postgres://user[:password]@host[:port]/database`; several
    ///     hosts (`@h1:p1,h2:p2`) with `?target_session_attrs=read-write` follow a failover.
    ///   - replicaURL: A streaming replica of that database: fetches read it when it has replayed
    ///     past their change token (`logsync_postgres_replica_reads_total`), the primary otherwise.
    ///   - connections: How many requests this node runs against PostgreSQL at once; it opens up
    ///     to twice as many connections and one more, for the requests that hold a lock or read
    ///     one log inside another's transaction.
    ///   - logger: Where connection failures, migrations and notification reconnects are logged.
    ///   - metricsFactory: What makes the pool's and the notices' metrics
    ///     (`logsync_postgres_pool_in_use`, `logsync_postgres_notify_lag_seconds`); the global
    ///     factory by default.
    /// - Throws: `PostgresURLError` for a malformed URL, `SyncError(.serviceUnavailable)` when
    ///   PostgreSQL cannot be reached, `PostgresStoreError` when the schema cannot be migrated.
    public init(
        url: String, replicaURL: String? = nil, connections: Int = 16,
        logger: Logger = Logger(label: "logsync.postgres"), metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) throws {
        self.url = try PostgresURL(url)
        replica = try replicaURL.map {
            PostgresReplica(
                url: try PostgresURL($0), connections: connections, logger: logger, metricsFactory: metricsFactory)
        }
        self.logger = logger
        notifications = PostgresNotifications(
            url: self.url, logger: logger,
            notifyLag: Metrics.Timer(label: "logsync_postgres_notify_lag_seconds", factory: metricsFactory))
        pool = PostgresPool(
            url: self.url, size: max(1, connections) * 2 + 1, threads: max(1, connections), logger: logger,
            inUse: Meter(label: "logsync_postgres_pool_in_use", factory: metricsFactory))
        do {
            _ = try Self.schema.migrate(pool)
        } catch {
            pool.shutdown()
            replica?.shutdown()
            throw error
        }
    }

    /// ``init(url:replicaURL:connections:logger:metricsFactory:)`` on a thread of its own: connecting and migrating block,
    /// and an async caller's thread is one of Swift's few cooperative threads.
    public static func open(
        url: String, replicaURL: String? = nil, connections: Int = 16,
        logger: Logger = Logger(label: "logsync.postgres"), metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) async throws -> PostgresStorage {
        try await onOwnThread {
            try PostgresStorage(
                url: url, replicaURL: replicaURL, connections: connections, logger: logger,
                metricsFactory: metricsFactory)
        }
    }

    /// `postgres`, the `store` label of the server's metrics.
    public var metricsStoreName: String { "postgres" }

    /// The versioned migrations of the store's tables.
    package static var schema: PostgresMigrations { PostgresMigrations.logSync }

    public func openLog(_ name: ServerLogName, projection: any Projection) throws -> any ServerLog {
        let logID = try pool.withSession { session in
            try session.transaction { session -> Int64 in
                let row = try Self.lockRow(of: name, session)
                if row.projection != projection.name || row.version != projection.version {
                    try rebuild(logID: row.logID, through: row.lastOffset, projection: projection, session)
                }
                return row.logID
            }
        }
        return PostgresServerLog(storage: self, name: name, logID: logID, projection: projection)
    }

    /// The row of log `name` in `logsync_logs`, made if missing, locked until the transaction
    /// ends: its ID, the projection its index was built by, and its last offset.
    static func lockRow(
        of name: ServerLogName, _ session: PostgresSession
    ) throws -> (logID: Int64, projection: String, version: UInt32, lastOffset: UInt64) {
        try session.query(
            "INSERT INTO logsync_logs (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", [.string(name.description)])
        guard
            let row = try session.query(
                "SELECT log_id, projection, projection_version, last_offset FROM logsync_logs WHERE name = $1 FOR UPDATE",
                [.string(name.description)]
            ).first
        else {
            throw PostgresStoreError(statement: "SELECT log_id …", sqlState: "", message: "log \(name) vanished")
        }
        let (logID, projection, version, last) = try row.decode((Int64, String, Int32, Int64).self)
        return (logID, projection, UInt32(version), UInt64(last))
    }

    /// Replaces the index of log `logID` with one `projection` builds from its entries, when the
    /// stored index was built by another projection or version.
    private func rebuild(
        logID: Int64, through last: UInt64, projection: any Projection, _ session: PostgresSession
    ) throws {
        if last > 0 {
            logger.info(
                "rebuilding the index of a log", metadata: ["log": "\(logID)", "projection": "\(projection.name)"])
        }
        try session.query("DELETE FROM logsync_index WHERE log_id = $1", [.int64(logID)])
        var next: UInt64 = 1
        while next <= last {
            let tables = PostgresIndexTables(session: session, logID: logID)
            let entries = try PostgresIndexReader.entries(logID: logID, from: next, limit: 1000, session)
            guard let lastRead = entries.last else { break }
            try tables.applying { try projection.apply(entries, to: ProjectionTables(external: tables)) }
            try tables.flush()
            next = lastRead.offset.rawValue + 1
        }
        try session.query(
            "UPDATE logsync_logs SET projection = $2, projection_version = $3 WHERE log_id = $1",
            [.int64(logID), .string(projection.name), .int32(Int32(projection.version))])
    }

    /// Deletes the user's logs (`u<number>/…`: their rows of `logsync_entries`,
    /// `logsync_index` and `logsync_logs`) and asset contents (their rows of `logsync_assets`,
    /// `logsync_asset_partials` and `logsync_asset_chunks`) in one transaction.
    public func deleteLogs(ofUser number: UInt64) throws {
        let pattern = "u\(number)/%"
        let owner = PostgresValue.int64(Int64(bitPattern: number))
        try pool.withSession { session in
            try session.transaction { session in
                let logs = "SELECT log_id FROM logsync_logs WHERE name LIKE $1"
                try session.query("DELETE FROM logsync_index WHERE log_id IN (\(logs))", [.string(pattern)])
                try session.query("DELETE FROM logsync_entries WHERE log_id IN (\(logs))", [.string(pattern)])
                try session.query("DELETE FROM logsync_logs WHERE name LIKE $1", [.string(pattern)])
                try session.query("DELETE FROM logsync_asset_chunks WHERE owner = $1", [owner])
                try session.query("DELETE FROM logsync_asset_partials WHERE owner = $1", [owner])
                try session.query("DELETE FROM logsync_assets WHERE owner = $1", [owner])
                try session.query("DELETE FROM logsync_bundle_chunks WHERE owner = $1", [owner])
                try session.query("DELETE FROM logsync_bundle_partials WHERE owner = $1", [owner])
                try session.query("DELETE FROM logsync_bundles WHERE owner = $1", [owner])
            }
        }
    }

    /// Runs `body` on one of the pool's threads: it blocks on PostgreSQL round trips.
    public func perform<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await pool.run(body)
    }

    /// Holds a PostgreSQL advisory lock named by `name` for the duration of `body`: one holder
    /// at a time across every node. Threads of this node queue on a local lock first, so they
    /// never hold connections while they wait.
    public func withExclusiveLock<R>(_ name: String, _ body: () throws -> R) throws -> R {
        try localLocks.withLock(named: name) {
            try pool.withSession { session in
                let key = Int64(bitPattern: Self.lockKey(name))
                try session.query("SELECT pg_advisory_lock($1)", [.int64(key)])
                defer { _ = try? session.query("SELECT pg_advisory_unlock($1)", [.int64(key)]) }
                return try body()
            }
        }
    }

    /// A stable 64-bit key for an advisory lock name (FNV-1a).
    static func lockKey(_ name: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in ("logsync:" + name).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// Every database log with entries and its last offset, in one query of `logsync_logs`.
    public func databaseLogEnds() throws -> [DatabaseLogEnd]? {
        let rows = try pool.withSession { session in
            try session.query("SELECT name, last_offset FROM logsync_logs WHERE last_offset > 0 AND name LIKE 'u%'")
        }
        return try rows.compactMap { row -> DatabaseLogEnd? in
            let (name, last) = try row.decode((String, Int64).self)
            guard case .database(let user, let scope)? = ServerLogName(name) else { return nil }
            return DatabaseLogEnd(user: user, scope: scope, lastOffset: LogOffset(UInt64(last)))
        }
    }

    /// The database's size (`pg_database_size`) and the entries of every log, from the logs'
    /// table of ends: one query, no entry read.
    public func storedSize() throws -> StoredSize? {
        let rows = try pool.withSession { session in
            try session.query(
                "SELECT pg_database_size(current_database())::bigint, coalesce(sum(last_offset), 0)::bigint FROM logsync_logs"
            )
        }
        guard let row = rows.first else { return nil }
        let (bytes, entries) = try row.decode((Int64, Int64).self)
        return StoredSize(bytes: UInt64(max(0, bytes)), entries: UInt64(max(0, entries)))
    }

    /// Sends `notice` to every node (this one too) with `pg_notify`. A hint is a hint: a failure
    /// to send it is logged, and devices catch up at their next fetch.
    public func publish(_ notice: PushNotice) {
        do {
            let payload = String(decoding: try JSONEncoder().encode(notice), as: UTF8.self)
            try pool.withSession { session in try session.notify(channel: Self.channel, payload: payload) }
        } catch {
            logger.warning("a push notice was not sent", metadata: ["error": "\(error)"])
        }
    }

    /// Listens on a connection of its own (the one revocations travel on too); `missed` is
    /// called each time that connection was lost and made again, since notices sent meanwhile
    /// are gone.
    public func startNotifications(
        _ deliver: @escaping @Sendable (PushNotice) -> Void, missed: @escaping @Sendable () -> Void
    ) {
        notifications.onPushNotices(deliver, missed: missed)
    }

    /// Whether this node listens for other nodes' push notices and revocations now.
    public var isListening: Bool { notifications.isListening }

    public var hearsOtherNodes: Bool? { isListening }

    /// The bearer tokens, in `logsync_tokens`: every node accepts the same ones, and a
    /// revocation on any node reaches every node by `NOTIFY` on ``revocationChannel``.
    public var tokens: (any StoredTokens)? { PostgresTokens(pool: pool, notifications: notifications) }
    /// Asset contents, in `logsync_assets`, `logsync_asset_partials` and `logsync_asset_chunks`:
    /// every node serves every content.
    public var assets: any ServerAssetStore { PostgresAssetStore(pool: pool) }

    /// Uploaded support bundles, in `logsync_bundles`, `logsync_bundle_partials` and
    /// `logsync_bundle_chunks`.
    public var bundles: (any ServerBundleStore)? { PostgresBundleStore(pool: pool) }

    /// Stops listening and closes the connections. Returns at once: closing the pool's
    /// connections and joining its threads happen on a thread of their own, so a caller on a
    /// cooperative thread never waits for them.
    public func shutdown() {
        let (notifications, pool, replica) = (notifications, pool, replica)
        Thread.detachNewThread {
            notifications.stop()
            pool.shutdown()
            replica?.shutdown()
        }
    }
}

/// One log in PostgreSQL.
final class PostgresServerLog: ServerLog {
    let storage: PostgresStorage
    let name: ServerLogName
    let logID: Int64
    let projection: any Projection

    init(storage: PostgresStorage, name: ServerLogName, logID: Int64, projection: any Projection) {
        self.storage = storage
        self.name = name
        self.logID = logID
        self.projection = projection
    }

    /// A read-only, repeatable-read transaction: every statement of `body` sees one snapshot.
    func read<R>(_ body: (any IndexReader) throws -> R) throws -> R {
        try storage.pool.withSession { session in
            try session.transaction { session in
                // Sent ahead with BEGIN: it travels with the first read.
                try session.send("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                return try body(PostgresIndexReader(session: session, logID: logID))
            }
        }
    }

    /// A read-committed transaction that first locks the log's row: the writers of this log,
    /// on every node, run one at a time, and each reads what the previous one committed.
    func write<R>(_ body: (any IndexReader) throws -> (entries: [NewEntry], result: R)) throws -> (R, Range<LogOffset>)
    {
        try storage.pool.withSession { session in
            try session.transaction { session in
                guard let last = try PostgresIndexReader.lastOffset(of: logID, locking: true, session) else {
                    throw PostgresStoreError(
                        statement: "SELECT last_offset …", sqlState: "", message: "log \(name) has no row")
                }
                let reader = PostgresIndexReader(session: session, logID: logID, lastOffset: last)
                let tables = reader.tables
                let (entries, result) = try tables.applying { try body(reader) }
                guard !entries.isEmpty else { return (result, LogOffset(last + 1)..<LogOffset(last + 1)) }
                let time = EntryTime.now()
                let stored = entries.enumerated().map { index, entry in
                    LogEntry(
                        offset: LogOffset(last + 1 + UInt64(index)), kind: entry.kind, time: entry.time ?? time,
                        payload: entry.payload, decoded: entry.decoded)
                }
                let end = try Self.append(stored, to: logID, projection: projection, tables: tables, session)
                return (result, LogOffset(last + 1)..<LogOffset(end + 1))
            }
        }
    }

    /// Appends `entries` (offsets following the log's last, under its row lock) to log `logID`:
    /// inserts them, applies `projection` to them in `tables`, sends the index rows, and moves
    /// the log's last offset. Returns the new last offset.
    ///
    /// The writes are sent ahead (``PostgresSession/send(_:_:)``), not awaited one by one: the
    /// transaction's `COMMIT` waits for them all and fails with the first that failed, so an
    /// append costs the round trips of the projection's reads, if any, and none of its own.
    static func append(
        _ entries: [LogEntry], to logID: Int64, projection: any Projection, tables: PostgresIndexTables,
        _ session: PostgresSession
    ) throws -> UInt64 {
        try insert(entries, logID: logID, session)
        try tables.applying { try projection.apply(entries, to: ProjectionTables(external: tables)) }
        try tables.flush()
        let end = entries.last?.offset.rawValue ?? 0
        try session.send(
            "UPDATE logsync_logs SET last_offset = $2 WHERE log_id = $1",
            [.int64(logID), .int64(Int64(end))])
        return end
    }

    /// Inserts `entries` in one statement, sent ahead.
    static func insert(_ entries: [LogEntry], logID: Int64, _ session: PostgresSession) throws {
        try session.send(
            """
            INSERT INTO logsync_entries (log_id, "offset", kind, time_us, payload)
            SELECT $1, o, k, t, p FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[]) AS e(o, k, t, p)
            """,
            [
                .int64(logID), .int64Array(entries.map { Int64($0.offset.rawValue) }),
                .int64Array(entries.map { Int64($0.kind.rawValue) }),
                .int64Array(entries.map { $0.time.microsecondsSince1970 }), .bytesArray(entries.map(\.payload)),
            ])
    }

    var lastOffset: LogOffset {
        get throws {
            try storage.pool.withSession { session in
                LogOffset(try PostgresIndexReader.lastOffset(of: logID, locking: false, session) ?? 0)
            }
        }
    }
}

/// The index rows and entries of one log, inside a transaction. Reads go through the
/// transaction's ``PostgresIndexTables``, which keeps what it read and, in a write, sees its
/// own changes.
struct PostgresIndexReader: IndexReader {
    let session: PostgresSession
    let logID: Int64
    let tables: PostgresIndexTables
    var knownLastOffset: UInt64?

    init(session: PostgresSession, logID: Int64, lastOffset: UInt64? = nil) {
        self.session = session
        self.logID = logID
        self.tables = PostgresIndexTables(session: session, logID: logID)
        self.knownLastOffset = lastOffset
    }

    func value(forKey key: [UInt8], in table: String) throws -> [UInt8]? {
        try tables.read(key, in: table)
    }

    func forEach(
        in table: String, from start: [UInt8]?, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try tables.flush()
        try PostgresIndexTables.scan(table, from: start, logID: logID, session, body)
    }

    func entry(at offset: LogOffset) throws -> LogEntry? {
        if let known = tables.entries[offset.rawValue] { return known }
        return try Self.entries(logID: logID, at: [offset.rawValue], session).first
    }

    var readsAhead: Bool { true }

    func prefetch(keys: [[UInt8]], in table: String) throws {
        try tables.prefetch(keys.map { (table: table, key: $0) })
    }

    func prefetch(rows: [(table: String, key: [UInt8])]) throws {
        try tables.prefetch(rows)
    }

    /// Reads the entries at `offsets` in one statement; they are kept until the transaction ends.
    func prefetch(entries offsets: [LogOffset]) throws {
        let missing = offsets.map(\.rawValue).filter { tables.entries[$0] == nil }
        guard !missing.isEmpty else { return }
        for entry in try Self.entries(logID: logID, at: missing, session) {
            tables.entries[entry.offset.rawValue] = entry
        }
    }

    var lastOffset: LogOffset {
        get throws {
            LogOffset(try knownLastOffset ?? Self.lastOffset(of: logID, locking: false, session) ?? 0)
        }
    }

    /// The last offset of log `logID` (`nil` without a row), its row locked until the
    /// transaction ends when `locking`.
    static func lastOffset(of logID: Int64, locking: Bool, _ session: PostgresSession) throws -> UInt64? {
        try session.query(
            "SELECT last_offset FROM logsync_logs WHERE log_id = $1" + (locking ? " FOR UPDATE" : ""), [.int64(logID)]
        ).first.map { UInt64(try $0.decode(Int64.self)) }
    }

    /// Up to `limit` entries of the log from offset `start` on, in order.
    static func entries(logID: Int64, from start: UInt64, limit: Int, _ session: PostgresSession) throws -> [LogEntry] {
        try decode(
            session.query(
                """
                SELECT "offset", kind, time_us, payload FROM logsync_entries
                WHERE log_id = $1 AND "offset" >= $2 ORDER BY "offset" LIMIT $3
                """,
                [.int64(logID), .int64(Int64(start)), .int64(Int64(limit))]))
    }

    /// The entries at `offsets` that the log has.
    static func entries(logID: Int64, at offsets: [UInt64], _ session: PostgresSession) throws -> [LogEntry] {
        try decode(
            session.query(
                """
                SELECT "offset", kind, time_us, payload FROM logsync_entries
                WHERE log_id = $1 AND "offset" = ANY($2::bigint[])
                """,
                [.int64(logID), .int64Array(offsets.map { Int64(bitPattern: $0) })]))
    }

    /// Entries from rows of (offset, kind, time, payload).
    static func decode(_ rows: [PostgresRow]) throws -> [LogEntry] {
        try rows.map { row in
            let (offset, kind, time, payload) = try row.decode((Int64, Int64, Int64, ByteBuffer).self)
            guard offset > 0, kind >= 0, kind <= Int64(UInt16.max) else {
                throw LogStoreError(
                    .corruptEntry, "a stored entry with kind \(kind)", offset: LogOffset(UInt64(max(offset, 0))))
            }
            return LogEntry(
                offset: LogOffset(UInt64(offset)), kind: EntryKind(rawValue: UInt16(kind)),
                time: EntryTime(microsecondsSince1970: time), payload: Array(payload.readableBytesView))
        }
    }
}

/// A projection's tables as rows of `logsync_index`, inside a write transaction that holds the
/// log's lock: what it reads it keeps, and what the projection writes it sends in a few
/// statements before the next scan and at the end.
final class PostgresIndexTables: ExternalProjectionTables {
    let session: PostgresSession
    let logID: Int64
    /// Rows read or written in this transaction, by table: `nil` is a row known to be absent.
    private var rows: [String: [[UInt8]: [UInt8]?]] = [:]
    /// Rows written and not yet sent, by table.
    private var changed: [String: Set<[UInt8]>] = [:]
    /// Rows this transaction read and found absent, by table, and has not written since: the
    /// transaction holds the log's lock, so a write of one is an insert without `ON CONFLICT`,
    /// which costs PostgreSQL about half an upsert.
    private var absent: [String: Set<[UInt8]>] = [:]
    /// The store's own failure behind a `LogStoreError(.io)` thrown to the projection.
    private var failure: (any Error)?
    /// Entries read ahead in this transaction, by offset.
    var entries: [UInt64: LogEntry] = [:]

    init(session: PostgresSession, logID: Int64) {
        self.session = session
        self.logID = logID
    }

    /// Runs `body`; if it failed because the store failed inside a projection's call, throws
    /// the store's own error (`serviceUnavailable`, a statement error) instead.
    func applying<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch {
            if let failure { throw failure }
            throw error
        }
    }

    private func storeCall<R>(_ body: () throws -> R) throws(LogStoreError) -> R {
        do {
            return try body()
        } catch let error as LogStoreError {
            throw error
        } catch {
            failure = error
            throw LogStoreError(.io, "the PostgreSQL store failed: \(error)")
        }
    }

    /// The row's value, from this transaction's rows or PostgreSQL.
    func read(_ key: [UInt8], in table: String) throws -> [UInt8]? {
        if let known = rows[table]?[key] { return known }
        let value = try Self.select(key, in: table, logID: logID, session)
        rows[table, default: [:]][key] = .some(value)
        if value == nil { absent[table, default: []].insert(key) }
        return value
    }

    func value(forKey key: [UInt8], in table: String) throws(LogStoreError) -> [UInt8]? {
        try storeCall { try read(key, in: table) }
    }

    /// Reads the rows of `wanted` (keys of tables) not yet known, in one statement, and keeps
    /// them (or their absence).
    func prefetch(_ wanted: [(table: String, key: [UInt8])]) throws {
        var missing: [String: Set<[UInt8]>] = [:]
        for (table, key) in wanted where rows[table]?[key] == nil {
            missing[table, default: []].insert(key)
        }
        guard !missing.isEmpty else { return }
        // One point lookup per (table, key) on the primary key, as a subquery per pair: a
        // condition `key = ANY(…)` lets the planner scan every row of a large log instead.
        var pairs: (tables: [String], keys: [[UInt8]]) = ([], [])
        for (table, unknown) in missing {
            for key in unknown {
                pairs.tables.append(table)
                pairs.keys.append(key)
            }
        }
        let result = try session.query(
            """
            SELECT t, k, v FROM (
                SELECT t, k, (SELECT value FROM logsync_index WHERE log_id = $1 AND tbl = t AND key = k) AS v
                FROM unnest($2::text[], $3::bytea[]) AS r(t, k)
            ) AS found WHERE v IS NOT NULL
            """,
            [.int64(logID), .stringArray(pairs.tables), .bytesArray(pairs.keys)])
        var found: [String: [[UInt8]: [UInt8]]] = [:]
        for row in result {
            let (table, key, value) = try row.decode((String, ByteBuffer, ByteBuffer).self)
            found[table, default: [:]][Array(key.readableBytesView)] = Array(value.readableBytesView)
        }
        for (table, unknown) in missing {
            var known = rows[table] ?? [:]
            for key in unknown {
                let value = found[table]?[key]
                known[key] = .some(value)
                if value == nil { absent[table, default: []].insert(key) }
            }
            rows[table] = known
        }
    }

    func put(_ value: [UInt8], forKey key: [UInt8], in table: String) throws(LogStoreError) {
        rows[table, default: [:]][key] = .some(value)
        changed[table, default: []].insert(key)
    }

    func removeValue(forKey key: [UInt8], in table: String) throws(LogStoreError) -> Bool {
        let existed = try value(forKey: key, in: table) != nil
        rows[table, default: [:]][key] = .some(nil)
        changed[table, default: []].insert(key)
        return existed
    }

    func forEach(
        in table: String, from start: [UInt8]?, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try storeCall { try flush() }
        try Self.scan(table, from: start, logID: logID, session, body)
    }

    func count(of table: String) throws(LogStoreError) -> Int {
        try storeCall {
            try flush()
            return Int(
                try session.query(
                    "SELECT count(*) FROM logsync_index WHERE log_id = $1 AND tbl = $2",
                    [.int64(logID), .string(table)]
                ).first?.decode(Int64.self) ?? 0)
        }
    }

    /// Sends every changed row, ahead (``PostgresSession/send(_:_:)``): one insert for the rows
    /// of every table known to be absent, one upsert for the others, and one delete statement
    /// per table with removed rows. The next statement of the transaction (a scan, a read,
    /// `COMMIT`) waits for them.
    func flush() throws {
        var inserts: (tables: [String], keys: [[UInt8]], values: [[UInt8]]) = ([], [], [])
        var upserts: (tables: [String], keys: [[UInt8]], values: [[UInt8]]) = ([], [], [])
        for (table, keys) in changed {
            var deletes: [[UInt8]] = []
            for key in keys {
                if let value = rows[table]?[key] ?? nil {
                    if absent[table]?.remove(key) != nil {
                        inserts.tables.append(table)
                        inserts.keys.append(key)
                        inserts.values.append(value)
                    } else {
                        upserts.tables.append(table)
                        upserts.keys.append(key)
                        upserts.values.append(value)
                    }
                } else {
                    deletes.append(key)
                }
            }
            if !deletes.isEmpty {
                try session.send(
                    "DELETE FROM logsync_index WHERE log_id = $1 AND tbl = $2 AND key = ANY($3::bytea[])",
                    [.int64(logID), .string(table), .bytesArray(deletes)])
                absent[table, default: []].formUnion(deletes)
            }
        }
        if !inserts.keys.isEmpty {
            try session.send(
                """
                INSERT INTO logsync_index (log_id, tbl, key, value)
                SELECT $1, t, k, v FROM unnest($2::text[], $3::bytea[], $4::bytea[]) AS r(t, k, v)
                """,
                [.int64(logID), .stringArray(inserts.tables), .bytesArray(inserts.keys), .bytesArray(inserts.values)])
        }
        if !upserts.keys.isEmpty {
            try session.send(
                """
                INSERT INTO logsync_index (log_id, tbl, key, value)
                SELECT $1, t, k, v FROM unnest($2::text[], $3::bytea[], $4::bytea[]) AS r(t, k, v)
                ON CONFLICT (log_id, tbl, key) DO UPDATE SET value = EXCLUDED.value
                """,
                [.int64(logID), .stringArray(upserts.tables), .bytesArray(upserts.keys), .bytesArray(upserts.values)])
        }
        changed = [:]
    }

    static func select(_ key: [UInt8], in table: String, logID: Int64, _ session: PostgresSession) throws -> [UInt8]? {
        try session.query(
            "SELECT value FROM logsync_index WHERE log_id = $1 AND tbl = $2 AND key = $3",
            [.int64(logID), .string(table), .bytes(key)]
        ).first.map { Array(try $0.decode(ByteBuffer.self).readableBytesView) }
    }

    /// Visits the rows of `table` from `start` in key order, a page of rows per statement,
    /// while `body` returns `true`.
    static func scan(
        _ table: String, from start: [UInt8]?, logID: Int64, _ session: PostgresSession,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var after: [UInt8]? = nil
        let page = 500
        while true {
            let rows: [PostgresRow]
            if let after {
                rows = try session.query(
                    "SELECT key, value FROM logsync_index WHERE log_id = $1 AND tbl = $2 AND key > $3 ORDER BY key LIMIT $4",
                    [.int64(logID), .string(table), .bytes(after), .int64(Int64(page))])
            } else {
                rows = try session.query(
                    "SELECT key, value FROM logsync_index WHERE log_id = $1 AND tbl = $2 AND key >= $3 ORDER BY key LIMIT $4",
                    [.int64(logID), .string(table), .bytes(start ?? []), .int64(Int64(page))])
            }
            for row in rows {
                let (key, value) = try row.decode((ByteBuffer, ByteBuffer).self)
                let keyBytes = Array(key.readableBytesView)
                let goOn = try keyBytes.withUnsafeBytes { keyPointer in
                    try Array(value.readableBytesView).withUnsafeBytes { valuePointer in
                        try body(keyPointer, valuePointer)
                    }
                }
                if !goOn { return }
                after = keyBytes
            }
            if rows.count < page { return }
        }
    }
}

/// Bearer tokens as rows of `logsync_tokens` (digest, user); revocations as `NOTIFY` on
/// ``PostgresStorage/revocationChannel``, sent in the transaction that deletes the rows, so that
/// every node hears of a deletion exactly when it is committed.
struct PostgresTokens: StoredTokens {
    let pool: PostgresPool
    let notifications: PostgresNotifications

    func user(forDigest digest: String) throws -> UserID? {
        try pool.withSession { session in
            try session.query("SELECT user_id FROM logsync_tokens WHERE digest = $1", [.string(digest)])
                .first.map { UserID(rawValue: try $0.decode(String.self)) }
        }
    }

    func users(forDigests digests: [String]) throws -> [String: UserID] {
        guard !digests.isEmpty else { return [:] }
        return try pool.withSession { session in
            var users: [String: UserID] = [:]
            for row in try session.query(
                "SELECT digest, user_id FROM logsync_tokens WHERE digest = ANY($1::text[])", [.stringArray(digests)])
            {
                let (digest, user) = try row.decode((String, String).self)
                users[digest] = UserID(rawValue: user)
            }
            return users
        }
    }

    func revoke(_ revocation: Revocation) throws -> Int {
        let payload = String(decoding: try JSONEncoder().encode(revocation), as: UTF8.self)
        return try pool.withSession { session in
            try session.transaction { session in
                let deleted: Int
                switch revocation {
                case .credential(let digest):
                    deleted = try session.query(
                        "DELETE FROM logsync_tokens WHERE digest = $1 RETURNING digest", [.string(digest)]
                    ).count
                case .user(let user):
                    deleted = try session.query(
                        "DELETE FROM logsync_tokens WHERE user_id = $1 RETURNING digest", [.string(user.rawValue)]
                    ).count
                case .session:
                    deleted = 0  // a session is a log's entries, revoked there: only the nodes need telling
                }
                try session.notify(channel: PostgresStorage.revocationChannel, payload: payload)
                return deleted
            }
        }
    }

    func observeRevocations(_ handler: @escaping @Sendable (RevocationEvent) -> Void) {
        notifications.onRevocations(handler)
    }

    func add(digest: String, user: UserID) throws {
        let inserted = try pool.withSession { session in
            try session.query(
                "INSERT INTO logsync_tokens (digest, user_id) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING RETURNING digest",
                [.string(digest), .string(user.rawValue)]
            ).count
        }
        if inserted == 0 { throw SyncError(.invalidArguments, "the token is already in use") }
    }

    func count() throws -> Int {
        try pool.withSession { session in
            Int(try session.query("SELECT count(*) FROM logsync_tokens").first?.decode(Int64.self) ?? 0)
        }
    }
}

/// Runs the blocking `body` on a new thread and resumes the caller with its result, so that an
/// async caller never blocks one of Swift's cooperative threads on PostgreSQL.
package func onOwnThread<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
