import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSync

/// The state survives closing and reopening the log, without replaying it.
@Suite("Persistence")
struct PersistenceTests {
    typealias F = Fixtures

    /// Writes a small history through an engine that is gone when this returns.
    static func writeHistory(_ directory: URL) throws -> (lastOffset: LogOffset, state: ReferenceState) {
        let engine = try makeEngine(directory)
        try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: F.notes)), .deleteZone(F.photos)])
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .deleteRecord(F.b), .saveRecord(F.c)])
        try engine.state.setHasPendingUntrackedChanges(true)
        try engine.deviceLog.append(
            .batchPrepared(
                recordsToSave: [F.clientRecord(F.a), F.clientRecord(F.c)], recordIDsToDelete: [], atomicByZone: false))
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.c)])
        try engine.deviceLog.append(
            .batchResult(
                saved: [F.serverRecord(F.a, tag: "5")], deleted: [], failedSaves: [:], failedDeletes: [:]))
        try engine.deviceLog.append(
            .batchPrepared(recordsToSave: [F.clientRecord(F.c)], recordIDsToDelete: [F.b], atomicByZone: false))
        let state = try engine.deviceLog.read { try $0.referenceState(recordIDs: [F.a, F.b, F.c]) }
        #expect(state == (try ReferenceState.replaying(engine.deviceLog)))
        return (try engine.deviceLog.log.lastOffset, state)
    }

    @Test("Reopened, the state is the same and the projection is current without a replay")
    func reopen() async throws {
        try withTemporaryDirectory { directory in
            let (last, before) = try Self.writeHistory(directory)
            #expect(before.records == [.deleteRecord(F.b), .saveRecord(F.c)])
            #expect(before.inFlight == [.saveRecord(F.c): false, .deleteRecord(F.b): false])
            #expect(before.serverRecords[F.a]?.recordChangeTag == "5")

            // Read-only: the log opens without touching (or catching up) its projections, so
            // what it shows is what was stored at the last commit.
            do {
                let readOnly = try openDeviceLog(directory, readOnly: true)
                #expect(try readOnly.log.lastOffset == last)
                #expect(try readOnly.log.appliedOffsets() == [DeviceIndex.projectionName: last])
                let after = try readOnly.read { try $0.referenceState(recordIDs: [F.a, F.b, F.c]) }
                #expect(after == before)
                #expect(throws: LogStoreError.self) {
                    try makeEngine(deviceLog: readOnly, directory: directory).state.add(pendingRecordZoneChanges: [
                        .saveRecord(F.x)
                    ])
                }
            }

            // Read-write again: the engine carries on where it was.
            let engine = try makeEngine(directory)
            #expect(try engine.state.pendingRecordZoneChanges == [.deleteRecord(F.b), .saveRecord(F.c)])
            #expect(
                try engine.state.pendingDatabaseChanges == [
                    .saveZone(RecordZone(zoneID: F.notes)), .deleteZone(F.photos),
                ])
            #expect(try engine.state.hasPendingUntrackedChanges)
            #expect(try engine.deviceLog.lastKnownServerRecord(for: F.a)?.recordChangeTag == "5")
            try engine.deviceLog.append(
                .batchResult(
                    saved: [F.serverRecord(F.c, tag: "6")], deleted: [F.b], failedSaves: [:], failedDeletes: [:]))
            #expect(try engine.state.pendingRecordZoneChanges == [])
            #expect(try engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    @Test("A configuration with a log directory opens a durable log")
    func durableInit() async throws {
        try withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory.appendingPathComponent("server"), durability: .fast))
            func engine() throws -> SyncEngine {
                try SyncEngine(
                    SyncEngine.Configuration(
                        database: server.database(for: "tester"),
                        logDirectory: directory.appendingPathComponent("sync"),
                        delegate: IdleDelegate.shared))
            }
            do {
                let engine = try engine()
                #expect(engine.deviceLog.log.environment.options.durability == .durable)
                #expect(engine.deviceLog.log.name == "device")
                try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            }
            #expect(try engine().state.pendingRecordZoneChanges == [.saveRecord(F.a)])
        }
    }
}
