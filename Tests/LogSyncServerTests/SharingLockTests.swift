import Foundation
import LogStore
import SyncModel
import SyncTestKit
import Testing

@testable import LogSyncServer

/// Sharing takes one lock per participant, not one for the whole server (F119, F120): a
/// participant's acceptance and propagation never wait for another participant's.
@Suite("The sharing lock, per participant")
struct SharingLockTests {
    @Test("while bob's sharing lock is held, carol accepts a share; bob accepts once it is free")
    func otherParticipantsDoNotWait() async throws {
        try await withServer { server, _ in
            let scenario = try await SharingLockScenario(owner: server)
            var carolAccepted = false
            let heldThroughout = try await SharingLockScenario.holding(
                try server.sharingLockName(of: "bob"), on: server.storage
            ) {
                carolAccepted = try await scenario.accept(as: "carol", through: server)
            }
            #expect(carolAccepted)
            #expect(heldThroughout, "carol's acceptance waited for bob's lock")
            #expect(try await scenario.accept(as: "bob", through: server))
        }
    }

    @Test("a named lock is kept only while it is held or waited for")
    func namedLocksAreDropped() async throws {
        let locks = NamedLocks()
        locks.withLock(named: "sharing:u1") {
            locks.withLock(named: "sharing:u2") { #expect(locks.count == 2) }
            #expect(locks.count == 1)
        }
        #expect(locks.count == 0)
    }
}
