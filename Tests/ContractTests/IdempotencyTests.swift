import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Idempotent retries by request ID (F160, F103).
@Suite("Idempotent retries (F160)")
struct IdempotencyTests {
    // F160, F103: replaying a modify request with the same request ID returns the first outcome
    // and writes nothing, even after later writes to the same record.
    @Test("F160 a replayed request returns the first outcome", arguments: Harnesses.all)
    func replayReturnsFirstOutcome(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            let request = ModifyRecordsRequest(
                recordsToSave: [newRecord("n1", ["title": "v1"])], requestID: "phone-1")

            let first = try await phone.database.modifyRecords(request)
            let saved = try requireSuccess(first.saveResults[recordID("n1")], "the first save")
            let afterFirst = try server.currentToken(of: "alice")

            server.clock.advance(by: 10)
            let replay = try await phone.database.modifyRecords(request)
            #expect(replay == first)
            #expect(try server.currentToken(of: "alice") == afterFirst, "a replay writes nothing")
            #expect(try await laptop.fetchRecord(recordID("n1"))?.recordChangeTag == saved.recordChangeTag)

            let edited = try await phone.save(saved.setting(["title": "v2"]))
            let late = try await phone.database.modifyRecords(request)
            #expect(late == first, "a late replay still returns the first outcome, not a conflict")
            let onServer = try #require(try await laptop.fetchRecord(recordID("n1")))
            #expect(onServer.recordChangeTag == edited.recordChangeTag)
            #expect(onServer["title"] == "v2")
        }
    }

    // F160: a replayed request whose items failed returns the same failures; a replayed
    // deletion returns its first success, not unknownItem.
    @Test("F160 replayed failures and deletions", arguments: Harnesses.all)
    func replayFailuresAndDeletions(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            let v1 = try await phone.save(newRecord("n1", ["v": 1]))
            try await phone.save(v1.setting(["v": 2]))
            let stale = ModifyRecordsRequest(recordsToSave: [v1.setting(["v": 3])], requestID: "phone-2")
            let firstFailure = try await phone.database.modifyRecords(stale)
            expectFailure(firstFailure.saveResults[v1.recordID], .serverRecordChanged)
            let replayedFailure = try await phone.database.modifyRecords(stale)
            expectFailure(replayedFailure.saveResults[v1.recordID], .serverRecordChanged)
            #expect(replayedFailure.saveResults[v1.recordID].map { (try? $0.get()) == nil } == true)

            let deletion = ModifyRecordsRequest(recordIDsToDelete: [v1.recordID], requestID: "phone-3")
            let deleted = try await phone.database.modifyRecords(deletion)
            expectSuccess(deleted.deleteResults[v1.recordID])
            let afterDeletion = try server.currentToken(of: "alice")
            let replayedDeletion = try await phone.database.modifyRecords(deletion)
            #expect(replayedDeletion == deleted)
            #expect(try server.currentToken(of: "alice") == afterDeletion)
        }
    }

    // F160: a different request that reuses a request ID is not a retry: it is never answered
    // with the first request's outcome (it is applied, or rejected as invalid), and its response
    // has one entry per item it carries. "Other content" is another record, or the same record,
    // key and size with another value.
    @Test(
        "F160 a reused request ID with other content is not a replay",
        arguments: Harnesses.all, ReusedRequest.allCases)
    func reusedRequestID(harness: any ContractHarness, reuse: ReusedRequest) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let first = ModifyRecordsRequest(recordsToSave: [newRecord("n1", ["title": "aaaa"])], requestID: "7")
            let saved = try requireSuccess(
                try await phone.database.modifyRecords(first).saveResults[recordID("n1")], "the first save")

            let otherRecord =
                reuse == .otherRecord ? newRecord("n2", ["title": "bbbb"]) : newRecord("n1", ["title": "bbbb"])
            let other = ModifyRecordsRequest(recordsToSave: [otherRecord], requestID: "7")
            do {
                let response = try await laptop.database.modifyRecords(other)
                #expect(Set(response.saveResults.keys) == [otherRecord.recordID], "\(response)")
                #expect(response.deleteResults.isEmpty)
                switch reuse {
                case .otherRecord:
                    expectSuccess(response.saveResults[otherRecord.recordID])
                    #expect(try await phone.fetchRecord(otherRecord.recordID)?["title"] == "bbbb")
                case .sameShapeOtherValue:
                    // Applied, it is an untagged save of an existing record: a conflict.
                    let error = expectFailure(response.saveResults[otherRecord.recordID], .serverRecordChanged)
                    #expect(error?.serverRecord?.recordChangeTag == saved.recordChangeTag)
                }
            } catch let error as SyncError {
                #expect(error.code == .invalidArguments, "\(error)")
            }
            #expect(try await phone.fetchRecord(recordID("n1"))?["title"] == "aaaa")
        }
    }
}

/// How a second request reusing a request ID differs from the first.
enum ReusedRequest: String, Sendable, CaseIterable, CustomStringConvertible {
    case otherRecord, sameShapeOtherValue
    var description: String { rawValue }
}
