import LogStore
import SyncModel

/// The engine's state as a device log's index held it after one entry: what `state(at:)` returns.
///
/// Rebuilt from the entries `1...offset`, so it is the state the engine showed then (its
/// `state` reads at that moment), not a reconstruction from the current tables.
public struct DeviceState: Sendable, Hashable {
    /// The account a device log last recorded.
    public enum Account: Sendable, Hashable {
        /// No account check was recorded yet.
        case never
        /// The last check found nobody signed in.
        case signedOut
        /// The last check found this user.
        case user(Record.ID)
    }

    /// The offset the state is at: the last entry it includes.
    public var offset: LogOffset
    /// `SyncEngine.State.pendingRecordZoneChanges`, in order.
    public var pendingRecordZoneChanges: [SyncEngine.PendingRecordZoneChange]
    /// `SyncEngine.State.pendingDatabaseChanges`, in order.
    public var pendingDatabaseChanges: [SyncEngine.PendingDatabaseChange]
    /// The record changes of the batch being sent at that offset (empty between sends).
    public var inFlightRecordZoneChanges: [SyncEngine.PendingRecordZoneChange]
    /// `SyncEngine.State.hasPendingUntrackedChanges`.
    public var hasPendingUntrackedChanges: Bool
    /// `SyncEngine.State.zoneIDsWithUnfetchedServerChanges`, in key order.
    public var zoneIDsWithUnfetchedServerChanges: [RecordZone.ID]
    /// The zones the server was known to hold, in key order.
    public var knownZoneIDs: [RecordZone.ID]
    /// The database change token of the last database changes fetched, or `nil`.
    public var databaseChangeToken: DatabaseChangeToken?
    /// Each zone's change token (the position of the zone's last fetched page), in zone ID
    /// order: owner name, then zone name. Each token names its zone (`ZoneChangeToken.zoneID`).
    public var zoneChangeTokens: [ZoneChangeToken]
    /// The last known server record of each record ID (`DeviceLog.lastKnownServerRecord(for:)`),
    /// in ID order: owner name, zone name, record name.
    public var lastKnownServerRecords: [Record]
    /// The offset through which the delegate had handled every event, or `nil`.
    public var deliveredOffset: LogOffset?
    /// The account last recorded.
    public var account: Account
    /// The subscription the engine had ensured last, or `nil`.
    public var subscriptionID: Subscription.ID?

    /// A state of these parts, for the diagnostics that compute one without the index (a
    /// replay of the entries in memory).
    package init(
        offset: LogOffset, pendingRecordZoneChanges: [SyncEngine.PendingRecordZoneChange],
        pendingDatabaseChanges: [SyncEngine.PendingDatabaseChange],
        inFlightRecordZoneChanges: [SyncEngine.PendingRecordZoneChange], hasPendingUntrackedChanges: Bool,
        zoneIDsWithUnfetchedServerChanges: [RecordZone.ID], knownZoneIDs: [RecordZone.ID],
        databaseChangeToken: DatabaseChangeToken?, zoneChangeTokens: [ZoneChangeToken],
        lastKnownServerRecords: [Record],
        deliveredOffset: LogOffset?, account: Account, subscriptionID: Subscription.ID?
    ) {
        self.offset = offset
        self.pendingRecordZoneChanges = pendingRecordZoneChanges
        self.pendingDatabaseChanges = pendingDatabaseChanges
        self.inFlightRecordZoneChanges = inFlightRecordZoneChanges
        self.hasPendingUntrackedChanges = hasPendingUntrackedChanges
        self.zoneIDsWithUnfetchedServerChanges = zoneIDsWithUnfetchedServerChanges
        self.knownZoneIDs = knownZoneIDs
        self.databaseChangeToken = databaseChangeToken
        self.zoneChangeTokens = zoneChangeTokens
        self.lastKnownServerRecords = lastKnownServerRecords
        self.deliveredOffset = deliveredOffset
        self.account = account
        self.subscriptionID = subscriptionID
    }
}
