import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Tombstones and token expiry (F144).
@Suite("Tombstones (F144)")
struct TombstoneTests {
    // F144, F100: after tombstones before T are compacted, database and zone tokens from before
    // T give changeTokenExpired, and fetching again from nil works and gives the current state.
    @Test("F144 compacted tokens expire and a refetch from nil works", arguments: Harnesses.all)
    func compactedTokensExpire(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            try await phone.save(newRecord("n0"))
            let (oldDatabase, oldZone) = try await laptop.currentTokens()

            try await phone.save([newRecord("n1"), newRecord("n2"), newRecord("n3")])
            try await phone.delete(recordID("n1"), recordID("n0"))
            try await phone.createZone("Photos")
            try server.admin.compactTombstones(of: "alice", before: try server.currentToken(of: "alice"))

            await expectThrows(.changeTokenExpired) {
                try await laptop.database.fetchDatabaseChanges(since: oldDatabase)
            }
            await expectThrows(.changeTokenExpired) {
                try await laptop.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: oldZone)
            }

            let database = try await laptop.fetchDatabase()
            #expect(database.netModified == [zoneID("Notes"), zoneID("Photos")])
            let zone = try await laptop.fetchZone("Notes")
            #expect(Set(zone.records.keys) == [recordID("n2"), recordID("n3")])
            #expect(Set(zone.deletions.keys).isSubset(of: [recordID("n0"), recordID("n1")]))

            try await phone.save(newRecord("n4"))
            let next = try await laptop.fetchZone("Notes", since: zone.token)
            #expect(next.modifiedIDs == [recordID("n4")])
            #expect(try await laptop.fetchDatabase(since: database.token).netModified == [zoneID("Notes")])
        }
    }

    // F144: a token at the compaction horizon is not older than it, so it keeps working.
    @Test("F144 a token at the horizon still works", arguments: Harnesses.all)
    func tokenAtHorizonWorks(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            try await phone.save(newRecord("n1"))
            try await phone.delete(recordID("n1"))
            let horizon = try server.currentToken(of: "alice")
            try server.admin.compactTombstones(of: "alice", before: horizon)

            let nothing = try await laptop.fetchDatabase(since: horizon)
            #expect(nothing.isEmpty)
            try await phone.save(newRecord("n2"))
            #expect(try await laptop.fetchDatabase(since: horizon).netModified == [zoneID("Notes")])
        }
    }

    // F100, F141, F144: a zone listed from nil in pages after a compaction can be listed to the
    // end: the listing's continuation tokens may lie below the horizon (they are the offsets of
    // old records), and the listing needs none of the dropped tombstones. The listing holds the
    // live records only, and its last token works like any other.
    @Test("F144 a zone listed from nil in pages survives a compaction", arguments: Harnesses.all, [1, 2])
    func pagedListingAfterCompaction(harness: any ContractHarness, limit: Int) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            try await phone.save((0..<5).map { newRecord("n\($0)") })
            try await phone.delete(recordID("n1"))
            try server.admin.compactTombstones(of: "alice", before: try server.currentToken(of: "alice"))

            let listing = try await laptop.fetchZone("Notes", resultsLimit: limit)
            #expect(Set(listing.records.keys) == Set([0, 2, 3, 4].map { recordID("n\($0)") }))
            #expect(listing.deletedIDs.isEmpty, "a listing from nil reports no deletions (F100)")
            #expect(listing.pages.count > 1, "the listing was paged")

            // A compaction at the point the listing started does not stop it either.
            let first = try await laptop.database.fetchZoneChanges(
                zoneID: zoneID("Notes"), since: nil, resultsLimit: limit)
            #expect(first.moreComing)
            try server.admin.compactTombstones(of: "alice", before: try server.currentToken(of: "alice"))
            let rest = try await laptop.fetchZone("Notes", since: first.changeToken, resultsLimit: limit)
            #expect(rest.deletedIDs.isEmpty)
            #expect(
                Set(first.modifications.map(\.record.recordID)).union(rest.records.keys) == Set(listing.records.keys))

            // The last token is an ordinary one: later deletions are reported from it.
            try await phone.delete(recordID("n2"))
            let next = try await laptop.fetchZone("Notes", since: listing.token, resultsLimit: limit)
            #expect(next.deletedIDs == [recordID("n2")])
            #expect(next.records.isEmpty)
        }
    }

    // F100, F141, F144: a record a paged listing from nil has already returned, then deleted
    // before the listing ends, is reported deleted by a later page; or, if that tombstone was
    // compacted meanwhile, the listing's next page is refused with changeTokenExpired. The
    // listing never ends holding the deleted record.
    @Test("F144 a record deleted during a paged listing is not kept", arguments: Harnesses.all, [false, true])
    func deletionDuringPagedListing(harness: any ContractHarness, compacts: Bool) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            try await phone.save((0..<4).map { newRecord("n\($0)") })

            var fetch = ZoneFetch()
            fetch.apply(
                try await laptop.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: nil, resultsLimit: 1))
            let held = try #require(fetch.records.keys.first)
            #expect(fetch.pages[0].moreComing)
            try await phone.delete(held)
            if compacts {
                try server.admin.compactTombstones(of: "alice", before: try server.currentToken(of: "alice"))
            }
            do {
                let rest = try await laptop.fetchZone("Notes", since: fetch.token, resultsLimit: 1)
                for page in rest.pages { fetch.apply(page) }
            } catch let error as SyncError {
                #expect(compacts, "only a compaction may refuse the listing: \(error)")
                #expect(error.code == .changeTokenExpired, "\(error)")
                fetch = try await laptop.fetchZone("Notes", resultsLimit: 1)
            }
            #expect(fetch.records[held] == nil, "\(held) was deleted")
            #expect(fetch.records.count == 3)
        }
    }

    // F144: a fetch from nil may list deletions, even of records this device never had, but
    // only of records that were deleted, never of live ones, and never a deleted record as live.
    @Test("F144 a nil-token fetch lists only true deletions", arguments: Harnesses.all)
    func nilTokenFetchDeletions(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            try await phone.save((0..<6).map { newRecord("n\($0)", type: $0.isMultiple(of: 2) ? "Even" : "Odd") })
            try await phone.delete(recordID("n1"), recordID("n2"))

            let fresh = try await server.device("alice", "new-laptop")
            let zone = try await fresh.fetchZone("Notes")
            #expect(Set(zone.records.keys) == [recordID("n0"), recordID("n3"), recordID("n4"), recordID("n5")])
            #expect(Set(zone.deletions.keys).isSubset(of: [recordID("n1"), recordID("n2")]))
            if let type = zone.deletions[recordID("n1")] { #expect(type == "Odd") }
            if let type = zone.deletions[recordID("n2")] { #expect(type == "Even") }
        }
    }
}
