import Foundation
import LogSyncServer
import SyncModel
import Testing

/// One row of F145's truth table: the change tag the client sends and whether the server holds
/// the record, with the outcome CloudKit gives.
struct TagRow: Sendable, CustomStringConvertible {
    enum Tag: String, Sendable { case none, matching, stale }
    enum Outcome: Sendable, Equatable { case created, saved, conflict, unknownItem }

    let tag: Tag
    let recordExists: Bool
    let outcome: Outcome

    var description: String { "tag \(tag.rawValue), record \(recordExists ? "exists" : "absent") → \(outcome)" }

    static let all: [TagRow] = [
        TagRow(tag: .none, recordExists: true, outcome: .conflict),
        TagRow(tag: .matching, recordExists: true, outcome: .saved),
        TagRow(tag: .stale, recordExists: true, outcome: .conflict),
        TagRow(tag: .none, recordExists: false, outcome: .created),
        TagRow(tag: .matching, recordExists: false, outcome: .unknownItem),
        TagRow(tag: .stale, recordExists: false, outcome: .unknownItem),
    ]
}

/// Conflict detection by change tag (F145) and the last-writer save policies (F146).
@Suite("Change tags and save policies (F145, F146)")
struct ChangeTagTests {
    // F145, F92: every cell of {tag none/matching/stale} × {record exists/absent}. "Absent" is a
    // record that existed and was deleted, the case a naive server gets wrong.
    @Test("F145 change-tag truth table", arguments: Harnesses.all, TagRow.all)
    func truthTable(harness: any ContractHarness, row: TagRow) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            let v1 = try await phone.save(newRecord("n1", ["title": "v1", "body": "first"]))
            let v2 = try await phone.save(v1.setting(["title": "v2"]))
            if !row.recordExists {
                try await phone.delete(v1.recordID)
            }
            server.clock.advance(by: 60)

            let attempt: Record =
                switch row.tag {
                case .none: newRecord("n1", ["title": "client"])
                case .matching: v2.setting(["title": "client"])
                case .stale: v1.setting(["title": "client"])
                }
            let result = try await laptop.attemptSave(attempt)

            switch row.outcome {
            case .created:
                let saved = try #require(expectSuccess(result))
                #expect(saved.recordChangeTag != nil)
                #expect(saved.recordChangeTag != v2.recordChangeTag)
                #expect(saved["title"] == "client")
                #expect(saved.creationDate == server.clock.now, "a record created after a deletion is new")
                #expect(try await phone.fetchRecord(v1.recordID)?["title"] == "client")
            case .saved:
                let saved = try #require(expectSuccess(result))
                #expect(saved.recordChangeTag != nil)
                #expect(saved.recordChangeTag != v2.recordChangeTag)
                #expect(saved["title"] == "client")
                #expect(try await phone.fetchRecord(v1.recordID)?["title"] == "client")
            case .conflict:
                let error = try #require(expectFailure(result, .serverRecordChanged))
                #expect(error.item == .record(v1.recordID))
                let serverRecord = try #require(error.serverRecord, "a conflict carries the server's record (F92)")
                #expect(serverRecord.recordID == v1.recordID)
                #expect(serverRecord.recordChangeTag == v2.recordChangeTag)
                #expect(serverRecord["title"] == "v2")
                #expect(serverRecord["body"] == "first")
                let onServer = try #require(try await phone.fetchRecord(v1.recordID))
                #expect(onServer.recordChangeTag == v2.recordChangeTag, "a rejected save changes nothing")
                #expect(onServer["title"] == "v2")
            case .unknownItem:
                expectFailure(result, .unknownItem)
                #expect(try await phone.fetchRecord(v1.recordID) == nil, "a rejected save creates nothing")
            }
        }
    }

    // F146: changedKeys and allKeys skip the tag comparison, whether the tag is stale or absent.
    @Test(
        "F146 changedKeys and allKeys skip the change-tag check",
        arguments: Harnesses.all, [SavePolicy.changedKeys, .allKeys])
    func lastWriterPolicies(harness: any ContractHarness, policy: SavePolicy) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let v1 = try await phone.save(newRecord("n1", ["title": "v1"]))
            let v2 = try await phone.save(v1.setting(["title": "v2"]))

            let stale = try await laptop.save(v1.setting(["title": "stale"]), savePolicy: policy)
            #expect(stale["title"] == "stale")
            #expect(stale.recordChangeTag != v2.recordChangeTag)

            let untagged = try await laptop.save(newRecord("n1", ["title": "untagged"]), savePolicy: policy)
            #expect(untagged["title"] == "untagged")
            #expect(untagged.recordChangeTag != stale.recordChangeTag)
            #expect(try await phone.fetchRecord(v1.recordID)?["title"] == "untagged")
        }
    }

    // F146, F132: allKeys saves every key the client's record holds and keeps the server's other
    // keys: a record fetched with desiredKeys, saved with allKeys, touches only the fetched and
    // added keys.
    @Test("F146 F132 allKeys keeps keys the client does not hold", arguments: Harnesses.all)
    func allKeysKeepsOtherKeys(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            try await phone.save(newRecord("n1", ["a": 1, "b": 2]))

            let partial = try #require(try await laptop.fetchZone("Notes", desiredKeys: ["a"]).records[recordID("n1")])
            #expect(partial.allKeys() == ["a"])
            let saved = try await laptop.save(partial.setting(["c": 3]), savePolicy: .allKeys)
            #expect(saved["a"] == 1)
            #expect(saved["c"] == 3)
            #expect(saved["b"] == 2, "a key the client never fetched is not removed")
            let onServer = try #require(try await phone.fetchRecord(recordID("n1")))
            #expect(onServer.allKeys() == ["a", "b", "c"])
        }
    }
}
