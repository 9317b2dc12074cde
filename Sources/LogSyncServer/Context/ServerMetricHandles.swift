import Foundation
import Metrics

/// The server core's metrics (Docs/Deployment.md, "Operating"), made once from the factory of
/// ``SyncServer/Configuration/metricsFactory``: commits timed by store, records saved, deleted and
/// fetched, push fan-out and sharing propagation timed, asset bytes in flight and stored. No-ops when no backend is bootstrapped.
final class ServerMetricHandles: Sendable {
    /// `logsync_commit_duration_seconds{store}`: a modifying request's work in its store
    /// transaction, rules and append.
    let commitDuration: Metrics.Timer
    /// `logsync_records_saved_total`, `…_deleted_total`: records a modifyRecords saved or deleted.
    let recordsSaved: Counter
    let recordsDeleted: Counter
    /// `logsync_records_fetched_total`: records returned by zone change fetches.
    let recordsFetched: Counter
    /// `logsync_push_fanout_seconds`: from a commit's push notice to its hints handed to the
    /// push channels of this node.
    let pushFanout: Metrics.Timer
    /// `logsync_sharing_propagation_seconds`: bringing participants' shared databases up to date
    /// after a commit to a shared zone.
    let sharingPropagation: Metrics.Timer
    /// `logsync_log_entries_appended_total{store}`: entries committed to users' database logs.
    let logEntriesAppended: Counter
    /// `logsync_asset_bytes_in_flight`: bytes of asset uploads under way (received, the upload
    /// not ended yet).
    let assetBytesInFlight: Meter
    /// `logsync_asset_bytes_stored_total`: bytes of asset contents this node stored (new to their
    /// owner) since it started.
    let assetBytesStored: Counter

    init(factory: any MetricsFactory, store: String) {
        commitDuration = Metrics.Timer(
            label: "logsync_commit_duration_seconds", dimensions: [("store", store)], factory: factory)
        recordsSaved = Counter(label: "logsync_records_saved_total", factory: factory)
        recordsDeleted = Counter(label: "logsync_records_deleted_total", factory: factory)
        recordsFetched = Counter(label: "logsync_records_fetched_total", factory: factory)
        pushFanout = Metrics.Timer(label: "logsync_push_fanout_seconds", factory: factory)
        sharingPropagation = Metrics.Timer(label: "logsync_sharing_propagation_seconds", factory: factory)
        logEntriesAppended = Counter(
            label: "logsync_log_entries_appended_total", dimensions: [("store", store)], factory: factory)
        assetBytesInFlight = Meter(label: "logsync_asset_bytes_in_flight", factory: factory)
        assetBytesStored = Counter(label: "logsync_asset_bytes_stored_total", factory: factory)
    }
}
