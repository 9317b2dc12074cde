import Synchronization

/// A clock that moves only when a test says so, for driving an engine's scheduler without real
/// waiting.
///
/// Sleepers wake, in deadline order, when ``advance(by:)`` or ``advance(to:)`` moves the clock
/// past their deadline. A cancelled sleep throws `CancellationError` at once.
///
/// ```swift
/// let clock = TestClock()
/// configuration.clock = clock
/// try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
/// await clock.waitForSleepers()          // the scheduler waits for the debounce
/// await clock.advance(by: .seconds(1))   // … and sends
/// ```
public final class TestClock: Clock, Sendable {
    /// A point on a test clock: the time since the clock was made.
    public struct Instant: InstantProtocol, Sendable, Hashable, CustomStringConvertible {
        /// The time since the clock was made.
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }

        /// The offset, such as `13.0 seconds`.
        public var description: String { "\(offset)" }
    }

    private struct Sleeper {
        let id: UInt64
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A clock at offset zero.
    public init() {}

    /// The current instant.
    public var now: Instant { state.withLock { $0.now } }

    /// No resolution limit: deadlines are exact.
    public var minimumResolution: Duration { .zero }

    /// The deadlines of the tasks sleeping now, earliest first.
    public var sleepingDeadlines: [Instant] { state.withLock { $0.sleepers.map(\.deadline).sorted() } }

    /// Sleeps until the clock reaches `deadline` (at once if it has).
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool in
                    if deadline <= state.now { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward by `duration`, waking every sleeper whose deadline is reached.
    public func advance(by duration: Duration) async {
        await advance(to: now.advanced(by: duration))
    }

    /// Moves the clock to `instant` (never backwards), waking sleepers in deadline order; after
    /// each wake it lets the woken task run (yielding) before moving on.
    public func advance(to instant: Instant) async {
        while true {
            let woken = state.withLock { state -> Sleeper? in
                guard
                    let index = state.sleepers.indices.min(by: {
                        state.sleepers[$0].deadline < state.sleepers[$1].deadline
                    }),
                    state.sleepers[index].deadline <= instant
                else {
                    if state.now < instant { state.now = instant }
                    return nil
                }
                let sleeper = state.sleepers.remove(at: index)
                if state.now < sleeper.deadline { state.now = sleeper.deadline }
                return sleeper
            }
            guard let woken else { break }
            woken.continuation.resume()
            await Self.yieldMany()
        }
        await Self.yieldMany()
    }

    /// Waits (yielding, never sleeping) until at least `count` tasks sleep on this clock, or
    /// gives up after many yields. Returns whether they do.
    @discardableResult
    public func waitForSleepers(count: Int = 1, maximumYields: Int = 100_000) async -> Bool {
        for _ in 0..<maximumYields {
            if state.withLock({ $0.sleepers.count }) >= count { return true }
            await Task.yield()
        }
        return state.withLock { $0.sleepers.count } >= count
    }

    private static func yieldMany() async {
        for _ in 0..<50 { await Task.yield() }
    }
}
