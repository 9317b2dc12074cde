import Foundation
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

/// A participant's engine on the shared database works as an engine on a private one: the
/// shared zone appears as a fetched database change, its records arrive, the participant's edits
/// reach the owner, and removal shows up as a zone deletion (F118, F119, F121, F124, F125).
@Suite("A participant's engine on the shared database")
struct SharedEngineTests {
    /// Alice's phone writes n1 "Groceries" in her zone Notes and syncs; she shares the zone with
    /// bob (read-write), who accepts. Returns her device and the zone.
    static func aliceSharesNotesWithBob(
        _ server: SyncServer, _ directory: URL
    ) async throws -> (TestDevice, RecordZone.ID) {
        try server.registerUser("bob", emailAddress: "bob@example.com")
        let notes = RecordZone.ID(zoneName: "Notes")
        let alice = try TestDevice("alice-phone", server: server, user: "alice", directory: directory)
        try alice.createZone(notes)
        try alice.write(Record.ID(recordName: "n1", zoneID: notes), "Groceries")
        try await alice.sync()
        var share = Share(recordZoneID: notes)
        share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
        let saved = try await server.database(for: "alice", device: "admin").modifyRecords(
            saving: [share.record], deleting: [])
        let savedShare = try #require(saved.saveResults[share.recordID])
        let url = try #require(try Share(record: try savedShare.get()).url)
        _ = try #require(
            try await server.database(for: "bob", scope: .shared).acceptShares(AcceptSharesRequest(shareURLs: [url]))
                .results[url]
        ).get()
        return (alice, notes)
    }

    @Test("F119 F121 F124 a shared engine fetches the owner's zone, sends edits, and loses the zone on removal")
    func participantEngine() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (alice, notes) = try await Self.aliceSharesNotesWithBob(server, directory)
            let owner = server.database(for: "alice", device: "admin")

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

    @Test(
        "F118 F125 a device's private and shared engines side by side: tokens, pending changes, subscriptions and events never mix"
    )
    func privateAndSharedSideBySide() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (alice, notes) = try await Self.aliceSharesNotesWithBob(server, directory)

            // Bob's phone runs two engines, as an app does: one per database, each with its own log.
            let mine = RecordZone.ID(zoneName: "Notes")  // bob's own zone of the same name
            let privateEngine = try TestDevice("bob-phone-private", server: server, user: "bob", directory: directory)
            let sharedEngine = try TestDevice(
                "bob-phone-shared", server: server, user: "bob", scope: .shared, directory: directory)
            try privateEngine.createZone(mine)
            try privateEngine.write(Record.ID(recordName: "todo", zoneID: mine), "Call mum")
            try await privateEngine.sync()
            try await sharedEngine.sync()

            let sharedZone = RecordZone.ID(
                zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
            let n1 = Record.ID(recordName: "n1", zoneID: sharedZone)
            #expect(privateEngine.notes == [Record.ID(recordName: "todo", zoneID: mine): "Call mum"])
            #expect(sharedEngine.notes == [n1: "Groceries"])

            // A pending change of one engine is not the other's.
            try sharedEngine.write(n1, "Groceries and bread")
            #expect(try privateEngine.engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(try sharedEngine.engine.state.pendingRecordZoneChanges == [.saveRecord(n1)])

            // Each engine's events name only its own database's zones.
            func zones(_ device: TestDevice) -> Set<RecordZone.ID> {
                Set(
                    device.events.flatMap { event -> [RecordZone.ID] in
                        switch event {
                        case .fetchedDatabaseChanges(let changes):
                            changes.modifications.map(\.zoneID) + changes.deletions.map(\.zoneID)
                        case .fetchedRecordZoneChanges(let changes): changes.modifications.map(\.record.recordID.zoneID)
                        case .sentRecordZoneChanges(let sent): sent.savedRecords.map(\.recordID.zoneID)
                        case .sentDatabaseChanges(let sent): sent.savedZones.map(\.zoneID)
                        default: []
                        }
                    })
            }
            try await sharedEngine.sync()
            #expect(zones(privateEngine) == [mine])
            #expect(zones(sharedEngine) == [sharedZone])

            // Tokens are offsets of two different logs, kept apart; so are the subscriptions.
            let privateState = try privateEngine.engine.deviceLog.snapshotState()
            let sharedState = try sharedEngine.engine.deviceLog.snapshotState()
            #expect(privateState.knownZoneIDs == [mine])
            #expect(sharedState.knownZoneIDs == [sharedZone])
            #expect(privateState.zoneChangeTokens.map(\.zoneID) == [mine])
            #expect(sharedState.zoneChangeTokens.map(\.zoneID) == [sharedZone])
            let privateSubscriptions = try await server.database(for: "bob", scope: .private).allSubscriptions().map(
                \.subscriptionID)
            let sharedSubscriptions = try await server.database(for: "bob", scope: .shared).allSubscriptions().map(
                \.subscriptionID)
            #expect(privateState.subscriptionID.map { [$0] } ?? [] == privateSubscriptions)
            #expect(sharedState.subscriptionID.map { [$0] } ?? [] == sharedSubscriptions)

            // Alice sees bob's shared edit; bob's own zone stays his.
            try await alice.sync()
            #expect(alice.notes == [Record.ID(recordName: "n1", zoneID: notes): "Groceries and bread"])
        }
    }

    // Found by the sharing simulation's soak (seed 10167): the owner's app deleted a share, fetched
    // it again (a participant had accepted meanwhile) before sending the deletion, and kept it.
    @Test("F124 the owner's share, deleted and fetched again before the deletion is sent, stays deleted")
    func deletedShareStaysDeleted() async throws {
        try await withServer(shutsDown: true) { directory, server in
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
                try await server.database(for: "bob", scope: .shared).acceptShares(
                    AcceptSharesRequest(shareURLs: [url])
                ).results[url]
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
