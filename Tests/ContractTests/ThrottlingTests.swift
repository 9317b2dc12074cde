import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Throttling and availability (F152) and storage quota (F153).
@Suite("Throttling and quota (F152, F153)")
struct ThrottlingTests {
    // F152, F90: injected request failures reach the client whole, with their retry-after, on
    // any operation and scope of that user only; a failed request changes nothing; once the
    // failures are used up (and the wait is over) requests succeed.
    @Test(
        "F152 throttling with retry-after, then success",
        arguments: Harnesses.all, [SyncError.Code.requestRateLimited, .serviceUnavailable, .zoneBusy])
    func throttling(harness: any ContractHarness, code: SyncError.Code) async throws {
        try await withPhone(harness) { server, phone in
            let shared = try await server.device("alice", "phone", scope: .shared)
            let bob = try await server.device("bob", "phone")
            try await phone.createZone("Notes")
            try await bob.createZone("Notes")
            let before = try server.currentToken(of: "alice")

            server.admin.failNextRequests(
                of: "alice", count: 2, with: SyncError(code, "injected", retryAfter: .seconds(3)))

            let first = await expectThrows(code) { try await phone.modify(saving: [newRecord("n1")]) }
            #expect(first?.retryAfter == .seconds(3))
            #expect(first?.retryAfterSeconds == 3)
            try await bob.save(newRecord("b1"))
            let second = await expectThrows(code) { try await shared.database.allSubscriptions() }
            #expect(second?.retryAfter == .seconds(3))
            #expect(try server.currentToken(of: "alice") == before, "a failed request writes nothing")

            server.clock.advance(by: 3)
            try await phone.save(newRecord("n1"))
            #expect(Set(try await phone.fetchZone("Notes").records.keys) == [recordID("n1")])
        }
    }

    // F153, F97: saves past a user's quota fail per item with quotaExceeded; other users are
    // unaffected, and lifting the quota lets the save through.
    @Test("F153 quota exceeded per item, per user", arguments: Harnesses.all)
    func quota(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            let bob = try await server.device("bob", "phone")
            try await alice.createZone("Notes")
            try await bob.createZone("Notes")
            server.admin.setQuota(1_000, for: "alice")

            try await alice.save(sizedRecord("r1", size: 600))
            let over = expectFailure(try await alice.attemptSave(sizedRecord("r2", size: 600)), .quotaExceeded)
            #expect(over?.item == .record(recordID("r2")))
            #expect(try await alice.fetchRecord(recordID("r2")) == nil)

            try await bob.save(sizedRecord("r1", size: 600))
            try await bob.save(sizedRecord("r2", size: 600))

            server.admin.setQuota(nil, for: "alice")
            try await alice.save(sizedRecord("r2", size: 600))
        }
    }

    // F153: the quota counts the data stored now: deleting a record or its zone frees its
    // bytes, and replacing a field counts the new size, not the sum of every version.
    @Test("F153 quota counts current storage", arguments: Harnesses.all)
    func quotaCountsCurrentStorage(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            try await alice.createZone("Notes")
            server.admin.setQuota(1_000, for: "alice")

            var r1 = try await alice.save(sizedRecord("r1", size: 600))
            for size in [700, 800, 900] {
                r1 = try await alice.save(r1.setting(["k": .bytes(Data(count: size - 1))]))
            }
            expectFailure(try await alice.attemptSave(sizedRecord("r2", size: 600)), .quotaExceeded)
            try await alice.delete(r1.recordID)
            try await alice.save(sizedRecord("r2", size: 600))

            try await alice.deleteZone("Notes")
            try await alice.createZone("Notes")
            try await alice.save(sizedRecord("r3", size: 900))
        }
    }
}
