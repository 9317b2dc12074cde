import LogStore
import SyncModel

extension SyncEngine {
    /// Something the engine tells its delegate, one at a time, awaiting each (F10, F33).
    ///
    /// Mirrors `CKSyncEngine.Event`: the same twelve cases with the same payloads (F34–F45), but
    /// the payloads are value types, and ``stateUpdate(_:)`` carries a log offset instead of a
    /// state serialization (see ``StateUpdate``). Only the engine creates events.
    ///
    /// ```swift
    /// func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
    ///     switch event {
    ///     case .fetchedRecordZoneChanges(let changes):
    ///         for modification in changes.modifications { store.upsert(modification.record) }
    ///         for deletion in changes.deletions { store.delete(deletion.recordID) }
    ///     case .sentRecordZoneChanges(let sent):
    ///         for record in sent.savedRecords { store.upsert(record) }
    ///     default:
    ///         break
    ///     }
    /// }
    /// ```
    ///
    /// A fetch emits `willFetchChanges`, any `fetchedDatabaseChanges`, then for each zone with
    /// changes `willFetchRecordZoneChanges`, any `fetchedRecordZoneChanges` and
    /// `didFetchRecordZoneChanges`, and last `didFetchChanges` (F46). A send emits
    /// `willSendChanges`, `sentDatabaseChanges` and `sentRecordZoneChanges` per request, and
    /// `didSendChanges` (F47). `stateUpdate` may come anywhere.
    public enum Event: Sendable, Hashable, CustomStringConvertible {
        /// The state changed; it is in the device log up to the offset given.
        case stateUpdate(StateUpdate)
        /// The device's account changed.
        case accountChange(AccountChange)
        /// Zones were created, changed or deleted on the server.
        case fetchedDatabaseChanges(FetchedDatabaseChanges)
        /// Records were saved or deleted on the server.
        case fetchedRecordZoneChanges(FetchedRecordZoneChanges)
        /// The server answered a request saving or deleting zones.
        case sentDatabaseChanges(SentDatabaseChanges)
        /// The server answered a request saving or deleting records.
        case sentRecordZoneChanges(SentRecordZoneChanges)
        /// A fetch starts.
        case willFetchChanges(WillFetchChanges)
        /// A fetch of one zone's record changes starts.
        case willFetchRecordZoneChanges(WillFetchRecordZoneChanges)
        /// A fetch of one zone's record changes ended, successfully or not.
        case didFetchRecordZoneChanges(DidFetchRecordZoneChanges)
        /// A fetch ended.
        case didFetchChanges(DidFetchChanges)
        /// A send starts.
        case willSendChanges(WillSendChanges)
        /// A send ended.
        case didSendChanges(DidSendChanges)

        /// The kind of an event, with `CKSyncEngineEventType`'s raw values.
        package enum Kind: Int, Sendable, Hashable, CaseIterable {
            case stateUpdate = 0
            case accountChange = 1
            case fetchedDatabaseChanges = 2
            case fetchedRecordZoneChanges = 3
            case sentDatabaseChanges = 4
            case sentRecordZoneChanges = 5
            case willFetchChanges = 6
            case willFetchRecordZoneChanges = 7
            case didFetchRecordZoneChanges = 8
            case didFetchChanges = 9
            case willSendChanges = 10
            case didSendChanges = 11
        }

        /// The event's kind.
        package var kind: Kind {
            switch self {
            case .stateUpdate: .stateUpdate
            case .accountChange: .accountChange
            case .fetchedDatabaseChanges: .fetchedDatabaseChanges
            case .fetchedRecordZoneChanges: .fetchedRecordZoneChanges
            case .sentDatabaseChanges: .sentDatabaseChanges
            case .sentRecordZoneChanges: .sentRecordZoneChanges
            case .willFetchChanges: .willFetchChanges
            case .willFetchRecordZoneChanges: .willFetchRecordZoneChanges
            case .didFetchRecordZoneChanges: .didFetchRecordZoneChanges
            case .didFetchChanges: .didFetchChanges
            case .willSendChanges: .willSendChanges
            case .didSendChanges: .didSendChanges
            }
        }

        /// The payload, for the description (and for the tests of each payload's description).
        var payload: any EventPayload {
            switch self {
            case .stateUpdate(let p): p
            case .accountChange(let p): p
            case .fetchedDatabaseChanges(let p): p
            case .fetchedRecordZoneChanges(let p): p
            case .sentDatabaseChanges(let p): p
            case .sentRecordZoneChanges(let p): p
            case .willFetchChanges(let p): p
            case .willFetchRecordZoneChanges(let p): p
            case .didFetchRecordZoneChanges(let p): p
            case .didFetchChanges(let p): p
            case .willSendChanges(let p): p
            case .didSendChanges(let p): p
            }
        }

