import AsyncHTTPClient
import ChildProcesses
import Foundation
import LogSyncPostgres
import Logging
import Testing

/// `/health/ready` of a node on PostgreSQL says whether the node may take traffic: ready while
/// its store answers and it hears the other nodes, not ready (503, naming the check) while it
/// cannot hear them, ready again once it does; `/health/live` answers throughout.
@Suite("Health of nodes on PostgreSQL", .timeLimit(.minutes(3)))
struct HealthNodeTests {
    /// The status and body of `GET path` on `node`.
    static func get(_ path: String, on node: Node) async throws -> (status: Int, body: String) {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: node.url.absoluteString + path), timeout: .seconds(60))
        var body = try await response.body.collect(upTo: 1 << 16)
        return (Int(response.status.code), body.readString(length: body.readableBytes) ?? "")
    }

    @Test(
        "a node that cannot hear the other nodes is not ready (503, naming it) but live, and ready again once it hears")
    func readinessFollowsListening() async throws {
        let store = try await MultiNodeTests.freshDatabase()
        let name = String(store.split(separator: "/").last!)
        defer { try? RevocationTests.onServer(store, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS true") }
        try await Cluster.with(store: store) { cluster in
            let node = try await cluster.startNode("node1")
            let ready = try await Self.get("/health/ready", on: node)
            #expect(ready.status == 200, "\(ready)")
            #expect(ready.body.contains(#""store":"ok""#) && ready.body.contains(#""notifications":"listening""#))

            // No new connection to the database, and the node's listening connection ended.
            try RevocationTests.onServer(store, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS false")
            try RevocationTests.onServer(
                store,
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND query LIKE 'LISTEN%'
                """)
            try await node.process.waitForErrorLine(containing: "token revocations cannot be heard")
            let notReady = try await Self.get("/health/ready", on: node)
            #expect(notReady.status == 503, "\(notReady)")
            #expect(notReady.body.contains(#""status":"not ready""#), "\(notReady)")
            #expect(notReady.body.contains(#""notifications":"not listening"#), "\(notReady)")
            let live = try await Self.get("/health/live", on: node)
            #expect(live.status == 200 && live.body.contains(#""status":"live""#), "\(live)")

            try RevocationTests.onServer(store, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS true")
            try await waitUntil("the node is ready again", limit: .seconds(60)) {
                try await Self.get("/health/ready", on: node).status == 200
            }
        }
    }
}
