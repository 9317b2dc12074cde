import Dispatch
import LogSyncPostgres
import PostgresProcess
import SyncModel
import Synchronization
import Testing

/// What a PostgreSQL restart or outage does to the pool and the listener. Each test starts a
/// server of its own, since it restarts or stops it.
@Suite struct PostgresFaultTests {
    /// The error of a lost or refused connection: `serviceUnavailable`, retry after a second,
    /// naming the server's address.
    static func isUnavailable(_ error: any Error, port: Int) -> Bool {
        guard let error = error as? SyncError else { return false }
        return error.code == .serviceUnavailable && error.retryAfter == .seconds(1)
            && error.message.contains("127.0.0.1:\(port)")
    }

    /// A query on a connection that PostgreSQL's restart ended throws `serviceUnavailable`;
    /// the next checkout connects again and succeeds.
    @Test func restartFailsTheCallInFlightThenReconnects() async throws {
        let server = try await PostgresTestServer()
        let pool = PostgresPool(url: try PostgresURL(try await server.createDatabase()), size: 1, logger: quietLogger)
        defer { pool.shutdown() }

        let checkedOut = Mutex(false)
        let restarted = DispatchSemaphore(value: 0)
        async let duringRestart: Result<Int32, any Error> = pool.run {
            try pool.withSession { session in
                _ = try session.query("SELECT 1")
                checkedOut.withLock { $0 = true }
                guard restarted.wait(timeout: .now() + 60) == .success else { throw TimedOut(what: "the restart") }
                return Result { try session.query("SELECT 2")[0].decode(Int32.self) }
            }
        }
        try await eventually("the session is checked out") { checkedOut.withLock { $0 } }
        try await server.restart()
        restarted.signal()
        let failure = try await duringRestart
        #expect(throws: (any Error).self) { try failure.get() }
        if case .failure(let error) = failure {
            #expect(Self.isUnavailable(error, port: server.port), "\(error)")
        }

        let value = try await pool.run { try pool.withSession { try $0.query("SELECT 3")[0].decode(Int32.self) } }
        #expect(value == 3)
        await server.destroy()
    }

    /// While PostgreSQL is down, calls throw `serviceUnavailable` naming host and port; once
    /// it is back, calls succeed without a new pool.
    @Test func outageThrowsServiceUnavailableUntilTheServerIsBack() async throws {
        let server = try await PostgresTestServer()
        let pool = PostgresPool(url: try PostgresURL(try await server.createDatabase()), size: 2, logger: quietLogger)
        defer { pool.shutdown() }
        _ = try await pool.run { try pool.withSession { try $0.query("SELECT 1") } }

        try await server.stop()
        for _ in 0..<2 {
            await #expect {
                try await pool.run { try pool.withSession { try $0.query("SELECT 1") } }
            } throws: { error in
                Self.isUnavailable(error, port: server.port)
            }
        }

        try await server.startAgain()
        let value = try await pool.run { try pool.withSession { try $0.query("SELECT 4")[0].decode(Int32.self) } }
        #expect(value == 4)
        await server.destroy()
    }

    /// A listener receives what another pool notifies; after a restart it listens again,
    /// calls `onReconnect`, and receives again.
    @Test func listenerReconnectsAfterRestart() async throws {
        let server = try await PostgresTestServer()
        let url = try PostgresURL(try await server.createDatabase())
        let pool = PostgresPool(url: url, size: 1, logger: quietLogger)
        defer { pool.shutdown() }
        let received = Mutex<[String]>([])
        let reconnects = Mutex(0)
        let listener = PostgresListener(
            url: url, channel: "logsync_Changes", logger: quietLogger,
            onNotification: { payload in received.withLock { $0.append(payload) } },
            onReconnect: { reconnects.withLock { $0 += 1 } })
        listener.start()
        defer { listener.stop() }

        try await eventually("the listener listens") { listener.isListening }
        try await pool.run { try pool.withSession { try $0.notify(channel: "logsync_Changes", payload: "one") } }
        try await eventually("the first notification arrives") { received.withLock { $0 } == ["one"] }
        #expect(reconnects.withLock { $0 } == 0)

        try await server.restart()
        try await eventually("the listener reconnects") { reconnects.withLock { $0 } >= 1 && listener.isListening }
        // The pool's connection died with the restart: the first call may fail, a later one succeeds.
        try await eventually("a notify after the restart succeeds") {
            (try? await pool.run { try pool.withSession { try $0.notify(channel: "logsync_Changes", payload: "two") } })
                != nil
        }
        try await eventually("the second notification arrives") { received.withLock { $0 }.last == "two" }
        #expect(received.withLock { $0 } == ["one", "two"])
        await server.destroy()
    }

    /// The shared server's listener path without faults: a notification sent inside a
    /// transaction arrives only when it commits.
    @Test func notificationArrivesOnCommit() async throws {
        let server = try await PostgresTestServer.shared()
        let url = try PostgresURL(try await server.createDatabase())
        let pool = PostgresPool(url: url, size: 1, logger: quietLogger)
        defer { pool.shutdown() }
        let received = Mutex<[String]>([])
        let channel = "logsync_\(url.database)"
        let listener = PostgresListener(
            url: url, channel: channel, logger: quietLogger,
            onNotification: { payload in received.withLock { $0.append(payload) } }, onReconnect: {})
        listener.start()
        defer { listener.stop() }
        try await eventually("the listener listens") { listener.isListening }
        try await pool.run {
            try pool.withSession { session in
                try session.transaction { session in
                    try session.notify(channel: channel, payload: "committed")
                }
            }
        }
        try await eventually("the notification arrives") { received.withLock { $0 } == ["committed"] }
    }
}
