import Foundation
import SyncModel
import Synchronization

/// Delivers "database changed" hints to the devices listening to a database (F113, F154).
///
/// Publishing to devices only queues: ``publish(_:to:from:devices:sentAt:)`` adds the notice to
/// the hub's queue and returns (the admin change streams, few, are told at once), and one
/// delivery task at a time (started by the first notice of an empty queue, ending when the
/// queue is empty again) hands the queued notices to the listeners, in the order they were
/// published. So a commit's request never waits for its hint to reach the
/// listeners, however many there are: its cost does not grow with them.
///
/// Nothing grows without bound, however slow a listener or the delivery task is:
/// - The queue keeps one notice per database and originating device: a newer notice of the same
///   replaces the older where it stands (one naming another subscription or zone makes it
///   "fetch everything", as below).
/// - Each listener's stream keeps only the newest undelivered hint (a channel that cannot keep
///   up with its database's commits holds one hint, whatever their rate). When a newer hint
///   replaces one the listener has not taken and the two name different subscriptions or
///   zones, the listener gets one hint naming neither instead: "fetch everything", so that no
///   zone's change is forgotten by coalescing.
///
/// A device always fetches with its token rather than reading anything from a hint.
final class PushHub: Sendable {
    struct Key: Hashable {
        let user: UserID
        let scope: DatabaseScope
    }

    private struct Listener {
        let device: DeviceID?
        let receivesOwnChanges: Bool
        let continuation: AsyncStream<PushHint>.Continuation
        /// The queue's sequence number when it subscribed: notices published before (still
        /// queued) are not its.
        let since: UInt64
    }

    /// A notice waiting in the queue.
    private enum Pending {
        case notice(PushHint, key: Key, origin: DeviceID?, sentAt: Date?, sequence: UInt64)
        /// ``publishToEveryone()``.
        case everyone(sequence: UInt64)
    }

    /// What a queued notice is coalesced by.
    private struct Slot: Hashable {
        let key: Key
        let origin: DeviceID?
    }

    private struct Queue {
        var pending: [Pending] = []
        var slots: [Slot: Int] = [:]
        /// Whether a delivery task is running (it empties the queue before it ends).
        var delivering = false
        /// How many notices were coalesced into a queued one since the hub started.
        var coalesced = 0
        /// The number of the last notice queued.
        var sequence: UInt64 = 0
    }

    private let listeners = Mutex<(next: Int, byKey: [Key: [Int: Listener]])>((0, [:]))
    /// The admin change streams' listeners, which hear of every database's commits.
    private let everyDatabase = Mutex<(next: Int, listeners: [Int: DatabaseChangeListener])>((0, [:]))
    private let queue = Mutex(Queue())
    /// Called with each notice's `sentAt` once it was handed to the listeners (the push fan-out
    /// metric).
    private let delivered: @Sendable (Date) -> Void

    init(delivered: @escaping @Sendable (Date) -> Void = { _ in }) {
        self.delivered = delivered
    }

    /// A new stream of hints for `key`, ending when the consumer stops listening.
    func subscribe(_ key: Key, device: DeviceID?, receivesOwnChanges: Bool) -> AsyncStream<PushHint> {
        let (stream, continuation) = AsyncStream.makeStream(of: PushHint.self, bufferingPolicy: .bufferingNewest(1))
        // Registered with the queue's number read under the listeners' lock, which delivery
        // takes after queueing: a notice queued later is delivered to it, one queued earlier
        // (a commit before it subscribed) is not.
        let id = listeners.withLock { state in
            state.next += 1
            state.byKey[key, default: [:]][state.next] = Listener(
                device: device, receivesOwnChanges: receivesOwnChanges, continuation: continuation,
                since: queue.withLock { $0.sequence })
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { state in _ = state.byKey[key]?.removeValue(forKey: id) }
        }
        return stream
    }

    /// A new listener to every database's commits (the admin change stream), until it is
    /// cancelled or the hub finishes.
    func subscribeToEveryDatabase() -> DatabaseChangeListener {
        let listener = DatabaseChangeListener()
        let id = everyDatabase.withLock { state in
            state.next += 1
            state.listeners[state.next] = listener
            return state.next
        }
        listener.onFinish = { [weak self] in
            self?.everyDatabase.withLock { state in _ = state.listeners.removeValue(forKey: id) }
        }
        return listener
    }

    /// The devices listening to `user`'s databases on this node, by scope (`nil` for a listener
    /// without a device ID): what the operations console shows as connected.
    func listeners(of user: UserID) -> [(scope: DatabaseScope, device: DeviceID?)] {
        listeners.withLock { state in
            DatabaseScope.allCases.flatMap { scope in
                (state.byKey[Key(user: user, scope: scope)] ?? [:]).values.map { (scope, $0.device) }
            }
        }
    }

    /// How many push listeners this node has, over every user.
    var listenerCount: Int { listeners.withLock { $0.byKey.values.reduce(0) { $0 + $1.count } } }

    /// How many listeners ``subscribeToEveryDatabase()`` has that have not finished.
    var everyDatabaseListenerCount: Int { everyDatabase.withLock { $0.listeners.count } }

