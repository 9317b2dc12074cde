import Dispatch
import LogSyncPostgres
import NIOCore
import PostgresNIO
import PostgresProcess
import SyncModel
import Synchronization
import Testing

/// The pool, sessions, transactions and migrations on a database of the shared server.
@Suite struct PostgresPoolTests {
    /// A fresh database migrates from 0 to 5 and gets the store's tables; migrating again
    /// changes nothing.
    @Test func migrateCreatesTheSchemaOnce() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let first = try await pool.run { try PostgresMigrations.logSync.migrate(pool) }
        #expect(first.from == 0 && first.to == 5)
        let second = try await pool.run { try PostgresMigrations.logSync.migrate(pool) }
        #expect(second.from == 5 && second.to == 5)
        let tables = try await pool.run {
            try pool.withSession { session in
                try session.query(
                    """
                    SELECT table_name::text FROM information_schema.tables
                    WHERE table_schema = 'public' ORDER BY table_name
                    """
                ).map { try $0.decode(String.self) }
            }
        }
        #expect(
            tables == [
                "logsync_asset_chunks", "logsync_asset_partials", "logsync_assets", "logsync_bundle_chunks",
                "logsync_bundle_partials", "logsync_bundles", "logsync_directory", "logsync_entries", "logsync_index",
                "logsync_logs", "logsync_schema_migrations", "logsync_tokens", "logsync_user_fences",
            ])
        let versions = try await pool.run {
            try pool.withSession {
                try $0.query("SELECT version, name FROM logsync_schema_migrations ORDER BY version").map {
                    try $0.decode((Int32, String).self)
                }
            }
        }
        #expect(versions.map(\.0) == [1, 2, 3, 4, 5])
    }

    /// A database of version 1 (a server from before assets), with a log in it, gains the
    /// asset tables and keeps its rows.
    @Test func migratesVersionOneToTwo() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let versionOne = PostgresMigrations(Array(PostgresMigrations.logSync.migrations.prefix(1)))
        let first = try await pool.run { try versionOne.migrate(pool) }
        #expect(first.from == 0 && first.to == 1)
        try await pool.run {
            try pool.withSession {
                try $0.execute("INSERT INTO logsync_logs (name, last_offset) VALUES ('registry', 0)")
            }
        }
        let second = try await pool.run { try PostgresMigrations.logSync.migrate(pool) }
        #expect(second.from == 1 && second.to == 5)
        let (logs, assets) = try await pool.run {
            try pool.withSession { session in
                (
                    try session.query("SELECT name FROM logsync_logs").map { try $0.decode(String.self) },
                    try session.query("SELECT count(*) FROM logsync_assets")[0].decode(Int64.self)
                )
            }
        }
        #expect(logs == ["registry"])
        #expect(assets == 0)
    }

    /// A database of version 2 (partial uploads per content) keeps its contents and partial
    /// uploads: the partials become the default zone's (0), and a partial of the same content
    /// for another zone is a row of its own.
    @Test func migratesVersionTwoToThree() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let versionTwo = PostgresMigrations(Array(PostgresMigrations.logSync.migrations.prefix(2)))
        try await pool.run {
            try versionTwo.migrate(pool)
            try pool.withSession { session in
                try session.execute(
                    """
                    INSERT INTO logsync_asset_partials (owner, digest, length) VALUES (1, '\\x01', 3);
                    INSERT INTO logsync_asset_chunks (owner, digest, stored, start, bytes) VALUES (1, '\\x01', false, 0, '\\x0a0b0c');
                    INSERT INTO logsync_assets (owner, digest, size) VALUES (1, '\\x02', 1);
                    INSERT INTO logsync_asset_chunks (owner, digest, stored, start, bytes) VALUES (1, '\\x02', true, 0, '\\xff');
                    """)
            }
        }
        let migrated = try await pool.run { try PostgresMigrations.logSync.migrate(pool) }
        #expect(migrated.from == 2 && migrated.to == 5)
        let (partials, chunks) = try await pool.run {
            try pool.withSession { session in
                try session.execute(
                    """
                    INSERT INTO logsync_asset_partials (owner, digest, zone, length) VALUES (1, '\\x01', 7, 0);
                    INSERT INTO logsync_asset_chunks (owner, digest, stored, zone, start, bytes) VALUES (1, '\\x01', false, 7, 0, '\\x0d');
                    """)
                return (
                    try session.query("SELECT zone, length FROM logsync_asset_partials ORDER BY zone").map {
                        try $0.decode((Int64, Int64).self)
                    },
                    try session.query(
                        "SELECT stored, zone, octet_length(bytes) FROM logsync_asset_chunks ORDER BY digest, zone"
                    )
                    .map { try $0.decode((Bool, Int64, Int32).self) }
                )
            }
        }
        #expect(partials.map(\.0) == [0, 7] && partials.map(\.1) == [3, 0])
        #expect(
            chunks.map(\.0) == [false, false, true] && chunks.map(\.1) == [0, 7, 0] && chunks.map(\.2) == [3, 1, 1])
    }

    /// A database a newer server migrated is refused, naming both versions.
    @Test func refusesANewerSchema() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        try await pool.run {
            try PostgresMigrations.logSync.migrate(pool)
            try pool.withSession {
                try $0.execute("INSERT INTO logsync_schema_migrations (version, name) VALUES (6, 'future')")
            }
        }
        await #expect {
            try await pool.run { try PostgresMigrations.logSync.migrate(pool) }
        } throws: { error in
            guard let error = error as? PostgresSchemaTooNewError else { return false }
            return error.databaseVersion == 6 && error.knownVersion == 5
                && "\(error)".contains("version 6") && "\(error)".contains("version 5")
        }
    }

    /// Bytes, integers and text survive a round trip, arrays bind for `unnest`, and a unique
    /// violation names its statement and SQLSTATE.
    @Test func queriesRoundTripValues() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let bytes: [UInt8] = [0, 1, 2, 0xFF, 0x80, 0]
        let (back, count) = try await pool.run {
            try PostgresMigrations.logSync.migrate(pool)
            return try pool.withSession { session -> ([UInt8], Int64) in
                let logID = try session.query("INSERT INTO logsync_logs (name) VALUES ($1) RETURNING log_id", ["db"])[0]
                    .decode(Int64.self)
                try session.query(
                    "INSERT INTO logsync_entries (log_id, \"offset\", kind, time_us, payload) VALUES ($1, $2, $3, $4, $5)",
                    [.int64(logID), 1, .int32(7), 1_700_000_000_000_000, .bytes(bytes)])
                try session.query(
                    """
                    INSERT INTO logsync_index (log_id, tbl, key, value)
                    SELECT $1, 'records', k, v FROM unnest($2::bytea[], $3::bytea[]) AS t(k, v)
                    """, [.int64(logID), .bytesArray([[1], [2], [3]]), .bytesArray([[10], [20], [30]])])
                let payload = try session.query(
                    "SELECT payload FROM logsync_entries WHERE log_id = $1", [.int64(logID)])[0]
                    .decode(ByteBuffer.self)
                let count = try session.query(
                    "SELECT count(*) FROM logsync_index WHERE log_id = ANY($1::bigint[])", [.int64Array([logID, 99])])[
                        0
                    ]
                    .decode(Int64.self)
                return (Array(payload.readableBytesView), count)
            }
        }
        #expect(back == bytes)
        #expect(count == 3)

        await #expect {
            try await pool.run {
                try pool.withSession {
                    try $0.query("INSERT INTO logsync_logs (name) VALUES ($1)\nRETURNING log_id", ["db"])
                }
            }
        } throws: { error in
            guard let error = error as? PostgresStoreError else { return false }
            return error.sqlState == "23505" && error.isUniqueViolation && !error.isRetryable
                && error.statement == "INSERT INTO logsync_logs (name) VALUES ($1)"
                && error.message.contains("duplicate key")
        }
    }

    /// A transaction whose body throws leaves nothing behind, and the session stays usable.
    @Test func transactionRollsBackOnError() async throws {
        struct Abort: Error {}
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let count = try await pool.run {
            try pool.withSession { session -> Int64 in
                try session.execute("CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (1)")
                #expect(throws: Abort.self) {
                    try session.transaction { session in
                        try session.query("INSERT INTO t VALUES (2)")
                        throw Abort()
                    }
                }
                #expect(throws: PostgresStoreError.self) {
                    try session.transaction { session in
                        try session.query("INSERT INTO t VALUES (3)")
                        try session.query("INSERT INTO t VALUES (1)")
                    }
                }
                return try session.query("SELECT count(*) FROM t")[0].decode(Int64.self)
            }
        }
        #expect(count == 1)
    }

    /// Statements sent ahead run in order before the next query, which fails with the first of
    /// them that failed (not with the aborted transaction's later refusals); the transaction
    /// then rolls back whole, and the session stays usable.
    @Test func statementsSentAheadFailAtTheNextQuery() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let (count, seen) = try await pool.run {
            try pool.withSession { session -> (Int64, [Int32]) in
                try session.execute("CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (1)")
                let seen = try session.transaction { session in
                    try session.send("INSERT INTO t VALUES (2)")
                    try session.send("INSERT INTO t VALUES (3)")
                    return try session.query("SELECT k FROM t ORDER BY k").map { try $0.decode(Int32.self) }
                }
                let failure = #expect(throws: PostgresStoreError.self) {
                    try session.transaction { session in
                        try session.send("INSERT INTO t VALUES (4)")
                        try session.send("INSERT INTO t VALUES (1)")
                        try session.send("INSERT INTO t VALUES (5)")
                    }
                }
                #expect(failure?.statement == "INSERT INTO t VALUES (1)" && failure?.sqlState == "23505")
                return (try session.query("SELECT count(*) FROM t")[0].decode(Int64.self), seen)
            }
        }
        #expect(seen == [1, 2, 3])
        #expect(count == 3)
    }

    /// A statement sent ahead outside a transaction and never followed by a query is answered
    /// before the session ends, and its failure is the session's.
    @Test func statementsSentAheadAreAnsweredBeforeTheSessionEnds() async throws {
        let pool = try await freshPool(size: 1)
        defer { pool.shutdown() }
        try await pool.run {
            try pool.withSession { session in
                try session.execute("CREATE TABLE t (k int PRIMARY KEY)")
                try session.send("INSERT INTO t VALUES (1)")
            }
        }
        await #expect(throws: PostgresStoreError.self) {
            try await pool.run { try pool.withSession { session in try session.send("INSERT INTO t VALUES (1)") } }
        }
        let count = try await pool.run {
            try pool.withSession { session in try session.query("SELECT count(*) FROM t")[0].decode(Int64.self) }
        }
        #expect(count == 1)
    }

    /// A serialization failure is retried: the body runs again and the transaction commits.
    @Test func transactionRetriesSerializationFailures() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let attempts = Mutex(0)
        let result = try await pool.run {
            try pool.withSession { session in
                try session.transaction { session -> Int in
                    let attempt = attempts.withLock { attempts in
                        attempts += 1
                        return attempts
                    }
                    if attempt < 3 {
                        // RAISE with SQLSTATE 40001 is what PostgreSQL sends a losing serializable transaction.
                        try session.execute("DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$")
                    }
                    return attempt
                }
            }
        }
        #expect(result == 3)
    }

    /// With size 2, two `run` calls hold two sessions at once, on two connections.
    @Test func twoRunsAtOnceWithSizeTwo() async throws {
        let pool = try await freshPool(size: 2)
        defer { pool.shutdown() }
        let inside = Mutex(0)
        let work: @Sendable () throws -> Int32 = {
            try pool.withSession { session in
                inside.withLock { $0 += 1 }
                // Both must be inside together: a pool that serialized them would time out here.
                let deadline = DispatchTime.now() + .seconds(15)
                while inside.withLock({ $0 }) < 2 {
                    guard DispatchTime.now() < deadline else { throw TimedOut(what: "both sessions are checked out") }
                    usleep(1_000)
                }
                return try session.query("SELECT pg_backend_pid()")[0].decode(Int32.self)
            }
        }
        async let first = pool.run(work)
        async let second = pool.run(work)
        let pids = try await [first, second]
        #expect(Set(pids).count == 2)
    }

    /// Statements in a migration script split at semicolons outside quotes and comments.
    @Test func executeRunsEachStatementOfAScript() async throws {
        let pool = try await freshPool()
        defer { pool.shutdown() }
        let values = try await pool.run {
            try pool.withSession { session in
                try session.execute(
                    """
                    CREATE TABLE s (v text); -- a comment; with a semicolon
                    INSERT INTO s VALUES ('a;b'), ($$c;d$$);
                    INSERT INTO s VALUES ('it''s; here')
                    """)
                return try session.query("SELECT v FROM s ORDER BY v").map { try $0.decode(String.self) }
            }
        }
        #expect(values == ["a;b", "c;d", "it's; here"])
    }
}
