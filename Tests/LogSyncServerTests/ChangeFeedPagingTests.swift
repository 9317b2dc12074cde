import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

/// The change feeds under paging, deletions, re-creations and compaction: the database feed's
/// deletion markers (F140, F149) and the page tokens of a zone listing (F100, F141, F144).
@Suite("Change feeds: paging across deletions and compactions")
struct ChangeFeedPagingTests {
    /// What a model of the history expects from the database feed since a token.
    struct ZoneModel {
        var isLive = false
        /// The step of the zone's latest change (creation, record change or deletion).
        var lastChange = -1
        /// The step of the zone's latest deletion.
        var lastDeletion = -1
    }

    /// After a random history of zone deletions, re-creations, record changes and compactions,
    /// the database feed from every unexpired token, at every page size, reports a zone deleted
    /// exactly when it was deleted after the token, and modified exactly when it is live and
    /// changed after the token; the index equals its rebuild.
    @Test(arguments: [1 as UInt64, 2, 3, 4])
    func databaseFeedMatchesAModelOfTheHistory(seed: UInt64) async throws {
        try await withServer { server, _ in
            var random = SeededRandom(seed: seed)
            let database = server.database(for: "alice", device: "phone")
            let zones = (0..<4).map { RecordZone.ID(zoneName: "Z\($0)") }
            var model = Dictionary(uniqueKeysWithValues: zones.map { ($0, ZoneModel()) })
            var tokens: [DatabaseChangeToken] = [try server.admin.currentToken(of: "alice")]
            var horizon = ChangeOffset.zero
            for step in 0..<120 {
                let zoneID = zones.randomElement(using: &random)!
                switch Int.random(in: 0..<12, using: &random) {
                case 0...2 where model[zoneID]!.isLive:
                    _ = try await database.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [zoneID]))
                    model[zoneID] = ZoneModel(isLive: false, lastChange: step, lastDeletion: step)
                case 3:
                    let token = try server.admin.currentToken(of: "alice")
                    try server.admin.compactTombstones(of: "alice", before: token)
                    horizon = token.offset
                case 4...6 where model[zoneID]!.isLive:
                    var record = Record(recordType: "Note", recordID: Record.ID(recordName: "r\(step)", zoneID: zoneID))
                    record["step"] = .int64(Int64(step))
                    _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [record]))
                    model[zoneID]!.lastChange = step
                case _ where !model[zoneID]!.isLive:
                    _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zoneID)]))
                    model[zoneID]!.isLive = true
                    model[zoneID]!.lastChange = step
                default:
                    break  // saving a live zone again changes nothing
                }
                tokens.append(try server.admin.currentToken(of: "alice"))
            }
            // tokens[i] is the end of the log after step i - 1.
            for (index, token) in tokens.enumerated() {
                let after = index - 1
                for limit in [1, 2, 3, nil] as [Int?] {
                    let label = "seed \(seed), since step \(after), limit \(String(describing: limit))"
                    guard token.offset >= horizon else {
                        await #expect(throws: SyncError.self, "\(label)") {
                            _ = try await database.fetchDatabaseChanges(
                                FetchDatabaseChangesRequest(since: token, resultsLimit: limit))
                        }
                        continue
                    }
                    var since = token
                    var deleted: [RecordZone.ID] = []
                    var modified: [RecordZone.ID] = []
                    var pages = 0
                    while true {
                        let page = try await database.fetchDatabaseChanges(
                            FetchDatabaseChangesRequest(since: since, resultsLimit: limit))
                        #expect(page.modifications.count + page.deletions.count <= limit ?? .max, "\(label)")
                        deleted += page.deletions.map(\.zoneID)
                        modified += page.modifications.map(\.zoneID)
                        since = page.changeToken
                        pages += 1
                        if !page.moreComing { break }
                        try #require(pages < 1_000, "\(label): the feed kept saying moreComing")
                    }
                    let expectedDeleted = Set(zones.filter { model[$0]!.lastDeletion > after })
                    let expectedModified = Set(zones.filter { model[$0]!.isLive && model[$0]!.lastChange > after })
                    #expect(deleted.count == Set(deleted).count, "\(label): a deletion reported twice: \(deleted)")
                    #expect(Set(deleted) == expectedDeleted, "\(label)")
                    #expect(
                        modified.count == Set(modified).count, "\(label): a zone reported modified twice: \(modified)")
                    #expect(Set(modified) == expectedModified, "\(label)")
                }
            }
            let mismatch = try server.admin.log(of: "alice").verifyProjections()
            #expect(mismatch == nil, "seed \(seed): \(String(describing: mismatch))")
        }
    }

    /// A zone deleted and re-created keeps one deletion marker in the database feed, the last
    /// deletion's; a compaction past it removes it.
    @Test func aReCreatedZoneKeepsOneDeletionMarker() async throws {
        try await withServer { server, _ in
            let database = server.database(for: "alice")
            let zone = RecordZone.ID(zoneName: "Z")
            func feedKeys() throws -> [UInt64] {
                try server.admin.log(of: "alice").read { reader in
                    var keys: [UInt64] = []
                    try reader.transaction.forEach(in: reader.table("dbChanges", of: "index")) { key, _ in
                        keys.append(readBigEndian(key))
                        return true
                    }
                    return keys
                }
            }
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
            _ = try await database.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [zone]))
            let firstDeletion = try server.admin.currentToken(of: "alice").offset.rawValue
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
            let recreated = try server.admin.currentToken(of: "alice").offset.rawValue
            #expect(try feedKeys() == [firstDeletion, recreated])
            _ = try await database.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [zone]))
            let secondDeletion = try server.admin.currentToken(of: "alice").offset.rawValue
            #expect(try feedKeys() == [secondDeletion])
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
            let again = try server.admin.currentToken(of: "alice").offset.rawValue
            #expect(try feedKeys() == [secondDeletion, again])
            try server.admin.compactTombstones(of: "alice", before: try server.admin.currentToken(of: "alice"))
            #expect(try feedKeys() == [again])
            #expect(try server.admin.log(of: "alice").verifyProjections() == nil)
        }
    }

    /// A listing's page token is a version-3 token that reads back; every other token keeps
    /// its version-2 bytes, and a version-2 token still reads.
    @Test func listingTokensRoundTrip() throws {
        let zone = RecordZone.ID(zoneName: "Notes")
        let listing = ZoneChangeToken(zoneID: zone, incarnation: 3, offset: 42, database: 7, listingStart: 57)
        #expect(listing.data[2] == 3)
        let decoded = try ZoneChangeToken(data: listing.data)
        #expect(decoded == listing)
        #expect(decoded.listingStart == 57)
        #expect(listing.description == #"ZoneChangeToken(zone "Notes", incarnation 3, offset 42, listing from 57)"#)
        #expect(try JSONDecoder().decode(ZoneChangeToken.self, from: JSONEncoder().encode(listing)) == listing)

        let ordinary = ZoneChangeToken(zoneID: zone, incarnation: 3, offset: 42, database: 7)
        #expect(ordinary.data[2] == 2)
        #expect(ordinary != listing)
        #expect(try ZoneChangeToken(data: ordinary.data).listingStart == 0)
        #expect(DatabaseChangeToken(offset: 42, database: 7).data[2] == 2)

        // A version-3 token must carry a listing start.
        var bytes = Array(listing.data.dropLast(4))
        for index in 36..<44 { bytes[index] = 0 }
        let crc = CRC32C.checksum(bytes)
        let zeroStart = Data(bytes + (0..<4).map { UInt8(truncatingIfNeeded: crc >> UInt32(24 - 8 * $0)) })
        let error = #expect(throws: SyncError.self) { try ZoneChangeToken(data: zeroStart) }
        #expect(error?.code == .invalidArguments)
    }

    /// A listing page token whose listing start is past the end of the log is not from this
    /// database; one whose listing start is older than the horizon has expired.
    @Test func listingTokensAreChecked() async throws {
        try await withServer { server, _ in
            let database = server.database(for: "alice")
            let zone = RecordZone.ID(zoneName: "Notes")
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
            let records = (0..<3).map {
                Record(recordType: "Note", recordID: Record.ID(recordName: "n\($0)", zoneID: zone))
            }
            _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: records))
            let first = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone, resultsLimit: 1))
            let token = first.changeToken
            let end = try server.admin.currentToken(of: "alice").offset
            #expect(token.listingStart == end)
            #expect(token.offset < end)

            let future = ZoneChangeToken(
                zoneID: zone, incarnation: token.incarnation, offset: token.offset, database: token.database,
                listingStart: end.advanced(by: 10))
            let invalid = await #expect(throws: SyncError.self) {
                _ = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone, since: future))
            }
            #expect(invalid?.code == .invalidArguments)

            // A change after the listing's start, then a compaction past it: the deletions the
            // listing needs may be gone.
            _ = try await database.modifyRecords(ModifyRecordsRequest(recordIDsToDelete: [records[2].recordID]))
            try server.admin.compactTombstones(of: "alice", before: try server.admin.currentToken(of: "alice"))
            let expired = await #expect(throws: SyncError.self) {
                _ = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone, since: token))
            }
            #expect(expired?.code == .changeTokenExpired)
        }
    }
}
