import BenchSupport
import Foundation
import LogStore
import LogSync
import LogSyncPlatform
import SyncModel

/// The open phase: how long a device's engine takes to open on a long device log, from
/// `SyncEngine(configuration)` to the first `state.pendingRecordZoneChanges`. Opening reads the
/// log's projections, never replays the log, so the time must not grow with the log's length
/// (requirement: the 1,000,000-entry log opens within 2× the 10,000-entry one).
///
/// The logs are built (phase `build`, `.fast`) from the entries a device writes in its life:
/// the app's edits one `state.add` call each, an edit undone, sends (`batchPrepared` with the
/// records, `batchResult` with the server's copies), fetches of another device's edits (a
/// database page, a zone page with records, the delivery marks). They are appended with
/// `DeviceLog.append(_:)` (package access), a few thousand entries per commit, so the index is
/// kept exactly as the engine keeps it; only the commits are grouped.
enum OpenWorkload {
    /// The app's records: every edit, send and fetch touches one of these, so the state (last
    /// known server records, tokens, zones) stays the same size however long the log grows.
    static let recordCount = 2_000
    /// Record changes the app adds at the end of the log and has not sent yet: the first read
    /// returns these (plus the few entries needed to reach the exact length).
    static let tailChanges = 200
    /// Entries per `DeviceLog.append` call (one commit each) while building.
    static let appendChunk = 2_000
    /// Entries of one cycle (see `DeviceLogBuilder.cycle`) and of the prelude.
    static let cycleEntries = 18
    static let preludeEntries = 6
    /// The smallest log the benchmark builds.
    static let minimumEntries = preludeEntries + tailChanges

    static let user = Record.ID(recordName: "_user-alice")
    static let otherDevice = Record.ID(recordName: "_user-alice-tablet")
}

/// Generates a device log's entries in order and appends them in chunks, tracking what the
/// server would have assigned (change tags, log offsets) and the offsets the entries get.
struct DeviceLogBuilder {
    let deviceLog: DeviceLog
    private var entries: [DeviceEntry] = []
    /// The offset the next generated entry will have.
    private var nextOffset: UInt64
    /// The server database's log offset, for tokens and change tags.
    private var serverOffset: UInt64 = 1_000
    /// Last known server system fields per record number.
    private var known: [Int: Record.SystemFields] = [:]
    /// The app's record contents per record number.
    private let contents: [Record]
    private let started = Date(timeIntervalSince1970: 1_790_000_000)
    private(set) var appendCalls = 0

    init(deviceLog: DeviceLog) throws {
        self.deviceLog = deviceLog
        nextOffset = try deviceLog.log.lastOffset.next.rawValue
        contents = (0..<OpenWorkload.recordCount).map { workload.record($0, series: "app") }
    }

    /// Builds a log of exactly `count` entries (on an empty log).
    mutating func build(count: Int, progress: Bool) throws {
        precondition(count >= OpenWorkload.minimumEntries)
        let cycles = (count - OpenWorkload.preludeEntries - OpenWorkload.tailChanges) / OpenWorkload.cycleEntries
        let tail = count - OpenWorkload.preludeEntries - cycles * OpenWorkload.cycleEntries
        try prelude()
        let step = max(cycles / 5, 1)
        for k in 0..<cycles {
            try cycle(k)
            if progress && (k + 1) % step == 0 && k + 1 < cycles {
                emit("    built \(grouped((k + 1) * OpenWorkload.cycleEntries + OpenWorkload.preludeEntries)) entries")
            }
        }
        // The app's latest edits, not sent yet.
        for t in 0..<tail {
            let id = (cycles * 6 + 6 + t) % OpenWorkload.recordCount
            add(.pendingRecordZoneChangesAdded([.saveRecord(workload.recordID(id, series: "app"))]))
        }
        try flush()
    }

    /// The account check, the app's zones sent, the subscription.
    private mutating func prelude() throws {
        let zones = workload.zoneIDs.map { RecordZone(zoneID: $0) }
        add(.accountChanged(previous: nil, current: OpenWorkload.user))
        add(.pendingDatabaseChangesAdded(zones.map { .saveZone($0) }))
        add(.sendStarted(SyncEngine.SendChangesContext(reason: .scheduled, options: SyncEngine.SendChangesOptions())))
        add(.databaseChangesSent(savedZones: zones, deletedZoneIDs: [], failedZoneSaves: [:], failedZoneDeletes: [:]))
        add(.sendFinished(error: nil))
        add(.subscriptionEnsured("logsync-engine-bench"))
        try flushIfFull()
    }

