import ChildProcesses
import Foundation
import LogSyncHTTP
import SyncModel
import Testing

/// The admin API's user deletion under two `logsync-server` nodes on one PostgreSQL database:
/// the node that did not run it refuses the user's token, shows a participant the shared zone
/// gone, and forgets the user, so that the same ID registered again through it starts empty.
@Suite("Admin users across nodes", .timeLimit(.minutes(3)))
struct AdminNodeTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    @Test(
        "F124 a user deleted through node 1: node 2 refuses their token, their participant reading through node 2 sees the shared zone go, and the ID registered again through node 2 starts from nothing"
    )
    func deletedEverywhere() async throws {
        try await Cluster.with(store: try await MultiNodeTests.freshDatabase()) { cluster in
            let aliceToken = try await cluster.addUser("alice")
            let bobToken = try await cluster.addUser("bob")
            let adminFile = cluster.directory.appendingPathComponent("admin-tokens")
            let adminToken = try await ChildProcess.addAdminToken(to: adminFile, directory: cluster.directory)
            let options = ["--admin-token-file", adminFile.path]
            let node1 = try await cluster.startNode("node1", options: options)
            let node2 = try await cluster.startNode("node2", options: options)

            // alice, through node 2, shares her Notes with bob, who accepts through node 2.
            let alice = cluster.client(on: node2, token: aliceToken, device: "phone").database()
            _ = try await alice.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            try await RevocationTests.saveNote("n1", alice)
            var share = Share(recordZoneID: Self.notes)
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let saved = try await alice.modifyRecords(saving: [share.record], deleting: [])
            let url = try #require(try Share(record: try saved.saveResults[share.record.recordID]!.get()).url)
            let bobShared = cluster.client(on: node2, token: bobToken, device: "phone").database(.shared)
            _ = try await bobShared.acceptShares(AcceptSharesRequest(shareURLs: [url])).results[url]!.get()
            let before = try await bobShared.fetchDatabaseChanges(since: nil)
            #expect(before.modifications.count == 1)
            let aliceRecordName = try await alice.currentUserRecordID().recordName
            let aliceProbes = RevocationTests.probes(cluster, token: aliceToken, on: [node1, node2])
            #expect(try await RevocationTests.noneRefused(aliceProbes))

            try await AdminClient(serverURL: node1.url, adminToken: adminToken).deleteUser("alice")

            try await waitUntil("both nodes refuse alice's token") { try await RevocationTests.allRefused(aliceProbes) }
            let after = try await bobShared.fetchDatabaseChanges(since: before.changeToken)
            #expect(after.deletions.map(\.zoneID.zoneName) == ["Notes"], "\(after)")
            let number = aliceRecordName.dropFirst("_user".count)
            #expect(try logExtents(cluster.store).filter { $0.name.hasPrefix("u\(number)/") }.isEmpty)

            // Registered again through node 2, which had her open: a new user, nothing of the old.
            let admin2 = AdminClient(serverURL: node2.url, adminToken: adminToken)
            #expect(try await admin2.users().users.map(\.user) == ["bob"])
            try await admin2.createUser("alice")
            let tokens = try await admin2.mintSession(for: "alice", device: "phone")
            let again = cluster.client(on: node2, token: tokens.accessToken, device: "phone").database()
            #expect(try await again.currentUserRecordID().recordName != aliceRecordName)
            #expect(try await again.fetchAllZones().map(\.zoneID) == [.default])
        }
    }
}
