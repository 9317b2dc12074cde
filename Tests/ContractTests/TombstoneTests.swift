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
        try await withServer(harness) { server in
            let phone = try await server.device("alice", "phone")
            let laptop = try await server.device("alice", "laptop")
            try await phone.createZone("Notes")
            try await phone.save(newRecord("n0"))
            let oldDatabase = try await laptop.fetchDatabase().token
            let oldZone = try await laptop.fetchZone("Notes").token

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
        try await withServer(harness) { server in
            let phone = try await server.device("alice", "phone")
            let laptop = try await server.device("alice", "laptop")
            try await phone.createZone("Notes")
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

    // F144: a fetch from nil may list deletions, even of records this device never had, but
    // only of records that were deleted, never of live ones, and never a deleted record as live.
    @Test("F144 a nil-token fetch lists only true deletions", arguments: Harnesses.all)
    func nilTokenFetchDeletions(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let phone = try await server.device("alice", "phone")
            try await phone.createZone("Notes")
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
