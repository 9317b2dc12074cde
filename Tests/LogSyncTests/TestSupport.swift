import Foundation
import LogStore
import LogSyncServer
import SyncModel
import Testing

@testable import LogSync

typealias RecordChange = SyncEngine.PendingRecordZoneChange
typealias DatabaseChange = SyncEngine.PendingDatabaseChange

/// A fresh directory under the system temporary directory, removed when `body` returns.
@discardableResult
func withTemporaryDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("logsync-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url)
}

/// A device log in `directory` with unflushed commits (tests only) and a fixed clock.
func openDeviceLog(_ directory: URL, readOnly: Bool = false) throws -> DeviceLog {
    try DeviceLog(
        directory: directory, options: LogEnvironment.Options(durability: .fast, readOnly: readOnly, initialMapSize: 8 << 20),
        clock: { EntryTime(microsecondsSince1970: 1_700_000_000_000_000) })
}

/// An engine on a fresh device log in `directory`, with manual sync, a delegate that does
/// nothing, and a server of its own in `directory/server` (for the tests of the state alone).
func makeEngine(_ directory: URL) throws -> SyncEngine {
    try makeEngine(deviceLog: openDeviceLog(directory), directory: directory)
}

/// An engine on `deviceLog`; see `makeEngine(_:)`.
func makeEngine(deviceLog: DeviceLog, directory: URL) throws -> SyncEngine {
    let server = try SyncServer(.init(directory: directory.appendingPathComponent("server"), durability: .fast))
    var configuration = SyncEngine.Configuration(
        database: server.database(for: "tester"), deviceLog: deviceLog, delegate: IdleDelegate.shared)
    configuration.automaticallySync = false
    return try SyncEngine(configuration)
}

/// A delegate that handles nothing and sends nothing.
final class IdleDelegate: SyncEngineDelegate {
    static let shared = IdleDelegate()

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? { nil }
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
        record.applySystemFields(Record.SystemFields(
            recordChangeTag: tag, creationDate: Date(timeIntervalSince1970: 1_700_000_000),
            modificationDate: Date(timeIntervalSince1970: 1_700_000_100),
            creatorUserRecordID: Record.ID(recordName: "_alice"), lastModifiedUserRecordID: Record.ID(recordName: "_alice")))
        return record
    }

    /// A record as the app hands it to a batch: changed fields, no system fields.
    static func clientRecord(_ id: Record.ID, title: String = "Groceries") -> Record {
        var record = Record(recordType: "Note", recordID: id)
        record["title"] = .string(title)
        return record
    }
}

/// An independent, in-memory implementation of the device index's rules (DeviceIndex's doc
/// comment), to compare the projection with a straightforward replay of the log.
struct ReferenceState: Equatable {
    var records: [RecordChange] = []
    var zones: [DatabaseChange] = []
    var untracked = false
    /// In-flight changes → re-added since.
    var inFlight: [RecordChange: Bool] = [:]
    var serverRecords: [Record.ID: Record] = [:]
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

    /// Adds a pending change: one for the same item (`sameItem`) is kept where it stands if it
    /// is the same change, else replaced by `change` at the end.
    private static func add<Change: Equatable>(_ change: Change, to list: inout [Change], sameItem: (Change) -> Bool) {
        if let i = list.firstIndex(where: sameItem) {
            if list[i] != change {
                list.remove(at: i)
                list.append(change)
            }
        } else {
            list.append(change)
        }
    }

    private mutating func forgetZone(_ id: RecordZone.ID) {
        knownZones.remove(id)
        unfetchedZones.remove(id)
        zoneTokens[id] = nil
        serverRecords = serverRecords.filter { $0.key.zoneID != id }
    }

