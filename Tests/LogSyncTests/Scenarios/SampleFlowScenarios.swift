import Foundation
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// The flows of Apple's sample app tests (apple/sample-cloudkit-sync-engine,
/// Tests/SyncTests.swift), as timelines of two devices of one account, syncing manually (F76).
@Suite("Scenario: Apple sample flows")
struct SampleFlowScenarios {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let note = Record.ID(recordName: "note", zoneID: notes)

    static func note(_ number: Int) -> Record.ID { Record.ID(recordName: "note-\(number)", zoneID: notes) }

    // F23, F47, F53, F54, F57, F74, F76
    @Test("A writes N notes and sends once; B fetches them all", arguments: [1, 10, 444])
    func syncNotes(count: Int) async throws {
        try await withDevices("A", "B") { _, phoneA, phoneB in
            // A creates the zone and N notes, and sends them in one sendChanges.
            try phoneA.createZone(Self.notes)
            try phoneA.write((0..<count).map { (Self.note($0), "Note \($0)") })
            try await phoneA.engine.sendChanges()
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == [])
            #expect(try phoneA.engine.state.pendingDatabaseChanges == [])

            // The batches stayed within 400 items; 444 took two or more (F54).
            let batches = phoneA.events.sentRecordZoneChanges
            let sizes = batches.map { $0.savedRecords.count + $0.failedRecordSaves.count }
            #expect(sizes.allSatisfy { $0 <= 400 })
            #expect(sizes.reduce(0, +) == count)
            #expect(batches.allSatisfy { $0.failedRecordSaves.isEmpty })
            if count > 400 { #expect(batches.count >= 2) }
            #expect(Set(batches.flatMap { $0.savedRecords.map(\.recordID) }).count == count)

            // B fetches and has every note, with A's titles.
            try await phoneB.engine.fetchChanges()
            #expect(phoneB.notes.count == count)
            try phoneB.expectConverged(with: phoneA)
        }
    }

    // F44, F76, F92 (no conflict: each rename is built on the last known server record)
    @Test("A renames, B sees it; B renames, A sees it")
    func renameBothWays() async throws {
        try await withDevices("A", "B") { _, phoneA, phoneB in
            try await phoneA.seedNote(Self.note, "Groceries", in: Self.notes, syncing: phoneB)
            #expect(phoneB.title(Self.note) == "Groceries")

            // A renames and sends; B fetches the new name.
            try phoneA.write(Self.note, "Groceries for Sunday")
            try await phoneA.engine.sendChanges()
            try await phoneB.engine.fetchChanges()
            #expect(phoneB.title(Self.note) == "Groceries for Sunday")

            // B renames and sends (no conflict: B's copy carries the tag it fetched); A fetches.
            try phoneB.write(Self.note, "Groceries for Monday")
            try await phoneB.engine.sendChanges()
            #expect(phoneB.events.sentRecordZoneChanges.last?.failedRecordSaves == [])
            try await phoneA.engine.fetchChanges()
            #expect(phoneA.title(Self.note) == "Groceries for Monday")
            try phoneA.expectConverged(with: phoneB)
        }
    }

    // F21, F47, F75, F93
    @Test("Zone deleted on the server: A's save fails with zoneNotFound, A re-creates the zone and the note, B sees it")
    func zoneNotFoundThenRecreated() async throws {
        try await withTemporaryDirectory { directory in
            let server = try makeTickingServer(directory)
            let phoneA = try TestDevice("A", server: server, directory: directory)
            let phoneB = try TestDevice("B", server: server, directory: directory)

            try phoneA.createZone(Self.notes)
            try phoneA.write(Self.note, "Groceries")
            try await phoneA.sync()
            let firstCreation = try #require(
                phoneA.events.sentRecordZoneChanges.first?.savedRecords.first?.creationDate)
            try await phoneB.sync()

            // B deletes the zone; the server no longer has it.
            try phoneB.deleteZone(Self.notes)
            try await phoneB.engine.sendChanges()
            #expect(phoneB.events.sentDatabaseChanges.last?.deletedZoneIDs == [Self.notes])

            // A edits the note before fetching: the save fails with zoneNotFound, sendChanges throws.
            phoneA.clearEvents()
            try await phoneA.writeExpectingFailedSave(Self.note, "Groceries, again", .zoneNotFound)
            let failed = phoneA.events.sentRecordZoneChanges.first
            #expect(failed?.failedRecordSaves.map(\.record.recordID) == [Self.note])
            #expect(failed?.failedRecordSaves.first?.error.code == .zoneNotFound)

            // A's delegate re-queued saveZone and the save; the next send succeeds.
            try await phoneA.engine.sendChanges()
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == [])
            #expect(try phoneA.engine.state.pendingDatabaseChanges == [])
            #expect(phoneA.events.sentDatabaseChanges.flatMap { $0.savedZones.map(\.zoneID) } == [Self.notes])
            let resaved = try #require(phoneA.events.sentRecordZoneChanges.flatMap(\.savedRecords).last)
            #expect(resaved.recordID == Self.note)

