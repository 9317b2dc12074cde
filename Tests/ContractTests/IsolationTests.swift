import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Per-user and per-database isolation (F126, F138).
@Suite("Isolation (F126, F138)")
struct IsolationTests {
    // F126: the same record ID in two users' private databases does not collide: each is
    // created without a conflict, keeps its own value and its own tags.
    @Test("F126 the same record ID in two users' databases does not collide", arguments: Harnesses.all)
    func sameRecordIDTwoUsers(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            let bob = try await server.device("bob", "phone")
            try await alice.createZone("Notes")
            try await bob.createZone("Notes")

            let alices = try await alice.save(newRecord("n1", ["owner": "alice"]))
            let bobs = try await bob.save(newRecord("n1", ["owner": "bob"]))
            try await bob.save(bobs.setting(["owner": "bob, edited"]))

            #expect(try await alice.fetchRecord(recordID("n1"))?["owner"] == "alice")
            #expect(try await bob.fetchRecord(recordID("n1"))?["owner"] == "bob, edited")
            let stillAlices = try await alice.save(alices.setting(["owner": "alice, edited"]))
            #expect(stillAlices["owner"] == "alice, edited")
            #expect(try await bob.fetchRecord(recordID("n1"))?["owner"] == "bob, edited")
        }
    }

    // F138: a user's database never shows another user's zones or records, in any operation.
    @Test("F138 a user never sees another user's zones", arguments: Harnesses.all)
    func usersSeeOnlyTheirOwnZones(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            let bob = try await server.device("bob", "phone")
            try await alice.createZone("AliceOnly")
            try await alice.save(newRecord("secret", in: "AliceOnly", ["text": "alice's"]))
            try await alice.save(newRecord(Record.ID(recordName: "inbox"), ["text": "alice's default zone"]))
            try await bob.createZone("BobOnly")

            #expect(try await bob.database.fetchAllZones().map(\.zoneID).allSatisfy { $0 != zoneID("AliceOnly") })
            #expect(try await bob.fetchDatabase().netModified == [zoneID("BobOnly")])
            expectFailure(
                try await bob.database.fetchZones([zoneID("AliceOnly")]).results[zoneID("AliceOnly")], .zoneNotFound)
            await expectThrows(.zoneNotFound) { try await bob.fetchZone("AliceOnly") }
            expectFailure(try await bob.attemptSave(newRecord("secret", in: "AliceOnly")), .zoneNotFound)
            let bobsInbox = try await bob.attemptSave(newRecord(Record.ID(recordName: "inbox"), ["text": "bob's"]))
            #expect(expectSuccess(bobsInbox)?["text"] == "bob's", "alice's default-zone record is not bob's")
            #expect(try await alice.fetchRecord(recordID("secret", in: "AliceOnly"))?["text"] == "alice's")
        }
    }

    // F104, F138: a user's devices agree on the user record ID; different users differ.
    @Test("F138 user record IDs are per user", arguments: Harnesses.all)
    func userRecordIDs(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alicePhone = try await server.device("alice", "phone")
            let aliceLaptop = try await server.device("alice", "laptop")
            let aliceShared = try await server.device("alice", "laptop", scope: .shared)
            let bob = try await server.device("bob", "phone")
            let alice = try await alicePhone.database.currentUserRecordID()
            #expect(try await aliceLaptop.database.currentUserRecordID() == alice)
            #expect(try await aliceShared.database.currentUserRecordID() == alice)
            #expect(try await bob.database.currentUserRecordID() != alice)

            // Long account identifiers that differ only at the end are still different users.
            let prefix = "https://accounts.example.com/realms/production/users/" + String(repeating: "0", count: 100)
            let first = try await server.device(UserID(prefix + "1"), "phone").database.currentUserRecordID()
            let second = try await server.device(UserID(prefix + "2"), "phone").database.currentUserRecordID()
            #expect(first != second)
            #expect(first.recordName.utf8.count <= Limits.maxNameLength)
        }
    }

    // F138: the private and shared databases of one user are separate: private zones do not
    // appear in the shared database.
    @Test("F138 private zones are not in the shared database", arguments: Harnesses.all)
    func privateAndSharedAreSeparate(harness: any ContractHarness) async throws {
        try await withPhone(harness) { server, phone in
            let shared = try await server.device("alice", "phone", scope: .shared)
            try await phone.createZone("Notes")
            try await phone.save(newRecord("n1"))
            #expect(try await shared.database.fetchAllZones().isEmpty)
            #expect(try await shared.fetchDatabase().isEmpty)
            #expect(shared.database.databaseScope == .shared)
            #expect(phone.database.databaseScope == .private)
        }
    }
}
