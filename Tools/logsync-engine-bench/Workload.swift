import BenchSupport
import Foundation
import LogSyncServer
import SyncModel
import Synchronization

/// The records of both phases: about 300 bytes of field data each (three strings, two
/// integers, as in logsync-server-bench), spread round-robin over 10 custom zones.
let workload = RecordWorkload(zones: 10)

/// The records of the sharing phase: the same records, all in one zone, the one shared.
let sharedWorkload = RecordWorkload(zones: 1)

/// Seeds `count` records into the database, as another device would have saved them: the
/// workload's zones (10 by default), then `modifyRecords` requests of 400 new records straight
/// to the server (no engine). Returns the wall time, record generation included, and the requests.
func seed(
    _ database: InProcessDatabase, count: Int, progress: Bool, in records: RecordWorkload = workload
) async throws -> (seconds: Double, requests: Int) {
    try await records.createZones(in: database)
    let result = try await records.save(
        count, series: "seed", to: database, requestIDs: false, reports: progress ? 5 : 0
    ) {
        sofar, _, _ in emit("    seeded \(grouped(sofar.records)) records")
    }
    return (result.wallSeconds, result.requests)
}

/// A `CloudDatabase` that forwards to the in-process server and adds up the time spent in it,
/// so that a phase's time can be split between the server and the device. It hands over a
/// page's records with their stored bytes as the server does (`RecordBytesFetching`), timed as
/// `fetchZoneChanges`.
final class TimedDatabase: RecordBytesFetching {
    let base: InProcessDatabase
    private let totals = Mutex<[String: (calls: Int, seconds: Double)]>([:])

    init(_ base: InProcessDatabase) { self.base = base }

    var databaseScope: DatabaseScope { base.databaseScope }

    /// Calls and seconds per method.
    var figures: [String: (calls: Int, seconds: Double)] { totals.withLock { $0 } }

    private func timed<R>(_ name: String, _ body: () async throws -> R) async rethrows -> R {
        let started = ContinuousClock.now
        defer {
            let seconds = (ContinuousClock.now - started).seconds
            totals.withLock { totals in
                let old = totals[name] ?? (0, 0)
                totals[name] = (old.calls + 1, old.seconds + seconds)
            }
        }
        return try await body()
    }

    // Each method of the server, timed under its name.
    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await timed(#function) { try await base.modifyZones(request) }
    }
    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await timed(#function) { try await base.fetchZones(request) }
    }
    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await timed(#function) { try await base.modifyRecords(request) }
    }
    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        try await timed(#function) { try await base.fetchDatabaseChanges(request) }
    }
    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try await timed(#function) { try await base.fetchZoneChanges(request) }
    }
    func fetchZoneChangesKeepingRecordBytes(_ request: FetchZoneChangesRequest) async throws -> FetchedZoneChanges {
        try await timed("fetchZoneChanges(_:)") { try await base.fetchZoneChangesKeepingRecordBytes(request) }
    }
    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try await timed(#function) { try await base.modifySubscriptions(request) }
    }
    func allSubscriptions() async throws -> [Subscription] {
        try await timed(#function) { try await base.allSubscriptions() }
    }
    func currentUserRecordID() async throws -> Record.ID {
        try await timed(#function) { try await base.currentUserRecordID() }
    }
    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await timed(#function) { try await base.uploadAsset(request) }
    }
    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try await timed(#function) { try await base.downloadAsset(request) }
    }
    func pushHints() -> AsyncStream<PushHint> { base.pushHints() }

    /// Seconds spent in every method together.
    var totalSeconds: Double { figures.values.reduce(0) { $0 + $1.seconds } }
}
