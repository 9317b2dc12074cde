import LogStore
import SyncModel

/// When the engine should send and fetch next: a pure value that the scheduling driver advances
/// with what happens, and asks what to do (Docs/Engine.md, Automatic sync).
///
/// Times are durations since the driver started, on its clock, so the value is independent of
/// the clock type and tests can step it without any clock at all.
///
/// - Local changes (F17, F82): the first change schedules one send after ``Policy/debounce``;
///   more changes before it runs add nothing.
/// - A push hint or a start-up catch-up (F83, F87) schedules a fetch at once.
/// - A failed sync with a transient error (F84, F89, F90) is retried no sooner than the
///   server's retry-after, or else after an exponential backoff (``Policy/initialBackoff``
///   doubling per consecutive failure up to ``Policy/maximumBackoff``) with ±``Policy/jitter``
///   drawn from a seeded generator. A success resets the backoff; a non-transient failure is the
///   app's to handle (F91) and schedules nothing more.
package struct SyncSchedule: Sendable, Equatable {
    /// The timings of a schedule: the configuration's.
    typealias Policy = SyncEngine.SchedulePolicy

    /// What a schedule can ask for.
    package enum Work: Sendable, Hashable, CustomStringConvertible {
        case send
        case fetch

        package var description: String {
            switch self {
            case .send: "send"
            case .fetch: "fetch"
            }
        }
    }

    /// Why a sync is due, for the log (every decision is an entry).
    package enum Cause: Sendable, Hashable {
        case localChanges
        case pushHint
        case catchUp
        case retry(failures: Int, after: Duration, serverRetryAfter: Bool)
    }

    /// When a kind of work is due, and why.
    package struct Due: Sendable, Hashable {
        package var at: Duration
        package var cause: Cause
    }

    /// When each kind of work is due, and why.
    private(set) var due: [Work: Due] = [:]
    /// Consecutive transient failures of each kind.
    private(set) var failures: [Work: Int] = [:]
    let policy: Policy

    init(policy: Policy = Policy()) { self.policy = policy }

    /// The app added changes at `now`: a send is due after the debounce unless one is already due
    /// (F17, F82). Returns whether this scheduled something new.
    @discardableResult
    mutating func localChangesAdded(at now: Duration) -> Bool {
        guard due[.send] == nil else { return false }
        due[.send] = Due(at: now + policy.debounce, cause: .localChanges)
        return true
    }

    /// A push hint arrived at `now` (or the engine starts and must catch up): a fetch is due at
    /// once, unless one is due sooner. Returns whether this moved the fetch.
    @discardableResult
    mutating func fetchNeeded(at now: Duration, cause: Cause = .pushHint) -> Bool {
        if let current = due[.fetch], current.at <= now { return false }
        due[.fetch] = Due(at: now, cause: cause)
        return true
    }

    /// The next work to do and when, the earliest first (sends before fetches at equal times).
    var next: (work: Work, at: Duration, cause: Cause)? {
        let candidates = due.map { (work: $0.key, at: $0.value.at, cause: $0.value.cause) }
        return candidates.min { ($0.at, $0.work == .send ? 0 : 1) < ($1.at, $1.work == .send ? 0 : 1) }
    }

    /// The driver starts `work` now: it is no longer due.
    mutating func started(_ work: Work) {
        due[work] = nil
    }

    /// `work` ended at `now`, with `error` if it failed. A transient failure schedules a retry
    /// (F84, F90), which this returns; anything else resets the backoff.
    @discardableResult
    mutating func finished(
        _ work: Work, error: SyncError?, at now: Duration, random: inout SeededRandom
    ) -> (after: Duration, cause: Cause)? {
        guard let error, error.keepsChangePending else {
            failures[work] = nil
            return nil
        }
        let count = (failures[work] ?? 0) + 1
        failures[work] = count
        let wait: Duration
        let fromServer: Bool
        if let retryAfter = error.retryAfter, retryAfter > .zero {
            wait = retryAfter
            fromServer = true
        } else {
            wait = backoff(afterFailures: count, random: &random)
            fromServer = false
        }
        let cause = Cause.retry(failures: count, after: wait, serverRetryAfter: fromServer)
        // Replaces any earlier due time (new changes made meanwhile): the server's wait is
        // honoured even then.
        due[work] = Due(at: now + wait, cause: cause)
        return (wait, cause)
    }

    /// The backoff after `count` consecutive failures: `initialBackoff · 2^(count-1)`, capped,
    /// with jitter.
    func backoff(afterFailures count: Int, random: inout SeededRandom) -> Duration {
        let exponent = min(max(count - 1, 0), 30)
        var base = policy.initialBackoff * (1 << exponent)
        if base > policy.maximumBackoff { base = policy.maximumBackoff }
        guard policy.jitter > 0 else { return base }
        let factor = Double.random(in: (1 - policy.jitter)...(1 + policy.jitter), using: &random)
        return base * factor
    }
}
