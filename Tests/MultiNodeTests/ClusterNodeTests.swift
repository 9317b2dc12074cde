import ChildProcesses
import Foundation
import LogSyncHTTP
import PostgresProcess
import SyncModel
import Testing

/// `logsync-server` processes over two PostgreSQL clusters (`--store` the directory, `--cluster
/// b=…`): users placed on both, and a user moved with `logsync-server user move` while their
/// devices are connected.
@Suite("Nodes on two PostgreSQL clusters")
struct ClusterNodeTests {
    /// The number of entries in the logs of `user` (`u<number>`) in the database at `url`.
    static func entries(_ url: String, _ user: String) throws -> Int64 {
        try logExtents(url).filter { $0.name.hasPrefix(user + "/") }.reduce(0) { $0 + $1.entries }
    }

    @Test("F142 users on two clusters sync through two nodes; `user move` moves one online, tokens go on")
    func moveAcrossNodes() async throws {
        let main = try await PostgresTestServer.shared().createDatabase()
        let b = try await PostgresTestServer.shared(number: 1).createDatabase()
        let clusterOptions = ["--cluster", "b=\(b)"]
        try await Cluster.with(store: main) { cluster in
            func addUser(_ name: String) async throws -> String {
                let added = try await ChildProcess.run(
                    ["user", "add", name, "--store", main] + clusterOptions, directory: cluster.directory)
                guard added.status == 0 else { throw MultiNodeTestError("user add \(name) failed: \(added)") }
                return added.output.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let alice = try await addUser("alice")
            let bob = try await addUser("bob")
            let node1 = try await cluster.startNode("node1", options: clusterOptions)
            let node2 = try await cluster.startNode("node2", options: clusterOptions)
            let notes = RecordZone.ID(zoneName: "Notes")
            func note(_ name: String) -> Record {
                var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
                record["title"] = .string(name)
                return record
            }
            func save(_ name: String, _ database: HTTPCloudDatabase) async throws {
                let response = try await database.modifyRecords(saving: [note(name)], deleting: [])
                _ = try #require(response.saveResults[note(name).recordID]).get()
            }

            // alice's phone on node 1 writes first (placed on main), then bob's on node 2 (on b).
            let alicePhone = cluster.client(on: node1, token: alice, device: "phone").database()
            _ = try await alicePhone.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
            try await save("a1", alicePhone)
            let aliceLogs = try logExtents(main).map(\.name).filter { $0.hasPrefix("u") }
            let u1 = try #require(aliceLogs.first.map { String($0.prefix { $0 != "/" }) })
            let bobPhone = cluster.client(on: node2, token: bob, device: "phone").database()
            _ = try await bobPhone.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
            try await save("b1", bobPhone)
            let bobLogs = try logExtents(b).map(\.name).filter { $0.hasPrefix("u") }
            let u2 = try #require(bobLogs.first.map { String($0.prefix { $0 != "/" }) })
            #expect(u1 != u2)
            #expect(try Self.entries(main, u1) > 0 && Self.entries(b, u1) == 0)
            #expect(try Self.entries(b, u2) > 0 && Self.entries(main, u2) == 0)

            // alice's laptop on node 2 fetches from main; bob's laptop on node 1 from b.
            let aliceLaptop = cluster.client(on: node2, token: alice, device: "laptop").database()
            let (seen, token) = try await fetchAll(aliceLaptop, zone: notes)
            #expect(Set(seen.keys) == ["a1"])
            let bobLaptop = cluster.client(on: node1, token: bob, device: "laptop").database()
            #expect(Set(try await fetchAll(bobLaptop, zone: notes).records.keys) == ["b1"])

            // The operator moves alice to b while both nodes serve her.
            let moved = try await ChildProcess.run(
                ["user", "move", "alice", "--to", "b", "--store", main] + clusterOptions, directory: cluster.directory)
            #expect(moved.status == 0, "\(moved)")
            #expect(moved.output.contains("moved from cluster main to b"), "\(moved)")

            // Both nodes still think she is on main: each meets the fence and goes to b.
            try await save("a2", alicePhone)
            let next = try await aliceLaptop.fetchZoneChanges(zoneID: notes, since: token)
            #expect(next.modifications.map(\.record.recordID.recordName) == ["a2"])
            try await save("a3", aliceLaptop)
            #expect(Set(try await fetchAll(alicePhone, zone: notes).records.keys) == ["a1", "a2", "a3"])
            #expect(try Self.entries(main, u1) == 0)
            #expect(try Self.entries(b, u1) > 0)
            // A wrong cluster name is refused, naming it.
            let wrong = try await ChildProcess.run(
                ["user", "move", "bob", "--to", "c", "--store", main] + clusterOptions, directory: cluster.directory)
            #expect(wrong.status != 0 && wrong.errorOutput.contains("no cluster is named \"c\""), "\(wrong)")
        }
    }
}