        /// The case name and the payload's fields, such as
        /// `willFetchRecordZoneChanges(zone "Notes")`.
        public var description: String { "\(kind)(\(payload.fields))" }
    }
}

/// An event payload: it describes itself as its type name and ``fields``.
protocol EventPayload: CustomStringConvertible {
    /// The payload's fields in one line, without the type name.
    var fields: String { get }
}

// MARK: State and account

extension SyncEngine.Event {
    /// The engine's state changed (F34).
    ///
    /// **Differs from CKSyncEngine**, whose event carries a `State.Serialization` that the app
    /// must persist and hand back at launch. Here the state lives in the device log (see
    /// Docs/Engine.md, Device log): it is already durable when this event is delivered, and the
    /// app has nothing to save.
    /// The event gives the log offset the state is at — the offset of the newest entry it
    /// reflects — for apps that record it or read the log at that point.
    public struct StateUpdate: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "StateUpdate(\(fields))" }

        /// The offset of the newest device-log entry the state reflects.
        public let offset: LogOffset

        /// Creates the payload; only the engine does.
        package init(offset: LogOffset) { self.offset = offset }

        var fields: String { "offset \(offset)" }
    }

    /// The device's account changed (F35).
    public struct AccountChange: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "AccountChange(\(fields))" }

        /// How the account changed, with the user record IDs concerned.
        public let changeType: ChangeType

        /// Creates the payload; only the engine does.
        package init(changeType: ChangeType) { self.changeType = changeType }

        /// The user before the change: `nil` for ``ChangeType/signIn(currentUser:)`` (the
        /// Objective-C view of `CKSyncEngineAccountChangeEvent`).
        public var previousUser: Record.ID? {
            switch changeType {
            case .signIn: nil
            case .signOut(let previous), .switchAccounts(let previous, _): previous
            }
        }

        /// The user after the change: `nil` for ``ChangeType/signOut(previousUser:)``.
        public var currentUser: Record.ID? {
            switch changeType {
            case .signOut: nil
            case .signIn(let current), .switchAccounts(_, let current): current
            }
        }

        var fields: String { changeType.description }

        /// How an account changed.
        ///
        /// Mirrors `CKSyncEngine.Event.AccountChange.ChangeType`; the Objective-C raw values
        /// are 0 (sign in), 1 (sign out) and 2 (switch).
        public enum ChangeType: Sendable, Hashable, CustomStringConvertible {
            /// A user signed in where no one was.
            case signIn(currentUser: Record.ID)
            /// The user signed out: the app should delete its local data (F105).
            case signOut(previousUser: Record.ID)
            /// Another user replaced the previous one.
            case switchAccounts(previousUser: Record.ID, currentUser: Record.ID)

            /// The case name and the user record IDs, such as
            /// `switchAccounts(previousUser: record "_a" in zone "_defaultZone", currentUser: …)`.
            public var description: String {
                switch self {
                case .signIn(let current): "signIn(currentUser: \(current))"
                case .signOut(let previous): "signOut(previousUser: \(previous))"
                case .switchAccounts(let previous, let current):
                    "switchAccounts(previousUser: \(previous), currentUser: \(current))"
                }
            }
        }
    }
}

// MARK: Fetching