    /// One stretch of the device's life, 18 entries: the user edits six records (one
    /// `state.add` each; every fourth cycle the first edit is a deletion) and undoes the last
    /// one; a send of the five left (`batchPrepared` with the records built on their last known
    /// server records, `batchResult` with the server's copies); then a fetch of two records
    /// another device changed in one zone (database page, zone page, each followed by its
    /// delivery mark as the engine writes it).
    private mutating func cycle(_ k: Int) throws {
        let ids = (0..<6).map { (k * 6 + $0) % OpenWorkload.recordCount }
        var changes: [SyncEngine.PendingRecordZoneChange] = []
        for (j, id) in ids.enumerated() {
            let recordID = workload.recordID(id, series: "app")
            changes.append(j == 0 && k % 4 == 0 ? .deleteRecord(recordID) : .saveRecord(recordID))
            add(.pendingRecordZoneChangesAdded([changes[j]]))
        }
        add(.pendingRecordZoneChangesRemoved([changes[5]]))

        var toSave: [Record] = []
        var saved: [Record] = []
        var toDelete: [Record.ID] = []
        for (j, id) in ids.prefix(5).enumerated() {
            if case .deleteRecord(let recordID) = changes[j] {
                toDelete.append(recordID)
                continue
            }
            let record = edit(id, version: k)
            toSave.append(record)
            saved.append(serverCopy(record, id, by: OpenWorkload.user))
        }
        add(.sendStarted(SyncEngine.SendChangesContext(reason: .scheduled, options: SyncEngine.SendChangesOptions())))
        add(.batchPrepared(recordsToSave: toSave, recordIDsToDelete: toDelete, atomicByZone: false))
        add(.batchResult(saved: saved, deleted: toDelete, failedSaves: [:], failedDeletes: [:]))
        for id in ids.prefix(5) where toDelete.contains(workload.recordID(id, series: "app")) { known[id] = nil }
        serverOffset += UInt64(toDelete.count)
        add(.sendFinished(error: nil))

        let zone = k % workload.zoneCount
        let zoneID = workload.zoneID(zone)
        let fetchedIDs = [(k * 7) % (OpenWorkload.recordCount / 10), (k * 7 + 3) % (OpenWorkload.recordCount / 10)]
            .map { $0 * workload.zoneCount + zone }
        let fetched = fetchedIDs.map { serverCopy(edit($0, version: k), $0, by: OpenWorkload.otherDevice) }
        add(
            .fetchStarted(SyncEngine.FetchChangesContext(reason: .scheduled, options: SyncEngine.FetchChangesOptions()))
        )
        let databasePage = add(
            .databaseChangesFetched(
                modifications: [zoneID], deletions: [],
                changeToken: DatabaseChangeToken(offset: ChangeOffset(serverOffset)), moreComing: false))
        add(.eventsDelivered(through: databasePage))
        let zonePage = add(
            .zoneChangesFetched(
                zoneID: zoneID, modifications: fetched, deletions: [],
                changeToken: ZoneChangeToken(zoneID: zoneID, incarnation: 1, offset: ChangeOffset(serverOffset)),
                moreComing: false))
        add(.eventsDelivered(through: zonePage))
        add(.zoneFetchFinished(zoneID: zoneID, error: nil))
        add(.fetchFinished(error: nil))
        try flushIfFull()
    }

    /// The app's edit of record `id`: its fields on the last known server record, as an app
    /// rebuilds it (`systemFieldsCopy()` plus fields).
    private func edit(_ id: Int, version: Int) -> Record {
        let content = contents[id]
        var record = Record(recordType: content.recordType, recordID: content.recordID)
        if let systemFields = known[id] { record.applySystemFields(systemFields) }
        for key in content.allKeys() { record[key] = content[key] }
        record["count"] = .int64(Int64(version))
        return record
    }

    /// The server's copy of a saved record: new change tag and modification date.
    private mutating func serverCopy(_ record: Record, _ id: Int, by user: Record.ID) -> Record {
        serverOffset += 1
        let previous = known[id]
        let now = started.addingTimeInterval(Double(serverOffset))
        let systemFields = Record.SystemFields(
            recordChangeTag: String(serverOffset, radix: 36), creationDate: previous?.creationDate ?? now,
            modificationDate: now, creatorUserRecordID: previous?.creatorUserRecordID ?? user,
            lastModifiedUserRecordID: user)
        known[id] = systemFields
        var copy = record
        copy.applySystemFields(systemFields)
        return copy
    }

    @discardableResult
    private mutating func add(_ entry: DeviceEntry) -> LogOffset {
        entries.append(entry)
        nextOffset += 1
        return LogOffset(nextOffset - 1)
    }

