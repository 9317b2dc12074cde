import BenchSupport
import Foundation
import LogSyncServer
import Synchronization
import SyncModel

/// The records of both phases: about 300 bytes of field data each (three strings, two
/// integers, as in logsync-server-bench), spread round-robin over 10 custom zones.
enum Workload {
    static let recordType = "Item"

    static func zoneID(_ zone: Int) -> RecordZone.ID {
        RecordZone.ID(zoneName: "zone-\(String(format: "%02d", zone))")
    }

    static var zoneIDs: [RecordZone.ID] { (0..<BenchOptions.zones).map(zoneID) }

    static func recordID(_ index: Int, series: String) -> Record.ID {
        Record.ID(recordName: "\(series)-\(index)", zoneID: zoneID(index % BenchOptions.zones))
    }

    /// Record `index` of a series, in zone `index % 10`.
    static func record(_ index: Int, series: String) -> Record {
        var record = Record(recordType: recordType, recordID: recordID(index, series: series))
        fill(&record, index, series: series)
        return record
    }

    /// Sets the record's five fields.
    static func fill(_ record: inout Record, _ index: Int, series: String) {
        let zone = index % BenchOptions.zones
        record["title"] = .string(filled("Title of item \(index) in \(series), zone \(zone)", to: 80))
        record["body"] = .string(filled("Body text of item \(index): a few words about it, repeated to fill. ", to: 160))
        record["author"] = .string(filled("user-\(index % 977)", to: 20))
        record["count"] = .int64(Int64(index))
        record["position"] = .int64(Int64(index &* 2_654_435_761 % 1_000_003))
    }

    /// `text` repeated and cut to exactly `length` characters (ASCII).
    static func filled(_ text: String, to length: Int) -> String {
        var result = text
        while result.count < length { result += " " + text }
        return String(result.prefix(length))
    }

    /// The field data of one record, as the server counts it (`Record.estimatedSize`).
    static var recordSize: Int { record(0, series: "size").estimatedSize }
}

/// Seeds `count` records into the database, as another device would have saved them: the 10
/// zones, then `modifyRecords` requests of 400 new records straight to the server (no engine).
func seed(_ database: InProcessDatabase, count: Int, progress: Bool) async throws -> (seconds: Double, requests: Int) {
    let zones = Workload.zoneIDs.map { RecordZone(zoneID: $0) }
    let zoneResponse = try await database.modifyZones(saving: zones, deleting: [])
    for (zoneID, result) in zoneResponse.saveResults {
        if case .failure(let error) = result { throw BenchError("creating \(zoneID) failed: \(error)") }
    }
    let started = ContinuousClock.now
    var first = 0
    var requests = 0
    let step = max(count / 5, BenchOptions.seedRequestSize)
    var nextReport = step
    while first < count {
        let last = min(first + BenchOptions.seedRequestSize, count)
        let records = (first..<last).map { Workload.record($0, series: "seed") }
        let response = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: records))
        guard response.saveResults.count == records.count else {
            throw BenchError("a seed request returned \(response.saveResults.count) results for \(records.count) records")
        }
        for (recordID, result) in response.saveResults {
            if case .failure(let error) = result { throw BenchError("seeding \(recordID) failed: \(error)") }
        }
        requests += 1
        first = last
        if progress && (first >= nextReport || first == count) {
            emit("    seeded \(grouped(first)) records")
            nextReport += step
        }
    }
    return ((ContinuousClock.now - started).seconds, requests)
}

/// A `CloudDatabase` that forwards to the in-process server and adds up the time spent in it,
/// so that a phase's time can be split between the server and the device.
final class TimedDatabase: CloudDatabase {
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

    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await timed("modifyZones") { try await base.modifyZones(request) }
    }
    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await timed("fetchZones") { try await base.fetchZones(request) }
    }
    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await timed("modifyRecords") { try await base.modifyRecords(request) }
    }
    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        try await timed("fetchDatabaseChanges") { try await base.fetchDatabaseChanges(request) }
    }
    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try await timed("fetchZoneChanges") { try await base.fetchZoneChanges(request) }
    }
    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try await timed("modifySubscriptions") { try await base.modifySubscriptions(request) }
    }
    func allSubscriptions() async throws -> [Subscription] {
        try await timed("allSubscriptions") { try await base.allSubscriptions() }
    }
    func currentUserRecordID() async throws -> Record.ID {
        try await timed("currentUserRecordID") { try await base.currentUserRecordID() }
    }
    func pushHints() -> AsyncStream<PushHint> { base.pushHints() }

    /// Seconds spent in every method together.
    var totalSeconds: Double { figures.values.reduce(0) { $0 + $1.seconds } }
}
