import Dispatch
import Foundation
import LogStore
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync

/// `SyncEngine.State` from many tasks at once (F31), and the device log's group commit.
@Suite("Concurrency")
struct ConcurrencyTests {
    typealias F = Fixtures

    /// The `i`th call of the F31 test: an add or a remove of 1–3 changes among 30 records.
    static func call(_ i: Int) -> (add: Bool, changes: [RecordChange]) {
        var random = SeededRandom(seed: UInt64(i))
        let changes = (0..<Int.random(in: 1...3, using: &random)).map { _ -> RecordChange in
            let id = F.id(
                "r\(Int.random(in: 0..<30, using: &random))", Bool.random(using: &random) ? F.notes : F.photos)
            return Bool.random(using: &random) ? .saveRecord(id) : .deleteRecord(id)
        }
        return (Int.random(in: 0..<4, using: &random) != 0, changes)
    }

    @Test("F31: 1,000 concurrent adds and removes equal a serial replay of the log")
    func concurrentMutations() async throws {
        try await withEngine { engine, directory in
            let state = engine.state
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<1000 {
                    group.addTask {
                        let (add, changes) = Self.call(i)
                        if add {
                            try state.add(pendingRecordZoneChanges: changes)
                        } else {
                            try state.remove(pendingRecordZoneChanges: changes)
                        }
                        // Reads interleave with writes.
                        if i % 10 == 0 { _ = try state.pendingRecordZoneChanges }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try engine.deviceLog.log.entryCount == 1000)
            let replayed = try ReferenceState.replaying(engine.deviceLog)
            #expect(try state.pendingRecordZoneChanges == replayed.records)
            #expect(try engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    @Test("Concurrent appends from threads each get their own contiguous offsets")
    func contiguousOffsets() async throws {
        try withTemporaryDirectory { directory in
            let deviceLog = try openDeviceLog(directory)
            let results = Results()
            DispatchQueue.concurrentPerform(iterations: 64) { i in
                let changes = (0..<(i % 5 + 1)).map { RecordChange.saveRecord(F.id("t\(i)-\($0)")) }
                do {
                    let range = try deviceLog.append([
                        .pendingRecordZoneChangesAdded(changes), .untrackedChangesFlagged(i % 2 == 0),
                    ])
                    results.append((i, range))
                } catch {
                    results.fail("\(error)")
                }
            }
            #expect(results.failures.isEmpty)
            let ranges = results.ranges.sorted { $0.1.lowerBound < $1.1.lowerBound }
            #expect(ranges.count == 64)
            var next = LogOffset.first
            for (i, range) in ranges {
                #expect(range.lowerBound == next)
                #expect(range.count == 2)
                next = range.upperBound
                let entry = try #require(try deviceLog.log.entry(at: range.lowerBound))
                guard case .pendingRecordZoneChangesAdded(let changes) = try DeviceEntry(entry) else {
                    Issue.record("offset \(range.lowerBound) is not caller \(i)'s first entry")
                    continue
                }
                #expect(changes.first == .saveRecord(F.id("t\(i)-0")))
            }
            #expect(try deviceLog.log.lastOffset == LogOffset(128))
        }
    }

    @Test("One bad request in a group fails alone")
    func badRequestFailsAlone() async throws {
        try withTemporaryDirectory { directory in
            let deviceLog = try openDeviceLog(directory)
            let committer = deviceLog.committer
            let results = Results()
            DispatchQueue.concurrentPerform(iterations: 40) { i in
                // Every fifth caller appends a kind the device index refuses.
                let entry =
                    i % 5 == 0
                    ? NewEntry(kind: 77, payload: [1, 2, 3])
                    : DeviceEntry.pendingRecordZoneChangesAdded([.saveRecord(F.id("g\(i)"))]).newEntry
                do {
                    results.append((i, try committer.append([entry])))
                } catch {
                    if i % 5 != 0 { results.fail("caller \(i): \(error)") }
                }
            }
            #expect(results.failures.isEmpty)
            #expect(results.ranges.count == 32)
            #expect(try deviceLog.log.entryCount == 32)
            #expect(try deviceLog.read { try $0.pendingRecordZoneChanges() }.count == 32)
        }
    }
}

/// Results gathered from many threads.
final class Results: Sendable {
    private struct Storage {
        var ranges: [(Int, Range<LogOffset>)] = []
        var failures: [String] = []
    }

    private let storage = Mutex(Storage())
    /// Caller `value.0` got the offsets `value.1`.
    func append(_ value: (Int, Range<LogOffset>)) { storage.withLock { $0.ranges.append(value) } }
    func fail(_ message: String) { storage.withLock { $0.failures.append(message) } }
    var ranges: [(Int, Range<LogOffset>)] { storage.withLock { $0.ranges } }
    var failures: [String] { storage.withLock { $0.failures } }
}
