import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Zone existence rules (F128, F147), zone operations (F156) and zone deletion (F149).
@Suite("Zones (F128, F147, F149, F156)")
struct ZoneTests {
    // F128, F156: a new custom zone reports atomic, fetchChanges and zoneWideSharing, on save
    // and on fetch.
    @Test("F128 F156 a new zone reports the custom-zone capabilities", arguments: Harnesses.all)
    func newZoneCapabilities(harness: any ContractHarness) async throws {
        try await withPhone(harness) { _, phone in
            let saved = try await phone.createZone("Notes")
            #expect(saved.zoneID == zoneID("Notes"))
            #expect(saved.capabilities == .customZoneDefault)
            let fetched = try #require(expectSuccess(try await phone.database.fetchZones([zoneID("Notes")]).results[zoneID("Notes")]))
            #expect(fetched.capabilities == .customZoneDefault)
            #expect(fetched.share == nil)
            #expect(try await phone.database.fetchAllZones().map(\.zoneID).contains(zoneID("Notes")))
        }
    }

    // F147, F128: a record saved into a zone that does not exist gets zoneNotFound.
    @Test("F147 a record into (or out of) a missing zone gets zoneNotFound", arguments: Harnesses.all)
    func recordIntoMissingZone(harness: any ContractHarness) async throws {
        try await withPhone(harness) { _, phone in
            let result = try await phone.attemptSave(newRecord("n1", in: "Nowhere"))
            let error = expectFailure(result, .zoneNotFound)
            #expect(error?.item == .record(recordID("n1", in: "Nowhere")))
            let deletion = try await phone.modify(deleting: [recordID("n1", in: "Nowhere")])
            expectFailure(deletion.deleteResults[recordID("n1", in: "Nowhere")], .zoneNotFound)
            try await phone.createZone("Nowhere")
            try await phone.save(newRecord("n1", in: "Nowhere"))
        }
    }

