import ChildProcesses
import Foundation
import PostgresProcess
import SyncModel
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `logsync-server serve --replica-url`: a node whose fetches read a streaming replica (a hot
/// standby made by the test with `pg_basebackup -R`) once it has replayed past their token, as
/// its `/metrics` counts.
@Suite("A node reading a streaming replica", .timeLimit(.minutes(5)))
struct ReplicaNodeTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    // F142: fetches read the replica once it has caught up, never with an older token.
    @Test("F142 a node started with --replica-url answers fetches from the replica once it has caught up")
    func nodeReadsTheReplica() async throws {
        let primary = try await PostgresTestServer()
        let standby: PostgresTestServer
        do {
            standby = try await primary.startStandby()
        } catch {
            await primary.destroy()
            throw error
        }
        do {
            let store = try await primary.createDatabase()
            let replica = store.replacingOccurrences(of: ":\(primary.port)/", with: ":\(standby.port)/")
            try await Cluster.with(store: store) { cluster in
                let token = try await cluster.addUser("alice")
                let adminFile = cluster.directory.appendingPathComponent("admin-tokens")
                let adminToken = try await ChildProcess.addAdminToken(to: adminFile, directory: cluster.directory)
                let node = try await cluster.startNode(
                    "node1", options: ["--replica-url", replica, "--admin-token-file", adminFile.path])

                // phone: a zone and a note, on the primary; then, once the replica has them,
                // fetches from the start and from the token.
                let phone = cluster.client(on: node, token: token, device: "phone").database()
                _ = try await phone.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
                var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.notes))
                note["title"] = .string("Groceries")
                _ = try await phone.modifyRecords(saving: [note], deleting: [])
                try await standby.waitUntilCaughtUp(with: primary)
                let first = try await phone.fetchZoneChanges(zoneID: Self.notes, since: nil)
                #expect(first.modifications.map(\.record.recordID.recordName) == ["n1"])
                let next = try await phone.fetchZoneChanges(zoneID: Self.notes, since: first.changeToken)
                #expect(next.modifications.isEmpty && next.changeToken.offset >= first.changeToken.offset)

                let metrics = try await Self.scrape(node.url, adminToken: adminToken)
                let replicaReads = Self.value(
                    of: #"logsync_postgres_replica_reads_total{result="replica"}"#, in: metrics)
                #expect((replicaReads ?? 0) >= 2, "\(metrics.split(separator: "\n").filter { $0.contains("replica") })")
            }
        } catch {
            await standby.destroy()
            await primary.destroy()
            throw error
        }
        await standby.destroy()
        await primary.destroy()
    }

    /// `GET /metrics` of the node, with the admin token.
    static func scrape(_ serverURL: URL, adminToken: String) async throws -> String {
        var request = URLRequest(url: serverURL.appendingPathComponent("metrics"))
        request.setValue("Bearer \(adminToken)", forHTTPHeaderField: "Authorization")
        let (body, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw MultiNodeTestError("GET /metrics answered \(response)")
        }
        return String(decoding: body, as: UTF8.self)
    }

    /// The value of the sample `name` (with its labels as written) in Prometheus text.
    static func value(of name: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
