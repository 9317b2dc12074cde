import Foundation
import LogStore
import Synchronization
import SyncModel

/// A device's sync log: every edit of the engine's state and every step of a sync, appended to
/// an LMDB log named `device`, with the engine's state kept as projections of it.
///
/// ```swift
/// let deviceLog = try DeviceLog(directory: appSupport.appending(path: "sync"))
/// let engine = try SyncEngine(SyncEngine.Configuration(database: database, deviceLog: deviceLog, delegate: notes))
/// try engine.state.add(pendingRecordZoneChanges: [.saveRecord(noteID)])
/// let archived = try deviceLog.lastKnownServerRecord(for: noteID)   // after a send
/// ```
///
/// Opening costs O(1) in the log's length: the projections are stored with the log, updated in
/// the same transaction as every append, and only read at open (a projection whose version
/// changed, or that lags entries written without it, is rebuilt or caught up first).
///
/// Concurrent appends share commits (group commit): each caller returns once the commit that
/// holds its entries is done (durable by default). Reads never block and see a committed state.
///
/// Time travel (`state(at:)`, `rewind(to:into:)`, DESIGN.md §6) is in `LogSyncTesting`. Not there yet: compaction.
public final class DeviceLog: Sendable {
    /// The name of the log in its environment.
    public static let logName = "device"

    /// The underlying log, for tools: dumping, verifying projections (`verifyProjections()`),
    /// reading entries. Appending to it directly bypasses group commit but keeps the projections
    /// right; an entry of a kind the device does not know is refused (`.corruptEntry`).
    public let log: Log

    let committer: GroupCommitter
    /// Decoded pending record changes by position, so that reading the pending list for every
    /// batch costs a walk of the table, not a decode of every change (see
    /// `DeviceSnapshot.pendingRecordZoneChanges(cache:)`).
    let pendingChangeCache = Mutex<[Position: SyncEngine.PendingRecordZoneChange]>([:])

    /// Opens (creating it if needed) the device log in `directory`.
    ///
    /// - Parameters:
    ///   - directory: the log's directory, created if missing. One directory per engine.
    ///   - options: the environment's options; `.durable` commits by default (`.fast` is for
    ///     tests), `readOnly` opens without writing (mutations then fail with `.readOnly`).
    ///   - clock: the wall-clock time stamped on each entry.
    /// - Throws: `LogStoreError`: the directory cannot be created or holds something else, the
    ///   environment is open in this process with other options, or a projection is inconsistent.
    public init(
        directory: URL, options: LogEnvironment.Options = .init(),
        clock: @escaping @Sendable () -> EntryTime = { .now() }
    ) throws {
        log = try Log.open(at: directory, named: Self.logName, options: options, projections: [DeviceIndex()], clock: clock)
        committer = GroupCommitter(log: log)
    }

    /// The last record the server is known to hold under `recordID`, or `nil`.
    ///
    /// Kept from the records of successful saves and from the `serverRecord` of
    /// `serverRecordChanged` failures, forgotten when the record is deleted or the server reports
    /// it (or its zone) gone. Rebuild an edit on it (`systemFieldsCopy()`) so that the save passes
    /// the change-tag check: apps need not archive system fields themselves.
    ///
    /// - Throws: `LogStoreError` if the log cannot be read.
    public func lastKnownServerRecord(for recordID: Record.ID) throws -> Record? {
        try read { try $0.lastKnownServerRecord(for: recordID) }
    }

