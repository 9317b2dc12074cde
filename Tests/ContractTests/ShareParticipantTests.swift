import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Looking up the users to invite (`fetchShareParticipants`, CloudKit's
/// `CKFetchShareParticipantsOperation`) and `Record.share` on the root of a hierarchy share,
/// on every harness (F119, F123; Docs/Protocol.md, "Sharing").
@Suite("Share participants and record shares (F119, F123)", .timeLimit(.minutes(10)))
struct ShareParticipantTests {
    // F119: alice finds bob by his e-mail address (any case) or his user record name, and invites
    // the participant the lookup gave her; bob accepts.
    @Test(
        "F119 a lookup by e-mail address or user record name gives a participant to invite; the invited user accepts",
        arguments: Harnesses.all)
    func lookUpAndInvite(harness: any ContractHarness) async throws {
        try await withAliceAndBob(harness, zone: "Notes") { server, alice, bob in
            let bobName = try await bob.userRecordName()
            let byEmail = UserIdentity.LookupInfo(emailAddress: "Bob@Example.com")
            let byName = UserIdentity.LookupInfo(userRecordName: bobName)
            // Reached from the database itself: no cast.
            let response = try await alice.database.fetchShareParticipants([byEmail, byName])
            #expect(response.results.count == 2)

            let found = try #require(expectSuccess(response.results[byEmail]))
            #expect(found.userIdentity.userRecordName == bobName)
            #expect(found.userIdentity.emailAddress == "Bob@Example.com", "the address as asked, nothing more")
            #expect(found.role == .privateUser)
            #expect(found.permission == .readOnly)
            #expect(found.acceptanceStatus == .pending)
            let named = try #require(expectSuccess(response.results[byName]))
            #expect(named.userIdentity.userRecordName == bobName)
            #expect(named.userIdentity.emailAddress == nil, "a lookup by record name does not tell the address")

            var invitation = named
            invitation.permission = .readWrite
            var share = Share(recordZoneID: zoneID("Notes"))
            share.addParticipant(invitation)
            let saved = try await alice.saveShare(share)
            #expect(saved.participant(userRecordName: bobName)?.permission == .readWrite)
            let accepted = try await bob.accept(try #require(saved.url))
            #expect(accepted.participant(userRecordName: bobName)?.acceptanceStatus == .accepted)
        }
    }

    // F119: an attacker probing for users learns nothing from the answers' shapes: every lookup
    // that finds nobody is the same unknownItem, whatever it named; a malformed one is
    // invalidArguments per item; a request too big or naming a user twice is refused whole.
    // Nothing is written, and nobody is registered.
    @Test(
        "F119 lookups that find nobody answer alike, malformed ones fail alone, and no lookup writes anything",
        arguments: Harnesses.all)
    func unknownUsersLookAlike(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, alice in
            try server.admin.registerUser("bob", emailAddress: "bob@example.com")
            try server.admin.registerUser("carol")  // no e-mail address
            let carolName = try await server.device("carol", "phone").userRecordName()
            let before = [
                try server.currentToken(of: "alice"), try server.currentToken(of: "bob"),
                try server.currentToken(of: "carol"),
            ]
            let unknown = [
                UserIdentity.LookupInfo(emailAddress: "zoe@example.com"),
                UserIdentity.LookupInfo(emailAddress: "carol@example.com"),  // carol has no address
                UserIdentity.LookupInfo(userRecordName: "_user999999"),
                UserIdentity.LookupInfo(userRecordName: "_user01"),  // not how a record name is written
                UserIdentity.LookupInfo(userRecordName: "bob"),  // a user ID, not a record name
            ]
            let malformed = [
                UserIdentity.LookupInfo(emailAddress: "not an address"),
                UserIdentity.LookupInfo(unchecked: nil, userRecordName: nil),
                UserIdentity.LookupInfo(unchecked: "bob@example.com", userRecordName: carolName),
            ]
            let response = try await alice.database.fetchShareParticipants(unknown + malformed)
            #expect(response.results.count == unknown.count + malformed.count)
            var shapes = Set<String>()
            for info in unknown {
                let error = try #require(expectFailure(response.results[info], .unknownItem))
                #expect(error.item == nil)
                shapes.insert(error.message.replacingOccurrences(of: info.description, with: "<lookup>"))
            }
            #expect(shapes == ["no user can be found as <lookup>"])
            for info in malformed { expectFailure(response.results[info], .invalidArguments) }

            let bob = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
            let twice = try await thrown { try await alice.database.fetchShareParticipants([bob, bob]) }
            #expect(twice?.code == .invalidArguments)
            let many = (0...Limits.maxItemsPerRequest).map { UserIdentity.LookupInfo(userRecordName: "_user\($0)") }
            let tooMany = try await thrown { try await alice.database.fetchShareParticipants(many) }
            #expect(tooMany?.code == .limitExceeded)

            let after = [
                try server.currentToken(of: "alice"), try server.currentToken(of: "bob"),
                try server.currentToken(of: "carol"),
            ]
            #expect(after == before, "a lookup wrote to a database")
            let zoe = try await alice.database.fetchShareParticipants([.init(emailAddress: "zoe@example.com")])
            expectFailure(zoe.results[.init(emailAddress: "zoe@example.com")], .unknownItem)
        }
    }

    // F123: the server sets Record.share on the root of a hierarchy share saved with it, for the
    // owner and for participants (named as they name the zone); descendants and the records of a
    // zone shared whole name no share; a root saved with the deletion of its share names none.
    @Test(
        "F123 a hierarchy's root names its share, for the owner and participants; other records name none",
        arguments: Harnesses.all)
    func rootNamesItsShare(harness: any ContractHarness) async throws {
        try await withAliceAndBob(harness, zone: "Notes") { server, alice, bob in
            try await alice.createZone("Trips")

            let folder = newRecord("folder", in: "Trips", type: "Folder", ["title": "Lisbon"])
            var child = newRecord("day1", in: "Trips", ["title": "Day 1"])
            child.parent = Record.Reference(recordID: folder.recordID)
            var share = Share(rootRecordID: folder.recordID)
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com"))
            let saved = try await alice.save([folder, child, share.record])
            let shareID = share.recordID
            #expect(saved[folder.recordID]?.share?.recordID == shareID)
            #expect(saved[child.recordID]?.share == nil)
            #expect(saved[shareID]?.share == nil)
            #expect(try await alice.fetchRecord(folder.recordID)?.share?.recordID == shareID)
            #expect(try await alice.fetchRecord(child.recordID)?.share == nil)

            // A participant sees the root's share in the zone as their shared database names it.
            let savedShare = try #require(saved[shareID])
            let url = try #require(try Share(record: savedShare).url)
            let joined = try await bob.accept(url)
            let tripsOfAlice = joined.zoneID
            let bobsFolder = try await bob.fetchRecord(Record.ID(recordName: "folder", zoneID: tripsOfAlice))
            #expect(bobsFolder?.share?.recordID == Record.ID(recordName: shareID.recordName, zoneID: tripsOfAlice))

            // A zone shared whole: its records name no share; the zone does.
            try await alice.save(newRecord("n1", ["title": "Groceries"]))
            let zoneShare = try await alice.saveShare(Share(recordZoneID: zoneID("Notes")))
            let n1 = try await alice.save(
                try #require(try await alice.fetchRecord(recordID("n1"))).setting(["title": "Groceries!"]))
            #expect(n1.share == nil)
            let notes = try #require(
                expectSuccess(try await alice.database.fetchZones([zoneID("Notes")]).results[zoneID("Notes")]))
            #expect(notes.share?.recordID == zoneShare.recordID)
            #expect(notes.capabilities.contains(.sharing))

            // Deleting the hierarchy share with its root saved in the same request clears it.
            let current = try #require(try await alice.fetchRecord(folder.recordID))
            let response = try await alice.modify(saving: [current.setting(["title": "Porto"])], deleting: [shareID])
            let resaved = try #require(expectSuccess(response.saveResults[folder.recordID]))
            #expect(resaved.share == nil)
            #expect(try await alice.fetchRecord(folder.recordID)?.share == nil)
        }
    }
}
