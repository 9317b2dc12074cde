import Foundation
import LogStore
import SyncModel
import SyncTestKit
import Testing

@testable import LogSync

/// `SendFlow` alone, against a ``ScriptedDatabase``: what it asks the server, what it appends to
/// the device log, how the index reads after, and what the delegate hears.
@Suite("SendFlow")
struct SendFlowTests {
    /// The answer to a batch of three saves: one saved, one conflict, one in a zone gone.
    static func mixedAnswer(saved: Record, conflict: Record) -> ModifyRecordsResponse {
        ModifyRecordsResponse(saveResults: [
            Fixtures.a: .success(saved),
            Fixtures.b: .failure(
                .serverRecordChanged(serverRecord: conflict, clientRecord: Fixtures.clientRecord(Fixtures.b))),
            Fixtures.photoC: .failure(SyncError(.zoneNotFound, "no zone Photos", item: .zone(Fixtures.photos))),
        ])
    }

    /// The answer to a batch that saved `record`.
    static func saving(_ record: Record) -> ModifyRecordsResponse {
        ModifyRecordsResponse(saveResults: [record.recordID: .success(record)])
    }

    // F21, F44, F57, F91, F92: one batch, three outcomes.
    @Test(
        "F44 F91 a batch whose items fail apart: a conflict carries the server's record, a zone not found ends its change"
    )
    func batchWithItemFailures() async throws {
        try await withFlowHarness { flow in
            let changes: [RecordChange] = [
                .saveRecord(Fixtures.a), .saveRecord(Fixtures.b), .saveRecord(Fixtures.photoC),
            ]
            try flow.state.add(pendingRecordZoneChanges: changes)
            let sentRecords = [Fixtures.a, Fixtures.b, Fixtures.photoC].map { Fixtures.clientRecord($0) }
            flow.delegate.queue(SyncEngine.RecordZoneChangeBatch(recordsToSave: sentRecords))
            let saved = Fixtures.serverRecord(Fixtures.a, tag: "1")
            let conflict = Fixtures.serverRecord(Fixtures.b, tag: "7", title: "Theirs")
            flow.database.answer(ModifyRecordsRequest.self) { _ in Self.mixedAnswer(saved: saved, conflict: conflict) }
            let before = try flow.deviceLog.log.lastOffset

            let error = await #expect(throws: SyncError.self) { try await flow.send() }
            #expect(error?.code == .partialFailure)
            #expect(error?.partialErrors[.record(Fixtures.b)]?.code == .serverRecordChanged)
            #expect(error?.partialErrors[.record(Fixtures.photoC)]?.code == .zoneNotFound)

            // One request: the batch, under the ID made of the prefix and its entry's offset (F103).
            let requests = flow.database.requests(ModifyRecordsRequest.self)
            try #require(requests.count == 1)
            #expect(requests[0].recordsToSave == sentRecords)
            #expect(requests[0].savePolicy == .ifServerRecordUnchanged)
            #expect(!requests[0].atomically)
            let prepared = try #require(try flow.entries(after: before).first { $0.entry.name == "batchPrepared" })
            #expect(requests[0].requestID == RequestID("\(FlowHarness.requestIDPrefix)-\(prepared.offset.rawValue)"))
            #expect(flow.database.requestNames == ["ModifyRecordsRequest"])

            // The log: the batch with its records, the answer item by item, the end.
            #expect(
                try flow.entryNames(after: before) == ["sendStarted", "batchPrepared", "batchResult", "sendFinished"])
            let entries = try flow.entries(after: before).map(\.entry)
            #expect(
                entries[1]
                    == .batchPrepared(
                        recordsToSave: sentRecords, recordIDsToDelete: [], atomicByZone: false,
                        requestID: requests[0].requestID))
            guard case .batchResult(let savedRecords, let deleted, let failedSaves, let failedDeletes) = entries[2]
            else {
                Issue.record("not a batchResult: \(entries[2])")
                return
            }
            #expect(savedRecords == [saved] && deleted.isEmpty && failedDeletes.isEmpty)
            #expect(failedSaves[Fixtures.b]?.serverRecord == conflict)
            #expect(failedSaves[Fixtures.photoC]?.code == .zoneNotFound)
            #expect(entries[3] == .sendFinished(error: nil))

            // The index: nothing pending or in flight; the saved record and the conflict's server
            // record are the last known server records (F92), the other is not.
            try flow.read { snapshot throws in
                #expect(try snapshot.pendingRecordZoneChanges().isEmpty)
                #expect(try snapshot.inFlightRecordChanges().isEmpty)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.a) == saved)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.b) == conflict)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.photoC) == nil)
                #expect(try snapshot.unansweredBatch() == nil)
            }

