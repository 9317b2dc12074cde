import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Sharing between users (F119–F124): shares saved by their owner, accepted by participants,
/// used from the participants' shared databases, left, revoked and deleted.
@Suite("Sharing (F119–F124)", .timeLimit(.minutes(10)))
struct SharingTests {
    // F123, F119: the owner saves a zone-wide share in the private database; the server sets its
    // URL, the owner, and each invited participant's identity (from the e-mail address) as pending.
    @Test(
        "F119 F123 the owner saves a zone-wide share: URL, owner and pending participants set by the server",
        arguments: Harnesses.all)
    func ownerSavesShare(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, alice in
            try server.admin.registerUser("bob", emailAddress: "Bob@Example.com")
            let bob = try await server.device("bob", "phone", scope: .shared)
            var share = Share(recordZoneID: zoneID("Notes"))
            share.title = "Groceries"
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let saved = try await alice.saveShare(share)

            #expect(saved.isZoneWide)
            #expect(saved.title == "Groceries")
            let url = try #require(saved.url)
            #expect(url.absoluteString.hasPrefix("logsync://share/"))
            #expect(saved.owner?.userIdentity.userRecordName == (try await alice.userRecordName()))
            #expect(saved.owner?.acceptanceStatus == .accepted)
            let invited = try #require(saved.participant(userRecordName: try await bob.userRecordName()))
            #expect(invited.permission == .readWrite)
            #expect(invited.acceptanceStatus == .pending)
            #expect(invited.role == .privateUser)
            #expect(invited.userIdentity.emailAddress == "Bob@Example.com")
            // The zone reports its share, and the share is a record of the zone's feed.
            let zone = try #require(
                expectSuccess(try await alice.database.fetchZones([zoneID("Notes")]).results[zoneID("Notes")]))
            #expect(zone.share?.recordID == saved.recordID)
            #expect(try await alice.fetchZone("Notes").records[saved.recordID]?.recordType == Share.recordType)

