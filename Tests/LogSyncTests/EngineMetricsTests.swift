import Foundation
import LogSync
import LogSyncServer
import LogSyncTesting
import Metrics
import MetricsTestKit
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

/// The engine's metrics through the factory its configuration names (Docs/Deployment.md,
/// "Operating"): sends and fetches timed by step, the pending changes after each, conflicts
/// counted (F92). Nothing is bootstrapped: a test injects `TestMetrics`.
@Suite("Engine metrics")
struct EngineMetricsTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let groceries = Record.ID(recordName: "groceries", zoneID: notes)

    /// A device of alice's whose engine records into `metrics`.
    static func device(
        _ name: String, _ server: SyncServer, _ directory: URL, _ metrics: TestMetrics
    ) throws
        -> TestDevice
    {
        try TestDevice(
            name, database: server.database(for: "alice", device: DeviceID(name)),
            directory: directory.appendingPathComponent(name, isDirectory: true)
        ) { configuration in configuration.metricsFactory = metrics }
    }

    @Test("each send and fetch is timed, the pending changes recorded after it, and a conflict counted (F92)")
    func syncsAndConflicts() async throws {
        try await withServer { directory, server in
            let phoneMetrics = TestMetrics()
            let laptopMetrics = TestMetrics()
            let phone = try Self.device("phone", server, directory, phoneMetrics)
            let laptop = try Self.device("laptop", server, directory, laptopMetrics)
            try await phone.seedNote(Self.groceries, "Groceries", in: Self.notes, syncing: laptop)
            let sends = try phoneMetrics.expectTimer("logsync_engine_sync_duration_seconds", [("step", "send")])
            let fetches = try phoneMetrics.expectTimer("logsync_engine_sync_duration_seconds", [("step", "fetch")])
            #expect(sends.values.count == 1 && fetches.values.count == 1)
            let pending = try phoneMetrics.expectGauge("logsync_engine_pending_changes", [("scope", "private")])
            #expect(pending.lastValue == 0)

            // The laptop edits the note the phone changed meanwhile: its save is a conflict.
            try phone.write(Self.groceries, "Milk")
            try await phone.sync()
            try laptop.write(Self.groceries, "Eggs")
            _ = try? await laptop.engine.sendChanges()
            let conflicts = try laptopMetrics.expectCounter("logsync_engine_conflicts_total")
            #expect(conflicts.totalValue == 1)
            #expect((try? phoneMetrics.expectCounter("logsync_engine_conflicts_total").totalValue) ?? 0 == 0)
        }
    }

    @Test("F90 a transient failure's scheduled retry is counted")
    func retries() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await SchedulerTests.serverWithNotes(directory)
            let metrics = TestMetrics()
            let phone = try launch(server: server, directory: directory, metricsFactory: metrics)
            await phone.waitForCatchUp()
            phone.delegate.setTitle(Fixtures.a, "A")
            try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(Fixtures.a)])
            await phone.waitForScheduler()
            server.admin.failNextRequests(of: "alice", count: 1, with: SyncError(.networkFailure, "transient"))
            await phone.clock.advance(by: .seconds(1))
            await waitUntil("a retry is scheduled") { try phone.engine.retries(.send).count == 1 }
            #expect(try metrics.expectCounter("logsync_engine_retries_total").totalValue == 1)
        }
    }
}
