import Foundation
import LogStore
import LogSyncServer
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync

/// An engine with `delegate` on a device log in `directory/device`.
private func makeEngine(in directory: URL, delegate: any SyncEngineDelegate) throws -> SyncEngine {
    try makeEngine(
        deviceLog: openDeviceLog(directory.appendingPathComponent("device")), directory: directory, delegate: delegate)
}

/// `engine.state.suspending`: the state's mutations as `async` methods, which suspend their task
/// until the commit instead of blocking its thread. Same effects as the blocking ones.
@Suite("State: suspending mutations")
struct SuspendingStateTests {
    typealias F = Fixtures

    /// A delegate that keeps every event it is handed.
    final class Recorder: SyncEngineDelegate {
        private let recorded = Mutex<[SyncEngine.Event]>([])
        var events: [SyncEngine.Event] { recorded.withLock { $0 } }
        var stateUpdateOffsets: [LogOffset] {
            events.compactMap { if case .stateUpdate(let update) = $0 { update.offset } else { nil } }
        }

        func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            recorded.withLock { $0.append(event) }
        }

        func nextRecordZoneChangeBatch(
            _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
        ) async -> SyncEngine.RecordZoneChangeBatch? { nil }
    }

    /// One edit of the script, made through either set of mutations.
    enum Edit {
        case addRecords([SyncEngine.PendingRecordZoneChange])
        case removeRecords([SyncEngine.PendingRecordZoneChange])
        case addDatabase([DatabaseChange])
        case removeDatabase([DatabaseChange])
        case untracked(Bool)

        func apply(to state: SyncEngine.State) throws {
            switch self {
            case .addRecords(let changes): try state.add(pendingRecordZoneChanges: changes)
            case .removeRecords(let changes): try state.remove(pendingRecordZoneChanges: changes)
            case .addDatabase(let changes): try state.add(pendingDatabaseChanges: changes)
            case .removeDatabase(let changes): try state.remove(pendingDatabaseChanges: changes)
            case .untracked(let value): try state.setHasPendingUntrackedChanges(value)
            }
        }

        func apply(to state: SyncEngine.State.Suspending) async throws {
            switch self {
            case .addRecords(let changes): try await state.add(pendingRecordZoneChanges: changes)
            case .removeRecords(let changes): try await state.remove(pendingRecordZoneChanges: changes)
            case .addDatabase(let changes): try await state.add(pendingDatabaseChanges: changes)
            case .removeDatabase(let changes): try await state.remove(pendingDatabaseChanges: changes)
            case .untracked(let value): try await state.setHasPendingUntrackedChanges(value)
            }
        }
    }

    /// Every list rule once: duplicates, opposites replacing, exact removal, empty lists, flags.
    static let script: [Edit] = [
        .addRecords([.saveRecord(F.id("a")), .saveRecord(F.id("b"))]),
        .addRecords([.saveRecord(F.id("a"))]),
        .addRecords([.deleteRecord(F.id("a"))]),
        .addRecords([]),
        .removeRecords([.deleteRecord(F.id("b")), .saveRecord(F.id("b"))]),
        .addDatabase([.saveZone(RecordZone(zoneID: F.notes)), .deleteZone(F.photos)]),
        .removeDatabase([.deleteZone(F.photos)]),
        .untracked(true),
        .untracked(false),
        .addRecords([.saveRecord(F.id("c", F.photos))]),
    ]

    /// Runs the script on a fresh engine in `directory`, waiting after each edit for the
    /// `stateUpdate` that covers it; returns the engine and its recorder.
    static func run(
        _ directory: URL, suspending: Bool
    ) async throws -> (engine: SyncEngine, recorder: Recorder) {
        let recorder = Recorder()
        let engine = try makeEngine(in: directory, delegate: recorder)
        for edit in script {
            let before = try engine.deviceLog.log.lastOffset
            if suspending {
                try await edit.apply(to: engine.state.suspending)
            } else {
                try edit.apply(to: engine.state)
            }
            let after = try engine.deviceLog.log.lastOffset
            guard after > before else { continue }  // an empty list appends nothing, announces nothing
            while recorder.stateUpdateOffsets.last != after { await Task.yield() }
        }
        await engine.operations.drain()
        return (engine, recorder)
    }

    @Test("F26 the suspending mutations leave the same log, state and stateUpdate events as the blocking ones")
    func sameEffects() async throws {
        try await withTemporaryDirectory { directory in
            let blocking = try await Self.run(directory.appendingPathComponent("blocking"), suspending: false)
            let suspending = try await Self.run(directory.appendingPathComponent("suspending"), suspending: true)

            #expect(try suspending.engine.deviceLog.snapshotState() == blocking.engine.deviceLog.snapshotState())
            let entries = { (engine: SyncEngine) throws -> [DeviceEntry] in
                var entries: [DeviceEntry] = []
                try engine.deviceLog.log.forEachEntry { entries.append(try DeviceEntry($0, in: engine.deviceLog.log)) }
                return entries
            }
            #expect(try entries(suspending.engine) == entries(blocking.engine))
            #expect(try entries(blocking.engine).count == 9)
            #expect(suspending.recorder.stateUpdateOffsets == (1...9).map { LogOffset(rawValue: $0) })
            #expect(suspending.recorder.stateUpdateOffsets == blocking.recorder.stateUpdateOffsets)
            #expect(suspending.recorder.events.count == 9, "stateUpdates only")
            #expect(
                try suspending.engine.state.pendingRecordZoneChanges == [
                    .deleteRecord(F.id("a")), .saveRecord(F.id("c", F.photos)),
                ])
            #expect(try suspending.engine.state.pendingDatabaseChanges == [.saveZone(RecordZone(zoneID: F.notes))])
            #expect(try suspending.engine.state.hasPendingUntrackedChanges == false)
        }
    }

    @Test(
        "F26 F31 edits from many tasks at once: every one committed, in the log's order, with stateUpdates covering them"
    )
    func manyTasks() async throws {
        try await withTemporaryDirectory { directory in
            let recorder = Recorder()
            let engine = try makeEngine(in: directory, delegate: recorder)
            let tasks = 40
            let perTask = 10
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        for i in 0..<perTask {
                            try await engine.state.suspending.add(pendingRecordZoneChanges: [
                                .saveRecord(F.id("t\(task)-\(i)"))
                            ])
                        }
                    }
                }
                try await group.waitForAll()
            }
            let last = try engine.deviceLog.log.lastOffset
            #expect(last == LogOffset(rawValue: UInt64(tasks * perTask)))
            // The pending list is the log's order, and each task's edits keep theirs.
            var fromLog: [SyncEngine.PendingRecordZoneChange] = []
            try engine.deviceLog.log.forEachEntry { entry in
                if case .pendingRecordZoneChangesAdded(let changes) = try DeviceEntry(entry, in: engine.deviceLog.log) {
                    fromLog += changes
                }
            }
            let pending = try engine.state.pendingRecordZoneChanges
            #expect(pending == fromLog)
            for task in 0..<tasks {
                let mine = pending.filter { $0.recordID.recordName.hasPrefix("t\(task)-") }
                #expect(mine == (0..<perTask).map { .saveRecord(F.id("t\(task)-\($0)")) })
            }
            while recorder.stateUpdateOffsets.last != last { await Task.yield() }
            await engine.operations.drain()
            let offsets = recorder.stateUpdateOffsets
            #expect(offsets == offsets.sorted())
            #expect(offsets.count <= tasks * perTask)
        }
    }

    @Test("F17 a suspending add asks the scheduler for a send, as a blocking one does")
    func schedulesASend() async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory.appendingPathComponent("server"), durability: .fast))
            let phone = try launch(server: server, directory: directory)
            await phone.waitForCatchUp()
            try await phone.engine.state.suspending.add(pendingRecordZoneChanges: [.saveRecord(F.id("n"))])
            #expect(
                try phone.engine.scheduled(.send) == [Scheduled(work: .send, reason: .localChanges, after: .seconds(1))]
            )
        }
    }
}