            // Saving it again keeps the URL; adding a participant is a save of the share.
            try server.admin.registerUser("carol", emailAddress: "carol@example.com")
            var again = saved
            again.addParticipant(Share.Participant(emailAddress: "carol@example.com"))
            let resaved = try await alice.saveShare(again)
            #expect(resaved.url == url)
            #expect(resaved.participants.count == 3)
        }
    }

    // F119, F120: a participant reads the metadata from the URL, accepts, and the zone appears in
    // their shared database as a database-feed modification, its ID carrying the owner's name.
    @Test(
        "F119 F120 accepting puts the zone in the participant's shared database under the owner's name",
        arguments: Harnesses.all)
    func acceptance(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, alice in
            try await alice.save(newRecord("n1", ["title": "Groceries"]))
            try server.admin.registerUser("bob", emailAddress: "bob@example.com")
            var share = Share(recordZoneID: zoneID("Notes"))
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let url = try #require(try await alice.saveShare(share).url)
            let bob = try await server.device("bob", "phone", scope: .shared)
            let before = try await bob.fetchDatabase()
            #expect(before.isEmpty)

            let metadata = try await bob.sharing.fetchShareMetadata(url: url)
            let owner = try await alice.userRecordName()
            let shared = RecordZone.ID(zoneName: "Notes", ownerName: owner)
            #expect(metadata.share.zoneID == shared)
            #expect(metadata.ownerIdentity.userRecordName == owner)
            #expect(metadata.participantRole == .privateUser)
            #expect(metadata.participantPermission == .readWrite)
            #expect(metadata.participantStatus == .pending)
            #expect(metadata.hierarchicalRootRecordID == nil)

            let accepted = try await bob.accept(url)
            #expect(accepted.participant(userRecordName: try await bob.userRecordName())?.acceptanceStatus == .accepted)
            let changes = try await bob.fetchDatabase(since: before.token)
            #expect(changes.netModified == [shared])
            #expect(try await bob.database.fetchAllZones().map(\.zoneID) == [shared])
            let fetched = try await bob.fetchZone(shared)
            #expect(fetched.records[Record.ID(recordName: "n1", zoneID: shared)]?["title"] == "Groceries")
            #expect(fetched.records[Record.ID(recordName: Share.zoneWideShareRecordName, zoneID: shared)] != nil)
            // The owner sees the acceptance; accepting again changes nothing.
            let ownersCopy = try Share(
                record: try #require(try await alice.fetchRecord(accepted.recordID.renamed(to: zoneID("Notes")))))
            #expect(
                ownersCopy.participant(userRecordName: try await bob.userRecordName())?.acceptanceStatus == .accepted)
            let token = try server.currentToken(of: "alice")
            try await bob.accept(url)
            #expect(try server.currentToken(of: "alice") == token)
        }
    }

    // F121: a read-write participant's saves and deletions reach the owner, authored by the
    // participant; a stale save conflicts exactly as between two devices of one user.
    @Test(
        "F121 a read-write participant writes; the owner sees it; conflicts as between two devices",
        arguments: Harnesses.all)
    func participantWrites(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let bob = try #require(notes.participants["bob"])
            let fetched = try await bob.fetchZone(notes.zoneID)
            let n1 = try #require(fetched.records[notes.recordID("n1")])

            let saved = try await bob.save(n1.setting(["title": "Groceries and milk"]))
            #expect(saved.recordID == notes.recordID("n1"))
            #expect(
                saved.lastModifiedUserRecordID?.recordName == (try await bob.database.currentUserRecordID().recordName))
            let ownerCopy = try #require(try await notes.alice.fetchRecord(recordID("n1")))
            #expect(ownerCopy["title"] == "Groceries and milk")
            #expect(ownerCopy.lastModifiedUserRecordID?.recordName == (try await bob.userRecordName()))
            try await bob.save(newRecord(notes.recordID("n2"), ["title": "from bob"]))
            #expect(try await notes.alice.fetchRecord(recordID("n2"))?["title"] == "from bob")

            // The owner edits n1; bob's edit from the older copy conflicts with the owner's.
            try await notes.alice.save(ownerCopy.setting(["title": "alice's"]))
            let conflict = expectFailure(
                try await bob.attemptSave(saved.setting(["title": "bob's"])), .serverRecordChanged)
            #expect(conflict?.serverRecord?["title"] == "alice's")
            #expect(conflict?.serverRecord?.recordID == notes.recordID("n1"))

            try await bob.delete(notes.recordID("n2"))
            #expect(try await notes.alice.fetchRecord(recordID("n2")) == nil)
        }
    }

    // F121: a read-only participant reads, and every write fails per item with
    // permissionFailure; nothing changes in the owner's database.
    @Test(
        "F121 a read-only participant's writes get permissionFailure per item, nothing changed",
        arguments: Harnesses.all)
    func readOnlyParticipant(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("carol", .readOnly)]) { notes in
            let carol = try #require(notes.participants["carol"])
            let n1 = try #require(try await carol.fetchZone(notes.zoneID).records[notes.recordID("n1")])
            let before = try notes.server.currentToken(of: "alice")

            let response = try await carol.modify(
                saving: [n1.setting(["title": "carol's"]), newRecord(notes.recordID("c1"))], atomically: false)
            expectFailure(response.saveResults[notes.recordID("n1")], .permissionFailure)
            expectFailure(response.saveResults[notes.recordID("c1")], .permissionFailure)
            let deletion = try await carol.modify(deleting: [notes.recordID("n1")])
            expectFailure(deletion.deleteResults[notes.recordID("n1")], .permissionFailure)
            #expect(try notes.server.currentToken(of: "alice") == before)
            #expect(try await notes.alice.fetchRecord(recordID("n1"))?["title"] == "Groceries")
        }
    }

    // F122: a participant's saves count against the owner's quota, not their own.
    @Test("F122 a participant's writes are charged to the owner's quota", arguments: Harnesses.all)
    func ownersQuota(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let bob = try #require(notes.participants["bob"])
            notes.server.admin.setQuota(0, for: "bob")
            try await bob.save(newRecord(notes.recordID("small"), ["k": "v"]))
            notes.server.admin.setQuota(3_000, for: "alice")
            let big = newRecord(notes.recordID("big"), ["k": .bytes(Data(count: 5_000))])
            expectFailure(try await bob.attemptSave(big), .quotaExceeded)
            notes.server.admin.setQuota(nil, for: "alice")
            try await bob.save(big)
        }
    }

    // F120: a participant cannot create or delete zones in the shared database, not even the
    // shared zone.
    @Test("F120 participants cannot create or delete zones in the shared database", arguments: Harnesses.all)
    func noZonesInSharedDatabase(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let bob = try #require(notes.participants["bob"])
            expectFailure(try await bob.attemptCreateZone(RecordZone.ID(zoneName: "Mine")), .badDatabase)
            expectFailure(try await bob.attemptCreateZone(notes.zoneID), .badDatabase)
            expectFailure(try await bob.attemptDeleteZone(notes.zoneID), .badDatabase)
            #expect(try await notes.alice.fetchZone("Notes").records[recordID("n1")] != nil)
        }
    }

    // F123: a zone is shared whole or by hierarchies, and a record belongs to one share at most.
    @Test("F123 a record or zone belongs to at most one share (alreadyShared)", arguments: Harnesses.all)
    func oneSharePerItem(harness: any ContractHarness) async throws {
        try await withPhone(harness) { _, alice in
            try await alice.createZone("Whole")
            try await alice.createZone("Parts")
            try await alice.saveShare(Share(recordZoneID: zoneID("Whole")))
            try await alice.save(newRecord("w1", in: "Whole"))
            expectFailure(
                try await alice.attemptSave(Share(rootRecordID: recordID("w1", in: "Whole")).record), .alreadyShared)

            var folder = newRecord("folder", in: "Parts", type: "Folder")
            try await alice.save(folder)
            folder = newRecord("child", in: "Parts")
            folder.parent = Record.Reference(recordID: recordID("folder", in: "Parts"))
            try await alice.save(folder)
            try await alice.saveShare(Share(rootRecordID: recordID("folder", in: "Parts")))
            expectFailure(
                try await alice.attemptSave(Share(rootRecordID: recordID("folder", in: "Parts")).record), .alreadyShared
            )
            expectFailure(
                try await alice.attemptSave(Share(rootRecordID: recordID("child", in: "Parts")).record), .alreadyShared)
            expectFailure(try await alice.attemptSave(Share(recordZoneID: zoneID("Parts")).record), .alreadyShared)
            // The default zone is never shared.
            try await alice.save(newRecord(Record.ID(recordName: "d1")))
            expectFailure(
                try await alice.attemptSave(Share(rootRecordID: Record.ID(recordName: "d1")).record), .invalidArguments)
            // The reserved name is a zone-wide share's only.
            expectFailure(
                try await alice.attemptSave(newRecord(Share.zoneWideShareRecordName, in: "Parts")), .invalidArguments)
        }
    }

    // F123: a share holds at most 100 participants, its owner included; a save that would hold
    // more fails alone with tooManyParticipants, and the share stays as it was.
    @Test(
        "F123 a share holds at most 100 participants, its owner included (tooManyParticipants)",
        arguments: Harnesses.all)
    func participantLimit(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, alice in
            let addresses = (0..<100).map { "guest\($0)@example.com" }
            for (number, address) in addresses.enumerated() {
                try server.admin.registerUser(UserID("guest\(number)"), emailAddress: address)
            }
            func invited(_ share: Share, _ addresses: some Sequence<String>) -> Share {
                var share = share
                for address in addresses {
                    share.addParticipant(Share.Participant(emailAddress: address, permission: .readOnly))
                }
                return share
            }
            // 99 guests and the owner: the limit exactly.
            let saved = try await alice.saveShare(invited(Share(recordZoneID: zoneID("Notes")), addresses.prefix(99)))
            #expect(saved.participants.count == 100)

            // One more fails alone: the note saved in the same request is saved.
            let note = newRecord("n1")
            let response = try await alice.modify(
                saving: [invited(saved, addresses.suffix(1)).record, note], atomically: false)
            let failure = expectFailure(response.saveResults[saved.recordID], .tooManyParticipants)
            #expect(failure?.message.contains("101 participants") == true)
            guard case .success? = response.saveResults[note.recordID] else {
                Issue.record(
                    "the note beside the refused share was not saved: \(String(describing: response.saveResults[note.recordID]))"
                )
                return
            }
            let kept = try Share(record: try #require(try await alice.fetchRecord(saved.recordID)))
            #expect(kept.participants.count == 100)
            #expect(kept.record.recordChangeTag == saved.record.recordChangeTag)

            // A new share over the limit is not saved at all.
            try await alice.createZone("Crowd")
            expectFailure(
                try await alice.attemptSave(invited(Share(recordZoneID: zoneID("Crowd")), addresses).record),
                .tooManyParticipants)
            #expect(try await alice.fetchRecord(Share(recordZoneID: zoneID("Crowd")).recordID) == nil)

            // Removing a guest makes room for another.
            var swapped = kept
            swapped.removeParticipant(UserIdentity(emailAddress: addresses[0]))
            swapped = invited(swapped, [addresses[99]])
            #expect(try await alice.saveShare(swapped).participants.count == 100)
        }
    }

    // F124: the participant leaves by deleting the share from their shared database: the zone
    // is a deletion in their feed, for every token issued before, and the owner's share says so.
    @Test("F124 F119 leaving: the zone is a deletion for every earlier token", arguments: Harnesses.all)
    func leaving(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let bob = try #require(notes.participants["bob"])
            let joined = try await bob.fetchDatabase()
            #expect(joined.netModified == [notes.zoneID])
            let zoneToken = try await bob.fetchZone(notes.zoneID).token
            try await bob.save(newRecord(notes.recordID("b1")))
            let later = try await bob.fetchDatabase(since: joined.token)

            try await bob.delete(notes.shareID)

            for token in [nil, joined.token, later.token] {
                let feed = try await bob.fetchDatabase(since: token)
                #expect(feed.netDeleted.keys.contains(notes.zoneID) || (token == nil && feed.netModified.isEmpty))
                #expect(!feed.netModified.contains(notes.zoneID))
            }
            await expectThrows(.zoneNotFound) { try await bob.fetchZone(notes.zoneID, since: zoneToken) }
            #expect(try await bob.database.fetchAllZones().isEmpty)
            let share = try Share(record: try #require(try await notes.alice.fetchRecord(notes.share.recordID)))
            #expect(share.participant(userRecordName: try await bob.userRecordName())?.acceptanceStatus == .removed)
            // The records stay the owner's.
            #expect(try await notes.alice.fetchRecord(recordID("b1")) != nil)
            expectFailure(try await bob.attemptAccept(notes.url), .unknownItem)
        }
    }

    // F124: the owner removes a participant by saving the share without them: their feed shows
    // the zone deleted, their old tokens give no new data, and they cannot accept again.
    @Test("F124 the owner removing a participant deletes the zone from their feed", arguments: Harnesses.all)
    func removal(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite), ("carol", .readOnly)]) { notes in
            let bob = try #require(notes.participants["bob"])
            let carol = try #require(notes.participants["carol"])
            let bobsFeed = try await bob.fetchDatabase()
            let bobsZone = try await bob.fetchZone(notes.zoneID).token

            var share = notes.share
            share.removeParticipant(UserIdentity(userRecordName: try await bob.userRecordName()))
            try await notes.alice.saveShare(share)
            try await notes.alice.save(newRecord("after", ["secret": "not for bob"]))

            let feed = try await bob.fetchDatabase(since: bobsFeed.token)
            #expect(feed.netDeleted.keys.contains(notes.zoneID))
            #expect(feed.modified.isEmpty)
            await expectThrows(.zoneNotFound) { try await bob.fetchZone(notes.zoneID, since: bobsZone) }
            expectFailure(try await bob.attemptSave(newRecord(notes.recordID("b2"))), .zoneNotFound)
            expectFailure(try await bob.attemptAccept(notes.url), .unknownItem)
            // Carol is still in.
            #expect(
                try await carol.fetchZone(notes.zoneID).records[notes.recordID("after")]?["secret"] == "not for bob")
        }
    }

    // F124: the owner deletes the share: every participant's feed shows the zone deleted, and
    // the URL finds nothing.
    @Test("F124 the owner deleting the share deletes the zone from every participant's feed", arguments: Harnesses.all)
    func shareDeleted(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite), ("carol", .readOnly)]) { notes in
            var tokens: [UserID: DatabaseChangeToken] = [:]
            for (user, device) in notes.participants { tokens[user] = try await device.fetchDatabase().token }

            try await notes.alice.delete(notes.share.recordID)

            for (user, device) in notes.participants {
                let feed = try await device.fetchDatabase(since: tokens[user])
                #expect(feed.netDeleted.keys.contains(notes.zoneID), "\(user)")
                await expectThrows(.zoneNotFound) { try await device.fetchZone(notes.zoneID) }
                await expectThrows(.unknownItem) { try await device.sharing.fetchShareMetadata(url: notes.url) }
            }
            #expect(try await notes.alice.fetchRecord(recordID("n1")) != nil)
        }
    }

    // F124, F119: the owner deleting the shared zone removes it from participants too.
    @Test("F124 the owner deleting the zone deletes it from participants' feeds", arguments: Harnesses.all)
    func zoneDeleted(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let bob = try #require(notes.participants["bob"])
            let token = try await bob.fetchDatabase().token
            try await notes.alice.deleteZone("Notes")
            #expect(try await bob.fetchDatabase(since: token).netDeleted.keys.contains(notes.zoneID))
            await expectThrows(.zoneNotFound) { try await bob.fetchZone(notes.zoneID) }
        }
    }

    // F121: a participant's write hints the owner's and the other participants' subscribed
    // devices; the owner's write hints the participants.
    @Test("F121 push hints reach every participant and the owner", arguments: Harnesses.all)
    func pushToEveryone(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite), ("carol", .readOnly)]) { notes in
            let bob = try #require(notes.participants["bob"])
            let carol = try #require(notes.participants["carol"])
            try await notes.alice.subscribe()
            try await bob.subscribe()
            try await carol.subscribe()
            let aliceHints = await notes.alice.listen()
            let carolHints = await carol.listen()
            let bobHints = await bob.listen()

            try await bob.save(newRecord(notes.recordID("b1")))
            let toAlice = try await aliceHints.next()
            #expect(toAlice.databaseScope == .private)
            #expect(hint(toAlice, isFor: try notes.server.currentToken(of: "alice"), in: zoneID("Notes")))
            let toCarol = try await carolHints.next()
            #expect(toCarol.databaseScope == .shared)
            if let zone = toCarol.zoneID { #expect(zone == notes.zoneID) }
            if let token = toCarol.changeToken {
                #expect(token == (try notes.server.currentToken(of: "carol", scope: .shared)))
            }

            try await notes.alice.save(newRecord("a1"))
            let toBob = try await bobHints.next()
            #expect(toBob.databaseScope == .shared)
            if let zone = toBob.zoneID { #expect(zone == notes.zoneID) }
            #expect(try await bob.fetchZone(notes.zoneID).records[notes.recordID("a1")] != nil)
        }
    }

    // A user the zone is not shared with learns nothing: every read and write of a zone named
    // with another user's name gets the same zoneNotFound whether or not the zone (or the owner)
    // exists, and a share URL not open to them the same unknownItem as a URL of no share.
    @Test("a non-participant learns nothing, not even that the zone exists", arguments: Harnesses.all)
    func nonParticipant(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let eve = try await notes.server.device("eve", "laptop", scope: .shared)
            let owner = notes.ownerName
            let zones = [
                notes.zoneID,  // exists, shared with bob
                RecordZone.ID(zoneName: "Nothing", ownerName: owner),  // no such zone
                RecordZone.ID(zoneName: "Notes", ownerName: "_user999"),  // no such owner
            ]
            func normalised(_ error: SyncError?, _ zoneID: RecordZone.ID) -> String? {
                error.map { "\($0.code) " + $0.message.replacingOccurrences(of: "\(zoneID)", with: "<zone>") }
            }
            var answers = Set<String?>()
            for zoneID in zones {
                let fetch = await expectThrows(.zoneNotFound) { try await eve.fetchZone(zoneID) }
                answers.insert(normalised(fetch, zoneID))
                let record = Record.ID(recordName: "n1", zoneID: zoneID)
                let write = try await eve.modify(saving: [newRecord(record)], deleting: [])
                answers.insert(
                    normalised(expectFailure(write.saveResults[record], .zoneNotFound), zoneID).map { "write " + $0 })
                let zone = try await eve.database.fetchZones([zoneID]).results[zoneID]
                answers.insert(normalised(expectFailure(zone, .zoneNotFound), zoneID).map { "zone " + $0 })
            }
            #expect(answers.count == 3, "\(answers)")
            #expect(try await eve.fetchDatabase().isEmpty)

            // The URL of a private share tells nothing either.
            let unknown = URL(string: notes.url.absoluteString.dropLast(4) + "0000")!
            let kept = await expectThrows(.unknownItem) { try await eve.sharing.fetchShareMetadata(url: notes.url) }
            let none = await expectThrows(.unknownItem) { try await eve.sharing.fetchShareMetadata(url: unknown) }
            #expect(
                kept?.message.replacingOccurrences(of: notes.url.absoluteString, with: "<url>")
                    == none?.message.replacingOccurrences(of: unknown.absoluteString, with: "<url>"))
        }
    }

    // Bad input: a malformed URL is invalidArguments naming it, an unknown or revoked one
    // unknownItem naming it; neither changes anything.
    @Test(
        "accepting a malformed, unknown or revoked share URL: a typed error naming it, nothing changed",
        arguments: Harnesses.all)
    func badURLs(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            try notes.server.admin.registerUser("dave", emailAddress: "dave@example.com")
            let dave = try await notes.server.device("dave", "phone", scope: .shared)
            var share = notes.share
            share.addParticipant(Share.Participant(emailAddress: "dave@example.com"))
            share = try await notes.alice.saveShare(share)
            share.removeParticipant(UserIdentity(emailAddress: "dave@example.com"))
            try await notes.alice.saveShare(share)  // revoked for dave

            let malformed = [
                URL(string: "https://example.com/share/1/abc")!, URL(string: "logsync://share/1")!,
                URL(string: "logsync://share/x/0123456789abcdef0123456789abcdef")!,
                URL(string: "logsync://share/01/0123456789abcdef0123456789abcdef")!,
            ]
            let unknown = [
                URL(string: "logsync://share/1/0123456789abcdef0123456789abcdef")!,
                URL(string: "logsync://share/999/0123456789abcdef0123456789abcdef")!,
            ]
            let ownerToken = try notes.server.currentToken(of: "alice")
            let daveToken = try notes.server.currentToken(of: "dave", scope: .shared)
            for url in malformed {
                let error = expectFailure(try await dave.attemptAccept(url), .invalidArguments)
                #expect(error?.message.contains(url.absoluteString) == true)
            }
            for url in unknown + [notes.url] {
                let error = expectFailure(try await dave.attemptAccept(url), .unknownItem)
                #expect(error?.message.contains(url.absoluteString) == true)
                await expectThrows(.unknownItem) { try await dave.sharing.fetchShareMetadata(url: url) }
            }
            #expect(try notes.server.currentToken(of: "alice") == ownerToken)
            #expect(try notes.server.currentToken(of: "dave", scope: .shared) == daveToken)
            #expect(try await dave.fetchDatabase().isEmpty)
        }
    }

    // F123, F119: a hierarchy share shares its root and the records reaching it through parent
    // references, and nothing else of the zone.
    @Test("F123 a hierarchy share shows and lets write its root and descendants only", arguments: Harnesses.all)
    func hierarchyShare(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, alice in
            func child(_ name: String, of parent: String?) -> Record {
                var record = newRecord(name)
                record.parent = parent.map { Record.Reference(recordID: recordID($0)) }
                return record
            }
            try await alice.save([
                child("folder", of: nil), child("a", of: "folder"), child("b", of: "a"), child("x", of: nil),
            ])
            try server.admin.registerUser("bob", emailAddress: "bob@example.com")
            var share = Share(rootRecordID: recordID("folder"), shareID: recordID("folder-share"))
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let url = try #require(try await alice.saveShare(share).url)
            let bob = try await server.device("bob", "phone", scope: .shared)
            let metadata = try await bob.sharing.fetchShareMetadata(url: url)
            let shared = RecordZone.ID(zoneName: "Notes", ownerName: try await alice.userRecordName())
            func id(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: shared) }
            #expect(metadata.hierarchicalRootRecordID == id("folder"))
            try await bob.accept(url)

            let visible = try await bob.fetchZone(shared)
            #expect(Set(visible.records.keys) == [id("folder-share"), id("folder"), id("a"), id("b")])
            var c = newRecord(id("c"))
            c.parent = Record.Reference(recordID: id("b"))
            try await bob.save(c)
            let outside = expectFailure(try await bob.attemptSave(newRecord(id("loose"))), .permissionFailure)
            let existingOutside = expectFailure(
                try await bob.attemptSave(newRecord(id("x")), savePolicy: .changedKeys), .permissionFailure)
            #expect(
                outside?.message.replacingOccurrences(of: "loose", with: "?")
                    == existingOutside?.message.replacingOccurrences(of: "\"x\"", with: "\"?\""))
            let deletion = try await bob.modify(deleting: [id("x")])
            expectFailure(deletion.deleteResults[id("x")], .permissionFailure)
            #expect(try await alice.fetchRecord(recordID("x")) != nil)
            #expect(try await alice.fetchRecord(recordID("c")) != nil)

            // Deleting the root deletes the share: the zone leaves bob's database.
            let token = try await bob.fetchDatabase().token
            try await alice.delete(recordID("folder"))
            #expect(try await bob.fetchDatabase(since: token).netDeleted.keys.contains(shared))
            expectFailure(try await bob.attemptAccept(url), .unknownItem)
        }
    }

    // F123: a record moved out of a shared hierarchy leaves it with its descendants: its
    // participants are told they were deleted, and their later changes never reach them.
    // F123, F100: the share re-keys the rows of folder and a in the zone's feed to its own
    // offset, after x's save; the owner's listing in pages of one record ends its first page at
    // x, between their saves and the share, and still holds every record.
    @Test(
        "F123 F100 the owner's listing in pages of one record holds the records of a hierarchy shared after them",
        arguments: Harnesses.all)
    func ownerListingAfterHierarchyShared(harness: any ContractHarness) async throws {
        try await withSharedFolders(
            harness, records: [("folder", nil), ("a", "folder"), ("x", nil)],
            shares: [("folder", [("bob", .readWrite)])]
        ) { notes in
            let listed = try await notes.alice.fetchZone("Notes", resultsLimit: 1)
            #expect(Set(listed.records.keys) == Set(["folder", "a", "x", "folder-share"].map { recordID($0) }))
            #expect(listed.deletedIDs.isEmpty)
        }
    }

    @Test(
        "F123 a record moved out of a shared hierarchy is a deletion for its participants, then out of their reach",
        arguments: Harnesses.all)
    func movedOutOfHierarchy(harness: any ContractHarness) async throws {
        try await withSharedFolders(
            harness, records: [("folder", nil), ("a", "folder"), ("a2", "a"), ("b", "folder"), ("x", nil)],
            shares: [("folder", [("bob", .readWrite)])]
        ) { notes in
            let alice = notes.alice
            let bob = notes.participants["bob"]!
            let before = try await bob.fetchZone(notes.zoneID)
            #expect(
                Set(before.records.keys)
                    == Set(["folder-share", "folder", "a", "a2", "b"].map(notes.recordID)))

            // Alice moves a (and a2 under it) out, under x.
            var a = try #require(try await alice.fetchRecord(recordID("a")))
            a.parent = Record.Reference(recordID: recordID("x"))
            try await alice.save(a)
            let moved = try await bob.fetchZone(notes.zoneID, since: before.token)
            #expect(Set(moved.deletedIDs) == [notes.recordID("a"), notes.recordID("a2")])
            #expect(moved.modifiedIDs.isEmpty)
            // The move is one change: pages of one record do not split it.
            let paged = try await bob.fetchZone(notes.zoneID, since: before.token, resultsLimit: 1)
            #expect(
                paged.deletedIDs.sorted { $0.recordName < $1.recordName } == [
                    notes.recordID("a"), notes.recordID("a2"),
                ])

            // Their later changes reach alice only (a2's change is the same deletion again for
            // bob, never its content); bob can no longer write them.
            try await alice.save(try #require(try await alice.fetchRecord(recordID("a2"))).setting(["title": "later"]))
            try await alice.save(child("a3", of: "a"))
            let later = try await bob.fetchZone(notes.zoneID, since: moved.token)
            #expect(later.modifiedIDs.isEmpty)
            #expect(Set(later.deletedIDs).isSubset(of: [notes.recordID("a2")]))
            #expect(
                Set(try await bob.fetchZone(notes.zoneID).records.keys)
                    == Set(["folder-share", "folder", "b"].map(notes.recordID)))
            expectFailure(
                try await bob.attemptSave(child("a4", of: "a", in: notes.zoneID)), .permissionFailure)
            expectFailure(
                try await bob.attemptSave(
                    newRecord(notes.recordID("a2"), ["title": "bob's"]), savePolicy: .changedKeys),
                .permissionFailure)

            // Moved back, a and its descendants are bob's again: new records in his feed.
            a = try #require(try await alice.fetchRecord(recordID("a")))
            a.parent = Record.Reference(recordID: recordID("b"))
            try await alice.save(a)
            let back = try await bob.fetchZone(notes.zoneID, since: later.token)
            #expect(Set(back.modifiedIDs) == Set(["a", "a2", "a3"].map(notes.recordID)))
            #expect(back.records[notes.recordID("a2")]?["title"] == "later")
            #expect(back.deletedIDs.isEmpty)
        }
    }

    // F123: a participant whose token passes a move's offset only after the moved record
    // changed again (its row re-keyed past the move) still gets the deletion, as does one whose
    // record was deleted in the hierarchy and saved again outside it before they fetched.
    @Test(
        "F123 a record that left a hierarchy and changed again before a participant fetched is a deletion for them",
        arguments: Harnesses.all)
    func leftAndChangedBeforeTheFetch(harness: any ContractHarness) async throws {
        try await withSharedFolders(
            harness, records: [("folder", nil), ("a", "folder"), ("d", "folder"), ("x", nil)],
            shares: [("folder", [("bob", .readWrite)])]
        ) { notes in
            let alice = notes.alice
            let bob = notes.participants["bob"]!
            let before = try await bob.fetchZone(notes.zoneID)
            #expect(Set(before.records.keys) == Set(["folder-share", "folder", "a", "d"].map(notes.recordID)))

            // Alice moves a out, saves b into the folder, then changes a again, outside; and
            // deletes d, then saves a new d outside the folder.
            var a = try #require(try await alice.fetchRecord(recordID("a")))
            a.parent = Record.Reference(recordID: recordID("x"))
            a = try await alice.save(a)
            try await alice.save(child("b", of: "folder"))
            try await alice.save(a.setting(["title": "changed outside"]))
            try await alice.delete(recordID("d"))
            try await alice.save(child("d", of: nil))

            // Bob fetches in pages of one: the page holding b ends past a's move.
            let paged = try await bob.fetchZone(notes.zoneID, since: before.token, resultsLimit: 1)
            #expect(Set(paged.deletions.keys) == [notes.recordID("a"), notes.recordID("d")])
            #expect(Set(paged.records.keys) == [notes.recordID("b")])
            #expect(
                Set(try await bob.fetchZone(notes.zoneID).records.keys)
                    == Set(["folder-share", "folder", "b"].map(notes.recordID)))
        }
    }

    // F123: a record moved from one shared hierarchy into another leaves the first one's
    // participants as a deletion and reaches the second one's as a new record, descendants too.
    @Test("F123 a record moved into another shared hierarchy appears to its participants", arguments: Harnesses.all)
    func movedIntoAnotherHierarchy(harness: any ContractHarness) async throws {
        try await withSharedFolders(
            harness, records: [("work", nil), ("home", nil), ("plan", "work"), ("step", "plan"), ("loose", nil)],
            shares: [("work", [("bob", .readWrite)]), ("home", [("carol", .readOnly)])]
        ) { notes in
            let bob = notes.participants["bob"]!
            let carol = notes.participants["carol"]!
            let bobBefore = try await bob.fetchZone(notes.zoneID)
            let carolBefore = try await carol.fetchZone(notes.zoneID)
            #expect(Set(carolBefore.records.keys) == Set(["home-share", "home"].map(notes.recordID)))

            var plan = try #require(try await notes.alice.fetchRecord(recordID("plan")))
            plan.parent = Record.Reference(recordID: recordID("home"))
            try await notes.alice.save(plan)
            let bobAfter = try await bob.fetchZone(notes.zoneID, since: bobBefore.token)
            #expect(Set(bobAfter.deletedIDs) == [notes.recordID("plan"), notes.recordID("step")])
            let carolAfter = try await carol.fetchZone(notes.zoneID, since: carolBefore.token)
            #expect(Set(carolAfter.modifiedIDs) == [notes.recordID("plan"), notes.recordID("step")])
            #expect(carolAfter.records[notes.recordID("step")]?["title"] == "step")
            #expect(carolAfter.deletedIDs.isEmpty)

            // A record never shared with bob that joins no hierarchy of his stays unknown to him.
            var loose = try #require(try await notes.alice.fetchRecord(recordID("loose")))
            loose.parent = Record.Reference(recordID: recordID("home"))
            try await notes.alice.save(loose)
            let unrelated = try await bob.fetchZone(notes.zoneID, since: bobAfter.token)
            #expect(unrelated.modifiedIDs.isEmpty && unrelated.deletedIDs.isEmpty)

            // The owner's feed holds each record once, however it moved.
            let owner = try await notes.alice.fetchZone("Notes")
            #expect(owner.records.count == 7)
            #expect(owner.modifiedIDs.count == 7)
        }
    }

    // F123, F121: a read-write participant saves a new record and its new child in one request,
    // in either order: the child is judged where the request puts its parent.
    // F124: deleting a root deletes its share, so no request may leave a share rooted at a
    // deleted record: an owner's request that saves a share and deletes its root refuses the
    // share, and a read-write participant who leaves a share and deletes its root in one request
    // deletes the share with the root.
    @Test("F124 a share never outlives its root when one request names both", arguments: Harnesses.all)
    func shareAndRootInOneRequest(harness: any ContractHarness) async throws {
        try await withSharedFolders(
            harness, records: [("folder", nil), ("a", "folder"), ("other", nil)],
            shares: [("folder", [("bob", .readWrite)])]
        ) { notes in
            let share = Share(rootRecordID: recordID("other"), shareID: recordID("other-share"))
            let owners = try await notes.alice.modify(
                saving: [share.record], deleting: [recordID("other")], atomically: false)
            expectFailure(owners.saveResults[recordID("other-share")], .referenceViolation)
            _ = try requireSuccess(owners.deleteResults[recordID("other")], "deleting the root")
            #expect(try await notes.alice.fetchRecord(recordID("other")) == nil)
            #expect(try await notes.alice.fetchRecord(recordID("other-share")) == nil)

            let bob = notes.participants["bob"]!
            let token = try await bob.fetchDatabase().token
            let leaving = try await bob.modify(deleting: [notes.recordID("folder-share"), notes.recordID("folder")])
            _ = try requireSuccess(leaving.deleteResults[notes.recordID("folder")], "deleting the root")
            let records = try await notes.alice.fetchZone("Notes").records
            #expect(records[recordID("folder")] == nil)
            #expect(records[recordID("folder-share")] == nil, "the share went with its root")
            #expect(records[recordID("a")] != nil)
            #expect(try await bob.fetchDatabase(since: token).netDeleted.keys.contains(notes.zoneID))
        }
    }

    @Test(
        "F123 a read-write participant saves a new parent and its new child in one request, in either order",
        arguments: Harnesses.all)
    func parentAndChildInOneRequest(harness: any ContractHarness) async throws {
        try await withSharedFolders(
            harness, records: [("folder", nil), ("x", nil)], shares: [("folder", [("bob", .readWrite)])]
        ) { notes in
            let bob = notes.participants["bob"]!
            let zone = notes.zoneID
            try await bob.save([child("p1", of: "folder", in: zone), child("c1", of: "p1", in: zone)])
            try await bob.save([child("c2", of: "p2", in: zone), child("p2", of: "folder", in: zone)])
            try await bob.save([
                child("c3", of: "m3", in: zone), child("m3", of: "p3", in: zone), child("p3", of: "p1", in: zone),
            ])
            let records = try await notes.alice.fetchZone("Notes").records
            for (name, parent) in [("p1", "folder"), ("c1", "p1"), ("c2", "p2"), ("p2", "folder"), ("c3", "m3")] {
                #expect(records[recordID(name)]?.parent?.recordID == recordID(parent), "\(name)'s parent")
            }
            #expect(
                Set(try await bob.fetchZone(zone).records.keys).isSuperset(of: ["c1", "c2", "c3"].map(notes.recordID)))

            // Outside the hierarchy, or under a record outside it, neither is saved.
            let outside = try await bob.modify(saving: [
                child("c4", of: "p4", in: zone), child("p4", of: "x", in: zone),
            ])
            expectFailure(outside.saveResults[notes.recordID("c4")], .permissionFailure)
            expectFailure(outside.saveResults[notes.recordID("p4")], .permissionFailure)
            let loose = try await bob.modify(saving: [child("p5", of: nil, in: zone), child("c5", of: "p5", in: zone)])
            expectFailure(loose.saveResults[notes.recordID("c5")], .permissionFailure)
            #expect(try await notes.alice.fetchRecord(recordID("c4")) == nil)
            #expect(try await notes.alice.fetchRecord(recordID("c5")) == nil)
        }
    }
}

extension Record.ID {
    /// The same record name in another zone.
    func renamed(to zoneID: RecordZone.ID) -> Record.ID { Record.ID(recordName: recordName, zoneID: zoneID) }
}
