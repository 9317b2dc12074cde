import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// One dedicated connection that `LISTEN`s on one or more channels and hands each
/// notification's channel and payload to `onNotification`, for as long as it runs.
///
/// Notifications travel only on a live connection: while PostgreSQL restarts, they are lost.
/// So when the connection drops, the listener calls `onDisconnect`, connects again with backoff
/// (0.1 s doubling to 2 s), listens again, and then calls `onListening` with `reconnected` set,
/// whose job is to catch up on whatever changed meanwhile (re-read the state the notifications
/// describe). Everything runs on the listener's own event loop; nothing blocks or polls.
package final class PostgresListener: Sendable {
    private let url: PostgresURL
    private let channels: [String]
    private let logger: Logger
    private let onNotification: @Sendable (_ channel: String, _ payload: String) -> Void
    private let onListening: @Sendable (_ reconnected: Bool) -> Void
    private let onDisconnect: @Sendable () -> Void
    private let group: MultiThreadedEventLoopGroup
    private let state = Mutex(State())

    /// The listener's lifecycle and its current connection.
    private struct State {
        var started = false
        var stopped = false
        var connection: PostgresConnection?
        var hasListened = false
        var nextID = 1
    }

    /// The first wait before connecting again, short so a quick restart costs little.
    static let initialBackoff = TimeAmount.milliseconds(100)
    /// The longest wait between connection attempts, so a long outage costs few attempts.
    static let maximumBackoff = TimeAmount.seconds(2)

    /// Creates a listener on `channels` of the database at `url`; it connects on ``start()``.
    ///
    /// - Parameters:
    ///   - onNotification: Called with each notification's channel and payload, on the
    ///     listener's event loop: return quickly.
    ///   - onListening: Called on the listener's event loop each time it listens on a new
    ///     connection: `reconnected` is `false` for the first, and `true` after a lost one, when
    ///     notifications may have been missed.
    ///   - onDisconnect: Called when a listening connection is lost (not on ``stop()``):
    ///     notifications are missed from then until the next `onListening`.
    package init(
        url: PostgresURL, channels: [String], logger: Logger,
        onNotification: @escaping @Sendable (_ channel: String, _ payload: String) -> Void,
        onListening: @escaping @Sendable (_ reconnected: Bool) -> Void = { _ in },
        onDisconnect: @escaping @Sendable () -> Void = {}
    ) {
        self.url = url
        self.channels = channels
        self.logger = logger
        self.onNotification = onNotification
        self.onListening = onListening
        self.onDisconnect = onDisconnect
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    /// A listener on the one channel `channel`; `onReconnect` is called after the listener
    /// listens again on a new connection, when notifications may have been missed (not for the
    /// first connection).
    package convenience init(
        url: PostgresURL, channel: String, logger: Logger,
        onNotification: @escaping @Sendable (String) -> Void, onReconnect: @escaping @Sendable () -> Void
    ) {
        self.init(
            url: url, channels: [channel], logger: logger, onNotification: { _, payload in onNotification(payload) },
            onListening: { reconnected in if reconnected { onReconnect() } })
    }

    /// Whether the listener has a connection that is listening now.
    package var isListening: Bool {
        state.withLock { state in state.connection.map { !$0.isClosed } ?? false }
    }

    /// Starts connecting and listening; returns at once. Calling it again does nothing.
    package func start() {
        let first = state.withLock { state in
            defer { state.started = true }
            return !state.started && !state.stopped
        }
        if first { attempt(backoff: Self.initialBackoff) }
    }

    /// Closes the connection and stops reconnecting; blocks until the listener's thread ends,
    /// so never call it from `onNotification` or `onReconnect`.
    package func stop() {
        let connection = state.withLock { state in
            state.stopped = true
            defer { state.connection = nil }
            return state.connection
        }
        try? connection?.close().wait()
        try? group.syncShutdownGracefully()
    }

    /// One attempt to connect and listen; on failure, another after `backoff`.
    private func attempt(backoff: TimeAmount) {
        let (stopped, id) = state.withLock { state in
            defer { state.nextID += 1 }
            return (state.stopped, state.nextID)
        }
        if stopped { return }
        let eventLoop = group.next()
        url.connect(on: eventLoop, id: id, logger: logger).map(\.0)
            .flatMap { [channels, onNotification, logger] connection -> EventLoopFuture<PostgresConnection> in
                // One statement per channel: the extended query protocol takes one at a time.
                var listened = eventLoop.makeSucceededVoidFuture()
                for channel in channels {
                    connection.addListener(channel: channel) { _, notification in
                        onNotification(channel, notification.payload)
                    }
                    let quoted = "\"" + channel.replacingOccurrences(of: "\"", with: "\"\"") + "\""
                    listened = listened.flatMap {
                        connection.query(PostgresQuery(unsafeSQL: "LISTEN \(quoted)"), logger: logger).map { _ in }
                    }
                }
                return
                    listened
                    .map { connection }
                    .flatMapError { error in connection.close().flatMapThrowing { throw error } }
            }
            .whenComplete { result in
                switch result {
                case .success(let connection):
                    self.listening(on: connection)
                case .failure(let error):
                    self.logger.debug(
                        "PostgreSQL listener could not connect",
                        metadata: ["endpoint": "\(self.url.endpoint)", "error": "\(error)"])
                    self.retry(after: backoff, on: eventLoop)
                }
            }
    }

    /// Keeps `connection`, tells the owner when it replaces a lost one, and reconnects when it
    /// closes.
    private func listening(on connection: PostgresConnection) {
        let (stopped, reconnected) = state.withLock { state -> (Bool, Bool) in
            if state.stopped { return (true, false) }
            state.connection = connection
            defer { state.hasListened = true }
            return (false, state.hasListened)
        }
        if stopped {
            connection.close().whenComplete { _ in }
            return
        }
        logger.debug("PostgreSQL listener listening", metadata: ["channels": "\(channels.joined(separator: ","))"])
        onListening(reconnected)
        connection.closeFuture.whenComplete { _ in
            let stopped = self.state.withLock { state in
                if state.connection === connection { state.connection = nil }
                return state.stopped
            }
            if stopped { return }
            self.onDisconnect()
            self.logger.info(
                "PostgreSQL listener lost its connection; reconnecting",
                metadata: ["endpoint": "\(self.url.endpoint)"])
            self.retry(after: Self.initialBackoff, on: connection.eventLoop, doubling: false)
        }
    }

    /// Tries again after `delay`, doubling the next delay up to ``maximumBackoff`` unless told
    /// not to.
    private func retry(after delay: TimeAmount, on eventLoop: any EventLoop, doubling: Bool = true) {
        if state.withLock({ $0.stopped }) { return }
        let next = doubling ? min(delay * 2, Self.maximumBackoff) : delay
        eventLoop.scheduleTask(in: delay) { self.attempt(backoff: next) }
    }
}
