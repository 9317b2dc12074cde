import LogStore
import LogSync
import SyncModel

/// The engine's state computed from a device log's entries by a fold in memory, independent of
/// the device index (the projection kept in LMDB): the "replay" that the invariant
/// ``DeviceInvariant/projectionsEqualReplay`` compares the projection with.
///
/// It follows the rules the index documents (Docs/Engine.md, "Projection tables"), written
/// again without tables, keys or zone numbers, so that a bug in one shows as a difference with
/// the other. It also keeps what the other built-in invariants need: the changes the app is
/// owed (added and not ended by a send result, a removal or an account change) and every move
/// of a change token.
///
/// A value type: copying it is how ``DeviceLogBisect`` keeps the fold at the last offset known
/// good while it tries a later one, so the fold costs O(entries) over a whole bisection.
public struct DeviceStateReplay: Sendable {
    typealias RecordChange = SyncEngine.PendingRecordZoneChange
    typealias DatabaseChange = SyncEngine.PendingDatabaseChange

    /// The last entry folded in (`.zero` before the first).
    public private(set) var offset: LogOffset = .zero

    private struct Position: Comparable, Hashable {
        var offset: UInt64
        var index: Int
        static func < (a: Position, b: Position) -> Bool { (a.offset, a.index) < (b.offset, b.index) }
    }

    private var pendingRecords: [Record.ID: (change: RecordChange, position: Position)] = [:]
    private var pendingZones: [RecordZone.ID: (change: DatabaseChange, position: Position)] = [:]
    /// The in-flight changes (record and case) with their re-added flag.
    private var inFlight: [RecordChange: Bool] = [:]
    private var untracked = false
    private var unfetched: Set<RecordZone.ID> = []
    private var known: Set<RecordZone.ID> = []
    private var databaseToken: DatabaseChangeToken?
    private var zoneTokens: [RecordZone.ID: ZoneChangeToken] = [:]
    private var serverRecords: [Record.ID: Record] = [:]
    /// The last known server records of the zones being listed that no page returned yet (F100);
    /// a record forgotten is no longer unlisted (``forgetServerRecord(_:)``).
    private var unlisted: Set<Record.ID> = []
    private var delivered: LogOffset?
    private var account: DeviceState.Account = .never
    private var subscription: Subscription.ID?

    /// The offset of the last `batchPrepared` whose outcome is unknown (F103), as the index
    /// keeps it: set by a batch that records its request ID, cleared by its answer unless every
    /// item sent failed on the way (`networkFailure`, `serverResponseLost`), and by an account
    /// change; a result of items that all failed before a request leaves it.
    package private(set) var unanswered: LogOffset?

    /// The first token move backwards the fold met, if any: where, and the two offsets.
    public private(set) var tokenWentBack: (offset: LogOffset, what: String)?

    public init() {}

