import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Server-side zone purge and encrypted-data reset (F150, F98, F99).
@Suite("Purge and encrypted-data reset (F150)")
struct PurgeAndResetTests {
    // F150, F98: a purged zone is reported deleted with reason `purged`; writes to it get
    // userDeletedZone until the zone is saved again, which gives a new, empty zone.
    @Test("F150 a purged zone reports purged and rejects writes until re-created", arguments: Harnesses.all)
    func purge(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            let bob = try await server.device("bob", "phone")
            try await phone.createZone("Notes")
            try await phone.createZone("Photos")
            try await phone.save(newRecord("n1"))
            try await bob.createZone("Notes")
            try await bob.save(newRecord("n1"))
            let start = try await laptop.fetchDatabase().token

            try server.admin.purgeZone(zoneID("Notes"), of: "alice")

            let changes = try await laptop.fetchDatabase(since: start)
            #expect(changes.netDeleted == [zoneID("Notes"): .purged])
            #expect(changes.netModified.isEmpty)
            let error = expectFailure(try await phone.attemptSave(newRecord("n2")), .userDeletedZone)
            #expect(error?.zoneDeletionReason == .purged)
            await expectThrows(.userDeletedZone) { try await laptop.fetchZone("Notes") }
            try await phone.save(newRecord("p1", in: "Photos"))
            #expect(try await bob.fetchRecord(recordID("n1")) != nil, "another user's zone is untouched")

            try await phone.createZone("Notes")
            try await phone.save(newRecord("n2"))
            #expect(Set(try await laptop.fetchZone("Notes").records.keys) == [recordID("n2")])
        }
    }

    // F150, F99: an encrypted-data reset deletes every zone with reason `encryptedDataReset`;
    // zone and record operations get zoneNotFound with userDidResetEncryptedDataKey until each
    // zone is re-created.
    @Test("F150 an encrypted-data reset deletes every zone", arguments: Harnesses.all)
    func encryptedDataReset(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            try await phone.createZone("Photos")
            try await phone.save(newRecord("n1"))
            try await phone.save(newRecord("p1", in: "Photos"))
            let start = try await laptop.fetchDatabase().token

            try server.admin.resetEncryptedData(of: "alice")

            let changes = try await laptop.fetchDatabase(since: start)
            #expect(
                changes.netDeleted == [
                    zoneID("Notes"): .encryptedDataReset, zoneID("Photos"): .encryptedDataReset,
                ])
            #expect(changes.netModified.isEmpty)
            let saveError = expectFailure(try await phone.attemptSave(newRecord("n2")), .zoneNotFound)
            #expect(saveError?.userDidResetEncryptedDataKey == true)
            let fetchError = expectFailure(
                try await laptop.database.fetchZones([zoneID("Photos")]).results[zoneID("Photos")], .zoneNotFound)
            #expect(fetchError?.userDidResetEncryptedDataKey == true)
            let feedError = await expectThrows(.zoneNotFound) { try await laptop.fetchZone("Notes") }
            #expect(feedError?.userDidResetEncryptedDataKey == true)

            try await phone.createZone("Notes")
            try await phone.save(newRecord("n2"))
            #expect(Set(try await laptop.fetchZone("Notes").records.keys) == [recordID("n2")])
            let stillGone = expectFailure(try await phone.attemptSave(newRecord("p2", in: "Photos")), .zoneNotFound)
            #expect(stillGone?.userDidResetEncryptedDataKey == true)
        }
    }
}