    // F147: zones cannot be created in the shared database.
    @Test("F147 creating a zone in the shared database gets badDatabase", arguments: Harnesses.all)
    func zoneInSharedDatabase(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let shared = try await server.device("alice", "phone", scope: .shared)
            expectFailure(try await shared.attemptCreateZone(zoneID("Notes")), .badDatabase)
            #expect(try await shared.database.fetchAllZones().isEmpty)
        }
    }

    // F147: zones cannot be modified in the public database.
    @Test("F147 modifying zones in the public database gets badDatabase", arguments: Harnesses.all)
    func zonesInPublicDatabase(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let publicDB = try await server.device("alice", "phone", scope: .public)
            expectFailure(try await publicDB.attemptCreateZone(zoneID("Notes")), .badDatabase)
            expectFailure(try await publicDB.attemptDeleteZone(zoneID("Notes")), .badDatabase)
        }
    }

    // F147: saving an existing zone again succeeds, returns the zone, and neither empties it nor
    // starts a new incarnation (its tokens stay valid).
    @Test("F147 saving an existing zone again is idempotent", arguments: Harnesses.all)
    func savingZoneAgain(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let note = try await phone.save(newRecord("n1", ["title": "kept"]))
            let before = try await laptop.fetchZone("Notes")

            let again = try await laptop.createZone("Notes")
            #expect(again.zoneID == zoneID("Notes"))
            #expect(again.capabilities == .customZoneDefault)

            let zones = try await laptop.database.fetchAllZones()
            #expect(zones.filter { $0.zoneID == zoneID("Notes") }.count == 1)
            let since = try await laptop.fetchZone("Notes", since: before.token)
            #expect(since.modifiedIDs.isEmpty)
            #expect(since.deletedIDs.isEmpty)
            let all = try await laptop.fetchZone("Notes")
            #expect(all.records[note.recordID]?["title"] == "kept")
            #expect(all.records[note.recordID]?.recordChangeTag == note.recordChangeTag)
        }
    }

    // F156: fetching named zones gives a per-zone result, zoneNotFound for a missing one.
    @Test("F156 fetching a missing zone gives a per-zone zoneNotFound", arguments: Harnesses.all)
    func fetchMissingZone(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            let results = try await phone.database.fetchZones([zoneID("Notes"), zoneID("Ghost")]).results
            #expect(results.count == 2)
            expectSuccess(results[zoneID("Notes")])
            expectFailure(results[zoneID("Ghost")], .zoneNotFound)
        }
    }

    // F156: deleting a zone that is not there gives one per-zone outcome, the same whether the
    // zone never existed or was already deleted (a spec choice: success or zoneNotFound).
    @Test("F156 deleting a missing zone is consistent", arguments: Harnesses.all)
    func deleteMissingZone(harness: any ContractHarness) async throws {
        try await withPhone(harness) { _, phone in
            try await phone.createZone("Gone")
            try await phone.deleteZone("Gone")
            let never = try #require(try await phone.attemptDeleteZone(zoneID("Ghost")))
            let again = try #require(try await phone.attemptDeleteZone(zoneID("Gone")))
            switch (never, again) {
            case (.success, .success):
                break
            case (.failure(let first), .failure(let second)):
                #expect(first.code == .zoneNotFound)
                #expect(second.code == .zoneNotFound)
            default:
                Issue.record("deleting a never-created zone gave \(never) but a deleted one gave \(again)")
            }
        }
    }

    // F149, F49: deleting a zone removes it: the database feed reports it deleted with reason
    // `deleted`, and every later operation on it gets zoneNotFound.
    @Test("F149 a deleted zone is gone", arguments: Harnesses.all)
    func deletedZoneIsGone(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            try await phone.save(newRecord("n1"))
            let seen = try await laptop.fetchDatabase()
            #expect(seen.modified.contains(zoneID("Notes")))

            try await phone.deleteZone("Notes")

            let changes = try await laptop.fetchDatabase(since: seen.token)
            #expect(changes.deleted == [zoneID("Notes"): .deleted])
            #expect(!changes.modified.contains(zoneID("Notes")))
            expectFailure(try await laptop.attemptSave(newRecord("n2")), .zoneNotFound)
            await expectThrows(.zoneNotFound) { try await laptop.fetchZone("Notes") }
            expectFailure(try await laptop.database.fetchZones([zoneID("Notes")]).results[zoneID("Notes")], .zoneNotFound)
            #expect(!(try await laptop.database.fetchAllZones().map(\.zoneID).contains(zoneID("Notes"))))
        }
    }

    // F149: a zone re-created after deletion is a new, empty incarnation: old tokens expire, old
    // records do not come back, old tags mean nothing, new records get new creation dates.
    @Test("F149 a re-created zone is a new empty incarnation", arguments: Harnesses.all)
    func recreatedZoneIsNew(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            let oldN1 = try await phone.save(newRecord("n1", ["title": "old"]))
            try await phone.save(newRecord("n2", ["title": "old"]))
            let oldFetch = try await laptop.fetchZone("Notes")
            #expect(Set(oldFetch.records.keys) == [recordID("n1"), recordID("n2")])

            try await phone.deleteZone("Notes")
            server.clock.advance(by: 3_600)
            try await phone.createZone("Notes")

            let empty = try await laptop.fetchZone("Notes")
            #expect(empty.modifiedIDs.isEmpty, "no records from before the deletion")
            #expect(empty.deletedIDs.isEmpty, "no history from before the deletion")
            await expectThrows(.changeTokenExpired) {
                try await laptop.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: oldFetch.token)
            }
            expectFailure(try await phone.attemptSave(oldN1.setting(["title": "stale"])), .unknownItem)

            let newN1 = try await phone.save(newRecord("n1", ["title": "new"]))
            #expect(newN1.creationDate == server.clock.now)
            #expect(newN1.creationDate != oldN1.creationDate)
            let fresh = try await laptop.fetchZone("Notes")
            #expect(Set(fresh.records.keys) == [recordID("n1")])
            #expect(fresh.records[recordID("n1")]?["title"] == "new")
            #expect(fresh.records[recordID("n1")]?.creationDate == server.clock.now)
        }
    }

    // F149, F49: a device that fetched before a zone was deleted and re-created learns both:
    // the deletion (so it wipes the old records) and the zone's new contents.
    @Test("F149 a missed delete and re-create is reported as both", arguments: Harnesses.all)
    func missedDeleteAndRecreate(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            try await phone.save(newRecord("old"))
            let start = try await laptop.fetchDatabase().token
            let oldZone = try await laptop.fetchZone("Notes").token

            try await phone.deleteZone("Notes")
            try await phone.createZone("Notes")
            try await phone.save(newRecord("new"))

            let changes = try await laptop.fetchDatabase(since: start)
            #expect(changes.deleted[zoneID("Notes")] == .deleted, "the old incarnation's deletion is reported")
            #expect(changes.modified.contains(zoneID("Notes")), "the new incarnation is reported")
            if let deletionPage = changes.pages.firstIndex(where: { $0.deletions.contains { $0.zoneID == zoneID("Notes") } }),
                let modificationPage = changes.pages.lastIndex(where: { $0.modifications.contains { $0.zoneID == zoneID("Notes") } })
            {
                #expect(deletionPage <= modificationPage, "the deletion does not come after the re-creation")
            }
            await expectThrows(.changeTokenExpired) {
                try await laptop.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: oldZone)
            }
            #expect(Set(try await laptop.fetchZone("Notes").records.keys) == [recordID("new")])
        }
    }
}
