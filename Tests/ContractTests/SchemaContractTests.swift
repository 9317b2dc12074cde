import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Schema modes (F137) on every harness: the development schema grows with what devices save, and
/// once deployed, the server refuses per item what the schema lacks, whatever the transport and
/// the store.
@Suite("Schema modes (F137)")
struct SchemaContractTests {
    // F137: in development mode the schema grows; deployed, an unknown type, an unknown field and a
    // value of another kind each fail alone with invalidArguments naming the record and the field,
    // nothing of them is stored, and the request's other items are saved.
    @Test(
        "F137 production refuses unknown types and fields per item; the schema grew in development",
        arguments: Harnesses.all)
    func productionRefusesPerItem(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            try await phone.save(newRecord("n1", ["title": "Groceries", "pinned": .bool(true)]))
            try await phone.save(newRecord(recordID("f1"), type: "Folder", ["name": "Home"]))
            let grown = try server.admin.developmentSchema(of: "alice")
            #expect(
                grown
                    == RecordSchema([
                        "Note": ["title": .value(.string), "pinned": .value(.bool)],
                        "Folder": ["name": .value(.string)],
                    ]))
            try server.admin.deploySchema(grown)

            let good = newRecord("n2", ["title": "Draft"])
            let unknownType = newRecord(recordID("p1"), type: "Photo", ["title": "Beach"])
            let unknownField = newRecord("n3", ["title": "x", "colour": "red"])
            let wrongKind = newRecord("n4", ["pinned": "yes"])
            let before = try server.currentToken(of: "alice")
            let response = try await phone.modify(
                saving: [good, unknownType, unknownField, wrongKind], atomically: false)
            try requireSuccess(response.saveResults[good.recordID], "saving \(good.recordID)")
            for (record, words) in [
                (unknownType, #"record type "Photo""#), (unknownField, #"field "colour""#),
                (wrongKind, #"field "pinned""#),
            ] {
                let error = expectFailure(response.saveResults[record.recordID], .invalidArguments)
                #expect(error?.item == .record(record.recordID))
                #expect(error?.message.contains(words) == true, "\(String(describing: error))")
                #expect(error?.message.contains(record.recordID.description) == true, "\(String(describing: error))")
            }
            #expect(
                try server.currentToken(of: "alice").offset.rawValue == before.offset.rawValue + 1,
                "only the good record is stored")
            let fetched = try await laptop.fetchZone("Notes")
            #expect(Set(fetched.records.keys.map(\.recordName)) == ["n1", "f1", "n2"])

            // An atomic zone: the refused item fails the others with batchRequestFailed.
            let atomic = try await phone.modify(
                saving: [newRecord("n5", ["title": "a"]), unknownField], atomically: true)
            _ = expectFailure(atomic.saveResults[recordID("n5")], .batchRequestFailed)
            #expect(try server.currentToken(of: "alice").offset.rawValue == before.offset.rawValue + 1)
        }
    }
}
