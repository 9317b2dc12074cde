import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSync

/// Batches in flight and their results: list maintenance after a send (F21, F32, F89, F91).
@Suite("Batches in flight")
struct InFlightTests {
    typealias F = Fixtures

    /// Notes A and B are pending, and a batch saving both is prepared: both are in flight.
    static func putAAndBInFlight(_ engine: SyncEngine) throws {
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .saveRecord(F.b)])
        try engine.deviceLog.append(prepared(saving: [F.a, F.b]))
    }

    static func prepared(saving ids: [Record.ID], deleting deletions: [Record.ID] = []) -> DeviceEntry {
        .batchPrepared(recordsToSave: ids.map { F.clientRecord($0) }, recordIDsToDelete: deletions, atomicByZone: false)
    }

    static func saved(_ ids: [Record.ID], deleted: [Record.ID] = []) -> DeviceEntry {
        .batchResult(
            saved: ids.map { F.serverRecord($0, tag: "t1") }, deleted: deleted, failedSaves: [:], failedDeletes: [:])
    }

    @Test("A successful batch removes its changes from the pending list")
    func successRemoves() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .deleteRecord(F.b), .saveRecord(F.c)])
            try engine.deviceLog.append(Self.prepared(saving: [F.a], deleting: [F.b]))
            let flying = try engine.deviceLog.read { try $0.inFlightRecordChanges() }
            #expect(Set(flying.map(\.change)) == [.saveRecord(F.a), .deleteRecord(F.b)])
            #expect(flying.allSatisfy { !$0.readded })
            try engine.deviceLog.append(Self.saved([F.a], deleted: [F.b]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.c)])
            #expect(try engine.deviceLog.read { try $0.inFlightRecordChanges() }.isEmpty)
        }
    }

    @Test("F32: a change re-added while in flight stays pending after success")
    func readdedDuringFlightStays() async throws {
        try withEngine { engine, directory in
            try Self.putAAndBInFlight(engine)
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])  // the app edits A mid-upload
            let a = try engine.deviceLog.read { try $0.inFlightState(of: .saveRecord(F.a)) }
            let b = try engine.deviceLog.read { try $0.inFlightState(of: .saveRecord(F.b)) }
            #expect(a.inFlight && a.readded)
            #expect(b.inFlight && !b.readded)
            try engine.deviceLog.append(Self.saved([F.a, F.b]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)])
            // The flag ended with the flight: the next success removes A.
            try engine.deviceLog.append(Self.prepared(saving: [F.a]))
            try engine.deviceLog.append(Self.saved([F.a]))
            #expect(try engine.state.pendingRecordZoneChanges == [])
        }
    }

    @Test("F32: removed and re-added while in flight, or added after an opposite change, stays")
    func readdedVariants() async throws {
        try withEngine { engine, directory in
            try Self.putAAndBInFlight(engine)
            try engine.state.remove(pendingRecordZoneChanges: [.saveRecord(F.a)])
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(F.b)])  // B: delete after save in flight
            try engine.deviceLog.append(Self.saved([F.a, F.b]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a), .deleteRecord(F.b)])
        }
    }

    @Test("F32: a change added while an untracked batch sends it stays pending")
    func addedDuringUntrackedFlight() async throws {
        try withEngine { engine, directory in
            try engine.state.setHasPendingUntrackedChanges(true)
            try engine.deviceLog.append(Self.prepared(saving: [F.a]))
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            try engine.deviceLog.append(Self.saved([F.a]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)])
        }
    }

    @Test("F21: networkFailure keeps A pending, serverRecordChanged removes B")
    func transientKeepsPermanentRemoves() async throws {
        try withEngine { engine, directory in
            try Self.putAAndBInFlight(engine)
            try engine.deviceLog.append(
                .batchResult(
                    saved: [], deleted: [],
                    failedSaves: [
                        F.a: SyncError(.networkFailure),
                        F.b: .serverRecordChanged(
                            serverRecord: F.serverRecord(F.b, tag: "9"), clientRecord: F.clientRecord(F.b)),
                    ],
                    failedDeletes: [:]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)])
            #expect(try engine.deviceLog.read { try $0.inFlightRecordChanges() }.isEmpty)
        }
    }

    @Test(
        "F21, F89: each transient code keeps the change pending",
        arguments: SyncError.Code.transient.sorted { $0.rawValue < $1.rawValue })
    func transientCodesKeep(_ code: SyncError.Code) async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .deleteRecord(F.b)])
            try engine.deviceLog.append(Self.prepared(saving: [F.a], deleting: [F.b]))
            try engine.deviceLog.append(
                .batchResult(
                    saved: [], deleted: [], failedSaves: [F.a: SyncError(code)], failedDeletes: [F.b: SyncError(code)]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a), .deleteRecord(F.b)])
        }
    }

    @Test(
        "F21, F91: non-transient codes remove the change",
        arguments: [
            SyncError.Code.serverRecordChanged, .zoneNotFound, .unknownItem, .quotaExceeded, .batchRequestFailed,
            .limitExceeded, .permissionFailure, .userDeletedZone, .invalidArguments,
        ])
    func permanentCodesRemove(_ code: SyncError.Code) async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .deleteRecord(F.b), .saveRecord(F.c)])
            try engine.deviceLog.append(Self.prepared(saving: [F.a], deleting: [F.b]))
            try engine.deviceLog.append(
                .batchResult(
                    saved: [], deleted: [], failedSaves: [F.a: SyncError(code)], failedDeletes: [F.b: SyncError(code)]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.c)])
        }
    }

    @Test("F21, F79: operationCancelled keeps the change pending, as in Apple's sample (spec choice)")
    func cancelledKeeps() async throws {
        try withEngine { engine, directory in
            #expect(
                !SyncError.Code.operationCancelled.isTransient,
                "operationCancelled is not one of the seven codes of F89")
            #expect(SyncError(.operationCancelled).keepsChangePending)
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .deleteRecord(F.b), .saveRecord(F.c)])
            try engine.deviceLog.append(Self.prepared(saving: [F.a, F.c], deleting: [F.b]))
            try engine.deviceLog.append(
                .batchResult(
                    saved: [F.serverRecord(F.c, tag: "1")], deleted: [],
                    failedSaves: [F.a: SyncError(.operationCancelled)],
                    failedDeletes: [F.b: SyncError(.operationCancelled)]))
            // The cancelled send left A and B to be sent again; C was answered.
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a), .deleteRecord(F.b)])
            #expect(try engine.deviceLog.read { try $0.inFlightRecordChanges() }.isEmpty)
            #expect(try engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    @Test("A change re-added while in flight survives a non-transient failure too (spec choice)")
    func readdedSurvivesPermanentFailure() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            try engine.deviceLog.append(Self.prepared(saving: [F.a]))
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            try engine.deviceLog.append(
                .batchResult(
                    saved: [], deleted: [], failedSaves: [F.a: SyncError(.quotaExceeded)], failedDeletes: [:]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)])
        }
    }

    @Test("Items a result does not mention keep their pending state and leave flight")
    func unmentionedItems() async throws {
        try withEngine { engine, directory in
            try Self.putAAndBInFlight(engine)
            try engine.deviceLog.append(Self.saved([F.a]))
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.b)])
            #expect(try engine.deviceLog.read { try $0.inFlightRecordChanges() }.isEmpty)
        }
    }

    @Test("A new batch ends the batch still in flight")
    func newBatchEndsOld() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .saveRecord(F.b)])
            try engine.deviceLog.append(Self.prepared(saving: [F.a]))
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])  // re-added in the first flight
            try engine.deviceLog.append(Self.prepared(saving: [F.b]))  // e.g. after a crash: A's flight is over
            #expect(try engine.deviceLog.read { try $0.inFlightRecordChanges() }.map(\.change) == [.saveRecord(F.b)])
            try engine.deviceLog.append(Self.saved([F.a, F.b]))
            // A was no longer in flight, so its re-added flag is gone: the success removes it.
            #expect(try engine.state.pendingRecordZoneChanges == [])
        }
    }
}
