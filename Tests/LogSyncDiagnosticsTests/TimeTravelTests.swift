import Foundation
import LogStore
import LogSyncDiagnostics
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

/// Time travel on device logs (Docs/Testing.md, Time travel in tests): `state(at:)` and
/// `rewind(to:into:)` on a real two-device timeline.
@Suite("Time travel")
struct TimeTravelTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func note(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: notes) }

    /// What `engine.state` showed at one offset of its log.
    struct Checkpoint {
        var step: String
        var offset: LogOffset
        var pendingRecordZoneChanges: [SyncEngine.PendingRecordZoneChange]
        var pendingDatabaseChanges: [SyncEngine.PendingDatabaseChange]
        var hasPendingUntrackedChanges: Bool
        var zoneIDsWithUnfetchedServerChanges: [RecordZone.ID]
    }

    /// Reads `engine.state` at a moment the log holds still (once its event deliveries are done).
    static func checkpoint(_ step: String, _ engine: SyncEngine) async throws -> Checkpoint {
        while true {
            await engine.operations.drain()
            let offset = try engine.deviceLog.log.lastOffset
            let checkpoint = Checkpoint(
                step: step, offset: offset,
                pendingRecordZoneChanges: try engine.state.pendingRecordZoneChanges,
                pendingDatabaseChanges: try engine.state.pendingDatabaseChanges,
                hasPendingUntrackedChanges: try engine.state.hasPendingUntrackedChanges,
                zoneIDsWithUnfetchedServerChanges: try engine.state.zoneIDsWithUnfetchedServerChanges)
            if try engine.deviceLog.log.lastOffset == offset { return checkpoint }
        }
    }

    static func expect(
        _ checkpoints: [Checkpoint], on deviceLog: DeviceLog, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for checkpoint in checkpoints {
            let state = try deviceLog.state(at: checkpoint.offset)
            #expect(state.offset == checkpoint.offset, "\(checkpoint.step)", sourceLocation: sourceLocation)
            #expect(
                state.pendingRecordZoneChanges == checkpoint.pendingRecordZoneChanges, "\(checkpoint.step)",
                sourceLocation: sourceLocation)
            #expect(
                state.pendingDatabaseChanges == checkpoint.pendingDatabaseChanges, "\(checkpoint.step)",
                sourceLocation: sourceLocation)
            #expect(
                state.hasPendingUntrackedChanges == checkpoint.hasPendingUntrackedChanges, "\(checkpoint.step)",
                sourceLocation: sourceLocation)
            #expect(
                state.zoneIDsWithUnfetchedServerChanges == checkpoint.zoneIDsWithUnfetchedServerChanges,
                "\(checkpoint.step)", sourceLocation: sourceLocation)
        }
    }

    @Test("state(at:) at each step of a two-device timeline is what engine.state showed then")
    func stateAtEachStep() async throws {
        try await withDevices("A", "B") { _, a, b in
            var onA: [Checkpoint] = [try await Self.checkpoint("A opened", a.engine)]
            var onB: [Checkpoint] = [try await Self.checkpoint("B opened", b.engine)]

            // B records what its state showed while its fetch stood between the database
            // changes and the zone's changes (the zone then has unfetched changes).
            let midFetch = Mutex<[Checkpoint]>([])
            b.onEvent { event, engine in
                guard event.kind == .fetchedDatabaseChanges || event.kind == .willFetchRecordZoneChanges else { return }
                guard let offset = try? engine.deviceLog.log.lastOffset,
                    let unfetched = try? engine.state.zoneIDsWithUnfetchedServerChanges,
                    let pending = try? engine.state.pendingRecordZoneChanges,
                    let zones = try? engine.state.pendingDatabaseChanges,
                    let untracked = try? engine.state.hasPendingUntrackedChanges,
                    (try? engine.deviceLog.log.lastOffset) == offset
                else { return }
                midFetch.withLock {
                    $0.append(
                        Checkpoint(
                            step: "B during fetch (\(event.kind))", offset: offset, pendingRecordZoneChanges: pending,
                            pendingDatabaseChanges: zones, hasPendingUntrackedChanges: untracked,
                            zoneIDsWithUnfetchedServerChanges: unfetched))
                }
            }

            try a.createZone(Self.notes)
            onA.append(try await Self.checkpoint("A created the zone", a.engine))
            try a.write(Self.note("n1"), "Groceries")
            onA.append(try await Self.checkpoint("A wrote n1", a.engine))
            try a.write([(Self.note("n2"), "Books"), (Self.note("n3"), "Films")])
            onA.append(try await Self.checkpoint("A wrote n2, n3", a.engine))
            try a.engine.state.setHasPendingUntrackedChanges(true)
            onA.append(try await Self.checkpoint("A flagged untracked changes", a.engine))
            try await a.engine.sendChanges()
            onA.append(try await Self.checkpoint("A sent", a.engine))
            try a.delete(Self.note("n2"))
            onA.append(try await Self.checkpoint("A deleted n2", a.engine))

            try await b.sync()
            onB.append(try await Self.checkpoint("B synced", b.engine))
            try b.write(Self.note("n1"), "Groceries and milk")
            onB.append(try await Self.checkpoint("B edited n1", b.engine))
            try await b.sync()
            onB.append(try await Self.checkpoint("B synced again", b.engine))

            try await a.sync()
            onA.append(try await Self.checkpoint("A synced", a.engine))

            // The timelines did what the checkpoints claim.
            #expect(
                onA[3].pendingRecordZoneChanges == [
                    .saveRecord(Self.note("n1")), .saveRecord(Self.note("n2")), .saveRecord(Self.note("n3")),
                ])
            #expect(onA[5].pendingRecordZoneChanges == [] && onA[5].pendingDatabaseChanges == [])
            #expect(onB[2].pendingRecordZoneChanges == [.saveRecord(Self.note("n1"))])
            #expect(b.title(Self.note("n3")) == "Films")
            #expect(a.title(Self.note("n1")) == "Groceries and milk")
            let during = midFetch.withLock { $0 }
            #expect(during.contains { $0.zoneIDsWithUnfetchedServerChanges == [Self.notes] })

            try Self.expect(onA, on: a.engine.deviceLog)
            try Self.expect(onB + during, on: b.engine.deviceLog)
            // Offsets are strictly increasing along each timeline, and the last one is the end.
            #expect(try a.engine.deviceLog.state(at: a.engine.deviceLog.log.lastOffset).offset == onA.last!.offset)
            #expect(try a.engine.deviceLog.state(at: .zero).pendingRecordZoneChanges == [])
            try a.expectProjectionsHold()
            try b.expectProjectionsHold()
        }
    }

    @Test("state(at:) and rewind(to:into:) past the end throw invalidArgument naming the offset")
    func pastTheEnd() async throws {
        try await withServer { directory, server in
            let a = try TestDevice("A", server: server, directory: directory)
            try a.createZone(Self.notes)
            let last = try a.engine.deviceLog.log.lastOffset
            let past = LogOffset(last.rawValue + 1)
            let error = #expect(throws: LogStoreError.self) { try a.engine.deviceLog.state(at: past) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.offset == past)
            #expect(error?.description.contains("\(past)") == true)
            let fork = directory.appendingPathComponent("fork", isDirectory: true)
            let rewound = #expect(throws: LogStoreError.self) { try a.engine.deviceLog.rewind(to: past, into: fork) }
            #expect(rewound?.code == .invalidArgument)
            #expect(try a.engine.deviceLog.log.lastOffset == last)
        }
    }

    @Test(
        "rewind(to:into:) forks the timeline before a send: the fork sends what was pending then, the original is unchanged"
    )
    func rewindBeforeSend() async throws {
        try await withServer { directory, server in
            let a = try TestDevice("A", server: server, directory: directory)
            try a.createZone(Self.notes)
            try a.write([(Self.note("n1"), "Groceries"), (Self.note("n2"), "Books")])
            let beforeSend = try await Self.checkpoint("before the send", a.engine).offset
            try await a.engine.sendChanges()
            try a.write(Self.note("n3"), "Films")
            let original = try await Self.checkpoint("after", a.engine)
            #expect(original.pendingRecordZoneChanges == [.saveRecord(Self.note("n3"))])

            // The fork, against a server of its own, with a fresh delegate.
            let forkServer = try makeServer(directory.appendingPathComponent("fork-server", isDirectory: true))
            let forkLog = try a.engine.deviceLog.rewind(
                to: beforeSend, into: directory.appendingPathComponent("A-fork", isDirectory: true))
            #expect(try forkLog.log.lastOffset == beforeSend)
            #expect(try forkLog.log.verifyProjections() == nil)
            let delegate = TestDevice.Delegate(policy: .scripted)
            delegate.setTitle(Self.note("n1"), "Groceries")
            delegate.setTitle(Self.note("n2"), "Books")
            var configuration = SyncEngine.Configuration(
                database: forkServer.database(for: "alice", scope: .private, device: DeviceID("A-fork")),
                deviceLog: forkLog, delegate: delegate)
            configuration.automaticallySync = false
            let fork = try SyncEngine(configuration)
            #expect(
                try fork.state.pendingRecordZoneChanges == [.saveRecord(Self.note("n1")), .saveRecord(Self.note("n2"))])
            #expect(try fork.state.pendingDatabaseChanges == [.saveZone(RecordZone(zoneID: Self.notes))])

            try await fork.sendChanges()
            await fork.operations.drain()
            let events = delegate.events
            #expect(events.sentDatabaseChanges.flatMap(\.savedZones).map(\.zoneID) == [Self.notes])
            #expect(
                events.sentRecordZoneChanges.flatMap(\.savedRecords).map(\.recordID) == [
                    Self.note("n1"), Self.note("n2"),
                ])
            #expect(events.sentRecordZoneChanges.flatMap(\.failedRecordSaves).isEmpty)
            #expect(try fork.state.pendingRecordZoneChanges == [])
            #expect(try fork.state.pendingDatabaseChanges == [])
            #expect(try fork.deviceLog.log.lastOffset > beforeSend)

            // The original timeline is untouched.
            #expect(try a.engine.deviceLog.log.lastOffset == original.offset)
            #expect(try a.engine.state.pendingRecordZoneChanges == [.saveRecord(Self.note("n3"))])
            #expect(try a.engine.deviceLog.log.verifyProjections() == nil)
            #expect(try fork.deviceLog.log.verifyProjections() == nil)
            try Self.expect([original], on: a.engine.deviceLog)
        }
    }
}
