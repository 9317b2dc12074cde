import SyncModel
import Synchronization

/// Delivers "database changed" hints to the devices listening to a database (F113, F154).
///
/// Each listener's stream keeps only the newest undelivered hint: hints coalesce, and a device
/// always fetches with its token rather than reading anything from a hint.
final class PushHub: Sendable {
    struct Key: Hashable {
        let user: UserID
        let scope: DatabaseScope
    }

    private struct Listener {
        let device: DeviceID?
        let receivesOwnChanges: Bool
        let continuation: AsyncStream<PushHint>.Continuation
    }

    private let listeners = Mutex<(next: Int, byKey: [Key: [Int: Listener]])>((0, [:]))
    /// The admin change streams' listeners, which hear of every database's commits.
    private let everyDatabase = Mutex<(next: Int, listeners: [Int: DatabaseChangeListener])>((0, [:]))

    /// A new stream of hints for `key`, ending when the consumer stops listening.
    func subscribe(_ key: Key, device: DeviceID?, receivesOwnChanges: Bool) -> AsyncStream<PushHint> {
        let (stream, continuation) = AsyncStream.makeStream(of: PushHint.self, bufferingPolicy: .bufferingNewest(1))
        let id = listeners.withLock { state in
            state.next += 1
            state.byKey[key, default: [:]][state.next] = Listener(
                device: device, receivesOwnChanges: receivesOwnChanges, continuation: continuation)
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

    /// Sends `hint` to every listener of `key`, except the originating device unless it asked
    /// (F114), when `devices`; and to the admin change streams' listeners in any case.
    func publish(_ hint: PushHint, to key: Key, from origin: DeviceID?, devices: Bool = true) {
        if let token = hint.changeToken {
            let admins = everyDatabase.withLock { Array($0.listeners.values) }
            for listener in admins { listener.changed(key, token: token) }
        }
        guard devices else { return }
        let targets = listeners.withLock { state in
            (state.byKey[key] ?? [:]).values.filter { listener in
                listener.receivesOwnChanges || origin == nil || listener.device != origin
            }.map(\.continuation)
        }
        for continuation in targets { continuation.yield(hint) }
    }

    /// Sends every listener a hint that names no subscription, zone or token: "fetch", for when
    /// hints may have been lost on their way between server nodes.
    func publishToEveryone() {
        let targets = listeners.withLock { state in
            state.byKey.flatMap { key, listeners in listeners.values.map { (key, $0.continuation) } }
        }
        for (key, continuation) in targets { continuation.yield(PushHint(databaseScope: key.scope)) }
        for listener in everyDatabase.withLock({ Array($0.listeners.values) }) { listener.missed() }
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
