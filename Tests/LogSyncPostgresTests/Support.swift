import LogSyncPostgres
import Logging
import PostgresProcess

/// A logger that stays quiet unless something is badly wrong, so test output stays readable.
let quietLogger: Logger = {
    var logger = Logger(label: "LogSyncPostgresTests")
    logger.logLevel = .critical
    return logger
}()

/// A pool on a fresh database of the shared test server.
func freshPool(size: Int = 2) async throws -> PostgresPool {
    let server = try await PostgresTestServer.shared()
    return PostgresPool(url: try PostgresURL(try await server.createDatabase()), size: size, logger: quietLogger)
}

/// Waits until `condition` holds, checking every 20 ms, and fails after `timeout`.
func eventually(
    _ what: String, timeout: Duration = .seconds(15), _ condition: @Sendable () async -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while !(await condition()) {
        guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// A condition that did not come true in time.
struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting until \(what)" }
}
