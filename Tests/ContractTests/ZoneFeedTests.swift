import Foundation
import LogSyncServer
import SyncModel
import Testing

/// The zone change feed (F141), its paging and resume points (F142), coalescing (F143),
/// deletions with types (F139) and the client change token echo (F159).
@Suite("Zone change feed (F139, F141–F143, F159)")
struct ZoneFeedTests {
    /// Zone Notes with `count` records r0…r(count-1), each with fields title and body.
    @discardableResult
    private func fillNotes(_ phone: Device, count: Int) async throws -> [Record.ID: Record] {
        try await phone.createZone("Notes")
        return try await phone.save(
            (0..<count).map {
                newRecord("r\($0)", ["title": .string("title \($0)"), "body": .string("body \($0)")])
            })
    }

    // F141: desiredKeys [] returns records with their system fields only; a list of keys
    // returns only those keys.
    @Test("F141 desiredKeys selects fields", arguments: Harnesses.all)
    func desiredKeys(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            let saved = try await fillNotes(phone, count: 3)

            let bare = try await laptop.fetchZone("Notes", desiredKeys: [])
            #expect(Set(bare.records.keys) == Set(saved.keys))
            for (id, record) in bare.records {
                #expect(record.allKeys().isEmpty, "\(id) has fields \(record.allKeys())")
                #expect(record.recordType == "Note")
                #expect(record.systemFields == saved[id]?.systemFields)
            }

            let titles = try await laptop.fetchZone("Notes", desiredKeys: ["title"])
            for (id, record) in titles.records {
                #expect(record.allKeys() == ["title"])
                #expect(record["title"] == saved[id]?["title"])
                #expect(record.recordChangeTag == saved[id]?.recordChangeTag)
            }
        }
    }

    // F141: with resultsLimit 5, no page holds more than 5 changes, every page but the last says
    // moreComing, and the pages together hold every record once.
    @Test("F141 resultsLimit bounds each page", arguments: Harnesses.all)
    func resultsLimitBoundsPages(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            let saved = try await fillNotes(phone, count: 12)

            let fetch = try await laptop.fetchZone("Notes", resultsLimit: 5)
            #expect(fetch.pages.count >= 3)
            for (index, page) in fetch.pages.enumerated() {
                #expect(page.modifications.count + page.deletions.count <= 5, "page \(index)")
                #expect(page.moreComing == (index < fetch.pages.count - 1), "page \(index)")
            }
            #expect(fetch.modifiedIDs.count == 12, "each record once")
            #expect(Set(fetch.modifiedIDs) == Set(saved.keys))
        }
    }

    // F141: the server may return fewer changes than asked (or than exist) per page: a zone
    // larger than one page, by count or by bytes, still arrives whole, each record once.
    @Test(
        "F141 a zone larger than a page arrives whole",
        arguments: Harnesses.all, [LargeZone(count: 450, size: 20), LargeZone(count: 5, size: 900_000)])
    func largeZoneArrivesWhole(harness: any ContractHarness, zone: LargeZone) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let records = (0..<zone.count).map { sizedRecord("r\($0)", size: zone.size) }
            let ids = Set(records.map(\.recordID))
            let perRequest = max(1, min(200, Limits.maxRequestBytes / zone.size))
            for start in stride(from: 0, to: records.count, by: perRequest) {
                try await phone.save(Array(records[start..<min(start + perRequest, records.count)]))
            }
            for limit in [nil, 1_000] {
                let fetch = try await laptop.fetchZone("Notes", resultsLimit: limit)
                #expect(fetch.modifiedIDs.count == zone.count, "limit \(String(describing: limit))")
                #expect(Set(fetch.modifiedIDs) == ids, "limit \(String(describing: limit))")
                #expect(fetch.records.values.allSatisfy { $0.estimatedSize == zone.size })
            }
        }
    }

    // F140, F141, F142: paging with a small limit until moreComing is false gives the same
    // contents as one unlimited fetch, from nil and from a mid-history token, and ends where
    // nothing is left to fetch.
    @Test("F141 F142 paging equals one unlimited fetch", arguments: Harnesses.all, [1, 2, 5])
    func pagingEqualsUnlimited(harness: any ContractHarness, limit: Int) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            let saved = try await fillNotes(phone, count: 8)
            let middle = try await laptop.fetchZone("Notes").token
            for index in [1, 3, 5] {
                try await phone.save(try #require(saved[recordID("r\(index)")]).setting(["title": "edited"]))
            }
            try await phone.delete(recordID("r2"), recordID("r6"))
            try await phone.save(newRecord("r8", ["title": "late"]))

            for since in [nil, middle] {
                let unlimited = try await laptop.fetchZone("Notes", since: since)
                let paged = try await laptop.fetchZone("Notes", since: since, resultsLimit: limit)
                for (index, page) in paged.pages.enumerated() {
                    #expect(page.modifications.count + page.deletions.count <= limit, "page \(index)")
                }
                #expect(paged.records == unlimited.records, "since \(String(describing: since))")
                if since != nil {
                    // From nil, r2 and r6 were created and deleted inside the window: reporting
                    // their deletions or nothing are both allowed (F143, F144).
                    #expect(paged.deletions == unlimited.deletions, "since \(String(describing: since))")
                }
                let rest = try await laptop.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: paged.token)
                #expect(rest.modifications.isEmpty && rest.deletions.isEmpty && !rest.moreComing)
            }
            let sinceMiddle = try await laptop.fetchZone("Notes", since: middle)
            #expect(Set(sinceMiddle.records.keys) == [recordID("r1"), recordID("r3"), recordID("r5"), recordID("r8")])
            #expect(Set(sinceMiddle.deletions.keys) == [recordID("r2"), recordID("r6")])
        }
    }

    // F142: an intermediate token is a safe resume point: resuming from it, on any device,
    // returns exactly the changes not yet fetched.
    @Test("F142 resuming from a mid-fetch token returns exactly the rest", arguments: Harnesses.all)
    func resumeFromMidFetchToken(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            let tablet = try await server.device("alice", "tablet")
            let saved = try await fillNotes(phone, count: 12)

            let first = try await laptop.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: nil, resultsLimit: 5)
            #expect(first.moreComing)
            #expect(!first.modifications.isEmpty && first.modifications.count <= 5)
            let firstIDs = first.modifications.map(\.record.recordID)

            for device in [laptop, tablet] {
                let rest = try await device.fetchZone("Notes", since: first.changeToken)
                #expect(Set(rest.modifiedIDs).isDisjoint(with: firstIDs), "\(device)")
                #expect(Set(rest.modifiedIDs).union(firstIDs) == Set(saved.keys), "\(device)")
                #expect(rest.modifiedIDs.count + firstIDs.count == 12, "\(device)")
            }
        }
    }

    // F143: ten edits of one record between two fetches come back as one modification, at the
    // last version; the database feed names the zone once.
    @Test("F143 edits coalesce to one modification", arguments: Harnesses.all)
    func editsCoalesce(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let zoneStart = try await laptop.fetchZone("Notes").token
            let databaseStart = try await laptop.fetchDatabase().token

            var record = try await phone.save(newRecord("r", ["version": 1]))
            for version in 2...10 {
                record = try await phone.save(record.setting(["version": .int64(Int64(version))]))
            }

            let zone = try await laptop.fetchZone("Notes", since: zoneStart)
            #expect(zone.modifiedIDs == [record.recordID])
            #expect(zone.records[record.recordID]?["version"] == 10)
            #expect(zone.records[record.recordID]?.recordChangeTag == record.recordChangeTag)
            let database = try await laptop.fetchDatabase(since: databaseStart)
            #expect(database.pages.flatMap(\.modifications).map(\.zoneID) == [zoneID("Notes")])
        }
    }

    // F143: a record created and deleted between two fetches is never reported as modified; one
    // edited and then deleted comes back as a deletion only.
    @Test("F143 a deleted record is never reported as modified", arguments: Harnesses.all)
    func deletedNotReportedModified(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let older = try await phone.save(newRecord("older", ["v": 1]))
            let start = try await laptop.fetchZone("Notes").token

            try await phone.save(newRecord("ephemeral"))
            try await phone.delete(recordID("ephemeral"))
            try await phone.save(older.setting(["v": 2]))
            try await phone.delete(older.recordID)

            for limit in [nil, 1] {
                let fetch = try await laptop.fetchZone("Notes", since: start, resultsLimit: limit)
                #expect(!fetch.modifiedIDs.contains(recordID("ephemeral")), "limit \(String(describing: limit))")
                #expect(!fetch.modifiedIDs.contains(older.recordID), "limit \(String(describing: limit))")
                #expect(fetch.deletions[older.recordID] == "Note", "limit \(String(describing: limit))")
                #expect(fetch.records.isEmpty)
            }
        }
    }

    // F139: a deletion in the feed carries the deleted record's type.
    @Test("F139 deletions carry the record type", arguments: Harnesses.all)
    func deletionsCarryType(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            try await phone.createZone("People")
            let contact = try await phone.save(newRecord("c1", in: "People", type: "Contact", ["name": "Ada"]))
            let start = try await laptop.fetchZone("People").token

            try await phone.delete(contact.recordID)

            let fetch = try await laptop.fetchZone("People", since: start)
            let deletions = fetch.pages.flatMap(\.deletions)
            #expect(deletions == [RecordZoneChange.Deletion(recordID: contact.recordID, recordType: "Contact")])
        }
    }

    // F159: the client change token sent with a write comes back in the writer's zone fetches,
    // always the latest one the server applied for that device; each device gets its own, and a
    // device that never sent one gets none.
    @Test("F159 the client change token is echoed per device", arguments: Harnesses.all)
    func clientChangeTokenEcho(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            let tablet = try await server.device("alice", "tablet")
            try await phone.createZone("Notes")
            let first = Data("phone-write-1".utf8)
            let second = Data("phone-write-2".utf8)
            let laptops = Data("laptop-write-1".utf8)

            let response = try await phone.modify(saving: [newRecord("n1")], clientChangeToken: first)
            expectSuccess(response.saveResults[recordID("n1")])
            #expect(try await phone.fetchZone("Notes").clientChangeToken == first)

            let again = try await phone.modify(saving: [newRecord("n2")], clientChangeToken: second)
            expectSuccess(again.saveResults[recordID("n2")])
            #expect(try await phone.fetchZone("Notes").clientChangeToken == second)

            let fromLaptop = try await laptop.modify(saving: [newRecord("n3")], clientChangeToken: laptops)
            expectSuccess(fromLaptop.saveResults[recordID("n3")])
            #expect(try await laptop.fetchZone("Notes").clientChangeToken == laptops)
            #expect(
                try await phone.fetchZone("Notes").clientChangeToken == second,
                "the phone's latest applied write is still its second one")
            #expect(try await tablet.fetchZone("Notes").clientChangeToken == nil, "the tablet never sent one")
        }
    }
}

/// A zone of `count` records of `size` bytes each.
struct LargeZone: Sendable, CustomStringConvertible {
    let count: Int
    let size: Int
    var description: String { "\(count) records of \(size) bytes" }
}
