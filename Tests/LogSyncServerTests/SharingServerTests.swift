import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

/// What the contract suite cannot see of sharing: the registry's e-mail addresses, the index of
/// shares and shared zones as a projection of the logs, and propagation's recovery.
@Suite("Sharing on the server (F119–F124)")
struct SharingServerTests {
    @Test("users are found by e-mail address (without case) and by user record name; an address has one user")
    func emailRegistry() async throws {
        try await withServer { server, directory in
            try server.registerUser("alice", emailAddress: "Alice@Example.com")
            try server.registerUser("bob")
            let alice = try #require(try server.userIdentity(forEmailAddress: "alice@example.COM"))
            #expect(alice.userRecordName == (try server.userRecordID(for: "alice").recordName))
            #expect(alice.emailAddress == "Alice@Example.com")
            #expect(try server.userIdentity(forUserRecordName: alice.userRecordName!) == alice)
            #expect(try server.userIdentity(forEmailAddress: "nobody@example.com") == nil)
            #expect(try server.userIdentity(forUserRecordName: "_user999") == nil)
            #expect(try server.userIdentity(forUserRecordName: "_user01") == nil)

            let taken = #expect(throws: SyncError.self) {
                try server.registerUser("bob", emailAddress: "ALICE@example.com")
            }
            #expect(taken?.code == .invalidArguments)
            #expect(taken?.message.contains("already belongs to another user") == true)
            let malformed = #expect(throws: SyncError.self) { try server.registerUser("bob", emailAddress: "bob") }
            #expect(malformed?.message.contains("invalid e-mail address \"bob\"") == true)

            // A new address replaces the old one, and both survive a reopening.
            try server.registerUser("alice", emailAddress: "alice@work.example")
            #expect(try server.userIdentity(forEmailAddress: "alice@example.com") == nil)
            server.shutdown()
            let reopened = try SyncServer(.init(directory: directory, durability: .fast))
            #expect(
                try reopened.userIdentity(forEmailAddress: "alice@work.example")?.userRecordName == alice.userRecordName
            )
        }
    }

    /// The projection rule on the logs sharing writes: the owner's index (shares, roots, URLs,
    /// wrapped zone keys) and each participant's (shared zones, device keys) built incrementally
    /// equal their rebuilds.
    @Test("the owner's and the participants' indexes equal their rebuilds after a sharing history")
    func projectionRule() async throws {
        try await withServer { server, _ in
            for user in ["bob", "carol"] as [UserID] {
                try server.registerUser(user, emailAddress: "\(user.rawValue)@example.com")
            }
            let alice = server.database(for: "alice", device: "phone")
            let bob = server.database(for: "bob", scope: .shared, device: "phone")
            let carol = server.database(for: "carol", scope: .shared, device: "phone")
            for name in ["A", "B"] {
                _ = try await alice.modifyZones(saving: [RecordZone(zoneName: name)], deleting: [])
            }
            var root = Record(
                recordType: "Folder", recordID: Record.ID(recordName: "root", zoneID: RecordZone.ID(zoneName: "B")))
            root["name"] = "root"
            _ = try await alice.modifyRecords(saving: [root], deleting: [])
            var zoneShare = Share(recordZoneID: RecordZone.ID(zoneName: "A"))
            zoneShare.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            zoneShare.addParticipant(Share.Participant(emailAddress: "carol@example.com"))
            var folderShare = Share(
                rootRecordID: root.recordID, shareID: Record.ID(recordName: "s", zoneID: root.recordID.zoneID))
            folderShare.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let saved = try await alice.modifyRecords(saving: [zoneShare.record, folderShare.record], deleting: [])
            let zoneURL = try Share(record: try #require(saved.saveResults[zoneShare.recordID]).get()).url!
            let folderURL = try Share(record: try #require(saved.saveResults[folderShare.recordID]).get()).url!
            let bobs = try await bob.acceptShares(AcceptSharesRequest(shareURLs: [zoneURL, folderURL]))
            #expect(bobs.results.values.allSatisfy { (try? $0.get()) != nil })
            _ = try #require(try await carol.acceptShares(AcceptSharesRequest(shareURLs: [zoneURL])).results[zoneURL])
                .get()
            let owner = try server.userRecordID(for: "alice").recordName
            let sharedA = RecordZone.ID(zoneName: "A", ownerName: owner)
            for index in 0..<5 {
                var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n\(index)", zoneID: sharedA))
                note["i"] = .int64(Int64(index))
                _ = try await bob.modifyRecords(saving: [note], deleting: [])
            }
            // Bob, a read-write participant, registers a key and wraps zone A's key for it and for
            // alice's (F129): entries of his private log and of alice's.
            let bobKey = DeviceKeyPair()
            let aliceKey = DeviceKeyPair()
            try await bob.registerDeviceKey(bobKey.publicKey)
            try await alice.registerDeviceKey(aliceKey.publicKey)
            let zoneKey = ZoneKey.generate(zoneID: sharedA, version: 1)
            let wraps = try await bob.saveZoneKeys(
                SaveZoneKeysRequest(keys: [bobKey, aliceKey].map { zoneKey.wrapped(for: $0.publicKey) }))
            #expect(wraps.results.values.allSatisfy { (try? $0.get()) != nil })
            _ = try await carol.modifyRecords(
                saving: [], deleting: [Record.ID(recordName: Share.zoneWideShareRecordName, zoneID: sharedA)])
            _ = try await bob.fetchDatabaseChanges(since: nil)
            _ = try await alice.modifyRecords(saving: [], deleting: [root.recordID])
            _ = try await alice.modifyZones(saving: [], deleting: [RecordZone.ID(zoneName: "A")])
            _ = try await carol.fetchDatabaseChanges(since: nil)

            for (user, scope) in [
                ("alice", DatabaseScope.private), ("bob", .private), ("bob", .shared), ("carol", .shared),
            ] as [(UserID, DatabaseScope)] {
                let log = try server.admin.log(of: user, scope: scope)
                let mismatch = try log.verifyProjections()
                #expect(mismatch == nil, "\(user)'s \(scope) database: \(String(describing: mismatch))")
            }
            #expect(try await bob.fetchAllZones().isEmpty)
            #expect(try await carol.fetchAllZones().isEmpty)
        }
    }

    /// A change the owner commits but does not propagate (as if the server stopped between the
    /// two commits) reaches the participant's feed at its next read: the owner's log is the truth.
    @Test("a change not yet propagated reaches the participant's feed at their next fetch")
    func propagationRecovers() async throws {
        try await withServer { server, _ in
            try server.registerUser("bob", emailAddress: "bob@example.com")
            let alice = server.database(for: "alice", device: "phone")
            let bob = server.database(for: "bob", scope: .shared, device: "phone")
            _ = try await alice.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            var share = Share(recordZoneID: RecordZone.ID(zoneName: "Notes"))
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let saved = try await alice.modifyRecords(saving: [share.record], deleting: [])
            let url = try Share(record: try #require(saved.saveResults.values.first).get()).url!
            _ = try await bob.acceptShares(AcceptSharesRequest(shareURLs: [url]))
            let token = try await bob.fetchDatabaseChanges(since: nil).changeToken

            // The owner's commit, appended without propagation.
            let store = try server.store("alice", .private)
            var note = Record(
                recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes")))
            note["title"] = "written while the participant's log was out of reach"
            _ = try store.write { _, next in
                ([ServerEntry.recordSaved(note.applyingTag(String(next)))], ())
            }
            let bobsLog = try server.admin.log(of: "bob", scope: .shared)
            let before = try bobsLog.lastOffset.rawValue

            let feed = try await bob.fetchDatabaseChanges(since: token)
            let owner = try server.userRecordID(for: "alice").recordName
            #expect(feed.modifications.map(\.zoneID) == [RecordZone.ID(zoneName: "Notes", ownerName: owner)])
            #expect(try bobsLog.lastOffset.rawValue == before + 1)
            guard let entry = try bobsLog.read({ try $0.entry(at: LogOffset(before + 1)) }),
                case .sharedZoneChanged = try ServerEntry(entry)
            else {
                Issue.record("the participant's log gained no sharedZoneChanged entry")
                return
            }
            // Coalesced: a second read adds nothing.
            _ = try await bob.fetchDatabaseChanges(since: token)
            #expect(try bobsLog.lastOffset.rawValue == before + 1)
        }
    }
}

extension Record {
    /// The record with the server's change tag `tag`, as an entry the server appends holds it.
    func applyingTag(_ tag: String) -> Record {
        var copy = self
        copy.applySystemFields(
            Record.SystemFields(
                recordChangeTag: tag, creationDate: Date(timeIntervalSince1970: 0),
                modificationDate: Date(timeIntervalSince1970: 0)))
        return copy
    }
}