            // B fetches: the note is back, a new record with a new creation date.
            try await phoneB.engine.fetchChanges()
            #expect(phoneB.title(Self.note) == "Groceries, again")
            let fetched = try #require(phoneB.events.fetchedRecordZoneChanges.last?.modifications.first?.record)
            #expect(fetched.creationDate != nil)
            #expect(fetched.creationDate != firstCreation)
            try phoneB.expectConverged(with: phoneA)
        }
    }

    // F21, F75, F94
    @Test("Unknown item: B deletes the note, A saves it with its old system fields, fails, re-uploads it fresh")
    func unknownItem() async throws {
        try await withDevices("A", "B") { server, phoneA, phoneB in
            try await phoneA.seedNote(Self.note, "Groceries", in: Self.notes, syncing: phoneB)

            // B deletes the note.
            try phoneB.delete(Self.note)
            try await phoneB.engine.sendChanges()
            #expect(phoneB.events.sentRecordZoneChanges.last?.deletedRecordIDs == [Self.note])

            // A edits it before fetching: its change tag names a record the server no longer has.
            phoneA.clearEvents()
            try await phoneA.writeExpectingFailedSave(Self.note, "Groceries, edited", .unknownItem)
            #expect(phoneA.events.sentRecordZoneChanges.first?.failedRecordSaves.first?.error.code == .unknownItem)

            // A's delegate re-queued the save without system fields: the next send succeeds.
            try await phoneA.engine.sendChanges()
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == [])
            #expect(phoneA.events.sentRecordZoneChanges.flatMap(\.savedRecords).map(\.recordID).last == Self.note)

            // B fetches the re-created note.
            try await phoneB.engine.fetchChanges()
            #expect(phoneB.title(Self.note) == "Groceries, edited")
            try phoneA.expectProjectionsHold()
            try phoneB.expectProjectionsHold()
        }
    }

    // F21, F56, F75, F76, F91, F92
    @Test(
        "Conflict: both edit, the first to send wins, the other merges the server record; both converge",
        arguments: [true, false])
    func conflict(aSendsFirst: Bool) async throws {
        try await withDevices("A", "B") { server, phoneA, phoneB in
            try await phoneA.seedNote(Self.note, "first", in: Self.notes, syncing: phoneB)

            // Both edit without fetching.
            try phoneA.write(Self.note, "A")
            try phoneB.write(Self.note, "B")
            let (winner, loser) = aSendsFirst ? (phoneA, phoneB) : (phoneB, phoneA)
            let winning = aSendsFirst ? "A" : "B"

            // The first sender succeeds; the second fails with serverRecordChanged.
            try await winner.engine.sendChanges()
            let error = await #expect(throws: SyncError.self) { try await loser.engine.sendChanges() }
            #expect(error?.partialErrors[.record(Self.note)]?.code == .serverRecordChanged)
            #expect(
                loser.events.sentRecordZoneChanges.last?.failedRecordSaves.first?.error.serverRecord?["title"]
                    == .string(winning))

            // The loser took the server's value (server wins); nothing left to send.
            #expect(loser.title(Self.note) == winning)
            #expect(try loser.engine.state.pendingRecordZoneChanges == [])

            try await loser.sync()
            try await winner.sync()
            #expect(phoneA.title(Self.note) == winning)
            try phoneA.expectConverged(with: phoneB)
        }
    }

    // F21, F47, F91, F92: a merge that keeps both edits is built on the server record; as
    // CKSyncEngine keeps sending while changes are pending, the merge the loser's delegate re-adds
    // while handling the conflict is saved by the very send that got the conflict.
    @Test(
        "F92 conflict with a merging resolver: the send that gets the conflict also saves the merge, and both converge on it",
        arguments: [true, false])
    func conflictMerged(aSendsFirst: Bool) async throws {
        try await withDevices("A", "B") { _, phoneA, phoneB in
            for phone in [phoneA, phoneB] {
                phone.resolveConflicts { local, server in [server, local].sorted().joined(separator: "+") }
            }
            try await phoneA.seedNote(Self.note, "first", in: Self.notes, syncing: phoneB)
            try phoneA.write(Self.note, "A")
            try phoneB.write(Self.note, "B")
            let (winner, loser) = aSendsFirst ? (phoneA, phoneB) : (phoneB, phoneA)
            try await winner.engine.sendChanges()

            // The loser's one send: the save fails with the conflict, its delegate re-adds the
            // merge, the merge is saved. The call still throws for the conflict, as the events
            // report it.
            loser.clearEvents()
            let error = await #expect(throws: SyncError.self) { try await loser.engine.sendChanges() }
            #expect(error?.code == .partialFailure)
            #expect(error?.partialErrors[.record(Self.note)]?.code == .serverRecordChanged)
            let sent = loser.events.sentRecordZoneChanges
            #expect(sent.count == 2, "\(loser.syncEvents)")
            #expect(sent.first?.failedRecordSaves.map(\.record.recordID) == [Self.note])
            #expect(sent.last?.savedRecords.map(\.recordID) == [Self.note])
            #expect(loser.syncEvents.kinds.filter { $0 == .didSendChanges }.count == 1)
            #expect(try loser.engine.state.pendingRecordZoneChanges == [])

            // The winner fetches the merge; nothing is left to send anywhere.
            try await winner.sync()
            try await loser.sync()
            #expect(phoneA.title(Self.note) == "A+B")
            try phoneA.expectConverged(with: phoneB)
        }
    }
}
