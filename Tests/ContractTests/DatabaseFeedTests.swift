import Foundation
import LogSyncServer
import SyncModel
import Testing

/// The database change feed (F140) and the default zone's place outside it (F112).
@Suite("Database change feed (F112, F140)")
struct DatabaseFeedTests {
    // F140: a nil token means all history: every zone created so far is reported.
    @Test("F140 a nil token lists every zone", arguments: Harnesses.all)
    func nilTokenListsEveryZone(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            for name in ["A", "B", "C"] { try await phone.createZone(name) }
            try await phone.save(newRecord("n1", in: "B"))

            let fetch = try await laptop.fetchDatabase()
            #expect(fetch.modified == [zoneID("A"), zoneID("B"), zoneID("C")])
            #expect(fetch.deleted.isEmpty)
            let nothing = try await laptop.fetchDatabase(since: fetch.token)
            #expect(nothing.isEmpty)
        }
    }

    // F140: a zone with record changes since the token is reported modified, once per page.
    @Test("F140 record changes mark their zone modified", arguments: Harnesses.all)
    func recordChangesMarkZone(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            try await phone.createZone("A")
            try await phone.createZone("B")
            let note = try await phone.save(newRecord("n1", in: "B"))
            let start = try await laptop.fetchDatabase().token

            try await phone.save(note.setting(["title": "x"]))
            try await phone.save(newRecord("n2", in: "B"))
            try await phone.delete(recordID("n1", in: "B"))

            let fetch = try await laptop.fetchDatabase(since: start)
            #expect(fetch.modified == [zoneID("B")])
            #expect(fetch.deleted.isEmpty)
            for page in fetch.pages {
                let zones = page.modifications.map(\.zoneID)
                #expect(zones.count == Set(zones).count, "a zone appears at most once per page")
            }
        }
    }

    // F140: paging the database feed with a small limit until moreComing is false gives the same
    // zones as one unlimited fetch, from nil and from a mid-history token (with a deletion).
    @Test("F140 paging equals one unlimited fetch", arguments: Harnesses.all, [1, 2, 3])
    func pagingEqualsUnlimited(harness: any ContractHarness, limit: Int) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            for index in 0..<5 { try await phone.createZone("Z\(index)") }
            try await phone.save(newRecord("n", in: "Z1"))
            let middle = try await laptop.fetchDatabase().token
            for index in 5..<9 { try await phone.createZone("Z\(index)") }
            try await phone.save(newRecord("n", in: "Z2"))
            try await phone.save(newRecord("n", in: "Z6"))
            try await phone.deleteZone("Z3")

            for since in [nil, middle] {
                let unlimited = try await laptop.fetchDatabase(since: since)
                let paged = try await laptop.fetchDatabase(since: since, resultsLimit: limit)
                for (index, page) in paged.pages.enumerated() {
                    #expect(page.modifications.count + page.deletions.count <= limit, "page \(index)")
                    #expect(page.moreComing == (index < paged.pages.count - 1), "page \(index)")
                }
                #expect(paged.netModified == unlimited.netModified, "since \(String(describing: since))")
                if since != nil {
                    // From nil, Z3 was created and deleted inside the window: reporting its
                    // deletion or nothing are both allowed, so only the later window compares it.
                    #expect(paged.netDeleted == unlimited.netDeleted, "since \(String(describing: since))")
                }
                #expect(try await laptop.fetchDatabase(since: paged.token).isEmpty)
            }
            let sinceMiddle = try await laptop.fetchDatabase(since: middle)
            #expect(sinceMiddle.netModified == Set(["Z2", "Z5", "Z6", "Z7", "Z8"].map(zoneID)))
            #expect(sinceMiddle.netDeleted == [zoneID("Z3"): .deleted])
            let fromNil = try await laptop.fetchDatabase()
            #expect(fromNil.netModified == Set(["Z0", "Z1", "Z2", "Z4", "Z5", "Z6", "Z7", "Z8"].map(zoneID)))
        }
    }

    // F140, F149: a zone deleted since the token is reported deleted, whatever the page size,
    // also when it was re-created since and a page ends between its deletion and its
    // re-creation; a token taken after the (last) deletion is not told it again. Checked from
    // every point of a history that deletes and re-creates a zone twice.
    @Test("F149 a paged database feed reports every deletion its token predates", arguments: Harnesses.all, [1, 2, 3])
    func pagedFeedKeepsDeletions(harness: any ContractHarness, limit: Int) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            try await phone.createZone("A")
            try await phone.createZone("B")
            var tokens = [try server.currentToken(of: "alice")]
            let steps: [() async throws -> Void] = [
                { try await phone.deleteZone("B") },
                { try await phone.save(newRecord("n", in: "A")) },
                { try await phone.createZone("B") },
                { try await phone.save(newRecord("n", in: "B")) },
                { try await phone.deleteZone("B") },
                { try await phone.save(newRecord("m", in: "A")) },
                { try await phone.createZone("B") },
            ]
            for step in steps {
                try await step()
                tokens.append(try server.currentToken(of: "alice"))
            }
            // B's last deletion is step 5, A's last change step 6, B's last re-creation step 7: a
            // page that ends at A's change falls between B's deletion and its re-creation.
            for (index, token) in tokens.enumerated() {
                for resultsLimit in [nil, limit] {
                    let fetch = try await laptop.fetchDatabase(since: token, resultsLimit: resultsLimit)
                    let label = "since step \(index), limit \(String(describing: resultsLimit))"
                    #expect(fetch.deleted == (index < 5 ? [zoneID("B"): .deleted] : [:]), "\(label)")
                    var modified: Set<RecordZone.ID> = []
                    if index < 6 { modified.insert(zoneID("A")) }
                    if index < 7 { modified.insert(zoneID("B")) }
                    #expect(fetch.modified == modified, "\(label)")
                    // The old incarnation's deletion does not come after the new one's modification.
                    if let deletion = fetch.pages.firstIndex(where: {
                        $0.deletions.contains { $0.zoneID == zoneID("B") }
                    }),
                        let modification = fetch.pages.lastIndex(where: {
                            $0.modifications.contains { $0.zoneID == zoneID("B") }
                        })
                    {
                        #expect(deletion <= modification, "\(label)")
                    }
                }
            }
        }
    }

    // F142: an intermediate database token is a safe resume point.
    @Test("F142 resuming the database feed from a mid-fetch token", arguments: Harnesses.all)
    func resumeFromMidFetchToken(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            let tablet = try await server.device("alice", "tablet")
            let names = (0..<6).map { "Z\($0)" }
            for name in names { try await phone.createZone(name) }

            let first = try await laptop.database.fetchDatabaseChanges(since: nil, resultsLimit: 2)
            #expect(first.moreComing)
            let firstZones = Set(first.modifications.map(\.zoneID))
            #expect(!firstZones.isEmpty && firstZones.count <= 2)
            let rest = try await tablet.fetchDatabase(since: first.changeToken)
            #expect(rest.modified.isDisjoint(with: firstZones))
            #expect(rest.modified.union(firstZones) == Set(names.map(zoneID)))
        }
    }

    // F112: writes in the default zone do not appear in the database feed; a write in a custom
    // zone does.
    @Test("F112 default-zone writes are not in the database feed", arguments: Harnesses.all)
    func defaultZoneNotInFeed(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let start = try await laptop.fetchDatabase().token

            let inbox = try await phone.save(newRecord(Record.ID(recordName: "d1"), ["title": "default"]))
            try await phone.save(inbox.setting(["title": "edited"]))
            try await phone.delete(inbox.recordID)
            try await phone.save(newRecord(Record.ID(recordName: "d2")))
            let afterDefault = try await laptop.fetchDatabase(since: start)
            #expect(afterDefault.isEmpty, "default-zone writes reported: \(afterDefault.pages)")

            try await phone.save(newRecord("n1"))
            let afterCustom = try await laptop.fetchDatabase(since: start)
            #expect(afterCustom.modified == [zoneID("Notes")])
            #expect(!afterCustom.modified.contains(.default))
        }
    }
}