/// The app's `stateUpdate` is queued at most once at a time (an edit that finds one queued and
/// not started needs no other); a queued one that is cancelled must not stop later ones.
@Suite("State updates: queued once")
struct StateUpdateQueueTests {
    typealias F = Fixtures

    /// Records events; holds `nextRecordZoneChangeBatch` until released.
    final class HoldingDelegate: SyncEngineDelegate {
        let recorder = SuspendingStateTests.Recorder()
        let entered = Atomic<Bool>(false)
        let released = Atomic<Bool>(false)

        func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            await recorder.handleEvent(event, syncEngine: syncEngine)
        }

        func nextRecordZoneChangeBatch(
            _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
        ) async -> SyncEngine.RecordZoneChangeBatch? {
            entered.store(true, ordering: .sequentiallyConsistent)
            while !released.load(ordering: .sequentiallyConsistent) { await Task.yield() }
            return nil
        }
    }

    @Test("F26 F79 after a queued stateUpdate is cancelled before it started, the next edit still gets one")
    func cancelledStateUpdateDoesNotStopLaterOnes() async throws {
        try await withTemporaryDirectory { directory in
            let delegate = HoldingDelegate()
            let engine = try makeEngine(in: directory, delegate: delegate)

            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.id("a"))])
            while delegate.recorder.stateUpdateOffsets.last != LogOffset(1) { await Task.yield() }

            // A send holds the operations' queue; the next edit's stateUpdate queues behind it.
            let send = Task { try await engine.sendChanges() }
            while !delegate.entered.load(ordering: .sequentiallyConsistent) { await Task.yield() }
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.id("b"))])
            while await engine.operations.queuedKinds != [.stateUpdate] { await Task.yield() }
            await engine.cancelOperations()
            delegate.released.store(true, ordering: .sequentiallyConsistent)
            _ = await send.result
            await engine.operations.drain()
            #expect(await engine.operations.queuedKinds.isEmpty)
            let updatesBefore = delegate.recorder.stateUpdateOffsets.count

            try await engine.state.suspending.add(pendingRecordZoneChanges: [.saveRecord(F.id("c"))])
            let last = try engine.deviceLog.log.lastOffset
            // Bounded by yields, not time: without the update this gives up and fails.
            for _ in 0..<1_000_000 where delegate.recorder.stateUpdateOffsets.last != last { await Task.yield() }
            #expect(delegate.recorder.stateUpdateOffsets.last == last)
            #expect(delegate.recorder.stateUpdateOffsets.count > updatesBefore)
        }
    }
}
