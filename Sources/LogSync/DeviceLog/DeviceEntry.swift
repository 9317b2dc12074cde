import LogStore
import SyncModel

/// One entry of a device log: an app's edit of the engine's state, or a step of a sync.
///
/// The device log is the engine's only memory: every mutation of ``SyncEngine/State`` and every
/// step of a send is appended here, and what the engine knows (pending changes, in-flight
/// changes, last known server records) is `DeviceIndex`, a projection of these entries.
/// Payloads are Protocol Buffers messages (Proto/device_log.proto, converted in
/// DeviceEntry+Codec.swift); the entry kind says which case an entry is.
///
/// Entry kinds 1–99 belong to the device (servers use 100–199). Numbers are forever: a kind is
/// never renumbered or reused, and a new case takes a new kind. See `Kind` for the kinds in use
/// and the ones reserved for the flows still to come (Docs/Engine.md, Entry kinds).
package enum DeviceEntry: Sendable, Equatable {
    /// The app added record changes, in this order (F16–F19).
    case pendingRecordZoneChangesAdded([SyncEngine.PendingRecordZoneChange])
    /// The app removed record changes (exact matches, F20).
    case pendingRecordZoneChangesRemoved([SyncEngine.PendingRecordZoneChange])
    /// The app added database (zone) changes, in this order (F22).
    case pendingDatabaseChangesAdded([SyncEngine.PendingDatabaseChange])
    /// The app removed database changes (exact matches by case and zone ID, F20, F22).
    case pendingDatabaseChangesRemoved([SyncEngine.PendingDatabaseChange])
    /// The app set `hasPendingUntrackedChanges` (F24).
    case untrackedChangesFlagged(Bool)
    /// A batch of record changes is about to be sent, with the contents of the records, so a
    /// timeline replays without the app. Marks its changes in flight (F32); a batch prepared
    /// while another is in flight ends the earlier one (its changes stay as they are).
    ///
    /// `requestID` is the request ID the batch is sent under (F103), so that after a relaunch a
    /// batch whose outcome is unknown can be sent again under it; `nil` in logs written before
    /// it was recorded.
    case batchPrepared(
        recordsToSave: [Record], recordIDsToDelete: [Record.ID], atomicByZone: Bool, requestID: RequestID? = nil)
    /// The outcome of the batch last prepared: the records as the server now holds them, the
    /// deleted IDs and the per-item errors (F21, F44). Ends the batch.
    case batchResult(
        saved: [Record], deleted: [Record.ID], failedSaves: [Record.ID: SyncError],
        failedDeletes: [Record.ID: SyncError])
    /// The outcome of sending database changes (F23, F43).
    case databaseChangesSent(
        savedZones: [RecordZone], deletedZoneIDs: [RecordZone.ID], failedZoneSaves: [RecordZone.ID: SyncError],
        failedZoneDeletes: [RecordZone.ID: SyncError])
    /// A send begins (`willSendChanges`, F42).
    case sendStarted(SyncEngine.SendChangesContext)
    /// The send ends (`didSendChanges`, F45): `nil` when every batch was answered, else the error
    /// that stopped it (a transient request failure, cancellation).
    case sendFinished(error: SyncError?)
    /// A fetch begins (`willFetchChanges`, F36).
    case fetchStarted(SyncEngine.FetchChangesContext)
    /// One page of the database's change feed (F37): zones to fetch, zones gone, the new token.
    case databaseChangesFetched(
        modifications: [RecordZone.ID], deletions: [DatabaseChange.Deletion], changeToken: DatabaseChangeToken,
        moreComing: Bool)
    /// One page of a zone's change feed (F39), with the records' contents, so a timeline replays
    /// and a restart re-delivers it without the server.
    case zoneChangesFetched(
        zoneID: RecordZone.ID, modifications: [Record], deletions: [RecordZoneChange.Deletion],
        changeToken: ZoneChangeToken, moreComing: Bool)
    /// A zone's fetch ends (`didFetchRecordZoneChanges`, F40): `nil` when fetched to the end.
    case zoneFetchFinished(zoneID: RecordZone.ID, error: SyncError?)
    /// The fetch ends (`didFetchChanges`, F41): `nil` when it completed, else what stopped it.
    case fetchFinished(error: SyncError?)
    /// The server refused a change token as expired (F100): the zone's token (or the database's,
    /// for `nil`) is dropped, so the feed is fetched again from the start.
    case changeTokenReset(zoneID: RecordZone.ID?)
    /// The delegate has handled the events of every entry through this offset (F29).
    case eventsDelivered(through: LogOffset)
    /// The database reports another account than the log last knew (`nil`: signed out). Wipes
    /// the state when there was an account or a sign-out before (F30, F104–F108).
    case accountChanged(previous: Record.ID?, current: Record.ID?)
    /// The database subscription the engine uses for push hints (F6, F111).
    case subscriptionEnsured(Subscription.ID)
    /// A push hint arrived; it lists its zone as unfetched when it names one (F83, F115).
    case pushReceived(zoneID: RecordZone.ID?)
    /// The scheduler will run `work` after `after`, and why (F82–F90).
    case syncScheduled(work: SyncSchedule.Work, reason: SyncSchedule.Cause, after: Duration)
    /// The scheduler waits: conditions or the account do not allow syncing (F81, F86, F109).
    case syncDeferred(reason: String)

    /// The entry kinds of a device log (1–99).
    ///
    /// In use: 1–5 (the app's edits of the state), 10–15 (sending), 20–25 (fetching), 30–32
    /// (account, subscription, push), 40–41 (scheduling) and 50 (delivery). Reserved for steps
    /// not written yet, so related kinds stay together:
    ///
    /// | kinds | for |
    /// |---|---|
    /// | 6–9 | more state edits |
    /// | 16–19 | more send steps |
    /// | 26–29 | more fetch steps |
    /// | 33–39 | more account and push steps |
    /// | 42–49 | more scheduling |
    /// | 51–59 | more delivery steps |
    /// | 90–99 | projection snapshots for compaction: a compacted log starts from one; offsets stay |
    package enum Kind {
        package static let pendingRecordZoneChangesAdded: EntryKind = 1
        package static let pendingRecordZoneChangesRemoved: EntryKind = 2
        package static let pendingDatabaseChangesAdded: EntryKind = 3
        package static let pendingDatabaseChangesRemoved: EntryKind = 4
        package static let untrackedChangesFlagged: EntryKind = 5
        package static let batchPrepared: EntryKind = 11
        package static let batchResult: EntryKind = 12
        /// A `batchResult` written against its batch's `batchPrepared`: the saved records as what
        /// the server changed in them (read back as `batchResult`).
        package static let batchSaved: EntryKind = 15
        package static let databaseChangesSent: EntryKind = 13
        package static let sendStarted: EntryKind = 10
        package static let sendFinished: EntryKind = 14
        package static let fetchStarted: EntryKind = 20
        package static let databaseChangesFetched: EntryKind = 21
        package static let zoneChangesFetched: EntryKind = 22
        package static let zoneFetchFinished: EntryKind = 23
        package static let fetchFinished: EntryKind = 24
        package static let changeTokenReset: EntryKind = 25
        package static let eventsDelivered: EntryKind = 50
        package static let accountChanged: EntryKind = 30
        package static let subscriptionEnsured: EntryKind = 31
        package static let pushReceived: EntryKind = 32
        package static let syncScheduled: EntryKind = 40
        package static let syncDeferred: EntryKind = 41

        /// Every kind this build writes and reads, with its name (as in `Docs/Engine.md`, error
        /// messages and `logtool`), in kind order.
        package static let named: [(kind: EntryKind, name: String)] = [
            (pendingRecordZoneChangesAdded, "pendingRecordZoneChangesAdded"),
            (pendingRecordZoneChangesRemoved, "pendingRecordZoneChangesRemoved"),
            (pendingDatabaseChangesAdded, "pendingDatabaseChangesAdded"),
            (pendingDatabaseChangesRemoved, "pendingDatabaseChangesRemoved"),
            (untrackedChangesFlagged, "untrackedChangesFlagged"),
            (sendStarted, "sendStarted"), (batchPrepared, "batchPrepared"), (batchResult, "batchResult"),
            (databaseChangesSent, "databaseChangesSent"), (sendFinished, "sendFinished"), (batchSaved, "batchSaved"),
            (fetchStarted, "fetchStarted"), (databaseChangesFetched, "databaseChangesFetched"),
            (zoneChangesFetched, "zoneChangesFetched"), (zoneFetchFinished, "zoneFetchFinished"),
            (fetchFinished, "fetchFinished"), (changeTokenReset, "changeTokenReset"),
            (accountChanged, "accountChanged"), (subscriptionEnsured, "subscriptionEnsured"),
            (pushReceived, "pushReceived"), (syncScheduled, "syncScheduled"), (syncDeferred, "syncDeferred"),
            (eventsDelivered, "eventsDelivered"),
        ]

        /// The kinds this build writes and reads.
        package static var inUse: [EntryKind] { named.map(\.kind) }

        /// The name of a kind this build writes and reads.
        package static func name(of kind: EntryKind) -> String? { named.first { $0.kind == kind }?.name }
    }

    /// The case's name, as in `Docs/Engine.md` and error messages.
    package var name: String { Kind.name(of: newEntry.kind) ?? "kind \(newEntry.kind)" }
}
