import Foundation
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Testing

@testable import LogSync

/// The conflict from the WWDC23 CKSyncEngine session, as a timeline of two devices.
@Suite("Scenario: conflicts")
struct ConflictScenarios {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let note = Record.ID(recordName: "note", zoneID: notes)

    // F21, F44, F56, F75, F91, F92
    @Test("WWDC23: A sends \"A\"; B sends \"B\" before fetching, fails, merges the server record, ends with \"A\"")
    func wwdcConflict() async throws {
        try await withDevices("A", "B") { server, phoneA, phoneB in
            // Both devices know the note; A and B each create the zone.
            try await phoneA.seedNote(Self.note, "first", in: Self.notes, syncing: phoneB)
            #expect(phoneB.title(Self.note) == "first")

            // A sets "A" and sends.
            try phoneA.write(Self.note, "A")
            try await phoneA.engine.sendChanges()

            // B sets "B" and sends before fetching: the save conflicts, and sendChanges throws.
            try await phoneB.writeExpectingFailedSave(Self.note, "B", .serverRecordChanged)
            let failed = phoneB.syncEvents.compactMap { event -> SyncEngine.Event.SentRecordZoneChanges? in
                if case .sentRecordZoneChanges(let sent) = event { sent } else { nil }
            }.last
            #expect(failed?.failedRecordSaves.first?.error.serverRecord?["title"] == .string("A"))

            // B's delegate merged into the server record (server wins): "A", nothing left to send.
            #expect(phoneB.title(Self.note) == "A")
            #expect(try phoneB.engine.state.pendingRecordZoneChanges == [])
            #expect(try phoneB.engine.deviceLog.lastKnownServerRecord(for: Self.note)?["title"] == .string("A"))
            try await phoneB.sync()
            try await phoneA.sync()
            #expect(phoneA.title(Self.note) == "A")
            try phoneA.expectConverged(with: phoneB)
        }
    }
}
