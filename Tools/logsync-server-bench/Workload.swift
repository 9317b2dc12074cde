import BenchSupport
import Foundation
import LogSyncServer
import SyncModel

/// The records the benchmark saves: about 300 bytes of field data each (five string and
/// integer fields), spread round-robin over the database's zones.
enum Workload {
    static let recordType = "Item"

    static func zoneID(_ zone: Int) -> RecordZone.ID {
        RecordZone.ID(zoneName: "zone-\(String(format: "%03d", zone))")
    }

    /// Record `index` of a series: in zone `index % zones`, named after the series and index.
    static func record(_ index: Int, series: String, zone: Int? = nil) -> Record {
        let zone = zone ?? index % BenchOptions.zones
        var record = Record(
            recordType: recordType, recordID: Record.ID(recordName: "\(series)-\(index)", zoneID: zoneID(zone)))
        record["title"] = .string(filled("Title of item \(index) in \(series), zone \(zone)", to: 80))
        record["body"] = .string(filled("Body text of item \(index): a few words about it, repeated to fill. ", to: 160))
        record["author"] = .string(filled("user-\(index % 977)", to: 20))
        record["count"] = .int64(Int64(index))
        record["position"] = .int64(Int64(index &* 2_654_435_761 % 1_000_003))
        return record
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

/// Creates the benchmark's zones in a database.
func createZones(_ database: InProcessDatabase) async throws {
    let zones = (0..<BenchOptions.zones).map { RecordZone(zoneID: Workload.zoneID($0)) }
    let response = try await database.modifyZones(saving: zones, deleting: [])
    let failures = response.saveResults.values.filter { if case .failure = $0 { true } else { false } }
    guard failures.isEmpty else { throw BenchError("creating the zones failed: \(failures.first!)") }
}

/// The outcome of loading a database with 400-record modify requests.
struct LoadResult {
    var records = 0
    var requests = 0
    /// Time spent inside `modifyRecords`, each request timed alone (record generation excluded).
    var seconds = 0.0
    /// Wall time of the whole load, generation included.
    var wallSeconds = 0.0
    var latencies: [Double] = []

    var recordsPerSecond: Double { Double(records) / seconds }
    var requestsPerSecond: Double { Double(requests) / seconds }
}

/// Saves `count` new records in requests of 400, each with a request ID (as the engine sends
/// them, F160) unless `requestIDs` is false, checking that every record was saved. With
/// `progress`, prints a line per tenth.
func load(
    _ database: InProcessDatabase, count: Int, series: String, requestIDs: Bool = true, progress: Bool
) async throws -> LoadResult {
    var result = LoadResult()
    let started = ContinuousClock.now
    var segmentRecords = 0
    var segmentSeconds = 0.0
    let step = max(count / 10, BenchOptions.requestSize)
    var nextReport = step
    var first = 0
    while first < count {
        let last = min(first + BenchOptions.requestSize, count)
        let records = (first..<last).map { Workload.record($0, series: series) }
        let request = ModifyRecordsRequest(
            recordsToSave: records, requestID: requestIDs ? RequestID("\(series)-\(result.requests)") : nil)
        let before = ContinuousClock.now
        let response = try await database.modifyRecords(request)
        let seconds = (ContinuousClock.now - before).seconds
        try check(response, expected: records.count)
        result.records += records.count
        result.requests += 1
        result.seconds += seconds
        result.latencies.append(seconds)
        segmentRecords += records.count
        segmentSeconds += seconds
        first = last
        if progress && (first >= nextReport || first == count) {
            emit("    \(pad(grouped(first), 11, left: true)) records: \(pad(grouped(Int(Double(segmentRecords) / segmentSeconds)), 7, left: true)) records/s over the last \(grouped(segmentRecords)); RSS \(Memory.read().rssMiB) MiB")
            segmentRecords = 0
            segmentSeconds = 0
            nextReport += step
        }
    }
    result.wallSeconds = (ContinuousClock.now - started).seconds
    return result
}

func check(_ response: ModifyRecordsResponse, expected: Int) throws {
    guard response.saveResults.count == expected else {
        throw BenchError("a modify request returned \(response.saveResults.count) results for \(expected) records")
    }
    for (recordID, result) in response.saveResults {
        if case .failure(let error) = result { throw BenchError("saving \(recordID) failed: \(error)") }
    }
}

/// A database ready for the fetch measurements: recent tokens taken, then 100 records saved
/// into the fetched zone.
struct Prepared {
    let name: String
    let database: InProcessDatabase
    let records: Int
    let zoneID: RecordZone.ID
    /// The zone token at the end of the zone's feed, before the 100 new records.
    let zoneToken: ZoneChangeToken
    /// The database token at the end of the database feed, before the 100 new records.
    let databaseToken: DatabaseChangeToken
    /// Fetching the whole zone from no token to the end (every page), once.
    let wholeZoneSeconds: Double
    let wholeZonePages: Int
    let wholeZoneRecords: Int
    let dataFileBytes: Int
}

func prepare(_ name: String, _ database: InProcessDatabase, records: Int, server: SyncServer) async throws -> Prepared {
    let zoneID = Workload.zoneID(0)
    // A recent zone token: fetch the zone from no token to the end, as a device's first fetch does.
    var token: ZoneChangeToken?
    var pages = 0
    var fetched = 0
    let started = ContinuousClock.now
    while true {
        let page = try await database.fetchZoneChanges(zoneID: zoneID, since: token)
        pages += 1
        fetched += page.modifications.count + page.deletions.count
        token = page.changeToken
        if !page.moreComing { break }
    }
    let wholeZoneSeconds = (ContinuousClock.now - started).seconds
    guard fetched == records / BenchOptions.zones + (records % BenchOptions.zones > 0 ? 1 : 0) else {
        throw BenchError("\(name): the whole-zone fetch returned \(fetched) records")
    }
    // A recent database token.
    var databaseToken: DatabaseChangeToken?
    while true {
        let page = try await database.fetchDatabaseChanges(since: databaseToken)
        databaseToken = page.changeToken
        if !page.moreComing { break }
    }
    // Then 100 more records into the zone.
    let recent = (0..<BenchOptions.recentChanges).map { Workload.record($0, series: "recent", zone: 0) }
    try check(try await database.modifyRecords(saving: recent, deleting: []), expected: recent.count)

    let path = try server.admin.log(of: database.user).environment.path
    let size = (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int) ?? 0
    return Prepared(
        name: name, database: database, records: records, zoneID: zoneID, zoneToken: token!, databaseToken: databaseToken!,
        wholeZoneSeconds: wholeZoneSeconds, wholeZonePages: pages, wholeZoneRecords: fetched, dataFileBytes: size)
}

/// One zone fetch since the recent token: exactly the 100 new records.
func fetchZoneSinceRecent(_ prepared: Prepared) async throws {
    let page = try await prepared.database.fetchZoneChanges(zoneID: prepared.zoneID, since: prepared.zoneToken)
    guard page.modifications.count == BenchOptions.recentChanges, page.deletions.isEmpty, !page.moreComing else {
        throw BenchError("\(prepared.name): the zone fetch since the recent token returned \(page.modifications.count) modifications")
    }
}

/// One database-feed fetch since the recent token: exactly the one zone that changed.
func fetchDatabaseSinceRecent(_ prepared: Prepared) async throws {
    let page = try await prepared.database.fetchDatabaseChanges(since: prepared.databaseToken)
    guard page.modifications.map(\.zoneID) == [prepared.zoneID], page.deletions.isEmpty, !page.moreComing else {
        throw BenchError("\(prepared.name): the database fetch since the recent token returned \(page.modifications)")
    }
}
