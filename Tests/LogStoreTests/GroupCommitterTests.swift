import Dispatch
import Foundation
import Synchronization
import Testing

@testable import LogStore

/// `GroupCommitter`: many callers, one commit for the requests that queued meanwhile.
@Suite("Group commit")
struct GroupCommitterTests {
    @Test("Group commit: requests queued during a commit share the next one")
    func requestsShareACommit() throws {
        let queue = WaitQueue()
        let leaderInside = DispatchSemaphore(value: 0)
        let releaseLeader = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let groups = Results()
        @Sendable func commit(_ group: [WaitQueue.Request]) -> [Result<Range<LogOffset>, any Error>] {
            groups.record(groupSize: group.count)
            if group.first?.entries.first?.kind == EntryKind(99) {
                leaderInside.signal()
                releaseLeader.wait()
            }
            // Each request's "offsets" encode its entry count, so callers can check what they got.
            return group.map { .success(LogOffset(UInt64($0.entries.count))..<LogOffset(UInt64($0.entries.count))) }
        }
        // Dedicated threads (not a pool that might not grow): the leader, then 20 followers.
        Thread.detachNewThread {
            _ = queue.submit(WaitQueue.Request(entries: [NewEntry(kind: 99, payload: [])]), commit: commit)
            finished.signal()
        }
        leaderInside.wait()
        for i in 1...20 {
            Thread.detachNewThread {
                let outcome = queue.submit(
                    WaitQueue.Request(entries: Array(repeating: NewEntry(kind: 1, payload: []), count: i)), commit: commit)
                if (try? outcome.get())?.lowerBound != LogOffset(UInt64(i)) { groups.fail("request \(i) got \(outcome)") }
                finished.signal()
            }
        }
        while queue.pendingCount < 20 { sched_yield() }
        releaseLeader.signal()
        for _ in 0...20 { finished.wait() }
        #expect(groups.failures.isEmpty)
        #expect(groups.groupSizes == [1, 20])
    }
}

/// What the callers of a `WaitQueue` saw, gathered from many threads.
private final class Results: Sendable {
    private let storage = Mutex((groupSizes: [Int](), failures: [String]()))

    /// A commit took a group of `groupSize` requests.
    func record(groupSize: Int) { storage.withLock { $0.groupSizes.append(groupSize) } }
    func fail(_ message: String) { storage.withLock { $0.failures.append(message) } }
    var groupSizes: [Int] { storage.withLock { $0.groupSizes } }
    var failures: [String] { storage.withLock { $0.failures } }
}