    /// Queues `hint` for every listener of `key`, except the originating device unless it asked
    /// (F114), when `devices`; and for the admin change streams' listeners in any case. Returns
    /// at once: the delivery task hands it on (see the type's description). `sentAt` is when the
    /// commit behind it published it, for the fan-out metric.
    func publish(_ hint: PushHint, to key: Key, from origin: DeviceID?, devices: Bool = true, sentAt: Date? = nil) {
        // The admin change streams are told at once: they are few (the app's backends), and
        // each keeps one token per database whatever the rate (``DatabaseChangeListener``).
        if let token = hint.changeToken {
            let admins = everyDatabase.withLock { Array($0.listeners.values) }
            for listener in admins { listener.changed(key, token: token) }
        }
        guard devices else {
            if let sentAt { delivered(sentAt) }
            return
        }
        enqueue(.notice(hint, key: key, origin: origin, sentAt: sentAt, sequence: 0))
    }

    /// Queues a hint for every listener that names no subscription, zone or token: "fetch", for
    /// when hints may have been lost on their way between server nodes.
    func publishToEveryone() {
        for listener in everyDatabase.withLock({ Array($0.listeners.values) }) { listener.missed() }
        enqueue(.everyone(sequence: 0))
    }

    /// How many notices wait for the delivery task, whether it runs, and how many notices were
    /// coalesced into a queued one since the hub started.
    var queueState: (waiting: Int, delivering: Bool, coalesced: Int) {
        queue.withLock { ($0.pending.count, $0.delivering, $0.coalesced) }
    }

    /// Queues `entry` (its sequence number is given here).
    private func enqueue(_ entry: Pending) {
        let start = queue.withLock { queue -> Bool in
            queue.sequence += 1
            switch entry {
            case .notice(let hint, let key, let origin, let sentAt, _):
                let slot = Slot(key: key, origin: origin)
                if let index = queue.slots[slot],
                    case .notice(let queued, _, _, let firstSent, _) = queue.pending[index]
                {
                    // The older notice's time stays: the fan-out metric counts the longest wait.
                    queue.coalesced += 1
                    queue.pending[index] = .notice(
                        Self.coalesce(queued, hint) ?? hint, key: key, origin: origin, sentAt: firstSent,
                        sequence: queue.sequence)
                    return false
                }
                queue.slots[slot] = queue.pending.count
                queue.pending.append(.notice(hint, key: key, origin: origin, sentAt: sentAt, sequence: queue.sequence))
            case .everyone:
                queue.pending.append(.everyone(sequence: queue.sequence))
            }
            guard !queue.delivering else { return false }
            queue.delivering = true
            return true
        }
        if start { Task.detached { [self] in deliverQueued() } }
    }

    /// The one hint standing for `older` and then `newer` of the same database: `newer` when
    /// they name the same subscription and zone (its token is the newer), else a hint naming
    /// neither ("fetch everything") with the newer of their tokens. `nil` means `newer`.
    private static func coalesce(_ older: PushHint, _ newer: PushHint) -> PushHint? {
        guard older.subscriptionID != newer.subscriptionID || older.zoneID != newer.zoneID else { return nil }
        let token = [older.changeToken, newer.changeToken].compactMap { $0 }.max {
            $0.offset.rawValue < $1.offset.rawValue
        }
        return PushHint(databaseScope: newer.databaseScope, changeToken: token)
    }

    /// Hands the queued notices on, in order, until the queue is empty.
    private func deliverQueued() {
        while true {
            let batch = queue.withLock { queue -> [Pending] in
                defer {
                    queue.pending = []
                    queue.slots = [:]
                }
                if queue.pending.isEmpty { queue.delivering = false }
                return queue.pending
            }
            guard !batch.isEmpty else { return }
            for entry in batch {
                switch entry {
                case .notice(let hint, let key, let origin, let sentAt, let sequence):
                    deliver(hint, to: key, from: origin, sequence: sequence)
                    if let sentAt { delivered(sentAt) }
                case .everyone(let sequence):
                    deliverToEveryone(sequence: sequence)
                }
            }
        }
    }

    private func deliver(_ hint: PushHint, to key: Key, from origin: DeviceID?, sequence: UInt64) {
        let targets = listeners.withLock { state in
            (state.byKey[key] ?? [:]).values.filter { listener in
                listener.since < sequence
                    && (listener.receivesOwnChanges || origin == nil || listener.device != origin)
            }.map(\.continuation)
        }
        for continuation in targets { Self.yield(hint, to: continuation) }
    }

    /// Yields `hint`; if it replaced a hint the listener had not taken yet that named another
    /// subscription or zone, yields "fetch everything" in its place.
    private static func yield(_ hint: PushHint, to continuation: AsyncStream<PushHint>.Continuation) {
        if case .dropped(let older) = continuation.yield(hint), let merged = coalesce(older, hint) {
            continuation.yield(merged)
        }
    }

    private func deliverToEveryone(sequence: UInt64) {
        let targets = listeners.withLock { state in
            state.byKey.flatMap { key, listeners in
                listeners.values.filter { $0.since < sequence }.map { (key, $0.continuation) }
            }
        }
        for (key, continuation) in targets { continuation.yield(PushHint(databaseScope: key.scope)) }
    }

    /// Ends every stream (server shutdown).
    /// Ends the streams of `user`'s devices, of every scope: the user was deleted.
    func finish(user: UserID) {
        let ended = listeners.withLock { state in
            let keys = state.byKey.keys.filter { $0.user == user }
            return keys.flatMap { key in (state.byKey.removeValue(forKey: key) ?? [:]).values.map(\.continuation) }
        }
        for continuation in ended { continuation.finish() }
    }

    func finishAll() {
        let all = listeners.withLock { state in
            defer { state.byKey = [:] }
            return state.byKey.values.flatMap { $0.values.map(\.continuation) }
        }
        for continuation in all { continuation.finish() }
        for listener in everyDatabase.withLock({ Array($0.listeners.values) }) { listener.finish() }
    }
}
