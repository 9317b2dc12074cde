// The records of the sync benchmarks (server, engine, HTTP), and how they save them.
import ArgumentParser
import Foundation
import SyncModel

/// The records the sync benchmarks save, fetch and send: about 300 bytes of field data each
/// (three strings, two integers), type `Item`, spread round-robin over `zoneCount` custom zones.
package struct RecordWorkload: Sendable {
    package static let recordType = "Item"
    /// Records per modify request: the server's limit (F151).
    package static let requestSize = 400

    package let zoneCount: Int

    package init(zones: Int) { zoneCount = zones }

    /// `zone-00`… with 10 zones, `zone-000`… with 100.
    package func zoneID(_ zone: Int) -> RecordZone.ID {
        RecordZone.ID(zoneName: "zone-" + String(format: "%0\(String(zoneCount).count)d", zone))
    }

    package var zoneIDs: [RecordZone.ID] { (0..<zoneCount).map(zoneID) }

    /// Record `index` of a series: in zone `zone`, by default `index % zoneCount`.
    package func recordID(_ index: Int, series: String, zone: Int? = nil) -> Record.ID {
        Record.ID(recordName: "\(series)-\(index)", zoneID: zoneID(zone ?? index % zoneCount))
    }

    package func record(_ index: Int, series: String, zone: Int? = nil) -> Record {
        let zone = zone ?? index % zoneCount
        var record = Record(recordType: Self.recordType, recordID: recordID(index, series: series, zone: zone))
        record["title"] = .string(Self.filled("Title of item \(index) in \(series), zone \(zone)", to: 80))
        record["body"] = .string(
            Self.filled("Body text of item \(index): a few words about it, repeated to fill. ", to: 160))
        record["author"] = .string(Self.filled("user-\(index % 977)", to: 20))
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
    package var recordSize: Int { record(0, series: "size").estimatedSize }

    /// Creates the zones in `database`.
    package func createZones(in database: some CloudDatabase) async throws {
        let response = try await database.modifyZones(saving: zoneIDs.map { RecordZone(zoneID: $0) }, deleting: [])
        for (zoneID, result) in response.saveResults {
            if case .failure(let error) = result { throw BenchError("creating \(zoneID) failed: \(error)") }
        }
    }

    /// Saves records `0..<count` of `series` as new records in requests of 400, each with a
    /// request ID (as the engine sends them, F160) unless `requestIDs` is false, and checks that
    /// every record was saved. With `reports` > 0, calls `report` that many times along the way
    /// (after the request that passes each step, and after the last) with the result so far
    /// and the records and seconds since the previous report.
    package func save(
        _ count: Int, series: String, to database: some CloudDatabase, requestIDs: Bool = true, reports: Int = 0,
        report: (_ sofar: LoadResult, _ segmentRecords: Int, _ segmentSeconds: Double) -> Void = { _, _, _ in }
    ) async throws -> LoadResult {
        var result = LoadResult()
        let started = ContinuousClock.now
        var segment = (records: 0, seconds: 0.0)
        let step = reports > 0 ? max(count / reports, Self.requestSize) : Int.max
        var nextReport = step
        while result.records < count {
            let first = result.records
            let records = (first..<min(first + Self.requestSize, count)).map { record($0, series: series) }
            let request = ModifyRecordsRequest(
                recordsToSave: records, requestID: requestIDs ? RequestID("\(series)-\(result.requests)") : nil)
            let before = ContinuousClock.now
            let response = try await database.modifyRecords(request)
            let seconds = (ContinuousClock.now - before).seconds
            try Self.check(response, expected: records.count)
            result.records += records.count
            result.requests += 1
            result.seconds += seconds
            result.latencies.append(seconds)
            segment.records += records.count
            segment.seconds += seconds
            if reports > 0 && (result.records >= nextReport || result.records == count) {
                report(result, segment.records, segment.seconds)
                segment = (0, 0)
                nextReport += step
            }
        }
        result.wallSeconds = (ContinuousClock.now - started).seconds
        return result
    }

    /// Throws unless the response saved every one of `expected` records.
    package static func check(_ response: ModifyRecordsResponse, expected: Int) throws {
        guard response.saveResults.count == expected else {
            throw BenchError("a modify request returned \(response.saveResults.count) results for \(expected) records")
        }
        for (recordID, result) in response.saveResults {
            if case .failure(let error) = result { throw BenchError("saving \(recordID) failed: \(error)") }
        }
    }
}

/// `--records` of the benchmarks that sync records through an engine (engine, HTTP).
package struct SyncedRecordsOption: ParsableArguments {
    package init() {}

    @Option(
        help: ArgumentHelp(
            "Records fetched in the initial sync, and edits sent (default 100,000, 10,000 with --quick).",
            valueName: "N"),
        transform: count(atLeast: 10))
    package var records: Int?

    /// `--records`, or the default.
    package func total(_ common: CommonOptions) -> Int { records ?? common.size(100_000, quick: 10_000) }
}

/// The outcome of saving records in modify requests.
package struct LoadResult: Sendable {
    package var records = 0
    package var requests = 0
    /// Time spent inside `modifyRecords`, each request timed alone (record generation excluded).
    package var seconds = 0.0
    /// Wall time of the whole load, generation included.
    package var wallSeconds = 0.0
    package var latencies: [Double] = []

    package init() {}

    package var recordsPerSecond: Double { Double(records) / seconds }
    package var requestsPerSecond: Double { Double(requests) / seconds }

    /// `123,456 records/s, 308.6 requests/s`: the two rates as the benchmarks print them.
    package var rates: String {
        "\(grouped(Int(recordsPerSecond))) records/s, \(String(format: "%.1f", requestsPerSecond)) requests/s"
    }
}

/// Reads everything `database` holds the way a fresh device does: the database's change feed
/// from no token to its end, then each zone it names from no token to the end, calling `page`
/// with each zone page in order.
package func forEachZonePage(
    of database: any CloudDatabase, _ page: (FetchZoneChangesResponse) async throws -> Void
) async throws {
    var zoneIDs: [RecordZone.ID] = []
    var databaseToken: DatabaseChangeToken?
    while true {
        let changes = try await database.fetchDatabaseChanges(FetchDatabaseChangesRequest(since: databaseToken))
        zoneIDs += changes.modifications.map(\.zoneID)
        databaseToken = changes.changeToken
        if !changes.moreComing { break }
    }
    for zoneID in zoneIDs {
        var token: ZoneChangeToken?
        while true {
            let changes = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zoneID, since: token))
            try await page(changes)
            token = changes.changeToken
            if !changes.moreComing { break }
        }
    }
}
