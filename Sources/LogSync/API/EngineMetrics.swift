import Foundation
import Metrics
import SyncModel

/// The engine's metrics, made once from ``SyncEngine/Configuration/metricsFactory``:
/// `logsync_engine_sync_duration_seconds{step}` (a send or a fetch, from its start to its end),
/// `logsync_engine_pending_changes{scope}` (record zone and database changes waiting, after each
/// sync), `logsync_engine_retries_total` (syncs the scheduler retries after a transient failure,
/// F84, F90) and `logsync_engine_conflicts_total` (saves a send reported as
/// `serverRecordChanged`, F92). With swift-metrics' no-op factory (nothing bootstrapped) the
/// handles do nothing and the pending count is not read.
struct EngineMetrics: Sendable {
    let fetchDuration: Metrics.Timer
    let sendDuration: Metrics.Timer
    let pendingChanges: Gauge
    let retries: Counter
    let conflicts: Counter
    /// Whether a backend records them: the pending count costs a read only then.
    let isRecording: Bool

    init(factory: any MetricsFactory, scope: DatabaseScope) {
        fetchDuration = Metrics.Timer(
            label: "logsync_engine_sync_duration_seconds", dimensions: [("step", "fetch")], factory: factory)
        sendDuration = Metrics.Timer(
            label: "logsync_engine_sync_duration_seconds", dimensions: [("step", "send")], factory: factory)
        pendingChanges = Gauge(
            label: "logsync_engine_pending_changes", dimensions: [("scope", scope.description)], factory: factory)
        retries = Counter(label: "logsync_engine_retries_total", factory: factory)
        conflicts = Counter(label: "logsync_engine_conflicts_total", factory: factory)
        isRecording = !(factory is NOOPMetricsHandler)
    }

    /// Handles that record nothing.
    static let none = EngineMetrics(factory: NOOPMetricsHandler.instance, scope: .private)

    /// Counts the conflicts a send's error reports (F92).
    func countConflicts(in error: any Error) {
        guard let error = error as? SyncError else { return }
        let conflicts = error.partialErrors.values.count { $0.code == .serverRecordChanged }
        if conflicts > 0 { self.conflicts.increment(by: conflicts) }
    }
}
