/// The schema of a LogSync PostgreSQL database, as numbered steps applied in order.
///
/// Each node runs ``migrate(_:)`` at startup. A transaction-scoped advisory lock serializes
/// nodes that start together, `logsync_schema_migrations` records what is applied, and each
/// missing step runs in its own transaction, so a failed step leaves the schema at the step
/// before. A database migrated by newer code is refused: this code would misread it.
package struct PostgresMigrations: Sendable {
    /// One schema step: its number (1, 2, … without gaps), a name for humans, and its SQL.
    package struct Migration: Sendable, Hashable {
        /// The schema version this step produces.
        package var version: Int
        /// What the step does, in a few words.
        package var name: String
        /// The statements, separated by `;`.
        package var sql: String

        /// Creates a step.
        package init(version: Int, name: String, sql: String) {
            self.version = version
            self.name = name
            self.sql = sql
        }
    }

    /// The steps, ordered by version.
    package var migrations: [Migration]

    /// The key of the advisory lock that serializes migrations (`'logsync'` in ASCII).
    static let lockKey: Int64 = 0x6C6F_6773_796E_63

    /// Creates the migrations from `migrations`, which must be numbered 1, 2, … in order.
    package init(_ migrations: [Migration]) {
        precondition(
            migrations.enumerated().allSatisfy { $0.offset + 1 == $0.element.version },
            "migrations must be numbered 1, 2, … in order")
        self.migrations = migrations
    }

    /// The store's schema: logs, their entries and index rows, and device tokens (1); asset
    /// contents (2); partial uploads per zone (3); support bundles (4); the cluster directory and
    /// the fences of users moved to another cluster (5).
    package static let logSync = PostgresMigrations([
        Migration(
            version: 1, name: "logs, entries, index and tokens",
            sql: """
                CREATE TABLE logsync_logs (log_id bigserial PRIMARY KEY, name text NOT NULL UNIQUE, last_offset bigint NOT NULL DEFAULT 0, projection text NOT NULL DEFAULT '', projection_version integer NOT NULL DEFAULT 0);
                CREATE TABLE logsync_entries (log_id bigint NOT NULL REFERENCES logsync_logs, "offset" bigint NOT NULL, kind integer NOT NULL, time_us bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (log_id, "offset"));
                CREATE TABLE logsync_index (log_id bigint NOT NULL REFERENCES logsync_logs, tbl text NOT NULL, key bytea NOT NULL, value bytea NOT NULL, PRIMARY KEY (log_id, tbl, key));
                CREATE TABLE logsync_tokens (digest text PRIMARY KEY, user_id text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
                """),
        // Asset contents (`PostgresAssetStore`): pieces of at most 1 MiB, a stored content's and
        // a partial upload's in one table, told apart by `stored`, so storing an upload flips
        // the flag instead of copying its bytes. Uncompressed, so a range read fetches only the
        // TOAST pages it needs (contents are mostly compressed already).
        Migration(
            version: 2, name: "asset contents",
            sql: """
                CREATE TABLE logsync_assets (owner bigint NOT NULL, digest bytea NOT NULL, size bigint NOT NULL CHECK (size >= 0), stored_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (owner, digest));
                CREATE TABLE logsync_asset_partials (owner bigint NOT NULL, digest bytea NOT NULL, length bigint NOT NULL CHECK (length >= 0), updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (owner, digest));
                CREATE TABLE logsync_asset_chunks (owner bigint NOT NULL, digest bytea NOT NULL, stored boolean NOT NULL, start bigint NOT NULL CHECK (start >= 0), bytes bytea NOT NULL CHECK (octet_length(bytes) BETWEEN 1 AND 1048576), PRIMARY KEY (owner, digest, stored, start));
                ALTER TABLE logsync_asset_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;
                """),
        // Partial uploads per zone (`AssetPartial`): uploads of one content for different zones
        // grow partials of their own. A partial of version 2 becomes the default zone's (0), as
        // every stored content's pieces are; only the owner uploads for the default zone.
        Migration(
            version: 3, name: "asset partials per zone",
            sql: """
                ALTER TABLE logsync_asset_partials ADD COLUMN zone bigint NOT NULL DEFAULT 0;
                ALTER TABLE logsync_asset_partials DROP CONSTRAINT logsync_asset_partials_pkey, ADD PRIMARY KEY (owner, digest, zone);
                ALTER TABLE logsync_asset_chunks ADD COLUMN zone bigint NOT NULL DEFAULT 0;
                ALTER TABLE logsync_asset_chunks DROP CONSTRAINT logsync_asset_chunks_pkey, ADD PRIMARY KEY (owner, digest, stored, zone, start);
                """),
        // Uploaded support bundles (`PostgresBundleStore`), kept as asset contents are.
        Migration(
            version: 4, name: "support bundles",
            sql: """
                CREATE TABLE logsync_bundles (owner bigint NOT NULL, id text NOT NULL, size bigint NOT NULL CHECK (size > 0), uploaded_at timestamptz NOT NULL, description text NOT NULL, PRIMARY KEY (owner, id));
                CREATE INDEX logsync_bundles_uploaded ON logsync_bundles (uploaded_at);
                CREATE TABLE logsync_bundle_partials (owner bigint NOT NULL, id text NOT NULL, length bigint NOT NULL CHECK (length >= 0), updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (owner, id));
                CREATE TABLE logsync_bundle_chunks (owner bigint NOT NULL, id text NOT NULL, stored boolean NOT NULL, start bigint NOT NULL CHECK (start >= 0), bytes bytea NOT NULL CHECK (octet_length(bytes) BETWEEN 1 AND 1048576), PRIMARY KEY (owner, id, stored, start));
                ALTER TABLE logsync_bundle_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;
                """),
        // Users partitioned across clusters (`PartitionedStorage`, `UserMove`). On the directory
        // cluster, `logsync_directory` says which cluster holds each user (and a move under
        // way). On every cluster, `logsync_user_fences` holds the users moved away, and a
        // trigger refuses their asset and bundle rows; log writes check the fence themselves
        // (`logsync_user_fence`). Both take the user's fence lock shared, the move takes it
        // alone, so a change committed before the fence is seen by the move's tail copy and
        // one after it is refused. The move's own statements pass (`logsync.mover`).
        Migration(
            version: 5, name: "cluster directory and move fences",
            sql: """
                CREATE TABLE logsync_directory (user_number bigint PRIMARY KEY, cluster text NOT NULL, moving_to text, moved_from text, placed_at timestamptz NOT NULL DEFAULT now());
                CREATE INDEX logsync_directory_cluster ON logsync_directory (cluster);
                CREATE TABLE logsync_user_fences (user_number bigint PRIMARY KEY, moved_to text NOT NULL, fenced_at timestamptz NOT NULL DEFAULT now());
                CREATE FUNCTION logsync_user_fence(n bigint) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
                BEGIN
                    PERFORM pg_advisory_xact_lock_shared(1819113009, (n % 2147483647)::int);
                    RETURN (SELECT moved_to FROM logsync_user_fences WHERE user_number = n);
                END $$;
                CREATE FUNCTION logsync_check_fence() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE
                    target text;
                    n bigint;
                BEGIN
                    IF coalesce(current_setting('logsync.mover', true), '') = 'on' THEN
                        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
                        RETURN NEW;
                    END IF;
                    IF TG_OP = 'DELETE' THEN n := OLD.owner; ELSE n := NEW.owner; END IF;
                    target := logsync_user_fence(n);
                    IF target IS NOT NULL THEN
                        RAISE EXCEPTION 'user % moved to cluster %', n, target USING ERRCODE = 'LS001';
                    END IF;
                    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
                    RETURN NEW;
                END $$;
                CREATE TRIGGER logsync_assets_fence BEFORE INSERT OR UPDATE OR DELETE ON logsync_assets FOR EACH ROW EXECUTE FUNCTION logsync_check_fence();
                CREATE TRIGGER logsync_asset_partials_fence BEFORE INSERT OR UPDATE OR DELETE ON logsync_asset_partials FOR EACH ROW EXECUTE FUNCTION logsync_check_fence();
                CREATE TRIGGER logsync_asset_chunks_fence BEFORE INSERT OR UPDATE OR DELETE ON logsync_asset_chunks FOR EACH ROW EXECUTE FUNCTION logsync_check_fence();
                CREATE TRIGGER logsync_bundles_fence BEFORE INSERT OR UPDATE OR DELETE ON logsync_bundles FOR EACH ROW EXECUTE FUNCTION logsync_check_fence();
                CREATE TRIGGER logsync_bundle_partials_fence BEFORE INSERT OR UPDATE OR DELETE ON logsync_bundle_partials FOR EACH ROW EXECUTE FUNCTION logsync_check_fence();
                CREATE TRIGGER logsync_bundle_chunks_fence BEFORE INSERT OR UPDATE OR DELETE ON logsync_bundle_chunks FOR EACH ROW EXECUTE FUNCTION logsync_check_fence();
                """),
    ])

    /// The newest version these migrations know.
    package var latestVersion: Int { migrations.last?.version ?? 0 }

    /// Brings the database of `pool` to ``latestVersion`` and returns the version it had and
    /// the one it has now (equal when nothing was missing).
    ///
    /// - Throws: ``PostgresSchemaTooNewError`` when the database is at a version this code does
    ///   not know; ``PostgresStoreError`` when a step fails (that step is rolled back);
    ///   `SyncError(.serviceUnavailable)` when PostgreSQL cannot be reached.
    @discardableResult
    package func migrate(_ pool: PostgresPool) throws -> (from: Int, to: Int) {
        try pool.withSession { session in
            let from = try session.transaction { session in try lockedVersion(session) }
            var current = from
            for migration in migrations where migration.version > from {
                current = try session.transaction { session -> Int in
                    // Another node may have applied it since the first look.
                    let version = try lockedVersion(session)
                    guard version < migration.version else { return version }
                    try session.execute(migration.sql)
                    try session.query(
                        "INSERT INTO logsync_schema_migrations (version, name) VALUES ($1, $2)",
                        [.int32(Int32(migration.version)), .string(migration.name)])
                    return migration.version
                }
            }
            return (from, current)
        }
    }

    /// Takes the migration lock for the current transaction, creates the version table when
    /// missing, and returns the database's version, refusing one newer than this code.
    private func lockedVersion(_ session: PostgresSession) throws -> Int {
        try session.query("SELECT pg_advisory_xact_lock($1)", [.int64(Self.lockKey)])
        try session.execute(
            """
            CREATE TABLE IF NOT EXISTS logsync_schema_migrations (version int PRIMARY KEY, name text, applied_at timestamptz DEFAULT now())
            """)
        let rows = try session.query("SELECT coalesce(max(version), 0) FROM logsync_schema_migrations")
        let version = Int(try rows.first?.decode(Int32.self) ?? 0)
        if version > latestVersion {
            throw PostgresSchemaTooNewError(databaseVersion: version, knownVersion: latestVersion)
        }
        return version
    }
}

/// The database's schema is newer than this code knows (a newer server migrated it): running
/// would misread or corrupt it, so the server refuses to start.
package struct PostgresSchemaTooNewError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The version recorded in `logsync_schema_migrations`.
    package var databaseVersion: Int
    /// The newest version this code knows.
    package var knownVersion: Int

    /// Names both versions.
    package var description: String {
        "the PostgreSQL schema is at version \(databaseVersion), newer than version \(knownVersion) that this server knows; upgrade the server"
    }
}