extension SyncEngine.Event {
    /// A fetch starts (F36).
    public struct WillFetchChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "WillFetchChanges(\(fields))" }

        /// The fetch's reason and options; equal to the one of its ``DidFetchChanges``.
        public let context: SyncEngine.FetchChangesContext

        /// Creates the payload; only the engine does.
        package init(context: SyncEngine.FetchChangesContext) { self.context = context }

        var fields: String { context.description }
    }

    /// Zones were created, changed or deleted on the server (F37). A fetch may bring several.
    ///
    /// One zone can be in both ``deletions`` and ``modifications``: it was deleted, then created
    /// again, since the last fetch (F149) — the owner deleted and re-created it, or, in a shared
    /// database, the owner removed this user and invited them back, or deleted the share and
    /// shared the zone again. The deletion always came first. Apply the deletions first (drop the
    /// zone's records), then the modifications: the engine then fetches the new incarnation's
    /// records, which the app keeps. Applying them in the other order drops the zone the app has
    /// just kept, and with it the records fetched next.
    ///
    /// ```swift
    /// case .fetchedDatabaseChanges(let changes):
    ///     for deletion in changes.deletions { store.dropZone(deletion.zoneID) }
    ///     for modification in changes.modifications { store.keepZone(modification.zoneID) }
    /// ```
    public struct FetchedDatabaseChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "FetchedDatabaseChanges(\(fields))" }

        /// Zones new, changed, or holding changed records.
        public let modifications: [DatabaseChange.Modification]
        /// Zones deleted, with the reason (F49); a zone here and in ``modifications`` was deleted
        /// first, then created again.
        public let deletions: [DatabaseChange.Deletion]

        /// Creates the payload; only the engine does.
        package init(modifications: [DatabaseChange.Modification] = [], deletions: [DatabaseChange.Deletion] = []) {
            self.modifications = modifications
            self.deletions = deletions
        }

        var fields: String {
            "modified \(describeItems(modifications.map(\.zoneID))), deleted \(describeItems(deletions.map { "\($0.zoneID) (\($0.reason))" }))"
        }
    }

    /// A fetch of one zone's record changes starts (F38).
    public struct WillFetchRecordZoneChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "WillFetchRecordZoneChanges(\(fields))" }

        /// The zone.
        public let zoneID: RecordZone.ID

        /// Creates the payload; only the engine does.
        package init(zoneID: RecordZone.ID) { self.zoneID = zoneID }

        var fields: String { zoneID.description }
    }

    /// Records were saved or deleted on the server (F39). A zone's fetch may bring several.
    public struct FetchedRecordZoneChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "FetchedRecordZoneChanges(\(fields))" }

        /// Records created or changed, in full with their system fields.
        public let modifications: [RecordZoneChange.Modification]
        /// Records deleted, with their types.
        public let deletions: [RecordZoneChange.Deletion]

        /// Creates the payload; only the engine does.
        package init(
            modifications: [RecordZoneChange.Modification] = [], deletions: [RecordZoneChange.Deletion] = []
        ) {
            self.modifications = modifications
            self.deletions = deletions
        }

        var fields: String {
            "modified \(describeItems(modifications.map(\.record.recordID))), deleted \(describeItems(deletions.map(\.recordID)))"
        }
    }

    /// A fetch of one zone's record changes ended (F40); one per ``WillFetchRecordZoneChanges``.
    public struct DidFetchRecordZoneChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "DidFetchRecordZoneChanges(\(fields))" }

        /// The zone.
        public let zoneID: RecordZone.ID
        /// Why the zone's fetch failed, or `nil` if it succeeded.
        public let error: SyncError?

        /// Creates the payload; only the engine does.
        package init(zoneID: RecordZone.ID, error: SyncError? = nil) {
            self.zoneID = zoneID
            self.error = error
        }

        var fields: String {
            guard let error else { return zoneID.description }
            return "\(zoneID), error \(error)"
        }
    }

    /// A fetch ended (F41); one per ``WillFetchChanges``.
    public struct DidFetchChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "DidFetchChanges(\(fields))" }

        /// The fetch's reason and options; equal to the one of its ``WillFetchChanges``.
        public let context: SyncEngine.FetchChangesContext

        /// Creates the payload; only the engine does.
        package init(context: SyncEngine.FetchChangesContext) { self.context = context }

        var fields: String { context.description }
    }
}

// MARK: Sending

