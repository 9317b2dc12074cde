import Dispatch
import Logging
import Metrics
import NIOCore
import NIOPosix
import PostgresNIO
import SyncModel
import Synchronization

/// Up to `size` PostgreSQL connections, checked out by blocking calls.
///
/// The server's rules are synchronous functions, so the store beneath them blocks too:
/// ``withSession(_:)`` waits (off the event loop) for a free connection and for each query.
/// Async code reaches it through ``run(_:)``, which runs the blocking work on the pool's own
/// threads so that Swift's few cooperative threads never wait on the network. Connections are
/// made on first need; one found closed, or that failed at the connection level, is dropped
/// and the next checkout connects again, so a PostgreSQL restart costs the calls in flight
/// (which throw `SyncError(.serviceUnavailable, retryAfter: 1 s)`) and nothing more.
///
/// A URL of several hosts makes each new connection find the one that suits its
/// `target_session_attrs` (`PostgresFailover.swift`), so after a failover the connections to
/// the lost primary are dropped and the next ones reach the promoted standby; a write that
/// reaches a read-only server drops its connection the same way (`serviceUnavailable`).
///
/// Built on postgres-nio's `PostgresConnection` and its `EventLoopFuture` API rather than
/// `PostgresClient`, whose pool runs on Swift concurrency and would starve behind threads that
/// block.
package final class PostgresPool: Sendable {
    /// The database the pool connects to.
    package let url: PostgresURL
    /// The most connections open at once, and the number of ``run(_:)`` threads.
    package let size: Int
    private let logger: Logger
    private let group: MultiThreadedEventLoopGroup
    private let threads: NIOThreadPool
    /// Counts the connections not checked out (idle or not yet made).
    private let free: DispatchSemaphore
    /// `logsync_postgres_pool_in_use`: the connections checked out.
    private let inUse: Meter
    private let state = Mutex(State())

    /// The connections not in use and the pool's lifecycle.
    private struct State {
        var idle: [(connection: PostgresConnection, host: PostgresHost)] = []
        var nextID = 1
        var isShutDown = false
    }

    /// Creates a pool of up to `size` connections to `url` and `threads` threads for ``run(_:)``
    /// (`size` unless given); connects nothing yet.
    ///
    /// A thread whose work holds a connection while it checks out another (a lock held across
    /// transactions, a read of one log inside another's) needs more connections than threads:
    /// with `size` at least twice `threads` plus one, such nesting cannot exhaust the pool.
    package init(
        url: PostgresURL, size: Int, threads: Int? = nil, logger: Logger,
        inUse: Meter = Meter(label: "logsync_postgres_pool_in_use")
    ) {
        precondition(size >= 1, "a PostgresPool needs at least one connection")
        self.inUse = inUse
        self.url = url
        self.size = size
        self.logger = logger
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.threads = NIOThreadPool(numberOfThreads: max(1, threads ?? size))
        self.threads.start()
        self.free = DispatchSemaphore(value: size)
    }

    /// Checks a connection out for `body`, waiting while all `size` are in use, and returns it
    /// afterwards (or drops it, if it failed at the connection level).
    ///
    /// Blocks the calling thread: call it from a pool thread (``run(_:)``) or another thread
    /// that may block, never from an event loop or a Swift concurrency task.
    ///
    /// - Throws: `SyncError(.serviceUnavailable)` when connecting fails or the connection is
    ///   lost, ``PostgresStoreError`` when a statement fails, and whatever `body` throws.
    package func withSession<R>(_ body: (PostgresSession) throws -> R) throws -> R {
        free.wait()
        inUse.increment()
        defer {
            inUse.decrement()
            free.signal()
        }
        let (connection, host) = try checkOut()
        let session = PostgresSession(connection: connection, endpoint: host.endpoint, logger: logger)
        defer { checkIn(connection, host: host, broken: session.health.isBroken) }
        do {
            let result = try body(session)
            // Statements sent ahead and never awaited are answered before the connection is
            // reused, and their failure is the body's.
            if session.health.hasSent { try session.flushSent() }
            return result
        } catch {
            if session.health.hasSent { _ = try? session.flushSent() }
            throw error
        }
    }

    /// Runs the blocking `body` on one of the pool's `size` threads and resumes the caller with
    /// its result, so async code can call the store without holding a cooperative thread.
    package func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await threads.runIfActive(body)
    }

    /// Closes every connection and stops the pool's threads; later calls fail. Blocks until
    /// done, so call it from a thread that may block, once no call is in flight.
    package func shutdown() {
        let idle = state.withLock { state in
            state.isShutDown = true
            defer { state.idle = [] }
            return state.idle
        }
        for (connection, _) in idle { try? connection.close().wait() }
        try? threads.syncShutdownGracefully()
        try? group.syncShutdownGracefully()
    }

    /// A pool dropped without ``shutdown()`` (its owner failed half-way through starting, say)
    /// still closes its idle connections, which postgres-nio requires of every connection.
    deinit {
        let idle = state.withLock { state in
            defer { state.idle = [] }
            return state.idle
        }
        for (connection, _) in idle {
            if connection.eventLoop.inEventLoop {
                connection.close().whenComplete { _ in }
            } else {
                try? connection.close().wait()
            }
        }
    }

    /// An idle open connection, or a new one, and the host it is connected to.
    private func checkOut() throws -> (PostgresConnection, PostgresHost) {
        while true {
            let (candidate, id, isShutDown) = state.withLock {
                state -> ((connection: PostgresConnection, host: PostgresHost)?, Int, Bool) in
                let id = state.nextID
                if state.idle.isEmpty { state.nextID += 1 }
                return (state.idle.popLast(), id, state.isShutDown)
            }
            if isShutDown {
                throw PostgresFailure.unavailable("the PostgreSQL pool for \(url.endpoint) is shut down")
            }
            guard let candidate else { return try connect(id: id) }
            if !candidate.connection.isClosed { return candidate }
            logger.debug("dropping a closed PostgreSQL connection", metadata: ["endpoint": "\(url.endpoint)"])
        }
    }

    /// Returns `connection` to the idle list, or closes it when it failed.
    private func checkIn(_ connection: PostgresConnection, host: PostgresHost, broken: Bool) {
        if broken || connection.isClosed {
            // Held until closed: postgres-nio wants a connection closed before it is released
            // (one refused as read-only is still open here).
            connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
            return
        }
        let keep = state.withLock { state in
            if state.isShutDown { return false }
            state.idle.append((connection, host))
            return true
        }
        if !keep { connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
    }

    /// Opens connection number `id` to the first of the URL's hosts that suits it
    /// (`target_session_attrs`), and names that host.
    private func connect(id: Int) throws -> (PostgresConnection, PostgresHost) {
        do {
            return try url.connect(on: group.next(), id: id, logger: logger).wait()
        } catch let error as SyncError {
            throw error
        } catch {
            switch PostgresFailure(error, sql: nil, endpoint: url.endpoint) {
            case .connection(let failure): throw failure
            case .statement(let failure): throw failure
            }
        }
    }
}