    /// Folds in the entry at `offset` (the next one).
    package mutating func apply(_ entry: DeviceEntry, at offset: LogOffset) {
        self.offset = offset
        switch entry {
        case .pendingRecordZoneChangesAdded(let changes):
            for (i, change) in changes.enumerated() { add(change, at: Position(offset: offset.rawValue, index: i)) }
        case .pendingRecordZoneChangesRemoved(let changes):
            for change in changes { remove(change) }
        case .pendingDatabaseChangesAdded(let changes):
            for (i, change) in changes.enumerated() {
                let position = Position(offset: offset.rawValue, index: i)
                if let existing = pendingZones[change.zoneID], existing.change == change { continue }
                pendingZones[change.zoneID] = (change, position)
            }
        case .pendingDatabaseChangesRemoved(let changes):
            for change in changes where pendingZones[change.zoneID]?.change == change {
                pendingZones[change.zoneID] = nil
            }
        case .untrackedChangesFlagged(let flag):
            untracked = flag
        case .batchPrepared(let records, let deletions, _, let requestID):
            unanswered = requestID == nil ? nil : offset
            inFlight = [:]
            for record in records { inFlight[.saveRecord(record.recordID)] = false }
            for id in deletions { inFlight[.deleteRecord(id)] = false }
        case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
            // Items that failed before the request (an asset upload) were never in flight, and
            // say nothing of the request's outcome.
            let sent = !inFlight.isEmpty
            let failures =
                failedSaves.filter { inFlight[.saveRecord($0.key)] != nil }.map(\.value)
                + failedDeletes.filter { inFlight[.deleteRecord($0.key)] != nil }.map(\.value)
            for record in saved {
                settle(.saveRecord(record.recordID), error: nil)
                serverRecords[record.recordID] = record
            }
            for id in deleted {
                settle(.deleteRecord(id), error: nil)
                forgetServerRecord(id)
            }
            for (id, error) in failedSaves { settle(.saveRecord(id), error: error) }
            for (id, error) in failedDeletes { settle(.deleteRecord(id), error: error) }
            inFlight = [:]
            let lostOnTheWay =
                saved.isEmpty && deleted.isEmpty && !failures.isEmpty
                && failures.allSatisfy { $0.code == .networkFailure || $0.code == .serverResponseLost }
            if sent, !lostOnTheWay { unanswered = nil }
        case .databaseChangesSent(let savedZones, let deletedZoneIDs, let failedZoneSaves, let failedZoneDeletes):
            for zone in savedZones {
                settleZone(.saveZone(zone), error: nil)
                known.insert(zone.zoneID)
            }
            for id in deletedZoneIDs {
                settleZone(.deleteZone(id), error: nil)
                forget(id)
            }
            for (id, error) in failedZoneSaves { settleZone(.saveZone(RecordZone(zoneID: id)), error: error) }
            for (id, error) in failedZoneDeletes { settleZone(.deleteZone(id), error: error) }
        case .databaseChangesFetched(let modifications, let deletions, let token, _):
            if let previous = databaseToken, token.offset < previous.offset {
                noteBackwards(at: offset, "the database token went from offset \(previous.offset) to \(token.offset)")
            }
            databaseToken = token
            for deletion in deletions { forget(deletion.zoneID) }
            for zoneID in modifications {
                known.insert(zoneID)
                unfetched.insert(zoneID)
            }
        case .zoneChangesFetched(let zoneID, let modifications, let deletions, let token, _):
            if let previous = zoneTokens[zoneID], previous.incarnation == token.incarnation,
                token.offset < previous.offset
            {
                noteBackwards(
                    at: offset,
                    "the token of zone \(DeviceStateReport.zone(zoneID)) went from offset \(previous.offset) to \(token.offset)"
                )
            }
            if zoneTokens[zoneID] == nil {
                // A page without a token begins a listing.
                unlisted = unlisted.filter { $0.zoneID != zoneID }.union(
                    serverRecords.keys.filter { $0.zoneID == zoneID })
            }
            zoneTokens[zoneID] = token
            known.insert(zoneID)
            for record in modifications {
                serverRecords[record.recordID] = record
                unlisted.remove(record.recordID)
            }
            for deletion in deletions { forgetServerRecord(deletion.recordID) }
        case .zoneFetchFinished(let zoneID, let error):
            switch error?.code {
            case nil: unfetched.remove(zoneID)
            case .zoneNotFound?, .userDeletedZone?: forget(zoneID)
            default: break
            }
        case .changeTokenReset(let zoneID):
            if let zoneID {
                zoneTokens[zoneID] = nil
                unlisted = unlisted.filter { $0.zoneID != zoneID }
            } else {
                databaseToken = nil
            }
        case .eventsDelivered(let through):
            delivered = through
        case .accountChanged(_, let current):
            if account != .never {
                pendingRecords = [:]
                pendingZones = [:]
                inFlight = [:]
                serverRecords = [:]
                unlisted = []
                unfetched = []
                known = []
                zoneTokens = [:]
                untracked = false
                databaseToken = nil
                unanswered = nil
            }
            account = current.map { .user($0) } ?? .signedOut
        case .subscriptionEnsured(let id):
            subscription = id
        case .pushReceived(let zoneID):
            if let zoneID { unfetched.insert(zoneID) }
        case .sendStarted, .sendFinished, .fetchStarted, .fetchFinished, .syncScheduled, .syncDeferred:
            break
        }
    }

    private mutating func noteBackwards(at offset: LogOffset, _ what: String) {
        if tokenWentBack == nil { tokenWentBack = (offset, what) }
    }

    private mutating func add(_ change: RecordChange, at position: Position) {
        if let existing = pendingRecords[change.recordID] {
            // the last wins (F19)
            if existing.change != change { pendingRecords[change.recordID] = (change, position) }
        } else {
            pendingRecords[change.recordID] = (change, position)
        }
        if inFlight[change] == false { inFlight[change] = true }  // re-added while in flight (F32)
    }

