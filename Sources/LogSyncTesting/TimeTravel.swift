import Foundation
import LogStore
import LogSync
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

    /// The state a device log's index holds, as `DeviceLog.snapshotState()` read it.
    package init(_ index: DeviceLog.IndexState) {
        offset = index.offset
        pendingRecordZoneChanges = index.pendingRecordZoneChanges
        pendingDatabaseChanges = index.pendingDatabaseChanges
        inFlightRecordZoneChanges = index.inFlightRecordZoneChanges
        hasPendingUntrackedChanges = index.hasPendingUntrackedChanges
        zoneIDsWithUnfetchedServerChanges = index.zoneIDsWithUnfetchedServerChanges
        knownZoneIDs = index.knownZoneIDs
        databaseChangeToken = index.databaseChangeToken
        zoneChangeTokens = index.zoneChangeTokens
        lastKnownServerRecords = index.lastKnownServerRecords
        deliveredOffset = index.deliveredOffset
        account = switch index.account {
        case nil: .never
        case .some(nil): .signedOut
        case .some(.some(let id)): .user(id)
        }
        subscriptionID = index.subscriptionID
    }
}

extension DeviceLog {
    /// The engine's state as it was after the entry at `offset`.
    ///
    /// Replays the entries `1...offset` into a scratch log (removed before returning) and reads
    /// its index; this log is only read. Costs O(offset).
    ///
    /// ```swift
    /// let before = try engine.deviceLog.log.lastOffset
    /// try await engine.sendChanges()
    /// try engine.deviceLog.state(at: before).pendingRecordZoneChanges   // what was pending
    /// ```
    ///
    /// - Throws: `LogStoreError` `.invalidArgument` if `offset` is past the end of the log; what
    ///   reading or replaying an entry throws.
    public func state(at offset: LogOffset) throws -> DeviceState {
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("logsync-state-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let past = try rewind(
            to: offset, into: scratch, options: LogEnvironment.Options(durability: .fast, initialMapSize: 1 << 20))
        return DeviceState(try past.snapshotState())
    }

    /// A new device log in `directory` holding this log's entries `1...offset`, its index
    /// rebuilt from them: a forked timeline. Open a `SyncEngine` on it to continue from that
    /// point (as after a crash there); this log is never modified.
    ///
    /// ```swift
    /// let fork = try engine.deviceLog.rewind(to: beforeSend, into: forkDirectory)
    /// let replay = try SyncEngine(.init(database: database, deviceLog: fork, delegate: delegate))
    /// ```
    ///
    /// - Parameters:
    ///   - offset: the last entry the fork holds; at most `log.lastOffset`.
    ///   - directory: the fork's directory, created if missing; must not hold a device log with entries.
    ///   - options: the fork's environment options; `nil` takes this log's, writable.
    /// - Throws: `LogStoreError` `.invalidArgument` if `offset` is past the end of the log or
    ///   `directory` already holds entries; what reading, replaying or opening throws.
    public func rewind(
        to offset: LogOffset, into directory: URL, options: LogEnvironment.Options? = nil
    ) throws -> DeviceLog {
        var forkOptions = options ?? log.environment.options
        forkOptions.readOnly = false
        // Closed before the device log opens it again, so the fork gets the device log's clock.
        _ = try log.rebuiltCopy(through: offset, at: directory, options: forkOptions)
        return try DeviceLog(directory: directory, options: forkOptions)
    }
}