extension SyncEngine.Event {
    /// A send starts (F42).
    public struct WillSendChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "WillSendChanges(\(fields))" }

        /// The send's reason and options; equal to the one of its ``DidSendChanges``.
        public let context: SyncEngine.SendChangesContext

        /// Creates the payload; only the engine does.
        package init(context: SyncEngine.SendChangesContext) { self.context = context }

        var fields: String { context.description }
    }

    /// The server answered a request saving or deleting zones (F43).
    public struct SentDatabaseChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "SentDatabaseChanges(\(fields))" }

        /// The zones saved, as the server returned them.
        public let savedZones: [RecordZone]
        /// The zone saves that failed, with their errors.
        public let failedZoneSaves: [FailedZoneSave]
        /// The IDs of the zones deleted.
        public let deletedZoneIDs: [RecordZone.ID]
        /// The zone deletions that failed, with their errors.
        public let failedZoneDeletes: [RecordZone.ID: SyncError]

        /// Creates the payload; only the engine does.
        package init(
            savedZones: [RecordZone] = [], failedZoneSaves: [FailedZoneSave] = [], deletedZoneIDs: [RecordZone.ID] = [],
            failedZoneDeletes: [RecordZone.ID: SyncError] = [:]
        ) {
            self.savedZones = savedZones
            self.failedZoneSaves = failedZoneSaves
            self.deletedZoneIDs = deletedZoneIDs
            self.failedZoneDeletes = failedZoneDeletes
        }

        var fields: String {
            SyncEngine.Event.describeSent(
                saved: savedZones.map(\.zoneID), failedSaves: failedZoneSaves, deleted: deletedZoneIDs,
                failedDeletes: failedZoneDeletes)
        }

        /// A zone save that failed.
        public struct FailedZoneSave: Sendable, Hashable, CustomStringConvertible {
            /// The zone the engine tried to save.
            public let zone: RecordZone
            /// Why it failed.
            public let error: SyncError

            /// Creates a failure; only the engine does.
            package init(zone: RecordZone, error: SyncError) {
                self.zone = zone
                self.error = error
            }

            /// The zone ID and the error code, such as `zone "Notes": badDatabase (24)`.
            public var description: String { "\(zone.zoneID): \(error.code)" }
        }
    }

    /// The server answered a request saving or deleting records (F44); one per batch sent (F57).
    public struct SentRecordZoneChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "SentRecordZoneChanges(\(fields))" }

        /// The records saved, as the server returned them: with a new change tag and dates.
        public let savedRecords: [Record]
        /// The record saves that failed, with their errors.
        public let failedRecordSaves: [FailedRecordSave]
        /// The IDs of the records deleted.
        public let deletedRecordIDs: [Record.ID]
        /// The record deletions that failed, with their errors.
        public let failedRecordDeletes: [Record.ID: SyncError]

        /// Creates the payload; only the engine does.
        package init(
            savedRecords: [Record] = [], failedRecordSaves: [FailedRecordSave] = [], deletedRecordIDs: [Record.ID] = [],
            failedRecordDeletes: [Record.ID: SyncError] = [:]
        ) {
            self.savedRecords = savedRecords
            self.failedRecordSaves = failedRecordSaves
            self.deletedRecordIDs = deletedRecordIDs
            self.failedRecordDeletes = failedRecordDeletes
        }

        var fields: String {
            SyncEngine.Event.describeSent(
                saved: savedRecords.map(\.recordID), failedSaves: failedRecordSaves, deleted: deletedRecordIDs,
                failedDeletes: failedRecordDeletes)
        }

        /// A record save that failed.
        public struct FailedRecordSave: Sendable, Hashable, CustomStringConvertible {
            /// The record the engine tried to save.
            public let record: Record
            /// Why it failed; for `serverRecordChanged`, with the server's record.
            public let error: SyncError

            /// Creates a failure; only the engine does.
            package init(record: Record, error: SyncError) {
                self.record = record
                self.error = error
            }

            /// The record ID and the error code, such as
            /// `record "A" in zone "Notes": serverRecordChanged (14)`.
            public var description: String { "\(record.recordID): \(error.code)" }
        }
    }

    /// The fields of ``SentDatabaseChanges`` and ``SentRecordZoneChanges``: the IDs saved, the
    /// failed saves, the IDs deleted and the failed deletions, these sorted by ID with their codes.
    private static func describeSent<ID: CustomStringConvertible, FailedSave>(
        saved: [ID], failedSaves: [FailedSave], deleted: [ID], failedDeletes: [ID: SyncError]
    ) -> String {
        let failedDeletes = failedDeletes.sorted { $0.key.description < $1.key.description }.map {
            "\($0.key): \($0.value.code)"
        }
        return "saved \(describeItems(saved)), failed saves \(describeItems(failedSaves)), "
            + "deleted \(describeItems(deleted)), failed deletes \(describeItems(failedDeletes))"
    }

    /// A send ended (F45); one per ``WillSendChanges``.
    public struct DidSendChanges: Sendable, Hashable, EventPayload {
        /// The type name and the fields, for logs.
        public var description: String { "DidSendChanges(\(fields))" }

        /// The send's reason and options; equal to the one of its ``WillSendChanges``.
        public let context: SyncEngine.SendChangesContext

        /// Creates the payload; only the engine does.
        package init(context: SyncEngine.SendChangesContext) { self.context = context }

        var fields: String { context.description }
    }
}
