import BenchSupport
import Foundation
import LogStore
import LogSyncServer
import LogSyncWire
import SyncModel

/// The records the benchmark saves: about 300 bytes of field data each (five string and
/// integer fields), spread round-robin over the database's 100 zones.
let workload = RecordWorkload(zones: 100)

/// Saves `count` new records of `series` in requests of 400 (see `RecordWorkload.save`). With
/// `progress`, prints a line per tenth.
func load(
    _ database: InProcessDatabase, count: Int, series: String, requestIDs: Bool = true, progress: Bool
) async throws -> LoadResult {
    try await workload.save(count, series: series, to: database, requestIDs: requestIDs, reports: progress ? 10 : 0) {
        sofar, records, seconds in
        emit(
            "    \(pad(grouped(sofar.records), 11, left: true)) records: \(pad(grouped(Int(Double(records) / seconds)), 7, left: true)) "
                + "records/s over the last \(grouped(records)); RSS \(Memory.read().rssMiB) MiB")
    }
}

/// A database ready for the fetch measurements: recent tokens taken, then 100 records saved
/// into the fetched zone.
struct Prepared {
    let name: String
    let database: InProcessDatabase
    /// The zone token at the end of the zone's feed, before the 100 new records.
    let zoneToken: ZoneChangeToken
    /// The database token at the end of the database feed, before the 100 new records.
    let databaseToken: DatabaseChangeToken
    /// Fetching the whole zone from no token to the end (every page), once.
    let wholeZone: (seconds: Double, pages: Int, records: Int)
    let dataFileBytes: Int

    var zoneID: RecordZone.ID { zoneToken.zoneID }
}

func prepare(_ name: String, _ database: InProcessDatabase, records: Int, server: SyncServer) async throws -> Prepared {
    let zoneID = workload.zoneID(0)
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
    guard fetched == records / workload.zoneCount + (records % workload.zoneCount > 0 ? 1 : 0) else {
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
    let recent = (0..<ServerBench.recentChanges).map { workload.record($0, series: "recent", zone: 0) }
    try RecordWorkload.check(try await database.modifyRecords(saving: recent, deleting: []), expected: recent.count)

    let path = try server.admin.log(of: database.user).environment.path
    let size = (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int) ?? 0
    return Prepared(
        name: name, database: database, zoneToken: token!, databaseToken: databaseToken!,
        wholeZone: (wholeZoneSeconds, pages, fetched), dataFileBytes: size)
}

/// One zone fetch since the recent token: exactly the 100 new records.
func fetchZoneSinceRecent(_ prepared: Prepared) async throws {
    let page = try await prepared.database.fetchZoneChanges(zoneID: prepared.zoneID, since: prepared.zoneToken)
    guard page.modifications.count == ServerBench.recentChanges, page.deletions.isEmpty, !page.moreComing else {
        throw BenchError(
            "\(prepared.name): the zone fetch since the recent token returned \(page.modifications.count) modifications"
        )
    }
}

/// One database-feed fetch since the recent token: exactly the one zone that changed.
func fetchDatabaseSinceRecent(_ prepared: Prepared) async throws {
    let page = try await prepared.database.fetchDatabaseChanges(since: prepared.databaseToken)
    guard page.modifications.map(\.zoneID) == [prepared.zoneID], page.deletions.isEmpty, !page.moreComing else {
        throw BenchError("\(prepared.name): the database fetch since the recent token returned \(page.modifications)")
    }
}

// MARK: The floor of a commit

/// The least work a server that keeps what it is sent can do for the same requests: the requests
/// of a load (the same records, 400 to a request, with request IDs), as the HTTP transport
/// carries them (protobuf), decoded into records, and each record's bytes, as they came in the
/// request, appended as one LogStore entry, one commit per request, with the same durability as
/// the server, and no server rules, no index. Making and encoding each request is not timed;
/// its decoding and commit are, together, as `modifyRecords` is.
func floorLoad(_ directory: URL, count: Int, series: String, durability: Durability) throws -> LoadResult {
    let log = try Log.open(at: directory, named: "floor", options: LogEnvironment.Options(durability: durability))
    var result = LoadResult()
    let started = ContinuousClock.now
    while result.records < count {
        let first = result.records
        let records = (first..<min(first + RecordWorkload.requestSize, count)).map {
            workload.record($0, series: series)
        }
        let bytes = Wire.encode(
            ModifyRecordsRequest(recordsToSave: records, requestID: RequestID("\(series)-\(result.requests)")),
            as: .protobuf)
        let before = ContinuousClock.now
        let request = try Wire.decode(ModifyRecordsRequest.self, from: bytes, as: .protobuf)
        let slices = try recordBytes(ofModifyRequest: bytes)
        guard slices.count == request.recordsToSave.count else {
            throw BenchError("the floor found \(slices.count) records in a request of \(request.recordsToSave.count)")
        }
        _ = try log.append(slices.map { NewEntry(kind: 1, payload: Array($0)) })
        let seconds = (ContinuousClock.now - before).seconds
        result.records += slices.count
        result.requests += 1
        result.seconds += seconds
        result.latencies.append(seconds)
    }
    result.wallSeconds = (ContinuousClock.now - started).seconds
    return result
}

/// The bytes of each record to save (field 1, `records_to_save`) of a protobuf
/// `logsync.wire.ModifyRecordsRequest`, as they are in the request.
func recordBytes(ofModifyRequest bytes: [UInt8]) throws -> [ArraySlice<UInt8>] {
    try ProtoFields.lengthDelimited(field: 1, in: bytes) {
        BenchError("a ModifyRecordsRequest that does not parse: \($0)")
    }
    .map { bytes[$0] }
}
