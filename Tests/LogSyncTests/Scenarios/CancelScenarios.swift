import Foundation
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

/// `cancelOperations()` in the middle of a sync, and the engine afterwards (F79, F80).
@Suite("Scenario: cancellation")
struct CancelScenarios {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func note(_ number: Int) -> Record.ID { Record.ID(recordName: "note-\(number)", zoneID: notes) }

    // F79, F80, F45, F57
    @Test(
        "Cancelled from inside the delegate after the first batch: that batch is reported, the rest stays pending; a later send sends it"
    )
    func cancelSendFromDelegate() async throws {
        try await withDevices("A", "B") { _, phoneA, phoneB in
            let cancelled = Atomic<Bool>(false)
            phoneA.onEvent { event, engine in
                guard case .sentRecordZoneChanges = event, !cancelled.exchange(true, ordering: .relaxed) else { return }
                await engine.cancelOperations()  // allowed here: it does not wait for the send
            }
            try phoneA.createZone(Self.notes)
            let ids = (0..<900).map(Self.note)
            try phoneA.write(ids.map { ($0, $0.recordName) })

            let error = await #expect(throws: SyncError.self) { try await phoneA.engine.sendChanges() }
            #expect(error?.code == .operationCancelled)
            // The batch already sent is reported, and the send's will/did still pair.
            #expect(
                phoneA.syncEvents.kinds == [
                    .willSendChanges, .sentDatabaseChanges, .sentRecordZoneChanges, .didSendChanges,
                ])
            let sent = phoneA.events.sentRecordZoneChanges.flatMap(\.savedRecords).map(\.recordID)
            #expect(sent == Array(ids.prefix(400)))
            // The unsent changes are still pending, in order.
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == ids.dropFirst(400).map { .saveRecord($0) })
            try await phoneB.engine.fetchChanges()
            #expect(phoneB.notes.count == 400)

            // F80: the engine is usable; the next send sends the rest.
            phoneA.clearEvents()
            try await phoneA.engine.sendChanges()
            #expect(phoneA.events.sentRecordZoneChanges.map(\.savedRecords.count) == [400, 100])
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == [])
            try await phoneB.fetchAndExpectConverged(with: phoneA)
        }
    }

    // F79, F80
    @Test("Cancelled from outside while the delegate handles the first batch: the same outcome")
    func cancelSendFromOutside() async throws {
        try await withDevice("A") { _, phone in
            let inFirstBatch = Gate()
            let held = Atomic<Bool>(false)
            phone.onEvent { event, _ in
                guard case .sentRecordZoneChanges = event, !held.exchange(true, ordering: .relaxed) else { return }
                await inFirstBatch.hold()
            }
            try phone.createZone(Self.notes)
            let ids = (0..<500).map(Self.note)
            try phone.write(ids.map { ($0, $0.recordName) })

            let send = Task { try await phone.engine.sendChanges() }
            await inFirstBatch.reached.wait()
            await phone.engine.cancelOperations()
            await inFirstBatch.release()
            let error = await #expect(throws: SyncError.self) { try await send.value }
            #expect(error?.code == .operationCancelled)
            #expect(phone.events.sentRecordZoneChanges.count == 1)
            #expect(phone.syncEvents.last?.kind == .didSendChanges)
            #expect(try phone.engine.state.pendingRecordZoneChanges.count == 100)

            try await phone.engine.sendChanges()
            #expect(try phone.engine.state.pendingRecordZoneChanges == [])
            try phone.expectProjectionsHold()
        }
    }

    // F79, F80, F29 (a cut-off fetch may cause redelivery, never loss), F100
    @Test(
        "A fetch cancelled after the first page of a zone's listing: the page is kept, the pairs balance, the next fetch continues the listing"
    )
    func cancelFetch() async throws {
        try await withDevices("W", "R", secondFetchResultsLimit: 100) { _, writer, reader in
            try writer.createZone(Self.notes)
            try writer.write((0..<250).map { (Self.note($0), "Note \($0)") })
            try await writer.engine.sendChanges()
            let cancelled = Atomic<Bool>(false)
            reader.onEvent { event, engine in
                guard case .fetchedRecordZoneChanges = event, !cancelled.exchange(true, ordering: .relaxed) else {
                    return
                }
                await engine.cancelOperations()
            }

            let error = await #expect(throws: SyncError.self) { try await reader.engine.fetchChanges() }
            #expect(error?.code == .operationCancelled)
            #expect(reader.events.isFetchSequence)
            #expect(reader.events.fetchedRecordZoneChanges.count == 1)
            #expect(reader.events.zoneFetchResults.first?.error?.code == .operationCancelled)
            #expect(reader.notes.count == 100)
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [Self.notes])

            // The zone is being listed from no token; the device index keeps which known records
            // the listing has not returned, so the next fetch continues it from its second page:
            // the other 150, none of the first 100 again.
            let firstPage = Set(reader.events.fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID))
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            let refetched = reader.events.fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID)
            #expect(refetched.count == 150)
            #expect(firstPage.union(refetched) == Set(writer.notes.keys))
            #expect(reader.notes == writer.notes)
            try reader.expectProjectionsHold()
        }
    }
}