    private mutating func flushIfFull() throws {
        if entries.count >= OpenWorkload.appendChunk { try flush() }
    }

    private mutating func flush() throws {
        guard !entries.isEmpty else { return }
        let expected = LogOffset(nextOffset - UInt64(entries.count))
        let range = try deviceLog.append(entries)
        appendCalls += 1
        guard range.lowerBound == expected, range.upperBound == LogOffset(nextOffset) else {
            throw BenchError("appended at \(range), expected \(expected)..<\(nextOffset)")
        }
        entries.removeAll(keepingCapacity: true)
    }
}

/// A database that is never reached: the open phase syncs nothing, and an engine with
/// `automaticallySync` false only asks it for its push hints.
final class OfflineDatabase: CloudDatabase {
    var databaseScope: DatabaseScope { .private }
    private func offline() -> SyncError { SyncError(.networkFailure, "the open phase is offline") }
    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse { throw offline() }
    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse { throw offline() }
    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse { throw offline() }
    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        throw offline()
    }
    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        throw offline()
    }
    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        throw offline()
    }
    func allSubscriptions() async throws -> [Subscription] { throw offline() }
    func currentUserRecordID() async throws -> Record.ID { throw offline() }
    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse { throw offline() }
    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse { throw offline() }
    func pushHints() -> AsyncStream<PushHint> { AsyncStream { _ in } }
}

/// The open phase's app: handles nothing (no sync runs). Its own, not LogSyncTesting's
/// `IdleDelegate`: a shipped tool depends on no test kit.
final class OpenPhaseDelegate: SyncEngineDelegate {
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}
    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? { nil }
}

extension Child {
    /// Builds the device log of `options.recordCount` entries in `<phase-dir>/device`, `.fast`.
    static func buildPhase(_ options: EngineBench, _ directory: URL) throws -> PhaseResult {
        let logDirectory = directory.appendingPathComponent("device")
        let started = ContinuousClock.now
        var calls = 0
        do {
            let deviceLog = try DeviceLog(directory: logDirectory, options: LogEnvironment.Options(durability: .fast))
            guard try deviceLog.log.lastOffset == .zero else { throw BenchError("\(logDirectory.path) is not empty") }
            var builder = try DeviceLogBuilder(deviceLog: deviceLog)
            try builder.build(count: options.recordCount, progress: options.recordCount >= 100_000)
            calls = builder.appendCalls
            let last = try deviceLog.log.lastOffset
            guard last == LogOffset(UInt64(options.recordCount)) else {
                throw BenchError("the built log ends at \(last), not \(options.recordCount)")
            }
        }
        var result = PhaseResult(phase: "build", durability: "fast", records: options.recordCount)
        result.seconds = (ContinuousClock.now - started).seconds
        result.addCalls = calls
        result.deviceLogBytes = fileSize(logDirectory.appendingPathComponent("data.mdb"))
        fillMemory(&result)
        return result
    }

    /// Opens an engine on the log built in `<phase-dir>/device` (`.durable`, the configuration's
    /// default) and reads the pending list once; times both.
    static func openPhase(_ options: EngineBench, _ directory: URL) throws -> PhaseResult {
        let logDirectory = directory.appendingPathComponent("device")
        let delegate = OpenPhaseDelegate()
        var configuration = SyncEngine.Configuration(
            database: OfflineDatabase(), logDirectory: logDirectory, delegate: delegate)
        configuration.automaticallySync = false

        var result = PhaseResult(phase: "open", durability: "durable", records: options.recordCount)
        result.hwmBefore = Memory.read().hwm
        let faultsBefore = pageFaults()
        let cpuBefore = cpuSeconds()
        let started = ContinuousClock.now
        let engine = try SyncEngine(configuration)
        let opened = ContinuousClock.now
        let pending = try engine.state.pendingRecordZoneChanges
        let read = ContinuousClock.now
        result.cpuSeconds = cpuSeconds() - cpuBefore
        let faults = pageFaults()
        result.openSeconds = (opened - started).seconds
        result.firstReadSeconds = (read - opened).seconds
        result.seconds = (read - started).seconds
        result.minorFaults = faults.minor - faultsBefore.minor
        result.majorFaults = faults.major - faultsBefore.major
        result.processed = pending.count
        result.entries = Int(try engine.deviceLog.log.lastOffset.rawValue)
        fillMemory(&result)
        result.deviceLogBytes = fileSize(logDirectory.appendingPathComponent("data.mdb"))
        withExtendedLifetime((engine, delegate)) {}
        return result
    }
}

/// Minor and major page faults of this process so far.
func pageFaults() -> (minor: Int, major: Int) {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return (Int(usage.ru_minflt), Int(usage.ru_majflt))
}
