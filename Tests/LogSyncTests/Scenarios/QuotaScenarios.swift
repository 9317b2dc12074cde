import Foundation
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Testing

/// A full account (F97, F153), as device timelines: what the engine reports, what stays
/// pending, and what goes once there is room.
@Suite("Scenario: quota")
struct QuotaScenarios: NoteIDs {
    // F97, F153, F21: quotaExceeded is reported per item and not retried by the engine; the app
    // keeps the edit pending (TestDevice re-adds it), and it goes once the quota frees.
    @Test(
        "F97 a save refused with quotaExceeded is reported, stays pending without a retry loop, and is sent once there is room"
    )
    func quotaExceededSaveWaitsForRoom() async throws {
        try await withServer { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            let laptop = try TestDevice("laptop", server: server, directory: directory)
            try await phone.seedNote(Self.note("small"), "Milk", in: Self.notes, syncing: laptop)

            // The phone's account is full: the next note does not fit; a small edit still does.
            server.admin.setQuota(600, for: "alice")
            let big = Self.note("big")
            let long = String(repeating: "Tomatoes, ", count: 100)
            phone.clearEvents()
            try phone.write(Self.note("small"), "Oat milk")
            let error = try await phone.writeExpectingFailedSave(big, long, .quotaExceeded)
            #expect(error?.partialErrors.count == 1)

            // Reported to the delegate in the send's events, once: the engine did not retry
            // within the send, though the app put the save back at once.
            let sent = phone.events.sentRecordZoneChanges
            let refusals = sent.flatMap(\.failedRecordSaves).filter { $0.record.recordID == big }
            #expect(refusals.map(\.error.code) == [.quotaExceeded])
            #expect(sent.flatMap(\.savedRecords).map(\.recordID) == [Self.note("small")])
            #expect(phone.tally.overQuota == 1)

            // Kept: pending, the note and its unacknowledged edit on the phone, nothing on the server.
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(big)])
            #expect(phone.title(big) == long)
            #expect(phone.unacknowledgedEdits.keys.contains(big))
            try await laptop.engine.fetchChanges()
            #expect(laptop.title(big) == nil)
            #expect(laptop.title(Self.note("small")) == "Oat milk")

            // Still full: the next send is refused the same way, and the save stays pending.
            await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(big)])
            #expect(phone.tally.overQuota == 2)

            // The user frees space: the next send saves the note, and the laptop gets it.
            server.admin.setQuota(nil, for: "alice")
            try await phone.engine.sendChanges()
            #expect(try phone.engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(phone.unacknowledgedEdits.isEmpty)
            try await laptop.engine.fetchChanges()
            #expect(laptop.title(big) == long)
            try phone.expectConverged(with: laptop)
            try expectProjectionsHold(phone.engine, laptop.engine)
        }
    }
}
