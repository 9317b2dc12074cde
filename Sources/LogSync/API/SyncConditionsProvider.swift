import Synchronization

extension SyncEngine {
    /// Whether the device can sync now: the network and power side of "conditions allow"
    /// (F81). The account side comes from the database (`currentUserRecordID()`).
    public struct Conditions: Sendable, Hashable, CustomStringConvertible {
        /// Whether the network is reachable.
        public var networkAvailable: Bool
        /// Whether power (battery, low-power mode) allows syncing.
        public var powerAllowsSync: Bool

        /// Conditions, all favourable by default.
        public init(networkAvailable: Bool = true, powerAllowsSync: Bool = true) {
            self.networkAvailable = networkAvailable
            self.powerAllowsSync = powerAllowsSync
        }

        /// Whether automatic syncs may run.
        public var allowSync: Bool { networkAvailable && powerAllowsSync }

        /// Such as `network up, power ok`.
        public var description: String {
            "network \(networkAvailable ? "up" : "down"), power \(powerAllowsSync ? "ok" : "low")"
        }
    }
}

/// Tells an engine whether conditions allow syncing, and when they (or the account) change.
///
/// The default, ``AlwaysAvailableConditions``, reports a network that is always up. An app
/// plugs in its platform's reachability and power notifications; tests use
/// ``ManualConditions``. The engine re-reads the conditions, and re-checks the account with the
/// database, after each change signalled.
public protocol SyncConditionsProvider: Sendable {
    /// The conditions now.
    func currentConditions() async -> SyncEngine.Conditions
    /// A stream that yields whenever the conditions or the account may have changed.
    func changes() -> AsyncStream<Void>
}

/// Conditions that always allow syncing and never change.
public struct AlwaysAvailableConditions: SyncConditionsProvider {
    public init() {}

    public func currentConditions() async -> SyncEngine.Conditions { SyncEngine.Conditions() }

    public func changes() -> AsyncStream<Void> { AsyncStream { _ in } }
}

/// Conditions set by hand, for tests and simulations: set them, or signal an account change,
/// and every engine using this provider re-checks.
public final class ManualConditions: SyncConditionsProvider {
    private struct State {
        var conditions: SyncEngine.Conditions
        var continuations: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    /// A provider starting at `conditions`.
    public init(_ conditions: SyncEngine.Conditions = SyncEngine.Conditions()) {
        state = Mutex(State(conditions: conditions))
    }

    /// The conditions now.
    public var conditions: SyncEngine.Conditions {
        get { state.withLock { $0.conditions } }
        set {
            state.withLock { $0.conditions = newValue }
            signal()
        }
    }

    /// Tells the engines that the account may have changed (sign-in, sign-out, switch).
    public func signal() {
        for continuation in state.withLock({ Array($0.continuations.values) }) { continuation.yield() }
    }

    public func currentConditions() async -> SyncEngine.Conditions { conditions }

    public func changes() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state.continuations[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }
}
