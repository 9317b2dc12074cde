import SyncModel

/// Per-user and per-database isolation (F126, F138).
enum IsolationChecks {
    static let all = [sameRecordIDTwoUsers, usersSeeOnlyTheirOwnZones, userRecordIDs, privateAndSharedAreSeparate]

    /// F126: the same record ID in two users' private databases does not collide: each is created
    /// without a conflict, keeps its own value and its own change tags.
    static let sameRecordIDTwoUsers = ContractCheck(
        "isolation.sameRecordIDTwoUsers", "F126 the same record ID in two users' databases does not collide"
    ) { probe in
        let alice = try await probe.device("alice", "phone")
        let bob = try await probe.device("bob", "phone")
        try await alice.createZone("Notes")
        try await bob.createZone("Notes")

        let alices = try await alice.save(note("n1", ["owner": "alice"]))
        var bobs = try await bob.save(note("n1", ["owner": "bob"]))
        bobs["owner"] = "bob, edited"
        try await bob.save(bobs)

        var stillAlices = alices
        stillAlices["owner"] = "alice, edited"
        let saved = try await alice.save(stillAlices)
        probe.expect(saved["owner"], equals: "alice, edited", "alice's record after her second save")
        let id = alices.recordID
        probe.expect(try await alice.zoneRecords(id.zoneID)[id]?["owner"], equals: "alice, edited", "alice's record")
        probe.expect(try await bob.zoneRecords(id.zoneID)[id]?["owner"], equals: "bob, edited", "bob's record")
    }

    /// F138: a user's database never shows another user's zones or records, in any operation.
    static let usersSeeOnlyTheirOwnZones = ContractCheck(
        "isolation.usersSeeOnlyTheirOwnZones", "F138 a user never sees another user's zones"
    ) { probe in
        let alice = try await probe.device("alice", "phone")
        let bob = try await probe.device("bob", "phone")
        let alicesZone = RecordZone.ID(zoneName: "AliceOnly")
        try await alice.createZone("AliceOnly")
        try await alice.save(note("secret", in: "AliceOnly", ["text": "alice's"]))
        var inbox = Record(recordType: "Note", recordID: Record.ID(recordName: "inbox"))
        inbox["text"] = "alice's default zone"
        try await alice.save(inbox)
        try await bob.createZone("BobOnly")

        let bobsZones = try await bob.database.fetchAllZones().map(\.zoneID)
        probe.expect(!bobsZones.contains(alicesZone), "bob's zones include alice's: \(bobsZones)")
        probe.expect(try await bob.changedZones(), equals: [RecordZone.ID(zoneName: "BobOnly")], "bob's database feed")
        probe.expectFailure(
            try await bob.database.fetchZones([alicesZone]).results[alicesZone], .zoneNotFound,
            "bob fetching alice's zone")
        await probe.expectThrows(.zoneNotFound, "bob reading alice's zone feed") {
            _ = try await bob.database.fetchZoneChanges(zoneID: alicesZone, since: nil)
        }
        probe.expectFailure(
            try await bob.attemptSave(note("secret", in: "AliceOnly")), .zoneNotFound, "bob saving into alice's zone")
        inbox = Record(recordType: "Note", recordID: inbox.recordID)
        inbox["text"] = "bob's"
        let bobsInbox = try probe.require(try await bob.attemptSave(inbox), "bob saving into his default zone")
        probe.expect(bobsInbox["text"], equals: "bob's", "bob's record in his default zone")
        let secret = Record.ID(recordName: "secret", zoneID: alicesZone)
        probe.expect(try await alice.zoneRecords(alicesZone)[secret]?["text"], equals: "alice's", "alice's record")
    }

    /// F104, F138: a user's devices and databases agree on the user record ID; different users
    /// differ, even when their names differ only at the end.
    static let userRecordIDs = ContractCheck("isolation.userRecordIDs", "F138 user record IDs are per user") { probe in
        let alice = try await probe.device("alice", "phone").database.currentUserRecordID()
        let laptop = try await probe.device("alice", "laptop").database.currentUserRecordID()
        let shared = try await probe.device("alice", "laptop", scope: .shared).database.currentUserRecordID()
        let bob = try await probe.device("bob", "phone").database.currentUserRecordID()
        probe.expect(laptop, equals: alice, "alice's user record ID on her laptop")
        probe.expect(shared, equals: alice, "alice's user record ID in her shared database")
        probe.expect(bob != alice, "bob has alice's user record ID \(alice)")

        let long = "account-" + String(repeating: "0", count: 100)
        let first = try await probe.device(long + "1", "phone").database.currentUserRecordID()
        let second = try await probe.device(long + "2", "phone").database.currentUserRecordID()
        probe.expect(first != second, "two users whose long names differ at the end share \(first)")
    }

    /// F138: the private and shared databases of one user are separate: private zones do not
    /// appear in the shared database.
    static let privateAndSharedAreSeparate = ContractCheck(
        "isolation.privateAndSharedAreSeparate", "F138 private zones are not in the shared database"
    ) { probe in
        let phone = try await probe.device("alice", "phone")
        let shared = try await probe.device("alice", "phone", scope: .shared)
        try await phone.createZone("Notes")
        try await phone.save(note("n1"))
        probe.expect(try await shared.database.fetchAllZones().isEmpty, "the shared database lists private zones")
        probe.expect(try await shared.changedZones().isEmpty, "the shared database feed reports private zones")
        probe.expect(shared.database.databaseScope, equals: .shared, "the shared database's scope")
        probe.expect(phone.database.databaseScope, equals: .private, "the private database's scope")
    }
}
