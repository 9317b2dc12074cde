import Dispatch
import Foundation
import Synchronization
import TemporaryDirectory
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
                    WaitQueue.Request(entries: Array(repeating: NewEntry(kind: 1, payload: []), count: i)),
                    commit: commit)
                if (try? outcome.get())?.lowerBound != LogOffset(UInt64(i)) {
                    groups.fail("request \(i) got \(outcome)")
                }
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

/// `GroupCommitter.append(_:) async`: tasks suspend while their group is committed, and share it.
///
/// Commits are counted by the entries' times: the test clock gives every transaction a time of
/// its own, and all the entries of one transaction carry it. A gate projection holds the first
/// commit open (entries of kind 99 wait for the test) while the other requests queue, so what
/// shares a commit is decided by the queue, not by timing.
@Suite("Group commit, async")
struct AsyncGroupCommitterTests {
    /// Holds a transaction open at each entry of kind `gateKind` until released, and refuses
    /// entries of kind `refusedKind` (as a projection refuses a bad entry).
    final class Gate: Projection, Sendable {
        static let gateKind: EntryKind = 99
        static let refusedKind: EntryKind = 77
        struct Refused: Error {}
        let name = "gate"
        let tableNames = ["seen"]
        let inside = Atomic<Bool>(false)
        let release = DispatchSemaphore(value: 0)

        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            if entry.kind == Self.refusedKind { throw Refused() }
            if entry.kind == Self.gateKind {
                inside.store(true, ordering: .sequentiallyConsistent)
                release.wait()
            }
        }
    }

    /// A clock that moves one microsecond per call: one call per transaction.
    static func countingClock() -> @Sendable () -> EntryTime {
        let ticks = Atomic<Int64>(0)
        return { EntryTime(microsecondsSince1970: ticks.add(1, ordering: .sequentiallyConsistent).newValue) }
    }

    /// A committer on a fresh log in `directory` (one transaction per clock tick), whose first
    /// commit is under way and held inside the gate until `gate.release` is signalled; `held`
    /// is that commit's task.
    static func committerHeldInACommit(
        _ directory: URL
    ) async throws -> (gate: Gate, log: Log, committer: GroupCommitter, held: Task<Range<LogOffset>, any Error>) {
        let gate = Gate()
        let log = try Log.open(
            at: directory, options: .init(durability: .fast), projections: [gate], clock: countingClock())
        let committer = GroupCommitter(log: log)
        let held = Task { try await committer.append([NewEntry(kind: Gate.gateKind, payload: [])]) }
        while !gate.inside.load(ordering: .sequentiallyConsistent) { await Task.yield() }
        return (gate, log, committer, held)
    }

    /// Waits (without sleeping) until `count` requests are queued.
    static func waitUntilQueued(_ committer: GroupCommitter, _ count: Int) async {
        while committer.pendingCount < count { await Task.yield() }
    }

    /// The times of the log's entries, in offset order.
    static func times(_ log: Log) throws -> [Int64] {
        var times: [Int64] = []
        try log.forEachEntry { entry in
            times.append(entry.time.microsecondsSince1970)
        }
        return times
    }

    @Test("Async appends queued during a commit share the next one, each caller's entries contiguous and in order")
    func tasksShareACommit() async throws {
        let callers = 20
        try await withTemporaryDirectory { directory in
            let (gate, log, committer, held) = try await Self.committerHeldInACommit(directory)
            var running: [(caller: Int, task: Task<Range<LogOffset>, any Error>)] = []
            for caller in 1...callers {
                running.append(
                    (
                        caller,
                        Task {
                            // Caller i appends i entries, each naming its caller and its place.
                            try await committer.append(
                                (0..<caller).map { NewEntry(kind: 1, payload: [UInt8(caller), UInt8($0)]) })
                        }
                    ))
            }
            await Self.waitUntilQueued(committer, callers)
            gate.release.signal()
            _ = try await held.value
            var ranges: [Int: Range<LogOffset>] = [:]
            for (caller, task) in running { ranges[caller] = try await task.value }

            #expect(ranges.count == callers)
            for (caller, range) in ranges {
                #expect(range.count == caller)
                for (place, offset) in zip(0..., (range.lowerBound.rawValue..<range.upperBound.rawValue)) {
                    #expect(try log.entry(at: LogOffset(rawValue: offset))?.payload == [UInt8(caller), UInt8(place)])
                }
            }
            #expect(try log.entryCount == 1 + callers * (callers + 1) / 2)
            // Two commits: the held one, and one for all 20 callers.
            #expect(Set(try Self.times(log)).count == 2)
            #expect(Set(try Self.times(log).dropFirst()).count == 1)
        }
    }

    @Test("Blocking and async requests share one queue: the log's order is the order they were queued")
    func logOrderIsQueueOrder() async throws {
        try await withTemporaryDirectory { directory in
            let (gate, log, committer, held) = try await Self.committerHeldInACommit(directory)
            var running: [Task<Range<LogOffset>, any Error>] = []
            let threadsDone = DispatchGroup()
            let threadOutcomes = ThreadOutcomes()
            for k in UInt8(0)..<10 {
                let entries = [NewEntry(kind: 1, payload: [k]), NewEntry(kind: 1, payload: [k])]
                if k % 2 == 0 {
                    running.append(Task { try await committer.append(entries) })
                } else {
                    // A blocking caller on a thread of its own.
                    threadsDone.enter()
                    Thread.detachNewThread {
                        let range = try? committer.append(entries)
                        threadOutcomes.storage.withLock { $0[k] = range }
                        threadsDone.leave()
                    }
                }
                await Self.waitUntilQueued(committer, Int(k) + 1)
            }
            gate.release.signal()
            _ = try await held.value
            var asyncRanges: [Range<LogOffset>] = []
            for task in running { asyncRanges.append(try await task.value) }
            await withCheckedContinuation { continuation in
                threadsDone.notify(queue: .global()) { continuation.resume() }
            }

            var payloads: [UInt8] = []
            try log.forEachEntry(from: LogOffset(2)) { entry in
                payloads.append(entry.payload[0])
            }
            #expect(payloads == (UInt8(0)..<10).flatMap { [$0, $0] })
            #expect(asyncRanges.map(\.lowerBound) == [2, 6, 10, 14, 18].map { LogOffset(rawValue: $0) })
            #expect(
                threadOutcomes.storage.withLock { $0 }.sorted { $0.key < $1.key }.map(\.value.lowerBound)
                    == [4, 8, 12, 16, 20].map { LogOffset(rawValue: $0) })
            #expect(Set(try Self.times(log).dropFirst()).count == 1)
        }
    }

    @Test("A request a projection refuses fails its caller only; the others of its group are committed")
    func refusedRequestFailsAlone() async throws {
        try await withTemporaryDirectory { directory in
            let (gate, log, committer, held) = try await Self.committerHeldInACommit(directory)
            var running: [Task<Range<LogOffset>, any Error>] = []
            for k in UInt8(0)..<10 {
                let kind = k == 3 ? Gate.refusedKind : EntryKind(1)
                running.append(Task { try await committer.append([NewEntry(kind: kind, payload: [k])]) })
                await Self.waitUntilQueued(committer, Int(k) + 1)
            }
            gate.release.signal()
            _ = try await held.value
            for (k, task) in running.enumerated() {
                let result = await task.result
                if k == 3 {
                    #expect(throws: Gate.Refused.self) { try result.get() }
                } else {
                    let range = try result.get()
                    #expect(try log.entry(at: range.lowerBound)?.payload == [UInt8(k)])
                }
            }
            #expect(try log.entryCount == 10)
            // The group's transaction failed, so each request was retried alone: 9 commits.
            #expect(Set(try Self.times(log).dropFirst()).count == 9)
        }
    }

    @Test("Cancelling a task does not stop its append: the entries are committed and the offsets returned")
    func cancellationDoesNotStopAnAppend() async throws {
        try await withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            let committer = GroupCommitter(log: log)
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                #expect(Task.isCancelled)
                return try await committer.append([NewEntry(kind: 1, payload: [42])])
            }
            let range = try await task.value
            #expect(range == LogOffset(1)..<LogOffset(2))
            #expect(try log.entry(at: 1)?.payload == [42])
        }
    }

    @Test("Many blocking threads and many tasks at once: every append is committed once, each caller's in its order")
    func blockingAndAsyncCallersTogether() async throws {
        try await withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            let committer = GroupCommitter(log: log)
            let perCaller = 50
            let threads = 8
            let tasks = 32
            let threadsDone = DispatchGroup()
            for thread in 0..<threads {
                threadsDone.enter()
                Thread.detachNewThread {
                    for i in 0..<perCaller {
                        _ = try? committer.append([NewEntry(kind: 1, payload: [0, UInt8(thread), UInt8(i)])])
                    }
                    threadsDone.leave()
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        for i in 0..<perCaller {
                            _ = try await committer.append([NewEntry(kind: 1, payload: [1, UInt8(task), UInt8(i)])])
                        }
                    }
                }
                try await group.waitForAll()
            }
            await withCheckedContinuation { continuation in
                threadsDone.notify(queue: .global()) { continuation.resume() }
            }
            var seen: [[UInt8]: Int] = [:]
            try log.forEachEntry { entry in
                let caller = Array(entry.payload.prefix(2))
                #expect(entry.payload[2] == UInt8(seen[caller, default: 0]), "caller \(caller)'s entries out of order")
                seen[caller, default: 0] += 1
            }
            #expect(seen.count == threads + tasks)
            #expect(seen.values.allSatisfy { $0 == perCaller })
        }
    }
}

/// The offsets blocking callers got, by caller, gathered from their threads.
private final class ThreadOutcomes: Sendable {
    let storage = Mutex<[UInt8: Range<LogOffset>]>([:])
}
