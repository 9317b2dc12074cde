#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Appends entries to one log for many concurrent callers, sharing one write transaction among
/// the calls that arrive while another commit is under way (group commit).
///
/// ```swift
/// let committer = GroupCommitter(log: log)
/// // From many threads at once: each call returns once its entries are committed.
/// let offsets = try committer.append([NewEntry(kind: 1, payload: bytes)])
/// ```
///
/// The first caller with nobody writing becomes the *leader*: it takes every request queued so
/// far, appends them all in one transaction (in queue order, each request's entries contiguous)
/// and hands each caller its offsets. Callers arriving meanwhile wait; when the leader is done,
/// one of them leads the next group. So a caller returns only after the commit that holds its
/// entries, a durable commit's cost is shared by everyone waiting, and with no contention an
/// append costs what `Log.append` costs.
///
/// If a group's transaction fails, each of its requests is retried alone, so one caller's bad
/// entry (one a projection rejects) fails that caller only.
///
/// Callers block their thread while they wait (as `Log.append` does on LMDB's writer lock). The
/// leader never waits for anything but the disk, so waiting cannot deadlock — provided no caller
/// appends from inside a read transaction of the same environment (LogEnvironment's rule 3).
///
/// A durable commit costs about the same for one entry as for a hundred, so throughput grows with
/// the number of concurrent callers (`Docs/Performance.md` has the figures).
public final class GroupCommitter: Sendable {
    /// The log appended to.
    public let log: Log
    private let queue = WaitQueue()

    /// A committer for `log`. Give every appender of the log the same committer.
    public init(log: Log) { self.log = log }

    /// Appends `entries` contiguously and returns their offsets once they are committed.
    ///
    /// - Throws: what `Log.append` throws for these entries.
    public func append(_ entries: [NewEntry]) throws -> Range<LogOffset> {
        let request = WaitQueue.Request(entries: entries)
        let outcome = queue.submit(request) { group in commit(group) }
        return try outcome.get()
    }

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
/// `@unchecked Sendable`: `pending`, `writing` and every request's `outcome` are read and written
/// only with `mutex` held; the pthread objects are heap-allocated and never move.
package final class WaitQueue: @unchecked Sendable {
    /// One caller's entries and, once its group is committed, its outcome.
    package final class Request {
        let entries: [NewEntry]
        var outcome: Result<Range<LogOffset>, any Error>?  // guarded by the queue's mutex
        package init(entries: [NewEntry]) { self.entries = entries }
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var pending: [Request] = []
    private var writing = false

    package init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
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
    package func submit(
        _ request: Request, commit: ([Request]) -> [Result<Range<LogOffset>, any Error>]
    ) -> Result<Range<LogOffset>, any Error> {
        pthread_mutex_lock(mutex)
        pending.append(request)
        while request.outcome == nil {
            if writing {
                pthread_cond_wait(condition, mutex)
                continue
            }
            writing = true
            let group = pending
            pending = []
            pthread_mutex_unlock(mutex)
            let outcomes = commit(group)
            pthread_mutex_lock(mutex)
            for (member, outcome) in zip(group, outcomes) { member.outcome = outcome }
            writing = false
            pthread_cond_broadcast(condition)
        }
        let outcome = request.outcome!
        pthread_mutex_unlock(mutex)
        return outcome
    }
}
