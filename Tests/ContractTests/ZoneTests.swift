import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Zone existence rules (F128, F147), zone operations (F156) and zone deletion (F149).
@Suite("Zones (F128, F147, F149, F156)")
struct ZoneTests {
    // F147: zones cannot be modified in the public database.
    @Test("F147 modifying zones in the public database gets badDatabase", arguments: Harnesses.all)
    func zonesInPublicDatabase(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let publicDB = try await server.device("alice", "phone", scope: .public)
            expectFailure(try await publicDB.attemptCreateZone(zoneID("Notes")), .badDatabase)
            expectFailure(try await publicDB.attemptDeleteZone(zoneID("Notes")), .badDatabase)
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
            expectFailure(
                try await laptop.database.fetchZones([zoneID("Notes")]).results[zoneID("Notes")], .zoneNotFound)
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
            let (start, oldZone) = try await laptop.currentTokens()

            try await phone.deleteZone("Notes")
            try await phone.createZone("Notes")
            try await phone.save(newRecord("new"))

            let changes = try await laptop.fetchDatabase(since: start)
            #expect(changes.deleted[zoneID("Notes")] == .deleted, "the old incarnation's deletion is reported")
            #expect(changes.modified.contains(zoneID("Notes")), "the new incarnation is reported")
            if let deletionPage = changes.pages.firstIndex(where: {
                $0.deletions.contains { $0.zoneID == zoneID("Notes") }
            }),
                let modificationPage = changes.pages.lastIndex(where: {
                    $0.modifications.contains { $0.zoneID == zoneID("Notes") }
                })
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
