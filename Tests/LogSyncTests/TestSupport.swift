import Foundation
import LogStore
import LogSyncDiagnostics
import LogSyncServer
import LogSyncTesting
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSync

typealias RecordChange = SyncEngine.PendingRecordZoneChange
typealias DatabaseChange = SyncEngine.PendingDatabaseChange

/// A device log in `directory` with unflushed commits (tests only) and a fixed clock.
func openDeviceLog(_ directory: URL, readOnly: Bool = false) throws -> DeviceLog {
    try DeviceLog(
        directory: directory,
        options: LogEnvironment.Options(durability: .fast, readOnly: readOnly, initialMapSize: 8 << 20),
        clock: { EntryTime(microsecondsSince1970: 1_700_000_000_000_000) })
}

/// An engine on a fresh device log in `directory`, with manual sync, a delegate that does
/// nothing, and a server of its own in `directory/server` (for the tests of the state alone).
func makeEngine(_ directory: URL) throws -> SyncEngine {
    try makeEngine(deviceLog: openDeviceLog(directory), directory: directory)
}

/// An engine from ``makeEngine(_:)`` in a temporary directory of its own, handed to `body`
/// with the directory; the directory is removed when `body` returns.
@discardableResult
func withEngine<R>(_ body: (_ engine: SyncEngine, _ directory: URL) throws -> R) throws -> R {
    try withTemporaryDirectory { directory in try body(try makeEngine(directory), directory) }
}

/// ``withEngine(_:)`` for an `async` body.
@discardableResult
func withEngine<R>(_ body: (_ engine: SyncEngine, _ directory: URL) async throws -> R) async throws -> R {
    try await withTemporaryDirectory { directory in try await body(try makeEngine(directory), directory) }
}

/// An engine on `deviceLog`, with `delegate` (one that does nothing by default); see `makeEngine(_:)`.
func makeEngine(
    deviceLog: DeviceLog, directory: URL, delegate: any SyncEngineDelegate = IdleDelegate.shared
) throws -> SyncEngine {
    let server = try SyncServer(.init(directory: directory.appendingPathComponent("server"), durability: .fast))
    var configuration = SyncEngine.Configuration(
        database: server.database(for: "tester"), deviceLog: deviceLog, delegate: delegate)
    configuration.automaticallySync = false
    return try SyncEngine(configuration)
}

enum Fixtures {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let photos = RecordZone.ID(zoneName: "Photos")
    static let shared = RecordZone.ID(zoneName: "Shared", ownerName: "_bob")

    static func id(_ name: String, _ zone: RecordZone.ID = notes) -> Record.ID {
        Record.ID(recordName: name, zoneID: zone)
    }

    static let a = id("A")
    static let b = id("B")
    static let c = id("C")
    static let x = id("X")
    static let userA = Record.ID(recordName: "_alice")
    static let userB = Record.ID(recordName: "_bob")

    /// A record as a server returns it: fields, and system fields with change tag `tag`.
    static func serverRecord(_ id: Record.ID, tag: String, title: String = "Groceries") -> Record {
        var record = Record(recordType: "Note", recordID: id)
        record["title"] = .string(title)
        record.applySystemFields(
            Record.SystemFields(
                recordChangeTag: tag, creationDate: Date(timeIntervalSince1970: 1_700_000_000),
                modificationDate: Date(timeIntervalSince1970: 1_700_000_100),
                creatorUserRecordID: Record.ID(recordName: "_alice"),
                lastModifiedUserRecordID: Record.ID(recordName: "_alice")))
        return record
    }

    /// A record as the app hands it to a batch: changed fields, no system fields.
    static func clientRecord(_ id: Record.ID, title: String = "Groceries") -> Record {
        var record = Record(recordType: "Note", recordID: id)
        record["title"] = .string(title)
        return record
    }
}

