import Foundation
import LogStore
import MetricsTestKit
import SyncModel
import Testing

@testable import LogSyncServer

/// The server core's metrics through the factory of its configuration (Docs/Deployment.md,
/// "Operating"): commits timed by store, records saved, deleted and fetched counted, push
/// fan-out timed from the commit's notice.
@Suite("Server core metrics")
struct ServerCoreMetricsTests {
    static let zone = RecordZone.ID(zoneName: "Notes")

    static func note(_ name: String) -> Record {
        Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
    }

    @Test("a commit is timed by store; saves, deletions and fetched records are counted; a notice's fan-out is timed")
    func counts() async throws {
        let metrics = TestMetrics()
        try await withServer(metricsFactory: metrics) { server, _ in
            defer { server.shutdown() }
            let database = server.database(for: "alice", device: "phone")
            _ = try await database.modifyZones(saving: [RecordZone(zoneID: Self.zone)], deleting: [])
            _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: ["a", "b", "c"].map(Self.note)))
            // One save refused (a stale change tag of nothing), one deletion.
            var stale = Self.note("a")
            stale.applySystemFields(Record.SystemFields(recordChangeTag: "no-such-tag"))
            _ = try await database.modifyRecords(
                ModifyRecordsRequest(
                    recordsToSave: [stale], recordIDsToDelete: [Self.note("b").recordID], atomically: false))
            let page = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: Self.zone))

            #expect(try metrics.expectCounter("logsync_records_saved_total").totalValue == 3)
            #expect(try metrics.expectCounter("logsync_records_deleted_total").totalValue == 1)
            #expect(
                try metrics.expectCounter("logsync_records_fetched_total").totalValue == Int64(page.modifications.count)
            )
            #expect(page.modifications.count == 2)
            let appended = try metrics.expectCounter("logsync_log_entries_appended_total", [("store", "lmdb")])
            #expect(
                appended.totalValue == Int64(try server.admin.log(of: "alice", scope: .private).lastOffset.rawValue))
            let commits = try metrics.expectTimer("logsync_commit_duration_seconds", [("store", "lmdb")])
            #expect(commits.values.count == 3)
            // Each commit that changed records of a zone published a notice, handed to the hub here.
            #expect(try metrics.expectTimer("logsync_push_fanout_seconds").values.count >= 2)
        }
    }

    @Test(
        "asset bytes count in flight while an upload is under way, and as stored once its content is new to its owner")
    func assetBytes() async throws {
        let metrics = TestMetrics()
        try await withServer(metricsFactory: metrics) { server, directory in
            defer { server.shutdown() }
            let database = try await ServerAssetTests.prepare(server)
            let bytes = ServerAssetTests.content(3 * AssetTransfer.chunkSize + 5, seed: 3)
            let digest = AssetHasher.digest(of: bytes)
            let file = try ServerAssetTests.file(bytes, in: directory)
            let request = AssetUploadRequest(
                zoneID: ServerAssetTests.notes, digest: digest, size: Int64(bytes.count), fileURL: file)
            _ = try await database.uploadAsset(request)
            let inFlight = try metrics.expectMeter("logsync_asset_bytes_in_flight")
            #expect(inFlight.values.max() == Double(bytes.count))
            #expect(inFlight.lastValue == 0)
            let stored = try metrics.expectCounter("logsync_asset_bytes_stored_total")
            #expect(stored.totalValue == Int64(bytes.count))
            // The same content again: kept already, nothing more stored.
            _ = try await database.uploadAsset(request)
            #expect(stored.totalValue == Int64(bytes.count))
        }
    }
}