            // The delegate: asked again after the batch, and told of each outcome once (F47, F57).
            #expect(flow.delegate.batchesAskedFor == 2)
            let events = flow.delegate.events
            #expect(events.withoutStateUpdates.kinds == [.willSendChanges, .sentRecordZoneChanges, .didSendChanges])
            let sent = try #require(events.sentRecordZoneChanges.first)
            #expect(sent.savedRecords == [saved])
            #expect(sent.failedRecordSaves.map(\.record.recordID) == [Fixtures.b, Fixtures.photoC])
            #expect(sent.failedRecordSaves.first?.error.serverRecord == conflict)
        }
    }

    // F103, F160: the server lost its answer, so the same request goes again under its ID.
    @Test("F103 F160 an answer the server lost is asked for again with the same request, and the batch saved once")
    func lostAnswerResentUnderItsID() async throws {
        try await withFlowHarness { flow in
            try flow.state.add(pendingRecordZoneChanges: [.saveRecord(Fixtures.a)])
            flow.delegate.queue(SyncEngine.RecordZoneChangeBatch(recordsToSave: [Fixtures.clientRecord(Fixtures.a)]))
            let saved = Fixtures.serverRecord(Fixtures.a, tag: "1")
            flow.database.fail(ModifyRecordsRequest.self, SyncError(.serverResponseLost, "the answer was lost"))
            flow.database.answer(ModifyRecordsRequest.self) { _ in Self.saving(saved) }
            let before = try flow.deviceLog.log.lastOffset

            try await flow.send()

            let requests = flow.database.requests(ModifyRecordsRequest.self)
            try #require(requests.count == 2)
            #expect(requests[0] == requests[1], "the same request, its ID included")
            #expect(requests[0].requestID != nil)
            #expect(
                try flow.entryNames(after: before) == ["sendStarted", "batchPrepared", "batchResult", "sendFinished"])
            try flow.read { snapshot throws in
                #expect(try snapshot.pendingRecordZoneChanges().isEmpty)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.a) == saved)
                #expect(try snapshot.unansweredBatch() == nil)
            }
            #expect(flow.delegate.events.sentRecordZoneChanges.map(\.savedRecords) == [[saved]])
        }
    }

    // F103, F160: lost twice, the batch's outcome stays unknown; the app's next equal batch goes
    // out under the same ID, so a server that applied it replays its answer.
    @Test("F103 F160 a batch whose answer was lost twice is sent again under its request ID by the next send")
    func unansweredBatchKeepsItsID() async throws {
        try await withFlowHarness { flow in
            let record = Fixtures.clientRecord(Fixtures.a)
            try flow.state.add(pendingRecordZoneChanges: [.saveRecord(Fixtures.a)])
            flow.delegate.queue(SyncEngine.RecordZoneChangeBatch(recordsToSave: [record]))
            for _ in 0..<2 {
                flow.database.fail(ModifyRecordsRequest.self, SyncError(.serverResponseLost, "the answer was lost"))
            }

            let error = await #expect(throws: SyncError.self) { try await flow.send() }
            #expect(error?.partialErrors[.record(Fixtures.a)]?.code == .serverResponseLost)
            let lost = try #require(try flow.read { try $0.unansweredBatch() })
            #expect(lost.recordsToSave == [record])

            // The app saves the same record again; the server had applied it and replays.
            let saved = Fixtures.serverRecord(Fixtures.a, tag: "1")
            try flow.state.add(pendingRecordZoneChanges: [.saveRecord(Fixtures.a)])
            flow.delegate.queue(SyncEngine.RecordZoneChangeBatch(recordsToSave: [record]))
            flow.database.answer(ModifyRecordsRequest.self) { _ in Self.saving(saved) }
            try await flow.send()

            let ids = flow.database.requests(ModifyRecordsRequest.self).map(\.requestID)
            #expect(ids == [lost.requestID, lost.requestID, lost.requestID])
            try flow.read { snapshot throws in
                #expect(try snapshot.unansweredBatch() == nil)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.a) == saved)
                #expect(try snapshot.pendingRecordZoneChanges().isEmpty)
            }
        }
    }

    // F23, F43: zone changes go first, in their own request and event.
    @Test("F23 F43 pending zone changes are sent before the delegate is asked for records")
    func zoneChangesFirst() async throws {
        try await withFlowHarness { flow in
            try flow.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: Fixtures.notes)), .deleteZone(Fixtures.photos),
            ])
            flow.database.answer(ModifyZonesRequest.self) { request in
                ModifyZonesResponse(
                    saveResults: Dictionary(
                        uniqueKeysWithValues: request.zonesToSave.map { ($0.zoneID, .success($0)) }),
                    deleteResults: [Fixtures.photos: .failure(SyncError(.zoneNotFound, item: .zone(Fixtures.photos)))])
            }
            let before = try flow.deviceLog.log.lastOffset

            let error = await #expect(throws: SyncError.self) { try await flow.send() }
            #expect(error?.partialErrors.keys.sorted { "\($0)" < "\($1)" } == [.zone(Fixtures.photos)])
            #expect(flow.database.requestNames == ["ModifyZonesRequest"])
            #expect(try flow.entryNames(after: before) == ["sendStarted", "databaseChangesSent", "sendFinished"])
            #expect(try flow.read { try $0.pendingDatabaseChanges() }.isEmpty)
            let sent = try #require(flow.delegate.events.sentDatabaseChanges.first)
            #expect(sent.savedZones.map(\.zoneID) == [Fixtures.notes])
            #expect(sent.failedZoneDeletes[Fixtures.photos]?.code == .zoneNotFound)
            #expect(flow.delegate.batchesAskedFor == 1)
        }
    }
}

extension Fixtures {
    /// A record in the Photos zone, in the same batch as notes.
    static let photoC = id("C", photos)
}
