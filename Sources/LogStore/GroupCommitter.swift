import Dispatch
import LogSyncPlatform

/// Appends entries to one log for many concurrent callers, sharing one write transaction among
/// the calls that arrive while another commit is under way (group commit).
///
/// ```swift
/// let committer = GroupCommitter(log: log)
/// // From many threads at once: each call returns once its entries are committed.
/// let offsets = try committer.append([NewEntry(kind: 1, payload: bytes)])
/// // From many tasks at once: each call suspends its task (no thread waits) until then.
/// let more = try await committer.append([NewEntry(kind: 1, payload: bytes)])
/// ```
///
/// Both calls queue their request in one queue, whose order is the log's: each request's
/// entries are contiguous, and a request queued before another (by any caller, either call)
/// has the lower offsets.
///
/// The synchronous call blocks its thread. The first caller with nobody writing becomes the
/// *leader*: it takes every request queued so far, appends them all in one transaction (in queue
/// order, each request's entries contiguous) and hands each caller its offsets. Callers arriving
/// meanwhile wait; when the leader is done, one of them leads the next group. So a caller returns
/// only after the commit that holds its entries, a durable commit's cost is shared by everyone
/// waiting, and with no contention an append costs what `Log.append` costs.
///
/// The asynchronous call never blocks a thread of Swift's cooperative pool (which has one thread
/// per core, so blocked callers there would be few): it suspends its task, and the committer's
/// own *drainer*, a serial dispatch queue outside the pool, commits the queued groups and resumes
/// each task with its offsets. So any number of tasks can wait for one commit. A synchronous
/// leader commits asynchronous requests too, and the drainer synchronous ones. After a group,
/// the drainer waits until as many requests are queued as it resumed callers, for at most half
/// the duration of that commit, so that callers appending in a loop share the next commit
/// instead of splitting into a small group and a large one.
///
/// If a group's transaction fails, each of its requests is retried alone, so one caller's bad
/// entry (one a projection rejects) fails that caller only.
///
/// The leader never waits for anything but the disk, so waiting cannot deadlock — provided no
/// caller appends from inside a read transaction of the same environment (LogEnvironment's
/// rule 3).
///
/// A durable commit costs about the same for one entry as for a hundred, so throughput grows with
/// the number of concurrent callers (`Docs/Performance.md` has the figures).
public final class GroupCommitter: Sendable {
    /// The log appended to.
    public let log: Log
    private let queue = WaitQueue()

    /// A committer for `log`. Give every appender of the log the same committer.
    public init(log: Log) { self.log = log }

    /// Appends `entries` contiguously and returns their offsets once they are committed,
    /// blocking the calling thread meanwhile.
    ///
    /// - Throws: what `Log.append` throws for these entries.
    public func append(_ entries: [NewEntry]) throws -> Range<LogOffset> {
        let request = WaitQueue.Request(entries: entries)
        let outcome = queue.submit(request) { group in commit(group) }
        return try outcome.get()
    }

    /// Appends `entries` contiguously and returns their offsets once they are committed,
    /// suspending the calling task meanwhile (no thread waits).
    ///
    /// Cancellation does not stop an append: once called, the entries are committed (or fail)
    /// and the call returns the outcome as the synchronous call would, so a caller always knows
    /// whether its entries are in the log. Check `Task.isCancelled` before calling to skip it.
    ///
    /// - Throws: what `Log.append` throws for these entries.
    public func append(_ entries: [NewEntry]) async throws -> Range<LogOffset> {
        try await withUnsafeThrowingContinuation { continuation in
            queue.enqueue(WaitQueue.Request(entries: entries) { continuation.resume(with: $0) }) { group in
                self.commit(group)
            }
        }
    }

    /// The number of requests waiting for a leader to take them.
    var pendingCount: Int { queue.pendingCount }

    private func commit(_ group: [WaitQueue.Request]) -> [Result<Range<LogOffset>, any Error>] {
        if group.count == 1 { return [Result { try log.append(group[0].entries) }] }
        do {
            let range = try log.append(group.flatMap(\.entries))
            var start = range.lowerBound
            return group.map { request in
                let end = start.advanced(by: Int64(request.entries.count))
                defer { start = end }
                return .success(start..<end)
            }
        } catch {
            return group.map { request in Result { try log.append(request.entries) } }
        }
    }
}

