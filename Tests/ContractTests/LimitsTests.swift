import Foundation
import LogSyncServer
import SyncModel
import Testing

/// A modify request of `saves` new records and `deletes` deletions of existing ones.
struct ItemCount: Sendable, CustomStringConvertible {
    let saves: Int
    let deletes: Int
    var total: Int { saves + deletes }
    var passes: Bool { total <= Limits.maxItemsPerRequest }
    var description: String { "\(saves) saves + \(deletes) deletes" }

    static let boundary: [ItemCount] = [
        ItemCount(saves: 400, deletes: 0), ItemCount(saves: 401, deletes: 0),
        ItemCount(saves: 200, deletes: 200), ItemCount(saves: 200, deletes: 201),
    ]
}

/// Request limits (F151) and the record size limit (F134).
@Suite("Request limits (F134, F151)")
struct LimitsTests {
    // F151: 400 items per request pass; 401 fail the whole request with limitExceeded and
    // write nothing. Saves and deletions count alike.
    @Test("F151 the 400-item boundary", arguments: Harnesses.all, ItemCount.boundary)
    func itemCountBoundary(harness: any ContractHarness, count: ItemCount) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            let existing = (0..<count.deletes).map { newRecord("old\($0)") }
            for chunk in stride(from: 0, to: existing.count, by: 100) {
                try await phone.save(Array(existing[chunk..<min(chunk + 100, existing.count)]))
            }
            let before = try server.currentToken(of: "alice")
            let saves = (0..<count.saves).map { newRecord("new\($0)", ["i": .int64(Int64($0))]) }

            if count.passes {
                let response = try await phone.modify(saving: saves, deleting: existing.map(\.recordID))
                #expect(response.saveResults.count == count.saves)
                #expect(response.deleteResults.count == count.deletes)
                #expect(response.saveResults.values.allSatisfy { (try? $0.get()) != nil })
                #expect(response.deleteResults.values.allSatisfy { (try? $0.get()) != nil })
                let zone = try await laptop.fetchZone("Notes")
                #expect(zone.records.count == count.saves)
            } else {
                await expectThrows(.limitExceeded) {
                    try await phone.modify(saving: saves, deleting: existing.map(\.recordID))
                }
                #expect(try server.currentToken(of: "alice") == before, "a rejected request writes nothing")
                let zone = try await laptop.fetchZone("Notes")
                #expect(zone.records.count == count.deletes)
            }
        }
    }

    // F151: exactly 2,000,000 bytes of field data per request pass; 2,000,001 fail the whole
    // request with limitExceeded.
    @Test("F151 the 2 MB request boundary", arguments: Harnesses.all, [0, 1])
    func requestSizeBoundary(harness: any ContractHarness, extra: Int) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            let records = [
                sizedRecord("a", size: 1_000_000),
                sizedRecord("b", size: 999_999),
                sizedRecord("c", size: 1 + extra),
            ]
            #expect(records.reduce(0) { $0 + $1.estimatedSize } == Limits.maxRequestBytes + extra)
            let before = try server.currentToken(of: "alice")

            if extra == 0 {
                let saved = try await phone.save(records, atomically: false)
                #expect(saved.count == 3)
                #expect(try await laptop.fetchZone("Notes").records.count == 3)
            } else {
                await expectThrows(.limitExceeded) { try await phone.modify(saving: records, atomically: false) }
                #expect(try server.currentToken(of: "alice") == before, "a rejected request writes nothing")
                #expect(try await laptop.fetchZone("Notes").records.isEmpty)
            }
        }
    }

    // F151, F134: a record of 1,000,000 bytes of field data is saved; one of 1,000,001 fails
    // alone with limitExceeded (each request stays under 2 MB).
    @Test("F134 F151 the 1 MB record boundary", arguments: Harnesses.all)
    func recordSizeBoundary(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let fits = sizedRecord("fits", size: Limits.maxRecordBytes)
            let tooBig = sizedRecord("tooBig", size: Limits.maxRecordBytes + 1)

            let fitting = try await phone.modify(saving: [fits, newRecord("small1")], atomically: false)
            let saved = expectSuccess(fitting.saveResults[fits.recordID])
            #expect(saved?["k"] == fits["k"])
            expectSuccess(fitting.saveResults[recordID("small1")])

            let response = try await phone.modify(saving: [tooBig, newRecord("small2")], atomically: false)
            let error = expectFailure(response.saveResults[tooBig.recordID], .limitExceeded)
            #expect(error?.item == .record(tooBig.recordID))
            expectSuccess(response.saveResults[recordID("small2")])
            #expect(
                Set(try await laptop.fetchZone("Notes").records.keys)
                    == [fits.recordID, recordID("small1"), recordID("small2")])
        }
    }

    // F151: the zone modify request has the same 400-item limit.
    @Test("F151 the 400-item boundary for zones", arguments: Harnesses.all, [400, 401])
    func zoneItemCountBoundary(harness: any ContractHarness, count: Int) async throws {
        try await withPhone(harness) { _, phone in
            let zones = (0..<count).map { RecordZone(zoneName: "Z\($0)") }
            if count <= Limits.maxItemsPerRequest {
                let response = try await phone.database.modifyZones(saving: zones, deleting: [])
                #expect(response.saveResults.count == count)
                #expect(response.saveResults.values.allSatisfy { (try? $0.get()) != nil })
            } else {
                await expectThrows(.limitExceeded) { try await phone.database.modifyZones(saving: zones, deleting: []) }
                #expect(try await phone.database.fetchAllZones().filter { !$0.zoneID.isDefaultZone }.isEmpty)
            }
        }
    }

    // F151: a request that names one record twice is malformed as a whole.
    @Test("F151 a record named twice in one request is rejected", arguments: Harnesses.all)
    func duplicateItems(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone async throws in
            await expectThrows(.invalidArguments) {
                try await phone.modify(saving: [newRecord("n1", ["v": 1]), newRecord("n1", ["v": 2])])
            }
            await expectThrows(.invalidArguments) {
                try await phone.modify(saving: [newRecord("n2")], deleting: [recordID("n2")])
            }
            #expect(try await phone.fetchZone("Notes").records.isEmpty)
        }
    }

    // F134, F132: the limit applies to the record as saved: a partial update that would make the
    // stored record exceed 1 MB fails per item, and the server keeps the previous version.
    @Test("F134 a partial update that makes a record too large fails", arguments: Harnesses.all)
    func partialUpdateTooLarge(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            let saved = try await phone.save(newRecord("n1", ["a": .bytes(Data(count: 600_000))]))
            let grown = saved.systemFieldsCopy().setting(["b": .bytes(Data(count: 600_000))])
            #expect(grown.estimatedSize < Limits.maxRecordBytes)
            expectFailure(try await phone.attemptSave(grown), .limitExceeded)
            let onServer = try #require(try await phone.fetchRecord(saved.recordID))
            #expect(onServer.recordChangeTag == saved.recordChangeTag)
            #expect(onServer.allKeys() == ["a"])
        }
    }
}
