import ChildProcesses
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Streaming replication between test servers: a standby made from a running server with
/// `pg_basebackup -R` (so it follows that server's WAL), waits for it to replay, promotion,
/// synchronous standbys, and a crash of the primary (`pg_ctl stop -m immediate`). What the
/// replica-read and failover tests build a primary and a standby with.
extension PostgresTestServer {
    /// Copies this server with `pg_basebackup -R -X stream` into a new directory and starts the
    /// copy on a free port as a hot standby streaming from this server: it serves reads, refuses
    /// writes, and replays what this server commits.
    ///
    /// - Parameters:
    ///   - name: The standby's name to the primary (`application_name`, as
    ///     `synchronous_standby_names` and `pg_stat_replication` know it).
    ///   - settings: Settings of the standby beyond this server's own, each `name=value`.
    /// - Throws: ``PostgresTestServerError`` when the copy or the start fails.
    package func startStandby(name: String = "standby", settings: [String] = []) async throws -> PostgresTestServer {
        let standbyDirectory = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("logsync-pg-standby-\(UUID().uuidString.prefix(8).lowercased())")
        try Self.makeDirectory(standbyDirectory, for: runAs)
        let copied = try await Self.command(
            binaries, runAs,
            [
                "pg_basebackup", "-D", standbyDirectory.path, "-h", directory.path, "-p", "\(port)", "-U", "postgres",
                "-R", "-X", "stream", "-c", "fast", "--no-sync", "-d",
                "application_name=\(name)",
            ])
        guard copied.status == 0 else {
            try? FileManager.default.removeItem(at: standbyDirectory)
            throw PostgresTestServerError("pg_basebackup of the server on port \(port) failed: \(copied)")
        }
        // The copy holds the primary's log: the standby's starts afresh.
        try? FileManager.default.removeItem(at: standbyDirectory.appendingPathComponent("log"))
        let standbySettings = settings + ["hot_standby=on"]
        var lastError: (any Error)?
        for _ in 0..<3 {
            let standbyPort = try Self.freePort()
            do {
                try await Self.start(
                    binaries, runAs, directory: standbyDirectory, port: standbyPort, durable: durable,
                    settings: self.settings + standbySettings)
                let standby = PostgresTestServer(
                    binaries: binaries, runAs: runAs, directory: standbyDirectory, port: standbyPort, durable: durable,
                    settings: self.settings + standbySettings)
                standby.registerForExit()
                return standby
            } catch {
                lastError = error
            }
        }
        throw lastError ?? PostgresTestServerError("the standby did not start")
    }

    /// Runs `sql` with `psql` on `database` and returns what it printed (unaligned, tuples
    /// only: one line per row, `|` between columns), trimmed.
    ///
    /// - Throws: ``PostgresTestServerError`` with psql's message when the statement fails.
    package func psql(_ sql: String, database: String = "postgres") async throws -> String {
        let ran = try await Self.command(
            binaries, runAs,
            [
                "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", directory.path, "-p", "\(port)", "-U",
                "postgres", "-d", database, "-c", sql,
            ])
        guard ran.status == 0 else {
            throw PostgresTestServerError("psql on port \(port) failed running \(sql): \(ran)")
        }
        return ran.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Where this server's WAL ends now, as an LSN such as `0/3000148`: the end of the last
    /// record inserted (`pg_current_wal_insert_lsn()` on a primary), which takes in commits not
    /// yet written out (`synchronous_commit=off`, as test servers run).
    package func walPosition() async throws -> String {
        try await psql("SELECT pg_current_wal_insert_lsn()")
    }

    /// Whether this server (a standby) has replayed the WAL up to `lsn`.
    package func hasReplayed(_ lsn: String) async throws -> Bool {
        try await psql("SELECT coalesce(pg_last_wal_replay_lsn() >= '\(lsn)'::pg_lsn, false)") == "t"
    }

    /// Waits until this standby has replayed everything `primary` has written so far.
    ///
    /// - Throws: ``PostgresTestServerError`` when `limit` passes first.
    package func waitUntilCaughtUp(with primary: PostgresTestServer, limit: Duration = .seconds(120)) async throws {
        let lsn = try await primary.walPosition()
        try await Self.waitUntil("the standby on port \(port) replays up to \(lsn)", limit: limit) {
            try await hasReplayed(lsn)
        }
    }

    /// Whether the server is in recovery: a standby, not yet promoted.
    package func isInRecovery() async throws -> Bool {
        try await psql("SELECT pg_is_in_recovery()") == "t"
    }

    /// Promotes this standby (`pg_ctl promote -w`): it stops following its primary and
    /// accepts writes once the command returns.
    package func promote() async throws {
        let promoted = try await Self.command(
            binaries, runAs, ["pg_ctl", "promote", "-w", "-t", "120", "-D", directory.path])
        guard promoted.status == 0 else {
            throw PostgresTestServerError("pg_ctl promote failed: \(promoted)\nlog:\n\(logTail())")
        }
        try await Self.waitUntil("the promoted server on port \(port) leaves recovery", limit: .seconds(120)) {
            try await !isInRecovery()
        }
    }

    /// Stops the server the way a crash does (`pg_ctl stop -m immediate`): no checkpoint, no
    /// goodbye to clients or standbys. ``startAgain()`` starts it again (with crash recovery).
    package func stopImmediately() async throws {
        let stopped = try await Self.command(
            binaries, runAs, ["pg_ctl", "stop", "-w", "-m", "immediate", "-D", directory.path])
        guard stopped.status == 0 else {
            throw PostgresTestServerError("pg_ctl stop -m immediate failed: \(stopped)\nlog:\n\(logTail())")
        }
    }

    /// Makes commits on this primary wait for the standbys `names` (`synchronous_standby_names`,
    /// `*` for any) to have them, with `ALTER SYSTEM` and a reload, and waits until one of them
    /// is synchronous (`pg_stat_replication`). The server must run with `synchronous_commit=on`
    /// (a setting of ``init(directory:durable:settings:)``): otherwise commits wait for no one.
    package func requireSynchronousStandbys(_ names: String = "*", limit: Duration = .seconds(120)) async throws {
        let quoted = names.replacingOccurrences(of: "'", with: "''")
        _ = try await psql("ALTER SYSTEM SET synchronous_standby_names = '\(quoted)'")
        _ = try await psql("SELECT pg_reload_conf()")
        try await Self.waitUntil("a standby of the server on port \(port) is synchronous", limit: limit) {
            try await psql("SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')") != "0"
        }
    }

    /// Checks `condition` every 20 ms until it holds, or fails naming `what` after `limit`.
    static func waitUntil(
        _ what: String, limit: Duration, _ condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + limit
        while try await !condition() {
            guard ContinuousClock.now < deadline else {
                throw PostgresTestServerError("timed out after \(limit) waiting until \(what)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
