import Foundation
import LogSyncServer
import SyncModel
import Testing

// The key directory of end-to-end encrypted fields (F129, `ZoneKeyDirectory`): device keys per
// user, zone keys wrapped for the zone's recipients, the owner's and participants' rights, and a
// server that refuses an encrypted value that arrives unsealed.

extension Device {
    /// The device's key directory (every harness's databases have one).
    var keys: any ZoneKeyDirectory {
        get throws { try operations((any ZoneKeyDirectory).self, "key directory") }
    }

    /// Registers a new key pair for this device and returns it.
    func registerNewKey(sourceLocation: SourceLocation = #_sourceLocation) async throws -> DeviceKeyPair {
        let pair = DeviceKeyPair()
        try await keys.registerDeviceKey(pair.publicKey)
        return pair
    }

    /// The keys of one zone, which must be a success.
    func zoneKeys(_ zoneID: RecordZone.ID, sourceLocation: SourceLocation = #_sourceLocation) async throws -> ZoneKeys {
        let response = try await keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [zoneID]))
        return try requireSuccess(
            response.results[zoneID], "fetching the keys of \(zoneID)", sourceLocation: sourceLocation)
    }

    /// Saves wraps in one request and returns the results.
    func saveWraps(_ wraps: [WrappedZoneKey]) async throws -> [WrappedZoneKey.ID: Result<WrappedZoneKey, SyncError>] {
        try await keys.saveZoneKeys(SaveZoneKeysRequest(keys: wraps)).results
    }
}

