import Foundation
import LogStore
import SyncModel

/// Syncs an app's records and zones with a server database, on a device log.
///
/// Mirrors `CKSyncEngine` without the `CK` prefix (DESIGN.md §3). Everything the engine knows is
/// kept in its ``DeviceLog``: ``state`` reads from it and every mutation appends to it.
///
/// ```swift
/// let engine = try SyncEngine(logDirectory: appSupport.appending(path: "sync"))
/// try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneName: "Notes"))])
/// try engine.state.add(pendingRecordZoneChanges: [.saveRecord(noteID)])
/// try engine.state.pendingRecordZoneChanges      // [saveRecord(record "n1" in zone "Notes")]
/// ```
///
/// **Not there yet** — this is the engine's foundation only: there is no `Configuration`
/// (database, delegate, automatic sync, clock, logger), no delegate, no
/// `sendChanges()`/`fetchChanges()`/`cancelOperations()` and no scheduling. The value types the
/// flows will use exist (``Event`` and its payloads, ``RecordZoneChangeBatch``, the send and
/// fetch contexts and options), but nothing creates events yet. Pending changes can be added
/// and read, and survive restarts, but nothing sends them.
public final class SyncEngine: Sendable {
    /// The engine's state: pending changes and flags, read from and written to the device log.
    public let state: State
    /// The log holding everything the engine knows.
    public let deviceLog: DeviceLog

    /// Creates an engine on the device log in `logDirectory` (created if missing), with durable
    /// commits.
    ///
    /// - Throws: `LogStoreError` if the log cannot be opened (see ``DeviceLog/init(directory:options:clock:)``).
    public convenience init(logDirectory: URL) throws {
        self.init(deviceLog: try DeviceLog(directory: logDirectory))
    }

    /// Creates an engine on an open device log.
    public init(deviceLog: DeviceLog) {
        self.deviceLog = deviceLog
        self.state = State(deviceLog: deviceLog)
    }
}
