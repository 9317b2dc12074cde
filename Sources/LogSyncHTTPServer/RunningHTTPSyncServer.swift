import Logging
import ServiceLifecycle
import SyncModel

/// An ``HTTPSyncServer`` running in this process, for tests, benchmarks and embedding: started
/// with ``start(_:)``, stopped gracefully with ``stop()``.
///
/// ```swift
/// let running = try await RunningHTTPSyncServer.start(HTTPSyncServer(server: server, tokens: tokens,
///                                                                    configuration: .init(port: 0)))
/// print(running.port)        // the port the system picked
/// try await running.stop()   // in-flight requests finish; push channels close
/// ```
public final class RunningHTTPSyncServer: Sendable {
    /// The port the server listens on.
    public let port: Int
    /// The served server.
    public let http: HTTPSyncServer
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    private init(port: Int, http: HTTPSyncServer, group: ServiceGroup, task: Task<Void, any Error>) {
        self.port = port
        self.http = http
        self.group = group
        self.task = task
    }

    /// Starts `http` and returns once it accepts connections.
    ///
    /// - Throws: The server's error if it stops before listening (the port is taken, say), or
    ///   if its TLS configuration is unusable.
    public static func start(_ http: HTTPSyncServer) async throws -> RunningHTTPSyncServer {
        let (ports, listening) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
        let application = try http.application { port in
            listening.yield(port)
            listening.finish()
        }
        let group = ServiceGroup(
            configuration: .init(services: [application], gracefulShutdownSignals: [], logger: http.logger))
        let task = Task {
            defer { listening.finish() }
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await task.value
            throw SyncError(
                .internalError,
                "the HTTP server stopped before it listened on \(http.configuration.host):\(http.configuration.port)")
        }
        return RunningHTTPSyncServer(port: port, http: http, group: group, task: task)
    }

    /// Stops accepting connections, closes idle ones, lets requests in flight finish, closes
    /// push channels, and returns when the server has stopped: at once when no request is in
    /// flight, and at the latest after ``HTTPSyncServer/Configuration/shutdownGracePeriod``,
    /// when the connections still busy are closed. Committed data is already on disk.
    ///
    /// - Throws: The server's error, if it failed while running.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}