@Suite("Zone key directory (F129)", .timeLimit(.minutes(10)))
struct ZoneKeyDirectoryTests {
    // F129: a device key is registered for its user, once: registering it again changes nothing,
    // through either database; past the limit, registration fails with limitExceeded.
    @Test("F129 device keys: per user, idempotent, limited", arguments: Harnesses.all)
    func registration(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            let pair = try await phone.registerNewKey()
            try await phone.keys.registerDeviceKey(pair.publicKey)
            let shared = try await server.device("alice", "phone", scope: .shared)
            try await shared.keys.registerDeviceKey(pair.publicKey)
            let laptop = try await shared.registerNewKey()  // through the shared database: still alice's

            let keys = try await phone.zoneKeys(zoneID("Notes"))
            let me = try await phone.userRecordName()
            #expect(Set(keys.recipients.map(\.keyID)) == [pair.publicKey.keyID, laptop.publicKey.keyID])
            #expect(keys.recipients.allSatisfy { $0.userRecordName == me })
            #expect(keys.wrappedKeys.isEmpty)
            #expect(keys.latestVersion == 0)

            for _ in 2..<Limits.maxDeviceKeysPerUser { _ = try await phone.registerNewKey() }
            try await phone.keys.registerDeviceKey(pair.publicKey)  // known already: still fine
            let error = await expectThrows(.limitExceeded) {
                try await phone.keys.registerDeviceKey(DeviceKeyPair().publicKey)
            }
            #expect(error?.message.contains("\(Limits.maxDeviceKeysPerUser)") == true)
            #expect(try await phone.zoneKeys(zoneID("Notes")).recipients.count == Limits.maxDeviceKeysPerUser)
        }
    }

    // F129: the owner saves a zone key wrapped for each recipient; a participant who accepted a
    // share of the zone is a recipient, reads the wraps through the shared database under the
    // owner's name, and opens the one wrapped for them. A stranger gets zoneNotFound.
    @Test(
        "F129 recipients: the owner's and the accepted participants' devices; strangers see nothing",
        arguments: Harnesses.all)
    func recipientsAndParticipants(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let alice = notes.alice
            let bob = notes.participants["bob"]!
            let alicePair = try await alice.registerNewKey()
            let bobPair = try await bob.registerNewKey()
            let bobName = try await bob.userRecordName()

            let recipients = try await alice.zoneKeys(zoneID("Notes")).recipients
            #expect(recipients.map(\.keyID) == [alicePair.publicKey.keyID, bobPair.publicKey.keyID])
            #expect(recipients.map(\.userRecordName) == [notes.ownerName, bobName])
            #expect(try await bob.zoneKeys(notes.zoneID).recipients == recipients)

            let key = ZoneKey.generate(zoneID: zoneID("Notes"), version: 1)
            let wraps = [key.wrapped(for: alicePair.publicKey), key.wrapped(for: bobPair.publicKey)]
            let saved = try await alice.saveWraps(wraps)
            for wrap in wraps { #expect(try saved[wrap.id]?.get() == wrap) }

            // Bob reads them under the owner's name, and opens his.
            let seen = try await bob.zoneKeys(notes.zoneID)
            #expect(seen.wrappedKeys.count == 2)
            #expect(seen.wrappedKeys.allSatisfy { $0.zoneID == notes.zoneID })
            #expect(seen.latestVersion == 1)
            let mine = try #require(seen.wrappedKeys.first { $0.recipientKeyID == bobPair.publicKey.keyID })
            #expect(try bobPair.unwrap(mine).check == key.check)
            // Alice, in her own spelling, and her listing of every zone with keys.
            #expect(try await alice.zoneKeys(zoneID("Notes")).wrappedKeys.allSatisfy { $0.zoneID == zoneID("Notes") })
            let listed = try await alice.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: nil)).results
            #expect(Array(listed.keys) == [zoneID("Notes")])
            let bobListed = try await bob.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: nil)).results
            #expect(Array(bobListed.keys) == [notes.zoneID])

            // Carol, a stranger, sees nothing through either database.
            let carol = try await notes.server.device("carol", "phone", scope: .shared)
            let carolPrivate = try await notes.server.device("carol", "phone")
            _ = try await carol.registerNewKey()
            expectFailure(
                try await carol.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [notes.zoneID])).results[notes.zoneID],
                .zoneNotFound)
            expectFailure(
                try await carolPrivate.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [notes.zoneID])).results[
                    notes.zoneID], .zoneNotFound)
            #expect(try await carol.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: nil)).results.isEmpty)
            var stolen = key.wrapped(for: alicePair.publicKey)
            stolen.zoneID = notes.zoneID
            expectFailure(try await carol.saveWraps([stolen])[stolen.id], .zoneNotFound)
        }
    }

    // F129: a hierarchy share makes its accepted participant a recipient of the zone's key too
    // (the key is the zone's), reading through the shared database; a pending invitee is none.
    @Test(
        "F129 a hierarchy share's accepted participant is a recipient; a pending one is not", arguments: Harnesses.all)
    func hierarchyShareParticipant(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, alice in
            try await alice.save(newRecord("folder", ["title": "Shared folder"]))
            for user in ["bob", "carol"] as [UserID] {
                try server.admin.registerUser(user, emailAddress: "\(user.rawValue)@example.com")
            }
            var share = Share(rootRecordID: recordID("folder"))
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readOnly))
            share.addParticipant(Share.Participant(emailAddress: "carol@example.com", permission: .readWrite))
            let saved = try await alice.saveShare(share)
            let bob = try await server.device("bob", "phone", scope: .shared)
            let carol = try await server.device("carol", "phone", scope: .shared)
            try await bob.accept(try #require(saved.url))
            let alicePair = try await alice.registerNewKey()
            let bobPair = try await bob.registerNewKey()
            _ = try await carol.registerNewKey()  // invited, not accepted

            let spelt = RecordZone.ID(zoneName: "Notes", ownerName: try await alice.userRecordName())
            let recipients = try await alice.zoneKeys(zoneID("Notes")).recipients.map(\.keyID)
            #expect(recipients == [alicePair.publicKey.keyID, bobPair.publicKey.keyID])
            #expect(try await bob.zoneKeys(spelt).recipients.map(\.keyID) == recipients)
            expectFailure(
                try await carol.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [spelt])).results[spelt], .zoneNotFound
            )
            // Bob reads only: his wraps are refused, alice's are his to fetch.
            let key = ZoneKey.generate(zoneID: spelt, version: 1)
            let bobs = key.wrapped(for: bobPair.publicKey)
            expectFailure(try await bob.saveWraps([bobs])[bobs.id], .permissionFailure)
            var alices = key.wrapped(for: bobPair.publicKey)
            alices.zoneID = zoneID("Notes")
            #expect((try? await alice.saveWraps([alices])[alices.id]?.get()) != nil)
            let mine = try #require(try await bob.zoneKeys(spelt).wrappedKeys.first)
            #expect(mine.zoneID == spelt)
            #expect(try bobPair.unwrap(mine).check == key.check)
        }
    }

    // F129: what a save of wraps refuses, wrap by wrap: a read-only participant, a recipient the
    // zone does not have, a malformed wrap, and a second key of one version (kept, or earlier in
    // the same request); saving the same wrap again is a success that changes nothing.
    @Test("F129 saving wraps: permissions, recipients, one key per version, idempotent", arguments: Harnesses.all)
    func saveRules(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite), ("dave", .readOnly)]) { notes in
            let alice = notes.alice
            let bob = notes.participants["bob"]!
            let dave = notes.participants["dave"]!
            let alicePair = try await alice.registerNewKey()
            let bobPair = try await bob.registerNewKey()
            let davePair = try await dave.registerNewKey()

            // Bob, read-write, makes version 1 for everyone, in his spelling of the zone.
            let v1 = ZoneKey.generate(zoneID: notes.zoneID, version: 1)
            let first = [alicePair, bobPair, davePair].map { v1.wrapped(for: $0.publicKey) }
            let saved = try await bob.saveWraps(first)
            for wrap in first { #expect(try saved[wrap.id]?.get() == wrap) }
            #expect(
                try alicePair.unwrap(
                    try #require(
                        try await alice.zoneKeys(zoneID("Notes")).wrappedKeys.first {
                            $0.recipientKeyID == alicePair.publicKey.keyID
                        })
                ).check == v1.check)

            // Dave may read, not write.
            let v2 = ZoneKey.generate(zoneID: notes.zoneID, version: 2)
            let daveWrap = v2.wrapped(for: davePair.publicKey)
            expectFailure(try await dave.saveWraps([daveWrap])[daveWrap.id], .permissionFailure)
            #expect(try await dave.zoneKeys(notes.zoneID).wrappedKeys.count == 3)

            // A device no recipient registered; a malformed wrap.
            let unknown = v1.wrapped(for: DeviceKeyPair().publicKey)
            var malformed = ZoneKey.generate(zoneID: zoneID("Notes"), version: 3).wrapped(for: alicePair.publicKey)
            malformed.wrapped = malformed.wrapped.prefix(10)
            let refused = try await bob.saveWraps([unknown])
            let error = expectFailure(refused[unknown.id], .invalidArguments)
            #expect(error?.message.contains(unknown.recipientKeyID) == true)
            expectFailure(try await alice.saveWraps([malformed])[malformed.id], .invalidArguments)

            // The same wrap again: kept as it was. Another key of version 1: refused.
            let again = try await alice.saveWraps(
                [first[0]].map {
                    var wrap = $0
                    wrap.zoneID = zoneID("Notes")
                    return wrap
                })
            #expect(again.values.allSatisfy { (try? $0.get()) != nil })
            let other = ZoneKey.generate(zoneID: zoneID("Notes"), version: 1)
            let sameRecipient = other.wrapped(for: alicePair.publicKey)
            let conflict = expectFailure(
                try await alice.saveWraps([sameRecipient])[sameRecipient.id], .serverRecordChanged)
            #expect(conflict?.message.contains("version 1") == true)

            // Within one request: the first key of version 2 wins, a second is refused.
            let a = ZoneKey.generate(zoneID: zoneID("Notes"), version: 2)
            let b = ZoneKey.generate(zoneID: zoneID("Notes"), version: 2)
            let mixed = [a.wrapped(for: alicePair.publicKey), b.wrapped(for: bobPair.publicKey)]
            let results = try await alice.saveWraps(mixed)
            #expect((try? results[mixed[0].id]?.get()) != nil)
            expectFailure(results[mixed[1].id], .serverRecordChanged)

            let kept = try await alice.zoneKeys(zoneID("Notes")).wrappedKeys
            #expect(kept.count == 4)  // version 1 for three devices, version 2 for alice's
            #expect(kept.filter { $0.version == 2 }.allSatisfy { $0.check == Data(a.check) })
        }
    }

    // F129: versions count rotations, one at a time. A read-write participant who saves a
    // version that skips ahead (4294967294, the highest valid one, or 3 after 1) is refused and
    // changes nothing, so a device always has a next version to rotate to; 4294967295 is not a
    // version at all.
    @Test(
        "F129 a new key version is the latest plus one: skipping ahead is refused and writes nothing",
        arguments: Harnesses.all)
    func versionsFollowTheLatest(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
            let bob = notes.participants["bob"]!
            let alicePair = try await notes.alice.registerNewKey()
            let bobPair = try await bob.registerNewKey()
            func wraps(_ version: UInt32) -> [WrappedZoneKey] {
                let key = ZoneKey.generate(zoneID: notes.zoneID, version: version)
                return [alicePair, bobPair].map { key.wrapped(for: $0.publicKey) }
            }
            let first = wraps(1)
            #expect(try await bob.saveWraps(first).values.allSatisfy { (try? $0.get()) != nil })
            let before = try notes.server.currentToken(of: "alice")
            for version in [WrappedZoneKey.maxVersion, 3, UInt32.max] {
                let attempt = wraps(version)
                let results = try await bob.saveWraps(attempt)
                for wrap in attempt {
                    let error = expectFailure(results[wrap.id], .invalidArguments)
                    #expect(error?.message.contains("version") == true, "\(String(describing: error))")
                }
                #expect(
                    try notes.server.currentToken(of: "alice") == before, "version \(version) changed the owner's log")
            }
            #expect(try await bob.zoneKeys(notes.zoneID).latestVersion == 1)
            let second = wraps(2)
            #expect(try await bob.saveWraps(second).values.allSatisfy { (try? $0.get()) != nil })
            #expect(try await notes.alice.zoneKeys(zoneID("Notes")).latestVersion == 2)
        }
    }

    // F129: a zone's keys go with it: deleting the zone drops its wraps, and the zone saved again
    // starts with none.
    @Test("F129 deleting a zone drops its wrapped keys", arguments: Harnesses.all)
    func zoneDeletionDropsWraps(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            let pair = try await phone.registerNewKey()
            let wrap = ZoneKey.generate(zoneID: zoneID("Notes"), version: 1).wrapped(for: pair.publicKey)
            #expect((try? await phone.saveWraps([wrap])[wrap.id]?.get()) != nil)
            #expect(try await phone.zoneKeys(zoneID("Notes")).wrappedKeys == [wrap])

            try await phone.deleteZone("Notes")
            expectFailure(
                try await phone.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [zoneID("Notes")])).results[
                    zoneID("Notes")], .zoneNotFound)
            expectFailure(try await phone.saveWraps([wrap])[wrap.id], .zoneNotFound)

            try await phone.createZone("Notes")
            #expect(try await phone.zoneKeys(zoneID("Notes")).wrappedKeys.isEmpty)
            #expect(try await phone.keys.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: nil)).results.isEmpty)
            // A new first key is welcome, whatever the old one was.
            let fresh = ZoneKey.generate(zoneID: zoneID("Notes"), version: 1).wrapped(for: pair.publicKey)
            #expect((try? await phone.saveWraps([fresh])[fresh.id]?.get()) != nil)
        }
    }

    // F129: the server never keeps an encrypted value in the clear: a save holding an opened one
    // fails for that record, naming it and the field, and nothing is stored; a sealed one is kept.
    @Test("F129 an encrypted field that arrives unsealed is refused", arguments: Harnesses.all)
    func openedValuesRefused(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            var open = newRecord("n1", ["title": "Groceries"])
            open.encryptedValues["diagnosis"] = "private"
            let key = ZoneKey.generate(zoneID: zoneID("Notes"), version: 1)
            var sealed = newRecord("n2", ["title": "Sealed"])
            sealed["diagnosis"] = .encrypted(.sealed(key.seal("private", recordID: sealed.recordID, key: "diagnosis")))

            let response = try await phone.modify(saving: [open, sealed], atomically: false)
            let error = expectFailure(response.saveResults[open.recordID], .invalidArguments)
            #expect(error?.message.contains("unsealed") == true)
            #expect(error?.message.contains("\"diagnosis\"") == true)
            #expect(error?.message.contains("n1") == true)
            #expect(error?.item == .record(open.recordID))
            let kept = try #require(expectSuccess(response.saveResults[sealed.recordID]))
            guard case .encrypted(.sealed(let value))? = kept["diagnosis"] else {
                Issue.record("the sealed field came back as \(String(describing: kept["diagnosis"]))")
                return
            }
            #expect(try key.open(value, recordID: sealed.recordID, key: "diagnosis") == "private")
            #expect(try await phone.fetchRecord(open.recordID) == nil)
        }
    }
}