/// The queue of `GroupCommitter`: requests waiting for a leader, on a mutex and a condition.
///
/// `@unchecked Sendable`: `pending`, `writing`, `draining` and every synchronous request's
/// `outcome` are read and written only with `mutex` held; an asynchronous request is resumed
/// once, by the leader that committed it, after it left `pending`; the pthread objects are
/// heap-allocated and never move.
package final class WaitQueue: @unchecked Sendable {
    /// One caller's entries and, once its group is committed, its outcome.
    package final class Request {
        let entries: [NewEntry]
        var outcome: Result<Range<LogOffset>, any Error>?  // guarded by the queue's mutex
        /// An asynchronous caller's continuation, called once with the outcome (without the
        /// mutex held) instead of setting `outcome`; `nil` for a caller blocked in `submit`.
        let resume: ((Result<Range<LogOffset>, any Error>) -> Void)?

        package init(entries: [NewEntry], resume: ((Result<Range<LogOffset>, any Error>) -> Void)? = nil) {
            self.entries = entries
            self.resume = resume
        }
    }

    package typealias Commit = ([Request]) -> [Result<Range<LogOffset>, any Error>]

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Signalled when `pending` reaches `awaitedCount` while the drainer waits for it.
    private let arrivals = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var pending: [Request] = []
    private var writing = false
    /// Whether the drainer is scheduled or running. Invariant: an asynchronous request in
    /// `pending` implies `draining`.
    private var draining = false
    /// While the drainer waits for the callers it just resumed: the queue length it waits for.
    private var awaitedCount: Int?
    private let drainer = DispatchQueue(label: "LogStore.GroupCommitter.drainer")

    package init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        TimedCondition.initialize(arrivals)
    }

    deinit {
        pthread_cond_destroy(arrivals)
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        arrivals.deallocate()
        condition.deallocate()
        mutex.deallocate()
    }

    /// The number of requests waiting for a leader to take them.
    package var pendingCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return pending.count
    }

    /// Queues `request` and returns its outcome, running `commit` (without the mutex held) on
    /// the groups this caller leads. `commit` returns one outcome per request, in order; every
    /// caller of one queue must pass the same `commit`, since a leader commits others' requests.
    package func submit(_ request: Request, commit: Commit) -> Result<Range<LogOffset>, any Error> {
        precondition(request.resume == nil, "an asynchronous request submitted synchronously")
        pthread_mutex_lock(mutex)
        pending.append(request)
        while request.outcome == nil {
            if writing {
                pthread_cond_wait(condition, mutex)
                continue
            }
            lead(commit)
        }
        let outcome = request.outcome!
        pthread_mutex_unlock(mutex)
        return outcome
    }

    /// Queues an asynchronous `request` (one with `resume`) and returns at once; the drainer,
    /// or a synchronous leader, commits it with `commit` and calls its `resume`.
    package func enqueue(
        _ request: Request, commit: @escaping @Sendable ([Request]) -> [Result<Range<LogOffset>, any Error>]
    ) {
        precondition(request.resume != nil, "a synchronous request enqueued")
        pthread_mutex_lock(mutex)
        pending.append(request)
        if let awaitedCount, pending.count >= awaitedCount { pthread_cond_signal(arrivals) }
        let start = !draining
        draining = true
        pthread_mutex_unlock(mutex)
        if start { drainer.async { self.drain(commit) } }
    }

    /// The drainer: leads groups until nothing is queued, waiting while a synchronous leader
    /// writes.
    ///
    /// After a group, the callers it resumed usually append again at once, but they need a
    /// moment of CPU to get there: committing the first one or two to arrive would leave the
    /// rest for the commit after, so groups would alternate between a few requests and most of
    /// them. So the drainer first waits until as many requests are queued as it resumed, for at
    /// most half the duration of the commit it just made: at worst a wait of half a commit, at
    /// best a commit saved. It waits once per group, and never while requests it did not resume
    /// are enough to fill it.
    private func drain(_ commit: Commit) {
        pthread_mutex_lock(mutex)
        var resumed = 0
        var lastCommitNanoseconds: UInt64 = 0
        while true {
            if writing {
                pthread_cond_wait(condition, mutex)
                continue
            }
            if resumed > 0, pending.count < resumed {
                waitForArrivals(count: resumed, nanoseconds: lastCommitNanoseconds / 2)
                resumed = 0
                continue
            }
            if pending.isEmpty { break }
            let started = DispatchTime.now().uptimeNanoseconds
            resumed = lead(commit)
            lastCommitNanoseconds = DispatchTime.now().uptimeNanoseconds - started
        }
        draining = false
        pthread_mutex_unlock(mutex)
    }

    /// Waits (with the mutex held) until `count` requests are queued or `nanoseconds` passed.
    private func waitForArrivals(count: Int, nanoseconds: UInt64) {
        awaitedCount = count
        defer { awaitedCount = nil }
        let deadline = TimedCondition.Deadline(after: nanoseconds)
        while pending.count < count {
            if !TimedCondition.wait(arrivals, mutex, until: deadline) { break }
        }
    }

    /// Commits every pending request as one group. Called with the mutex held and nobody
    /// writing; returns with the mutex held, after waking the waiters and resuming the group's
    /// asynchronous callers, the number of which it returns.
    @discardableResult
    private func lead(_ commit: Commit) -> Int {
        writing = true
        let group = pending
        pending = []
        pthread_mutex_unlock(mutex)
        let outcomes = commit(group)
        pthread_mutex_lock(mutex)
        for (member, outcome) in zip(group, outcomes) where member.resume == nil { member.outcome = outcome }
        writing = false
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
        var resumed = 0
        for (member, outcome) in zip(group, outcomes) {
            guard let resume = member.resume else { continue }
            resume(outcome)
            resumed += 1
        }
        pthread_mutex_lock(mutex)
        return resumed
    }
}
