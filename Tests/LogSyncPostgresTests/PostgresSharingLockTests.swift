import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import SyncTestKit
import Testing

/// The per-participant sharing lock across nodes (F119, F120): an advisory lock per participant,
/// so one participant's sharing on one node does not stop another participant's on another, and
/// one participant's sharing still takes turns across nodes.
@Suite("The sharing lock across nodes on PostgreSQL")
struct PostgresSharingLockTests {
    @Test("bob's lock held on one node: carol accepts through the other; bob's acceptance there waits for it")
    func perParticipantAcrossNodes() async throws {
        try await withServerOnPostgres("sharing-lock") { first, firstStorage, directory, url in
            let secondStorage = try await PostgresStorage.open(url: url, connections: 1)
            let second = try await onOwnThread {
                try SyncServer(
                    SyncServer.Configuration(directory: directory.appendingPathComponent("second"), durability: .fast),
                    storage: secondStorage)
            }
            defer { second.shutdown() }
            let scenario = try await SharingLockScenario(owner: first)
            let watcher = try PostgresPool(url: PostgresURL(url), size: 1, logger: quietLogger)
            defer { watcher.shutdown() }
            var carolAccepted = false
            var bob: Task<Bool, any Error>?
            let heldThroughout = try await SharingLockScenario.holding(
                try first.sharingLockName(of: "bob"), on: firstStorage
            ) {
                carolAccepted = try await scenario.accept(as: "carol", through: second)
                // Bob's acceptance on the second node waits on the first node's advisory lock.
                bob = Task { try await scenario.accept(as: "bob", through: second) }
                try await eventually("bob's acceptance waits for his lock", timeout: .seconds(120)) {
                    let waiting = try? await onOwnThread {
                        try watcher.withSession { session in
                            try session.query(
                                """
                                SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                                  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                                """
                            ).first?.decode(Int64.self)
                        }
                    }
                    return (waiting ?? 0) == 1
                }
            }
            #expect(carolAccepted)
            #expect(heldThroughout, "carol's acceptance waited for bob's lock")
            // Released at the end of the body: his acceptance then completes.
            #expect(try await bob?.value == true)
        }
    }
}