/// The device index's state in a shape tests compare field by field: read from a snapshot of
/// the index (`DeviceSnapshot.referenceState`), or replayed from the entries in memory by
/// `DeviceStateReplay` (LogSyncDiagnostics), an independent implementation of the index's rules
/// (DeviceIndex's doc comment) that `logtool bisect --invariant projections` also uses.
struct ReferenceState: Equatable {
    var records: [RecordChange] = []
    var zones: [DatabaseChange] = []
    var untracked = false
    /// In-flight changes → re-added since.
    var inFlight: [RecordChange: Bool] = [:]
    var serverRecords: [Record.ID: Record] = [:]
    /// The last known server records their zone's listing has not returned yet (F100).
    var unlisted: Set<Record.ID> = []
    var knownZones: Set<RecordZone.ID> = []
    var unfetchedZones: Set<RecordZone.ID> = []
    var databaseToken: DatabaseChangeToken?
    var zoneTokens: [RecordZone.ID: ZoneChangeToken] = [:]
    var delivered: LogOffset?
    /// The last account recorded: `nil` never, `.some(nil)` signed out.
    var account: Record.ID??
    var subscription: Subscription.ID?
    /// The offset of the last batchPrepared whose outcome is unknown (F103).
    var unanswered: LogOffset?
    /// The replay behind `apply`; not compared.
    private var replay = DeviceStateReplay()

    init() {}

    static func == (a: ReferenceState, b: ReferenceState) -> Bool {
        a.records == b.records && a.zones == b.zones && a.untracked == b.untracked && a.inFlight == b.inFlight
            && a.serverRecords == b.serverRecords && a.unlisted == b.unlisted && a.knownZones == b.knownZones
            && a.unfetchedZones == b.unfetchedZones
            && a.databaseToken == b.databaseToken && a.zoneTokens == b.zoneTokens && a.delivered == b.delivered
            && a.account == b.account && a.subscription == b.subscription && a.unanswered == b.unanswered
    }

    /// Applies `entry`, appended at `offset`.
    mutating func apply(_ entry: DeviceEntry, at offset: LogOffset) {
        replay.apply(entry, at: offset)
        let state = replay.state
        records = state.pendingRecordZoneChanges
        zones = state.pendingDatabaseChanges
        untracked = state.hasPendingUntrackedChanges
        inFlight = replay.inFlightChanges
        serverRecords = replay.serverRecordsByID
        unlisted = replay.unlistedRecordIDs
        knownZones = Set(state.knownZoneIDs)
        unfetchedZones = Set(state.zoneIDsWithUnfetchedServerChanges)
        databaseToken = state.databaseChangeToken
        zoneTokens = Dictionary(state.zoneChangeTokens.map { ($0.zoneID, $0) }, uniquingKeysWith: { a, _ in a })
        delivered = state.deliveredOffset
        switch state.account {
        case .never: account = nil
        case .signedOut: account = .some(nil)
        case .user(let user): account = .some(user)
        }
        subscription = state.subscriptionID
        unanswered = replay.unanswered
    }

    /// Replays the whole device log (decoding every entry) into a fresh reference state.
    static func replaying(_ deviceLog: DeviceLog) throws -> ReferenceState {
        var state = ReferenceState()
        try deviceLog.log.forEachEntry { entry in
            state.apply(try DeviceEntry(entry, in: deviceLog.log), at: entry.offset)
        }
        return state
    }
}

extension DeviceSnapshot {
    /// The snapshot's state in the reference model's shape, for comparisons.
    func referenceState(recordIDs: [Record.ID]) throws -> ReferenceState {
        var state = ReferenceState()
        state.records = try pendingRecordZoneChanges()
        state.zones = try pendingDatabaseChanges()
        state.untracked = try hasPendingUntrackedChanges()
        for (change, readded) in try inFlightRecordChanges() { state.inFlight[change] = readded }
        for id in recordIDs {
            if let record = try lastKnownServerRecord(for: id) { state.serverRecords[id] = record }
            if try isUnlisted(id) { state.unlisted.insert(id) }
        }
        state.knownZones = Set(try knownZoneIDs())
        state.unfetchedZones = Set(try zoneIDsWithUnfetchedServerChanges())
        state.databaseToken = try databaseChangeToken()
        for zoneID in Set(recordIDs.map(\.zoneID)).union(state.knownZones) {
            if let token = try zoneChangeToken(for: zoneID) { state.zoneTokens[zoneID] = token }
        }
        state.delivered = try deliveredOffset()
        switch try lastKnownAccount() {
        case .never: state.account = nil
        case .signedOut: state.account = .some(nil)
        case .user(let user): state.account = .some(user)
        }
        state.subscription = try subscriptionID()
        state.unanswered = try unansweredBatch()?.offset
        return state
    }
}
