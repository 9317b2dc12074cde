import Foundation
import PostgresProcess
import SyncModel
import Testing

@testable import LogSyncPostgres

/// A pool on a URL of several hosts (`postgres://u@h1:p1,h2:p2/db?target_session_attrs=…`)
/// follows the primary: it connects to the host whose session suits the URL, fails with
/// `serviceUnavailable` while none does, and reaches a standby once it is promoted. A real
/// primary and a real standby (`pg_basebackup -R`), started by the test.
@Suite("A pool across a primary and a standby", .timeLimit(.minutes(5)))
struct PostgresFailoverPoolTests {
    /// The URL of `database` on the hosts `servers`, in that order, with `attributes`.
    static func url(
        _ database: String, on servers: [PostgresTestServer], attributes: PostgresTargetSessionAttributes
    ) throws -> PostgresURL {
        var url = try PostgresURL(database)
        url.hosts = servers.map { PostgresHost(host: "127.0.0.1", port: $0.port) }
        url.targetSessionAttributes = attributes
        return url
    }

    /// Runs `body` with a new primary, a database on it, and a standby streaming from it;
    /// destroys both after.
    func withPrimaryAndStandby(
        _ body: (_ primary: PostgresTestServer, _ standby: PostgresTestServer, _ database: String) async throws -> Void
    ) async throws {
        let primary = try await PostgresTestServer()
        do {
            let database = try await primary.createDatabase()
            let standby = try await primary.startStandby()
            do {
                try await body(primary, standby, database)
            } catch {
                await standby.destroy()
                throw error
            }
            await standby.destroy()
        } catch {
            await primary.destroy()
            throw error
        }
        await primary.destroy()
    }

    /// The port of the server a pool's connection reached.
    static func serverPort(_ pool: PostgresPool) async throws -> Int32 {
        try await pool.run { try pool.withSession { try $0.query("SELECT inet_server_port()")[0].decode(Int32.self) } }
    }

    @Test("a read-write pool connects to the primary, a standby pool to the standby, whatever their order")
    func connectsToTheHostThatSuits() async throws {
        try await withPrimaryAndStandby { primary, standby, database in

            let writer = PostgresPool(
                url: try Self.url(database, on: [standby, primary], attributes: .readWrite), size: 1,
                logger: quietLogger)
            defer { writer.shutdown() }
            #expect(try await Self.serverPort(writer) == Int32(primary.port))

            let primaryOnly = PostgresPool(
                url: try Self.url(database, on: [standby, primary], attributes: .primary), size: 1, logger: quietLogger)
            defer { primaryOnly.shutdown() }
            #expect(try await Self.serverPort(primaryOnly) == Int32(primary.port))

            let reader = PostgresPool(
                url: try Self.url(database, on: [primary, standby], attributes: .preferStandby), size: 1,
                logger: quietLogger)
            defer { reader.shutdown() }
            #expect(try await Self.serverPort(reader) == Int32(standby.port))

            // A standby alone cannot be read-write: serviceUnavailable, saying why.
            let nowhere = PostgresPool(
                url: try Self.url(database, on: [standby], attributes: .readWrite), size: 1, logger: quietLogger)
            defer { nowhere.shutdown() }
            await #expect {
                try await Self.serverPort(nowhere)
            } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .serviceUnavailable && error.message.contains("standby")
            }
        }
    }

    @Test("a write that reaches a standby is retryable and drops the connection")
    func writeOnAStandbyIsRetryable() async throws {
        try await withPrimaryAndStandby { primary, standby, database in

            let pool = PostgresPool(
                url: try Self.url(database, on: [standby], attributes: .any), size: 1, logger: quietLogger)
            defer { pool.shutdown() }
            await #expect {
                try await pool.run { try pool.withSession { try $0.execute("CREATE TABLE t (x int)") } }
            } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .serviceUnavailable && error.retryAfter == .seconds(1)
                    && error.message.contains("read-only")
            }
            // The pool connects afresh and reads on.
            #expect(try await Self.serverPort(pool) == Int32(standby.port))
        }
    }

    @Test("when the primary is lost, calls fail with serviceUnavailable until the standby is promoted, then reach it")
    func followsAPromotion() async throws {
        try await withPrimaryAndStandby { primary, standby, database in
            let pool = PostgresPool(
                url: try Self.url(database, on: [primary, standby], attributes: .readWrite), size: 2,
                logger: quietLogger)
            defer { pool.shutdown() }
            _ = try await pool.run { try pool.withSession { try $0.execute("CREATE TABLE kept (x int)") } }
            _ = try await pool.run { try pool.withSession { try $0.query("INSERT INTO kept VALUES (1)") } }
            try await standby.waitUntilCaughtUp(with: primary)

            // The primary crashes: no host is writable.
            try await primary.stopImmediately()
            for _ in 0..<2 {
                await #expect {
                    try await pool.run { try pool.withSession { try $0.query("INSERT INTO kept VALUES (2)") } }
                } throws: { error in
                    (error as? SyncError)?.code == .serviceUnavailable
                }
            }

            // The standby is promoted: the same pool writes there.
            try await standby.promote()
            _ = try await pool.run { try pool.withSession { try $0.query("INSERT INTO kept VALUES (3)") } }
            #expect(try await Self.serverPort(pool) == Int32(standby.port))
            let kept = try await pool.run {
                try pool.withSession { try $0.query("SELECT x FROM kept ORDER BY x").map { try $0.decode(Int32.self) } }
            }
            #expect(kept == [1, 3])
        }
    }
}
