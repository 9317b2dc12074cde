import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Why the one bad item of an atomicity test fails.
enum BadItem: String, Sendable, CaseIterable, CustomStringConvertible {
    /// A save with a stale change tag: serverRecordChanged.
    case staleTag
    /// A record over 1 MB: limitExceeded.
    case tooLarge

    var description: String { rawValue }
    var code: SyncError.Code { self == .staleTag ? .serverRecordChanged : .limitExceeded }
}

/// Atomic zone commits (F148): with `atomically`, each zone's changes commit all-or-nothing.
@Suite("Atomic zone commits (F148)")
struct AtomicityTests {
    /// Zone Inbox holds `kept` and `edited` (edited once, so its first version is stale);
    /// zone Archive is empty. Returns the stale first version of `edited`.
    private func prepare(_ phone: Device) async throws -> Record {
        try await phone.createZone("Inbox")
        try await phone.createZone("Archive")
        try await phone.save(newRecord("kept", in: "Inbox"))
        let first = try await phone.save(newRecord("edited", in: "Inbox", ["v": 1]))
        try await phone.save(first.setting(["v": 2]))
        return first
    }

    private func bad(_ kind: BadItem, stale: Record) -> Record {
        switch kind {
        case .staleTag: stale.setting(["v": 3])
        case .tooLarge: sizedRecord("huge", in: "Inbox", size: Limits.maxRecordBytes + 1)
        }
    }

    // F148, F95: one failing item fails its whole zone: it gets its real error, its siblings
    // (saves and deletions) batchRequestFailed, nothing of that zone is written, and the other
    // zone of the request commits.
    @Test("F148 an atomic zone commits all or nothing", arguments: Harnesses.all, BadItem.allCases)
    func atomicZone(harness: any ContractHarness, kind: BadItem) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            let stale = try await prepare(phone)
            let inboxBefore = try await laptop.fetchZone("Inbox")
            let badRecord = bad(kind, stale: stale)

            let response = try await phone.modify(
                saving: [badRecord, newRecord("new", in: "Inbox"), newRecord("other", in: "Archive")],
                deleting: [recordID("kept", in: "Inbox")], atomically: true)

            #expect(response.saveResults.count == 3)
            #expect(response.deleteResults.count == 1)
            expectFailure(response.saveResults[badRecord.recordID], kind.code)
            expectFailure(response.saveResults[recordID("new", in: "Inbox")], .batchRequestFailed)
            expectFailure(response.deleteResults[recordID("kept", in: "Inbox")], .batchRequestFailed)
            expectSuccess(response.saveResults[recordID("other", in: "Archive")])

            let inboxAfter = try await laptop.fetchZone("Inbox", since: inboxBefore.token)
            #expect(inboxAfter.modifiedIDs.isEmpty, "no partial write in the atomic zone")
            #expect(inboxAfter.deletedIDs.isEmpty, "no partial write in the atomic zone")
            let inbox = try await laptop.fetchZone("Inbox")
            #expect(Set(inbox.records.keys) == [recordID("kept", in: "Inbox"), recordID("edited", in: "Inbox")])
            #expect(inbox.records[recordID("edited", in: "Inbox")]?["v"] == 2)
            #expect(try await laptop.fetchZone("Archive").records.keys.contains(recordID("other", in: "Archive")))
        }
    }

    // F148: without atomically, every item succeeds or fails on its own.
    @Test("F148 non-atomic items are independent", arguments: Harnesses.all, BadItem.allCases)
    func nonAtomic(harness: any ContractHarness, kind: BadItem) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            let stale = try await prepare(phone)
            let badRecord = bad(kind, stale: stale)

            let response = try await phone.modify(
                saving: [badRecord, newRecord("new", in: "Inbox"), newRecord("other", in: "Archive")],
                deleting: [recordID("kept", in: "Inbox")], atomically: false)

            expectFailure(response.saveResults[badRecord.recordID], kind.code)
            expectSuccess(response.saveResults[recordID("new", in: "Inbox")])
            expectSuccess(response.deleteResults[recordID("kept", in: "Inbox")])
            expectSuccess(response.saveResults[recordID("other", in: "Archive")])

            let inbox = try await laptop.fetchZone("Inbox")
            #expect(Set(inbox.records.keys) == [recordID("new", in: "Inbox"), recordID("edited", in: "Inbox")])
            #expect(inbox.records[recordID("edited", in: "Inbox")]?["v"] == 2)
        }
    }
}
