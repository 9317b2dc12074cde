import LogStore
import Synchronization
import SyncModel

/// The automatic sync driver of one engine (F5, F81–F90): a loop on the configured clock that
/// waits for the next work of its ``SyncSchedule``, for conditions to allow it, and for an
/// account, then runs it as a `.scheduled` send or fetch.
///
/// Every decision is a device-log entry (`syncScheduled`, `syncDeferred`), so a timeline shows
/// why the engine waited. The loop holds its engine weakly; dropping the engine stops it.
final class SyncScheduler: Sendable {
    /// The configured clock, as durations since the scheduler was made.
    struct Timer: Sendable {
        let now: @Sendable () -> Duration
        let sleep: @Sendable (_ until: Duration) async throws -> Void

        init<C: Clock>(_ clock: C) where C.Duration == Duration {
            let start = clock.now
            now = { start.duration(to: clock.now) }
            sleep = { deadline in try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil) }
        }
    }

    private struct State {
        var schedule: SyncSchedule
        var random: SeededRandom
        var wakeup: CheckedContinuation<Void, Never>?
        var woken = false
        var accountCheckNeeded = true
        var deferred: String?
        var loop: Task<Void, Never>?
        var listeners: [Task<Void, Never>] = []
    }

    let timer: Timer
    let conditions: any SyncConditionsProvider
    private let state: Mutex<State>

    init(clock: any Clock<Duration>, policy: SyncSchedule.Policy, seed: UInt64, conditions: any SyncConditionsProvider) {
        self.timer = Timer(clock)
        self.conditions = conditions
        self.state = Mutex(State(schedule: SyncSchedule(policy: policy), random: SeededRandom(seed: seed)))
    }

    /// The schedule now, for tests and `logtool`.
    var schedule: SyncSchedule { state.withLock { $0.schedule } }

    // MARK: Inputs

    /// The app added changes: one send is scheduled, after the debounce (F17, F82).
    func localChangesAdded(_ engine: SyncEngine) {
        let now = timer.now()
        let scheduled = state.withLock { $0.schedule.localChangesAdded(at: now) }
        if scheduled {
            engine.record(.syncScheduled(work: .send, reason: .localChanges, after: state.withLock { $0.schedule.policy.debounce }))
            wake()
        }
    }

    /// A fetch is needed now: a push hint, or catching up at start (F83, F87).
    func fetchNeeded(_ engine: SyncEngine, reason: SyncSchedule.Cause) {
        let now = timer.now()
        if state.withLock({ $0.schedule.fetchNeeded(at: now, cause: reason) }) {
            engine.record(.syncScheduled(work: .fetch, reason: reason, after: .zero))
            wake()
        }
    }

    /// Conditions or the account may have changed.
    func conditionsChanged() {
        state.withLock { $0.accountCheckNeeded = true }
        wake()
    }

    // MARK: The loop

    /// Starts the loop and the listeners for conditions.
    func start(_ engine: SyncEngine) {
        let weakEngine = WeakEngine(engine)
        let changes = conditions.changes()
        let listener = Task { [weak self] in
            for await _ in changes {
                guard let self else { return }
                self.conditionsChanged()
            }
        }
        let loop = Task { [weak self] in
            guard let self else { return }
            await self.run(weakEngine)
        }
        state.withLock { state in
            state.loop = loop
            state.listeners.append(listener)
        }
    }

    /// Stops the loop (a running sync finishes).
    func stop() {
        let tasks = state.withLock { state -> [Task<Void, Never>] in
            let tasks = state.listeners + (state.loop.map { [$0] } ?? [])
            state.loop = nil
            state.listeners = []
            return tasks
        }
        for task in tasks { task.cancel() }
        wake()
    }

    private func run(_ weakEngine: WeakEngine) async {
        while !Task.isCancelled {
            guard let decision = await decide(weakEngine) else { return }
            switch decision {
            case .wait:
                await waitForWake()
            case .sleep(let until):
                await sleepOrWake(until: until)
            case .run(let work):
                guard let engine = weakEngine.value else { return }
                let error = await engine.runScheduled(work)
                let now = timer.now()
                let retry = state.withLock { state in
                    if error?.code == .notAuthenticated { state.accountCheckNeeded = true }
                    return state.schedule.finished(work, error: error, at: now, random: &state.random)
                }
                if let retry {
                    engine.record(.syncScheduled(work: work, reason: retry.cause, after: retry.after))
                } else if work == .send, error == nil, engine.hasWorkToSend() {
                    localChangesAdded(engine)
                }
            }
        }
    }

    private enum Decision {
        case wait
        case sleep(until: Duration)
        case run(SyncSchedule.Work)
    }

    /// What the loop does next; `nil` when the engine is gone.
    private func decide(_ weakEngine: WeakEngine) async -> Decision? {
        guard let engine = weakEngine.value else { return nil }
        let current = await conditions.currentConditions()
        if !current.allowSync {
            deferOnce(engine, because: current.description)
            return .wait
        }
        if state.withLock({ $0.accountCheckNeeded }) {
            state.withLock { $0.accountCheckNeeded = false }
            let status = await engine.checkAccount()
            if status != .available {
                deferOnce(engine, because: status.description)
                return .wait
            }
        } else if let status = engine.knownAccountStatus, status != .available {
            deferOnce(engine, because: status.description)
            return .wait
        }
        guard let next = state.withLock({ $0.schedule.next }) else { return .wait }
        let now = timer.now()
        if next.at > now { return .sleep(until: next.at) }
        state.withLock { state in
            state.schedule.started(next.work)
            state.deferred = nil
        }
        return .run(next.work)
    }

    /// Logs once why the engine is dormant (until it runs again).
    private func deferOnce(_ engine: SyncEngine, because reason: String) {
        let first = state.withLock { state -> Bool in
            guard state.deferred != reason else { return false }
            state.deferred = reason
            return true
        }
        if first { engine.record(.syncDeferred(reason: reason)) }
    }

    // MARK: Waking

    private func wake() {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let continuation = state.wakeup else {
                state.woken = true
                return nil
            }
            state.wakeup = nil
            return continuation
        }
        continuation?.resume()
    }

    private func waitForWake() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resume = state.withLock { state -> Bool in
                    if state.woken || Task.isCancelled {
                        state.woken = false
                        return true
                    }
                    state.wakeup = continuation
                    return false
                }
                if resume { continuation.resume() }
            }
        } onCancel: {
            wake()
        }
    }

    private func sleepOrWake(until deadline: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [timer] in try? await timer.sleep(deadline) }
            group.addTask { [weak self] in await self?.waitForWake() }
            await group.next()
            group.cancelAll()
        }
    }
}