    /// The engine's state as the index holds it now, read in one snapshot (for `LogSyncTesting`'s
    /// time travel and `logtool`).
    ///
    /// - Complexity: O(the state's size): every pending and in-flight change, zone, token and
    ///   last known server record is read and decoded; never O(the log's length).
    package func snapshotState() throws -> IndexState {
        try read { snapshot in
            let account = try snapshot.lastKnownAccount()
            let accountUser: Record.ID?? = switch account {
            case .never: nil
            case .signedOut: .some(nil)
            case .user(let id): .some(id)
            }
            return IndexState(
                offset: try snapshot.offset,
                pendingRecordZoneChanges: try snapshot.pendingRecordZoneChanges(),
                pendingDatabaseChanges: try snapshot.pendingDatabaseChanges(),
                inFlightRecordZoneChanges: try snapshot.inFlightRecordChanges().map(\.change),
                hasPendingUntrackedChanges: try snapshot.hasPendingUntrackedChanges(),
                zoneIDsWithUnfetchedServerChanges: try snapshot.zoneIDsWithUnfetchedServerChanges(),
                knownZoneIDs: try snapshot.knownZoneIDs(),
                databaseChangeToken: try snapshot.databaseChangeToken(),
                zoneChangeTokens: try snapshot.zoneChangeTokens().sorted { IDOrder.precedes($0.zoneID, $1.zoneID) },
                lastKnownServerRecords: try snapshot.lastKnownServerRecords().sorted {
                    IDOrder.precedes($0.recordID, $1.recordID)
                },
                deliveredOffset: try snapshot.deliveredOffset(),
                account: accountUser,
                subscriptionID: try snapshot.subscriptionID())
        }
    }

    /// The index's tables as stored: every row of every table, in table and key order, each key
    /// and value preceded by its length. Equal bytes mean an equal index, so comparing them tells
    /// without decoding anything whether appends changed the state (`logtool diff` reads
    /// `snapshotState()` only then).
    ///
    /// - Complexity: O(the index's size in bytes).
    package func indexBytes() throws -> [UInt8] {
        try log.read { reader in
            var bytes: [UInt8] = []
            for name in DeviceIndex().tableNames {
                let table = try reader.table(name, of: DeviceIndex.projectionName)
                try reader.transaction.forEach(in: table) { key, value in
                    bytes += bigEndian(UInt64(key.count)) + key + bigEndian(UInt64(value.count)) + value
                    return true
                }
                bytes += bigEndian(UInt64.max)  // the end of the table
            }
            return bytes
        }
    }

    /// What `snapshotState()` reads.
    package struct IndexState {
        package var offset: LogOffset
        package var pendingRecordZoneChanges: [SyncEngine.PendingRecordZoneChange]
        package var pendingDatabaseChanges: [SyncEngine.PendingDatabaseChange]
        package var inFlightRecordZoneChanges: [SyncEngine.PendingRecordZoneChange]
        package var hasPendingUntrackedChanges: Bool
        package var zoneIDsWithUnfetchedServerChanges: [RecordZone.ID]
        package var knownZoneIDs: [RecordZone.ID]
        package var databaseChangeToken: DatabaseChangeToken?
        /// Each zone's change token, in zone ID order (owner name, then zone name).
        package var zoneChangeTokens: [ZoneChangeToken]
        /// The last known server record of each ID, in ID order (owner, zone, record name): not
        /// in the table's key order, whose zone numbers depend on the order the log met the zones,
        /// so that two logs holding the same records give equal states.
        package var lastKnownServerRecords: [Record]
        package var deliveredOffset: LogOffset?
        /// `nil`: never checked; `.some(nil)`: signed out; `.some(id)`: that user.
        package var account: Record.ID??
        package var subscriptionID: Subscription.ID?
    }

    // MARK: Engine access

    /// Runs `body` with a consistent snapshot of the index. Do not append inside `body`.
    func read<R>(_ body: (DeviceSnapshot) throws -> R) throws -> R {
        try log.read { reader in try body(DeviceSnapshot(reader: reader)) }
    }

    /// Appends `entries` contiguously (sharing a commit with concurrent callers) and returns
    /// their offsets once committed. An empty list appends nothing.
    ///
    /// - Throws: `LogStoreError` (for example `.mapFull` when the disk is full) or what a
    ///   projection throws; nothing was appended then.
    @discardableResult
    package func append(_ entries: [DeviceEntry]) throws -> Range<LogOffset> {
        guard !entries.isEmpty else {
            let end = try log.lastOffset.next
            return end..<end
        }
        return try committer.append(entries.map(\.newEntry))
    }

    /// Appends one entry; see `append(_:)`.
    @discardableResult
    func append(_ entry: DeviceEntry) throws -> LogOffset {
        try append([entry]).lowerBound
    }
}
