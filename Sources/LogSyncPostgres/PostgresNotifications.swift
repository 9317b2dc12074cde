import Dispatch
import Foundation
import LogSyncServer
import Logging
import Metrics
import Synchronization

/// What one node hears from the others through PostgreSQL: push notices (``PostgresStorage/channel``)
/// and token revocations (``PostgresStorage/revocationChannel``), on one listening connection
/// (``PostgresListener``), started by whichever of them is asked for first.
///
/// A lost connection loses the notifications sent meanwhile. So revocation handlers hear
/// `.interrupted` as soon as it is lost and `.listening` once it listens again, and only then is
/// the push `missed` handler called: a node re-checks its devices' tokens before it tells them to
/// fetch, so a device whose token was revoked meanwhile is not hinted. Revocation handlers are
/// called one at a time, in the order of the events, on a queue of their own, where they may
/// wait for PostgreSQL (the listener's event loop must not).
final class PostgresNotifications: Sendable {
    private struct Handlers {
        var deliver: (@Sendable (PushNotice) -> Void)?
        var missed: (@Sendable () -> Void)?
        var revocations: [@Sendable (RevocationEvent) -> Void] = []
        var listening = false
        var listener: PostgresListener?
        var stopped = false
    }

    private let url: PostgresURL
    private let logger: Logger
    private let handlers = Mutex(Handlers())
    /// Where revocation handlers run, and the push `missed` handler after them.
    private let queue = DispatchQueue(label: "logsync.postgres.revocations")

    /// `logsync_postgres_notify_lag_seconds`: from a push notice's commit on its node (by that
    /// node's clock) to its receipt here.
    private let notifyLag: Metrics.Timer

    init(
        url: PostgresURL, logger: Logger,
        notifyLag: Metrics.Timer = Metrics.Timer(label: "logsync_postgres_notify_lag_seconds")
    ) {
        self.url = url
        self.logger = logger
        self.notifyLag = notifyLag
    }

    /// Sends push notices to `deliver` (replacing an earlier handler), and calls `missed` after
    /// the listening connection was lost and made again.
    func onPushNotices(_ deliver: @escaping @Sendable (PushNotice) -> Void, missed: @escaping @Sendable () -> Void) {
        handlers.withLock { handlers in
            handlers.deliver = deliver
            handlers.missed = missed
        }
        startListening()
    }

    /// Adds `handler` to those told of revocations; it hears `.listening` at once if the
    /// connection listens already.
    func onRevocations(_ handler: @escaping @Sendable (RevocationEvent) -> Void) {
        queue.async { [self] in
            let listening = handlers.withLock { handlers in
                handlers.revocations.append(handler)
                return handlers.listening
            }
            if listening { handler(.listening) }
        }
        startListening()
    }

    /// Whether the listening connection listens now.
    var isListening: Bool { handlers.withLock { $0.listener }?.isListening ?? false }

    /// Closes the listening connection and forgets the handlers; blocks until the listener's
    /// thread ends.
    func stop() {
        let listener = handlers.withLock { handlers in
            handlers.stopped = true
            handlers.deliver = nil
            handlers.missed = nil
            handlers.revocations = []
            defer { handlers.listener = nil }
            return handlers.listener
        }
        listener?.stop()
    }

    private func startListening() {
        let started = handlers.withLock { handlers -> PostgresListener? in
            guard handlers.listener == nil, !handlers.stopped else { return nil }
            let listener = PostgresListener(
                url: url, channels: [PostgresStorage.channel, PostgresStorage.revocationChannel], logger: logger,
                onNotification: { [self] channel, payload in received(payload, on: channel) },
                onListening: { [self] reconnected in listening(reconnected: reconnected) },
                onDisconnect: { [self] in disconnected() })
            handlers.listener = listener
            return listener
        }
        started?.start()
    }

    private func received(_ payload: String, on channel: String) {
        if channel == PostgresStorage.revocationChannel {
            guard let revocation = try? JSONDecoder().decode(Revocation.self, from: Data(payload.utf8)) else {
                logger.error("an unreadable revocation notice", metadata: ["payload": "\(payload.prefix(200))"])
                return
            }
            queue.async { [self] in
                for handler in handlers.withLock({ $0.revocations }) { handler(.revoked(revocation)) }
            }
            return
        }
        guard let notice = try? JSONDecoder().decode(PushNotice.self, from: Data(payload.utf8)) else {
            logger.warning("an unreadable push notice", metadata: ["payload": "\(payload.prefix(200))"])
            return
        }
        if let sent = notice.sentAt {
            notifyLag.record(max(0, Date().timeIntervalSince(sent)))
        }
        handlers.withLock { $0.deliver }?(notice)
    }

    private func disconnected() {
        queue.async { [self] in
            let revocations = handlers.withLock { handlers in
                handlers.listening = false
                return handlers.revocations
            }
            for handler in revocations { handler(.interrupted) }
        }
    }

    /// Tells the revocation handlers, then (after a lost connection) the push handler: a
    /// revocation handler may ask PostgreSQL whether the tokens it holds are still there before
    /// devices are told to fetch.
    private func listening(reconnected: Bool) {
        queue.async { [self] in
            let (revocations, missed) = handlers.withLock { handlers in
                handlers.listening = true
                return (handlers.revocations, handlers.missed)
            }
            for handler in revocations { handler(.listening) }
            if reconnected { missed?() }
        }
    }
}
