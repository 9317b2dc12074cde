import Foundation
import LogSyncServer
import MetricsTestKit
import PostgresProcess
import SyncModel
import Testing

@testable import LogSyncPostgres

/// The PostgreSQL store's metrics (Docs/Deployment.md, "Operating"): connections checked out of
/// the pool, and the lag of push notices between nodes by LISTEN/NOTIFY; commits timed as
/// `postgres`.
@Suite("PostgreSQL metrics")
struct PostgresMetricsTests {
    @Test(
        "F113 a notice from another node is timed from its commit; the pool's connections are back after each request")
    func notifyLagAndPool() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = try await PostgresTestServer.shared().createDatabase()
        let (metrics1, metrics2) = (TestMetrics(), TestMetrics())
        let node1 = try PostgresStorageTests.node(url, in: directory.appendingPathComponent("1"), metrics: metrics1)
        let node2 = try PostgresStorageTests.node(url, in: directory.appendingPathComponent("2"), metrics: metrics2)
        defer {
            node1.shutdown()
            node2.shutdown()
        }
        let phone = node1.database(for: "alice", device: "phone")
        let laptop = node2.database(for: "alice", device: "laptop")
        _ = try await phone.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
        _ = try await phone.modifySubscriptions(saving: [Subscription(subscriptionID: "all")], deleting: [])
        try await eventually("node 2 listens") { (node2.storage as? PostgresStorage)?.isListening == true }
        let hints = laptop.pushHints()
        let lag = try metrics2.expectTimer("logsync_postgres_notify_lag_seconds")
        let before = lag.values.count
        _ = try await phone.modifyRecords(
            saving: [
                Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: .init(zoneName: "Notes")))
            ],
            deleting: [])
        _ = try await firstHint(hints)
        // Received (and timed) before it was handed to the laptop's stream.
        #expect(lag.values.count > before)
        #expect(try metrics2.expectTimer("logsync_push_fanout_seconds").values.count > 0)
        #expect(try metrics1.expectTimer("logsync_commit_duration_seconds", [("store", "postgres")]).values.count == 3)
        // The store's size in one query: the database's bytes, and every log's entries (the
        // registry's and alice's private database's at least: a zone, a subscription, a record).
        let size = try #require(try node1.storage.storedSize())
        #expect(size.bytes > 0)
        #expect((size.entries ?? 0) >= 3, "\(size)")
        let inUse = try metrics1.expectMeter("logsync_postgres_pool_in_use")
        #expect(inUse.lastValue == 0)
        #expect(inUse.values.contains { $0 > 0 })
    }
}
