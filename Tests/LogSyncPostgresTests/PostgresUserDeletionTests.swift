import Foundation
import LogStore
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Testing

/// Deleting a user on the PostgreSQL store (Docs/Protocol.md, "Admin API", "Users"): the rows of
/// their logs and asset contents go, their shares end for participants on either node, and
/// nothing of another user is touched.
@Suite("PostgreSQL user deletion")
struct PostgresUserDeletionTests {
    /// A note `name` in `zone`.
    static func note(_ name: String, in zone: String) -> Record {
        var record = Record(
            recordType: "Note", recordID: Record.ID(recordName: name, zoneID: RecordZone.ID(zoneName: zone)))
        record["text"] = .string(name)
        return record
    }

    @Test(
        "F124 a user deleted on one node: their rows and asset contents are gone, their share ends for a participant reading on the other node, they leave another's share, other users keep everything"
    )
    func deleteUser() async throws {
        try await PostgresStorageTests.withTwoNodes { directory, url, node1, node2 in
            for user in ["alice", "bob", "carol"] {
                try node1.registerUser(UserID(user), emailAddress: "\(user)@example.com")
            }
            let alice = node1.database(for: "alice", device: "phone")
            let bob = node2.database(for: "bob", device: "phone")
            let carol = node2.database(for: "carol", device: "phone")
            // alice's Notes, with an asset, shared with bob; bob's Trips shared with alice.
            _ = try await alice.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            let bytes = Array("a photo of alice's".utf8)
            let file = directory.appendingPathComponent("photo")
            try Data(bytes).write(to: file)
            let digest = AssetHasher.digest(of: bytes)
            _ = try await alice.uploadAsset(
                AssetUploadRequest(
                    zoneID: RecordZone.ID(zoneName: "Notes"), digest: digest, size: Int64(bytes.count), fileURL: file))
            var photo = Self.note("n1", in: "Notes")
            photo["photo"] = .asset(Asset(digest: digest, size: Int64(bytes.count)))
            _ = try await alice.modifyRecords(saving: [photo], deleting: [])
            let notes = try await Self.share("Notes", of: alice, with: "bob", participantNode: node2)
            _ = try await bob.modifyZones(saving: [RecordZone(zoneName: "Trips")], deleting: [])
            _ = try await Self.share("Trips", of: bob, with: "alice", participantNode: node1)
            _ = try await carol.modifyZones(saving: [RecordZone(zoneName: "Own")], deleting: [])
            _ = try await carol.modifyRecords(saving: [Self.note("c1", in: "Own")], deleting: [])
            let bobShared = node2.database(for: "bob", scope: .shared, device: "phone")
            let before = try await bobShared.fetchDatabaseChanges(since: nil)
            #expect(before.modifications.map(\.zoneID) == [notes])
            let aliceRecordName = try await alice.currentUserRecordID().recordName
            let number = try #require(UInt64(aliceRecordName.dropFirst("_user".count)))
            let logs = "SELECT count(*) FROM logsync_logs WHERE name LIKE 'u\(number)/%'"
            let assets = "SELECT count(*) FROM logsync_assets WHERE owner = \(number)"
            #expect(try await sqlValue(url, logs) >= 2)
            #expect(try await sqlValue(url, assets) == 1)
            let othersBefore = try await sqlValue(
                url,
                "SELECT count(*) FROM logsync_entries e JOIN logsync_logs l USING (log_id) WHERE l.name NOT LIKE 'u\(number)/%' AND l.name <> 'registry'"
            )

            #expect(try node1.deleteUser("alice"))

            #expect(try await sqlValue(url, logs) == 0)
            #expect(try await sqlValue(url, assets) == 0)
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks WHERE owner = \(number)") == 0)
            // bob, on the other node, sees alice's zone go as when an owner deletes a share.
            let after = try await bobShared.fetchDatabaseChanges(since: before.changeToken)
            #expect(after.deletions.map(\.zoneID) == [notes], "\(after)")
            // alice left bob's share.
            let trips = try await bob.fetchZoneChanges(zoneID: RecordZone.ID(zoneName: "Trips"), since: nil)
            let tripsShare = try Share(
                record: try #require(
                    trips.modifications.map(\.record).first {
                        $0.recordID.recordName == Share.zoneWideShareRecordName
                    }))
            let aliceInTrips = tripsShare.participants.filter { $0.userIdentity.userRecordName == aliceRecordName }
            #expect(aliceInTrips.map(\.acceptanceStatus) == [.removed], "\(tripsShare.participants)")
            // Nothing of bob's or carol's was lost: their logs only grew (the share's end, the leaving).
            let othersAfter = try await sqlValue(
                url,
                "SELECT count(*) FROM logsync_entries e JOIN logsync_logs l USING (log_id) WHERE l.name NOT LIKE 'u\(number)/%' AND l.name <> 'registry'"
            )
            #expect(othersAfter > othersBefore)
            let own = try await carol.fetchZoneChanges(zoneID: RecordZone.ID(zoneName: "Own"), since: nil)
            #expect(own.modifications.map(\.record.recordID.recordName) == ["c1"])
            #expect(try node2.userIdentity(forEmailAddress: "alice@example.com") == nil)
            #expect(try node2.users(limit: 10).map(\.user) == ["bob", "carol"])

            // Again: nothing to delete. Registered again (node 2 having forgotten her, as it does
            // on hearing her tokens' revocation), alice starts from nothing under a new number.
            #expect(try !node1.deleteUser("alice"))
            node2.forgetUser("alice")
            let fresh = node2.database(for: "alice", device: "phone")
            #expect(try await fresh.currentUserRecordID().recordName != aliceRecordName)
            #expect(try await fresh.fetchAllZones().map(\.zoneID) == [.default])
        }
    }

    /// Shares `zone` of `owner` whole with `participant` (invited by `<participant>@example.com`),
    /// who accepts on `participantNode`; the zone as the participant names it.
    static func share(
        _ zone: String, of owner: InProcessDatabase, with participant: UserID, participantNode: SyncServer
    ) async throws -> RecordZone.ID {
        var share = Share(recordZoneID: RecordZone.ID(zoneName: zone))
        share.addParticipant(
            Share.Participant(emailAddress: "\(participant.rawValue)@example.com", permission: .readWrite))
        let saved = try await owner.modifyRecords(saving: [share.record], deleting: [])
        let url = try #require(try Share(record: try saved.saveResults[share.record.recordID]!.get()).url)
        let accepted = try await participantNode.database(for: participant, scope: .shared).acceptShares(
            AcceptSharesRequest(shareURLs: [url]))
        _ = try accepted.results[url]!.get()
        return RecordZone.ID(zoneName: zone, ownerName: try await owner.currentUserRecordID().recordName)
    }
}