    /// Applies `entry`, appended at `offset`.
    mutating func apply(_ entry: DeviceEntry, at offset: LogOffset) {
        switch entry {
        case .pendingRecordZoneChangesAdded(let changes):
            for change in changes {
                Self.add(change, to: &records) { $0.recordID == change.recordID }
                if inFlight[change] != nil { inFlight[change] = true }
            }
        case .pendingRecordZoneChangesRemoved(let changes):
            for change in changes { records.removeAll { $0 == change } }
        case .pendingDatabaseChangesAdded(let changes):
            for change in changes { Self.add(change, to: &zones) { $0.zoneID == change.zoneID } }
        case .pendingDatabaseChangesRemoved(let changes):
            for change in changes { zones.removeAll { $0 == change } }
        case .untrackedChangesFlagged(let flag):
            untracked = flag
        case .batchPrepared(let saves, let deletions, _, let requestID):
            unanswered = requestID == nil ? nil : offset
            inFlight = [:]
            for record in saves { inFlight[.saveRecord(record.recordID)] = false }
            for id in deletions { inFlight[.deleteRecord(id)] = false }
        case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
            for record in saved {
                settle(.saveRecord(record.recordID), error: nil)
                serverRecords[record.recordID] = record
            }
            for id in deleted {
                settle(.deleteRecord(id), error: nil)
                serverRecords[id] = nil
            }
            for (id, error) in failedSaves { settle(.saveRecord(id), error: error) }
            for (id, error) in failedDeletes { settle(.deleteRecord(id), error: error) }
            inFlight = [:]
            // Unknown only if nothing succeeded and every item failed on the way.
            let failures = Array(failedSaves.values) + Array(failedDeletes.values)
            let lostOnTheWay = saved.isEmpty && deleted.isEmpty && !failures.isEmpty
                && failures.allSatisfy { $0.code == .networkFailure || $0.code == .serverResponseLost }
            if !lostOnTheWay { unanswered = nil }
        case .databaseChangesSent(let savedZones, let deletedZoneIDs, let failedZoneSaves, let failedZoneDeletes):
            for zone in savedZones {
                zones.removeAll { $0 == .saveZone(zone) }
                knownZones.insert(zone.zoneID)
            }
            for id in deletedZoneIDs {
                zones.removeAll { $0 == .deleteZone(id) }
                forgetZone(id)
            }
            for (id, error) in failedZoneSaves where !error.keepsChangePending {
                zones.removeAll { $0 == .saveZone(RecordZone(zoneID: id)) }
            }
            for (id, error) in failedZoneDeletes where !error.keepsChangePending {
                zones.removeAll { $0 == .deleteZone(id) }
            }
        case .databaseChangesFetched(let modifications, let deletions, let token, _):
            databaseToken = token
            for deletion in deletions { forgetZone(deletion.zoneID) }
            for id in modifications {
                knownZones.insert(id)
                unfetchedZones.insert(id)
            }
        case .zoneChangesFetched(let zoneID, let modifications, let deletions, let token, _):
            zoneTokens[zoneID] = token
            knownZones.insert(zoneID)
            for record in modifications { serverRecords[record.recordID] = record }
            for deletion in deletions { serverRecords[deletion.recordID] = nil }
        case .zoneFetchFinished(let zoneID, let error):
            switch error?.code {
            case nil: unfetchedZones.remove(zoneID)
            case .zoneNotFound?, .userDeletedZone?: forgetZone(zoneID)
            default: break
            }
        case .changeTokenReset(let zoneID):
            if let zoneID { zoneTokens[zoneID] = nil } else { databaseToken = nil }
        case .eventsDelivered(let offset):
            delivered = offset
        case .accountChanged(_, let current):
            if account != nil {
                records = []
                zones = []
                untracked = false
                inFlight = [:]
                serverRecords = [:]
                knownZones = []
                unfetchedZones = []
                databaseToken = nil
                zoneTokens = [:]
                unanswered = nil
            }
            account = .some(current)
        case .subscriptionEnsured(let id):
            subscription = id
        case .pushReceived(let zoneID):
            if let zoneID { unfetchedZones.insert(zoneID) }
        case .sendStarted, .sendFinished, .fetchStarted, .fetchFinished, .syncScheduled, .syncDeferred:
            break
        }
    }

    private mutating func settle(_ change: RecordChange, error: SyncError?) {
        let readded = inFlight.removeValue(forKey: change) ?? false
        if !readded && !(error?.keepsChangePending ?? false) { records.removeAll { $0 == change } }
        guard let error else { return }
        switch error.code {
        case .serverRecordChanged:
            if let server = error.serverRecord { serverRecords[change.recordID] = server }
        case .unknownItem, .zoneNotFound, .userDeletedZone:
            serverRecords[change.recordID] = nil
        default:
            break
        }
    }

    /// Replays the whole device log (decoding every entry) into a fresh reference state.
    static func replaying(_ deviceLog: DeviceLog) throws -> ReferenceState {
        var state = ReferenceState()
        try deviceLog.log.forEachEntry { entry in state.apply(try DeviceEntry(entry), at: entry.offset) }
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
