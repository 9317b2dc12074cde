import Foundation
import LogSyncServer
import SyncModel
import Testing

/// References: deleteSelf cascades, their limit, and parents (F135, F136).
@Suite("References (F135, F136)")
struct ReferenceTests {
    func child(_ name: String, of target: String, action: Record.Reference.Action = .deleteSelf) -> Record {
        newRecord(
            name, type: "Item", ["list": .reference(Record.Reference(recordID: recordID(target), action: action))])
    }

    // F135, F136: deleting a target deletes its deleteSelf referrers, transitively; the sender's
    // results list only what it asked to delete, and a fetch lists every deletion.
    @Test("F135 F136 deleteSelf cascades, invisible to the sender", arguments: Harnesses.all)
    func cascade(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            try await phone.save(newRecord("list", type: "List"))
            try await phone.save(child("item1", of: "list"))
            try await phone.save(
                newRecord(
                    "detail", type: "Detail",
                    [
                        "item": .reference(Record.Reference(recordID: recordID("item1"), action: .deleteSelf))
                    ]))
            try await phone.save(child("loose", of: "list", action: .none))
            let before = try await laptop.fetchZone("Notes")
            #expect(before.records.count == 4)

            let response = try await phone.modify(deleting: [recordID("list")])
            #expect(Array(response.deleteResults.keys) == [recordID("list")])

            let after = try await laptop.fetchZone("Notes", since: before.token)
            #expect(Set(after.deletedIDs) == [recordID("list"), recordID("item1"), recordID("detail")])
            #expect(after.deletions[recordID("detail")] == "Detail")
            let all = try await laptop.fetchZone("Notes")
            #expect(Set(all.records.keys) == [recordID("loose")])
        }
    }

    // F135: a record that drops its deleteSelf reference is no longer deleted with the target.
    @Test("F135 a removed reference no longer cascades", arguments: Harnesses.all)
    func removedReference(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            try await phone.save(newRecord("list", type: "List"))
            let item = try await phone.save(child("item1", of: "list"))
            try await phone.save(item.setting(["list": nil]))
            try await phone.delete(recordID("list"))
            #expect(try await phone.fetchRecord(recordID("item1")) != nil)
        }
    }

    // F135: at most 750 deleteSelf references may point at one record.
    @Test("F135 the 751st deleteSelf reference is rejected", arguments: Harnesses.all)
    func referenceLimit(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            try await phone.save(newRecord("list", type: "List"))
            let limit = Limits.maxDeleteSelfReferencesPerTarget
            for start in stride(from: 0, to: limit, by: 250) {
                let batch = (start..<min(start + 250, limit)).map { child("item\($0)", of: "list") }
                let response = try await phone.modify(saving: batch)
                #expect(response.saveResults.values.allSatisfy { (try? $0.get()) != nil })
            }
            let error = expectFailure(try await phone.attemptSave(child("one-too-many", of: "list")), .limitExceeded)
            #expect(error?.message.contains("750") == true)
            // A reference without deleteSelf is not counted.
            expectSuccess(try await phone.attemptSave(child("plain", of: "list", action: .none)))
        }
    }

    // F135: a parent must exist or be saved in the same request.
    @Test("F135 a parent must exist or come in the same request", arguments: Harnesses.all)
    func parents(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            var orphan = newRecord("orphan")
            orphan.parent = Record.Reference(recordID: recordID("missing"))
            expectFailure(try await phone.attemptSave(orphan), .referenceViolation)

            var child = newRecord("child")
            child.parent = Record.Reference(recordID: recordID("folder"))
            let response = try await phone.modify(saving: [newRecord("folder", type: "Folder"), child])
            expectSuccess(response.saveResults[recordID("child")])
            #expect(try await phone.fetchRecord(recordID("child"))?.parent?.recordID == recordID("folder"))
        }
    }
}
