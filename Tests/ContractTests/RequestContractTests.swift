import Foundation
import LogSyncServer
import SyncModel
import Testing

/// One operation of `CloudDatabase`, run with arguments that would succeed.
enum Operation: String, Sendable, CaseIterable, CustomStringConvertible {
    case modifyZones, fetchZones, modifyRecords, fetchDatabaseChanges, fetchZoneChanges
    case modifySubscriptions, allSubscriptions, currentUserRecordID

    var description: String { rawValue }

    func run(on device: Device) async throws {
        let database = device.database
        switch self {
        case .modifyZones: _ = try await database.modifyZones(saving: [RecordZone(zoneName: "More")], deleting: [])
        case .fetchZones: _ = try await database.fetchZones([zoneID("Notes")])
        case .modifyRecords: _ = try await database.modifyRecords(saving: [newRecord("n1")], deleting: [])
        case .fetchDatabaseChanges: _ = try await database.fetchDatabaseChanges(since: nil)
        case .fetchZoneChanges: _ = try await database.fetchZoneChanges(zoneID: zoneID("Notes"), since: nil)
        case .modifySubscriptions:
            _ = try await database.modifySubscriptions(saving: [Subscription(subscriptionID: "engine")], deleting: [])
        case .allSubscriptions: _ = try await database.allSubscriptions()
        case .currentUserRecordID: _ = try await database.currentUserRecordID()
        }
    }
}

/// The general contract of every `CloudDatabase` method (CloudDatabase.swift): errors are
/// `SyncError`s, cancellation gives operationCancelled, and injected whole-request failures
/// reach every operation (F152).
@Suite("CloudDatabase request contract")
struct RequestContractTests {
    // F80, CloudDatabase contract: a call made from a cancelled task throws SyncError
    // operationCancelled, never another error type.
    @Test("cancellation gives operationCancelled", arguments: Harnesses.all, Operation.allCases)
    func cancellation(harness: any ContractHarness, operation: Operation) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            let outcome: Result<Void, any Error> = await Task {
                withUnsafeCurrentTask { $0?.cancel() }
                do {
                    try await operation.run(on: phone)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }.value
            switch outcome {
            case .success:
                Issue.record("\(operation) from a cancelled task succeeded")
            case .failure(let error as SyncError):
                #expect(error.code == .operationCancelled, "\(error)")
            case .failure(let error):
                Issue.record("\(operation) from a cancelled task threw \(type(of: error)) \(error), not a SyncError")
            }
        }
    }

    // F152: an injected failure is the whole-request error of whichever database operation comes
    // next. The account query `currentUserRecordID` is not a database request: it is exempt, so
    // an engine's account check never swallows a failure meant for its next sync.
    @Test(
        "F152 injected failures reach every database operation",
        arguments: Harnesses.all, Operation.allCases.filter { $0 != .currentUserRecordID })
    func injectedFailureReachesEveryOperation(harness: any ContractHarness, operation: Operation) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            server.admin.failNextRequests(of: "alice", with: SyncError(.serviceUnavailable, retryAfter: .seconds(1)))
            let error = await expectThrows(.serviceUnavailable) { try await operation.run(on: phone) }
            #expect(error?.retryAfter == .seconds(1))
            try await operation.run(on: phone)
        }
    }
}

extension RequestContractTests {
    // F152: account queries are exempt from injected request failures.
    @Test("F152 the account query is not failed by an injected request failure", arguments: Harnesses.all)
    func accountQueryExempt(harness: any ContractHarness) async throws {
        try await withPhone(harness) { server, phone in
            server.admin.failNextRequests(of: "alice", with: SyncError(.serviceUnavailable, retryAfter: .seconds(1)))
            _ = try await phone.database.currentUserRecordID()
            // The failure is still there for the next database request.
            let error = await expectThrows(.serviceUnavailable) { try await Operation.allSubscriptions.run(on: phone) }
            #expect(error?.retryAfter == .seconds(1))
        }
    }
}
