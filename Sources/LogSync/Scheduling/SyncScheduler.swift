import LogStore
import Logging
import Metrics
import SyncModel
import Synchronization

/// The automatic sync planner of one engine (F5, F81–F90): it listens to the device log (the
/// app's changes, push hints) and to the conditions, keeps the ``SyncSchedule``, and tells the
/// engine's driver loop what to do next and when.
///
/// It never calls the engine. The engine asks it for the next step (``nextDecision()``), runs
/// the step, and reports back (``accountChecked(_:)``, ``finished(_:error:)``); everything else
/// the scheduler learns from the device log's announcements and the conditions provider.
///
/// Every decision is a device-log entry (`syncScheduled`, `syncDeferred`), so a timeline shows
/// why the engine waited.
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

    /// What the engine's driver loop does next.
    enum Decision: Sendable, Hashable {
        /// Ask the database who is signed in, then report the answer with ``accountChecked(_:)``.
        case checkAccount
        /// Run this sync now, then report how it ended with ``finished(_:error:)``.
        case run(SyncSchedule.Work)
    }

    private struct State {
        var schedule: SyncSchedule
        var random: SeededRandom
        var wakeup: CheckedContinuation<Void, Never>?
        var woken = false
        var stopped = false
        var accountCheckNeeded = true
        var accountStatus: SyncEngine.AccountStatus?
        var deferred: String?
        var conditionsListener: Task<Void, Never>?
        var logListener: DeviceLog.Listening?
    }

    let timer: Timer
    let conditions: any SyncConditionsProvider
    private let deviceLog: DeviceLog
    private let logger: Logger
    private let state: Mutex<State>
    /// `logsync_engine_retries_total`: syncs scheduled again after a transient failure.
    private let retries: Counter?

    init(
        deviceLog: DeviceLog, clock: any Clock<Duration>, policy: SyncSchedule.Policy, seed: UInt64,
        conditions: any SyncConditionsProvider, logger: Logger, retries: Counter? = nil
    ) {
        self.retries = retries
        self.deviceLog = deviceLog
        self.timer = Timer(clock)
        self.conditions = conditions
        self.logger = logger
        self.state = Mutex(State(schedule: SyncSchedule(policy: policy), random: SeededRandom(seed: seed)))
    }

    /// The schedule now, for tests and `logtool`.
    var schedule: SyncSchedule { state.withLock { $0.schedule } }

    // MARK: Listening

    /// Starts listening to the device log and the conditions, and plans what a start needs: a
    /// catch-up fetch (F85, F87) and a send of what is already pending (F88).
    func start() {
        let logListener = deviceLog.listen { [weak self] appended in self?.heard(appended) }
        let changes = conditions.changes()
        let conditionsListener = Task { [weak self] in
            for await _ in changes {
                guard let self else { return }
                self.conditionsChanged()
            }
        }
        state.withLock { state in
            state.logListener = logListener
            state.conditionsListener = conditionsListener
        }
        fetchNeeded(reason: .catchUp)
        if hasWorkToSend() { localChangesAdded() }
    }

    /// Stops listening and ends ``nextDecision()`` (a sync already running finishes).
    func stop() {
        let (logListener, conditionsListener) = state.withLock { state in
            state.stopped = true
            defer {
                state.logListener = nil
                state.conditionsListener = nil
            }
            return (state.logListener, state.conditionsListener)
        }
        logListener?.cancel()
        conditionsListener?.cancel()
        wake()
    }

    /// What an append to the device log means for the schedule: the app's changes call for a
    /// send, a push hint for a fetch.
    private func heard(_ appended: DeviceLog.Appended) {
        for entry in appended.entries {
            switch entry {
            case .pendingRecordZoneChangesAdded, .pendingDatabaseChangesAdded, .untrackedChangesFlagged(true):
                if appended.author == .app { localChangesAdded() }
            case .pushReceived:
                fetchNeeded(reason: .pushHint)
            default:
                continue
            }
        }
    }

    // MARK: Inputs

    /// The app added changes: one send is scheduled, after the debounce (F17, F82).
    func localChangesAdded() {
        let now = timer.now()
        let debounce = state.withLock { state in
            state.schedule.localChangesAdded(at: now) ? state.schedule.policy.debounce : nil
        }
        guard let debounce else { return }
        deviceLog.note(.syncScheduled(work: .send, reason: .localChanges, after: debounce), logger: logger)
        wake()
    }

    /// A fetch is needed now: a push hint, or catching up at start or after an account change
    /// (F83, F87, F106).
    func fetchNeeded(reason: SyncSchedule.Cause) {
        let now = timer.now()
        guard state.withLock({ $0.schedule.fetchNeeded(at: now, cause: reason) }) else { return }
        deviceLog.note(.syncScheduled(work: .fetch, reason: reason, after: .zero), logger: logger)
        wake()
    }

    /// Conditions or the account may have changed: the account is asked again.
    func conditionsChanged() {
        state.withLock { $0.accountCheckNeeded = true }
        wake()
    }

    /// The account as the engine last saw it, by a check the scheduler asked for or one of its
    /// own (F86, F109).
    func accountChecked(_ status: SyncEngine.AccountStatus) {
        state.withLock { $0.accountStatus = status }
    }

    /// A sync the scheduler asked for ended, with `error` if it should be retried: a transient
    /// failure schedules a retry (F84, F90); after a send, what was added meanwhile is sent next.
    func finished(_ work: SyncSchedule.Work, error: SyncError?) {
        let now = timer.now()
        let retry = state.withLock { state in
            if error?.code == .notAuthenticated { state.accountCheckNeeded = true }
            return state.schedule.finished(work, error: error, at: now, random: &state.random)
        }
        if let retry {
            retries?.increment()
            deviceLog.note(.syncScheduled(work: work, reason: retry.cause, after: retry.after), logger: logger)
        } else if work == .send, error == nil, hasWorkToSend() {
            localChangesAdded()
        }
    }

    /// Whether anything is waiting to be sent (F88).
    private func hasWorkToSend() -> Bool {
        (try? deviceLog.read { try $0.hasPendingChanges() || $0.hasPendingUntrackedChanges() }) ?? false
    }

    // MARK: Deciding

    /// Waits until there is something to do and it may be done: conditions allow syncing (F81),
    /// the account is available (F86, F109), and the next work of the schedule is due. Returns
    /// `nil` once stopped.
    func nextDecision() async -> Decision? {
        while !Task.isCancelled {
            if state.withLock({ $0.stopped }) { return nil }
            let current = await conditions.currentConditions()
            if !current.allowSync {
                deferOnce(because: current.description)
                await waitForWake()
                continue
            }
            let (checkNeeded, status) = state.withLock { state in
                defer { state.accountCheckNeeded = false }
                return (state.accountCheckNeeded, state.accountStatus)
            }
            if checkNeeded { return .checkAccount }
            if let status, status != .available {
                deferOnce(because: status.description)
                await waitForWake()
                continue
            }
            guard let next = state.withLock({ $0.schedule.next }) else {
                await waitForWake()
                continue
            }
            if next.at > timer.now() {
                await sleepOrWake(until: next.at)
                continue
            }
            state.withLock { state in
                state.schedule.started(next.work)
                state.deferred = nil
            }
            return .run(next.work)
        }
        return nil
    }

    /// Logs once why the engine is dormant (until it runs again).
    private func deferOnce(because reason: String) {
        let first = state.withLock { state -> Bool in
            guard state.deferred != reason else { return false }
            state.deferred = reason
            return true
        }
        if first { deviceLog.note(.syncDeferred(reason: reason), logger: logger) }
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
                    if state.woken || state.stopped || Task.isCancelled {
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
