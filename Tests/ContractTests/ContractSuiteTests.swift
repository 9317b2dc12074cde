import Foundation
import LogSyncContract
import LogSyncServer
import SyncModel
import TemporaryDirectory
import Testing

/// The shipped contract suite (LogSyncContract) against every harness, one test case per check,
/// and against databases that break it, which it must catch.
@Suite("The shipped contract suite")
struct ContractSuiteTests {
    @Test("Each check of ContractSuite holds", arguments: Harnesses.all, ContractSuite.checks)
    func check(harness: any ContractHarness, check: ContractCheck) async throws {
        try await withServer(harness) { server in
            let failures = await check.run { user, scope, device in
                try await server.server.database(user: UserID(rawValue: user.name), scope: scope, device: device)
            }
            for failure in failures { Issue.record(Comment(rawValue: failure.description)) }
        }
    }

    @Test("A database that gives every user the same data fails the isolation checks")
    func catchesSharedUsers() async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast))
            defer { server.shutdown() }
            let failures = await ContractSuite.run { _, scope, device in
                server.database(for: "everyone", scope: scope, device: device)
            }
            let failed = Set(failures.map(\.check))
            #expect(failed.contains("isolation.sameRecordIDTwoUsers"))
            #expect(failed.contains("isolation.usersSeeOnlyTheirOwnZones"))
            #expect(failed.contains("isolation.userRecordIDs"))
            #expect(!failed.contains("zones.newZoneCapabilities"), "checks of one user still pass: \(failures)")
        }
    }

    @Test("A database that cannot be reached fails every check, and verify throws them all")
    func catchesUnreachableDatabase() async throws {
        struct Unreachable: Error {}
        let error = await #expect(throws: ContractSuiteFailure.self) {
            try await ContractSuite.verify { _, _, _ in throw Unreachable() }
        }
        let failures = try #require(error).failures
        #expect(failures.map(\.check) == ContractSuite.checks.map(\.id))
        #expect(failures.allSatisfy { $0.message.contains("Unreachable") })
    }

    @Test("Every check has a name of its own")
    func checkNames() {
        let ids = ContractSuite.checks.map(\.id)
        #expect(Set(ids).count == ids.count)
        #expect(ids.count >= 11)
    }
}
