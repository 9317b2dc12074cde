import Foundation
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncModel
import Testing

/// A participant's engine on the shared database works as an engine on a private one: the
/// shared zone appears as a fetched database change, its records arrive, the participant's edits
/// reach the owner, and removal shows up as a zone deletion (F118, F119, F121, F124, F125).
@Suite("A participant's engine on the shared database")
struct SharedEngineTests {
    @Test("F119 F121 F124 a shared engine fetches the owner's zone, sends edits, and loses the zone on removal")
    func participantEngine() async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory.appendingPathComponent("server"), durability: .fast))
            defer { server.shutdown() }
            try server.registerUser("bob", emailAddress: "bob@example.com")
            let notes = RecordZone.ID(zoneName: "Notes")
            let alice = try TestDevice("alice-phone", server: server, user: "alice", directory: directory)
            try alice.createZone(notes)
            try alice.write(Record.ID(recordName: "n1", zoneID: notes), "Groceries")
            try await alice.sync()

            let owner = server.database(for: "alice", device: "admin")
            var share = Share(recordZoneID: notes)
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let saved = try await owner.modifyRecords(saving: [share.record], deleting: [])
            let result = try #require(saved.saveResults[share.recordID])
            let url = try #require(try Share(record: try result.get()).url)
            _ = try #require(
                try await server.database(for: "bob", scope: .shared).acceptShares(AcceptSharesRequest(shareURLs: [url])).results[url]
            ).get()

            let bob = try TestDevice("bob-phone", server: server, user: "bob", scope: .shared, directory: directory)
            try await bob.sync()
            let shared = RecordZone.ID(zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
            let n1 = Record.ID(recordName: "n1", zoneID: shared)
            #expect(bob.title(n1) == "Groceries")
            let zoneChanges = bob.events.compactMap { event -> SyncEngine.Event.FetchedDatabaseChanges? in
                if case .fetchedDatabaseChanges(let changes) = event { changes } else { nil }
            }
            #expect(zoneChanges.flatMap(\.modifications).map(\.zoneID) == [shared])

            try bob.write(n1, "Groceries and milk")
            try await bob.sync()
            #expect(bob.unacknowledgedEdits.isEmpty)
            try await alice.sync()
            #expect(alice.title(Record.ID(recordName: "n1", zoneID: notes)) == "Groceries and milk")

            // Removal: the owner saves the share without bob.
            let current = try await owner.fetchZoneChanges(zoneID: notes, since: nil).modifications
                .map(\.record).first { $0.recordType == Share.recordType }
            var kept = try Share(record: try #require(current))
            kept.removeParticipant(UserIdentity(emailAddress: "bob@example.com"))
            _ = try await owner.modifyRecords(saving: [kept.record], deleting: []).saveResults[kept.recordID]?.get()
            bob.clearEvents()
            try await bob.sync()
            let deletions = bob.events.compactMap { event -> SyncEngine.Event.FetchedDatabaseChanges? in
                if case .fetchedDatabaseChanges(let changes) = event { changes } else { nil }
            }.flatMap(\.deletions).map(\.zoneID)
            #expect(deletions == [shared])
            #expect(bob.title(n1) == nil)
        }
    }

    // Found by the sharing simulation's soak (seed 10167): the owner's app deleted a share, fetched
    // it again (a participant had accepted meanwhile) before sending the deletion, and kept it.
    @Test("F124 the owner's share, deleted and fetched again before the deletion is sent, stays deleted")
    func deletedShareStaysDeleted() async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory.appendingPathComponent("server"), durability: .fast))
            defer { server.shutdown() }
            try server.registerUser("bob", emailAddress: "bob@example.com")
            let notes = RecordZone.ID(zoneName: "Notes")
            let alice = try TestDevice("alice-phone", server: server, user: "alice", directory: directory)
            try alice.createZone(notes)
            var share = Share(recordZoneID: notes)
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            try alice.saveShare(share)
            try await alice.sync()
            let url = try #require(alice.shares[share.recordID]?.url)

            try alice.deleteShare(share.recordID)
            #expect(alice.shares.isEmpty)
            // bob accepts: the share record changes, and alice's fetch brings it before her deletion goes.
            _ = try #require(
                try await server.database(for: "bob", scope: .shared).acceptShares(AcceptSharesRequest(shareURLs: [url])).results[url]
            ).get()
            try await alice.engine.fetchChanges()
            #expect(alice.shares.isEmpty)
            try await alice.sync()
            #expect(alice.shares.isEmpty)
            let left = try await Simulation.contents(of: server.database(for: "alice", device: "observer")).shares
            #expect(left.isEmpty)
        }
    }
}