    private mutating func remove(_ change: RecordChange) {
        if pendingRecords[change.recordID]?.change == change { pendingRecords[change.recordID] = nil }
    }

    private mutating func settle(_ change: RecordChange, error: SyncError?) {
        let readded = inFlight.removeValue(forKey: change) == true
        let done = error.map { !($0.isTransient || $0.code == .operationCancelled) } ?? true
        if done && !readded { remove(change) }
        switch error?.code {
        case .serverRecordChanged?:
            if let record = error?.serverRecord { serverRecords[change.recordID] = record }
        case .unknownItem?, .zoneNotFound?, .userDeletedZone?:
            forgetServerRecord(change.recordID)
        default:
            break
        }
    }

    private mutating func settleZone(_ change: DatabaseChange, error: SyncError?) {
        let done = error.map { !($0.isTransient || $0.code == .operationCancelled) } ?? true
        if done, pendingZones[change.zoneID]?.change == change { pendingZones[change.zoneID] = nil }
    }

    private mutating func forget(_ zoneID: RecordZone.ID) {
        known.remove(zoneID)
        unfetched.remove(zoneID)
        zoneTokens[zoneID] = nil
        serverRecords = serverRecords.filter { $0.key.zoneID != zoneID }
        unlisted = unlisted.filter { $0.zoneID != zoneID }
    }

    private mutating func forgetServerRecord(_ id: Record.ID) {
        serverRecords[id] = nil
        unlisted.remove(id)
    }

    // MARK: Reading

    /// The state the fold gives, in the order `DeviceLog.state(at:)` gives it.
    public var state: DeviceState {
        DeviceState(
            offset: offset,
            pendingRecordZoneChanges: pendingRecords.values.sorted { $0.position < $1.position }.map(\.change),
            pendingDatabaseChanges: pendingZones.values.sorted { $0.position < $1.position }.map(\.change),
            inFlightRecordZoneChanges: inFlight.keys.sorted { Self.precedes($0, $1) },
            hasPendingUntrackedChanges: untracked,
            zoneIDsWithUnfetchedServerChanges: unfetched.sorted(by: Self.precedes),
            knownZoneIDs: known.sorted(by: Self.precedes),
            databaseChangeToken: databaseToken,
            zoneChangeTokens: zoneTokens.values.sorted { Self.precedes($0.zoneID, $1.zoneID) },
            lastKnownServerRecords: serverRecords.values.sorted { Self.precedes($0.recordID, $1.recordID) },
            deliveredOffset: delivered,
            account: account,
            subscriptionID: subscription)
    }

    /// The last known server records by the ID they are kept under: the ID of the item whose
    /// answer brought them (a conflict's server record is kept under the failed item's ID).
    package var serverRecordsByID: [Record.ID: Record] { serverRecords }

    /// The last known server records that the listing of their zone has not returned yet (F100),
    /// by the ID they are kept under.
    package var unlistedRecordIDs: Set<Record.ID> { unlisted }

    /// The in-flight record changes, each with whether the app added it again while it was in
    /// flight (F32).
    package var inFlightChanges: [SyncEngine.PendingRecordZoneChange: Bool] { inFlight }

    /// The changes the app is owed: every pending record change it added that no send result,
    /// removal or account change has ended since (the pending list itself). A fetched deletion
    /// ends none: the engine leaves what to do about a record deleted elsewhere to the app.
    var owedRecordChanges: [RecordChange] { pendingRecords.values.sorted { $0.position < $1.position }.map(\.change) }

    static func precedes(_ a: RecordZone.ID, _ b: RecordZone.ID) -> Bool {
        [a.ownerName, a.zoneName].lexicographicallyPrecedes([b.ownerName, b.zoneName]) {
            $0.utf8.lexicographicallyPrecedes($1.utf8)
        }
    }

    static func precedes(_ a: Record.ID, _ b: Record.ID) -> Bool {
        [a.zoneID.ownerName, a.zoneID.zoneName, a.recordName].lexicographicallyPrecedes(
            [b.zoneID.ownerName, b.zoneID.zoneName, b.recordName]
        ) { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    static func precedes(_ a: RecordChange, _ b: RecordChange) -> Bool {
        if a.recordID == b.recordID { return a.isSave && !b.isSave }
        return precedes(a.recordID, b.recordID)
    }
}

extension SyncEngine.PendingRecordZoneChange {
    var isSave: Bool { if case .saveRecord = self { true } else { false } }
}
