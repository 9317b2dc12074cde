import Foundation
import LogStore
import Logging
import SyncModel
import Synchronization

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
/// Inside the engine, information flows one way: the log announces each append to its
/// listeners (the engine, for `stateUpdate` events; the scheduler, which decides when to sync),
/// and never calls anything above it.
///
/// Time travel on a device log (`state(at:)`, `rewind(to:into:)`, replay against a fresh
/// server) is in `LogSyncDiagnostics`. Not there yet: compaction.
public final class DeviceLog: Sendable {
    /// The name of the log in its environment.
    public static let logName = "device"

    /// The underlying log, for tools: dumping, verifying projections (`verifyProjections()`),
    /// reading entries. Appending to it directly bypasses group commit but keeps the projections
    /// right; an entry of a kind the device does not know is refused (`.corruptEntry`).
    public let log: Log

    let committer: GroupCommitter
    /// Who hears of each append (see ``listen(_:)``), in the order they started listening, and
    /// their IDs in the same order (apart, so that an append copies the listeners without
    /// building an array).
    private let listeners = Mutex<(next: UInt64, ids: [UInt64], all: [@Sendable (Appended) -> Void])>((0, [], []))
    /// The pending record list of the last whole read, so that reading it for every batch costs
    /// a walk of the table, not a decode of every change (see
    /// `DeviceSnapshot.pendingRecordZoneChanges(cache:)`).
    let pendingChangeCache = Mutex(PendingListCache())
    /// What `lastKnownServerRecord(for:)` kept of the entries it read last: at most one page or
    /// result, one `batchSaved` and its `batchPrepared`.
    private let serverRecordEntries = Mutex(ServerRecordReader.Kept())

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
        log = try Log.open(
            at: directory, named: Self.logName, options: options, projections: [DeviceIndex()], clock: clock)
        committer = GroupCommitter(log: log)
    }

    /// A device log whose index is `index` instead of the device index: a projection with the
    /// index's name and tables, such as a deliberately broken copy that a diagnostics test
    /// bisects (`DeviceLogBisect`). Never for an engine.
    package init(directory: URL, options: LogEnvironment.Options, index: any Projection) throws {
        log = try Log.open(at: directory, named: Self.logName, options: options, projections: [index])
        committer = GroupCommitter(log: log)
    }

    /// The device index, the projection every device log keeps, for tests that wrap it.
    package static var standardIndex: any Projection { DeviceIndex() }

    /// The last record the server is known to hold under `recordID`, or `nil`.
    ///
    /// Kept from the records of successful saves and from the `serverRecord` of
    /// `serverRecordChanged` failures, forgotten when the record is deleted or the server reports
    /// it (or its zone) gone. Rebuild an edit on it (`systemFieldsCopy()`) so that the save passes
    /// the change-tag check: apps need not archive system fields themselves.
    ///
    /// - Throws: `LogStoreError` if the log cannot be read.
    /// - Complexity: O(the record's size) when the entry that holds it is the one read last, as
    ///   for the records of one page or batch in turn; otherwise O(that entry's size) as well,
    ///   which is read and checked once.
    public func lastKnownServerRecord(for recordID: Record.ID) throws -> Record? {
        try lastKnownServerRecord(for: recordID, keepingEntries: true)
    }

    /// `lastKnownServerRecord(for:)`, reading the entry that holds the record afresh unless
    /// `keepingEntries` (for a benchmark that measures what keeping them saves).
    package func lastKnownServerRecord(for recordID: Record.ID, keepingEntries: Bool) throws -> Record? {
        var kept = keepingEntries ? serverRecordEntries.withLock { $0 } : ServerRecordReader.Kept()
        let record = try read { try $0.lastKnownServerRecord(for: recordID, kept: &kept) }
        if keepingEntries { serverRecordEntries.withLock { $0 = kept } }
        return record
    }

    /// The engine's state as the index holds it now, read in one snapshot (for time travel and
    /// `logtool` in `LogSyncDiagnostics`).
    ///
    /// - Complexity: O(the state's size): every pending and in-flight change, zone, token and
    ///   last known server record is read and decoded; never O(the log's length).
    package func snapshotState() throws -> DeviceState {
        try read { snapshot in
            DeviceState(
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
                account: try snapshot.lastKnownAccount(),
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

    // MARK: Engine access

    /// Runs `body` with a consistent snapshot of the index. Do not append inside `body`.
    func read<R>(_ body: (DeviceSnapshot) throws -> R) throws -> R {
        try log.read { reader in try body(DeviceSnapshot(reader: reader)) }
    }

    /// Appends `entries` contiguously (sharing a commit with concurrent callers), announces them
    /// to the listeners, and returns their offsets once committed. An empty list appends nothing.
    ///
    /// - Parameters:
    ///   - author: who made the entries: `.app` for edits of `SyncEngine.State`.
    ///   - traceHeaders: the trace context of the request the last entry describes, recorded
    ///     with it (`DeviceEntry.traceHeaders(of:)`); none by default.
    ///   - recordBytes: the bytes each record of the last entry, a fetched page
    ///     (`zoneChangesFetched`), was read from, written instead of encoding the records again
    ///     (`DeviceEntry.decodedNewEntry(recordBytes:)`); `nil` by default.
    /// - Throws: `LogStoreError` (for example `.mapFull` when the disk is full) or what a
    ///   projection throws; nothing was appended (or announced) then.
    @discardableResult
    package func append(
        _ entries: [DeviceEntry], by author: Appended.Author = .engine, traceHeaders: [String: String] = [:],
        preparedBatch: PreparedBatchReference? = nil, recordBytes: [ArraySlice<UInt8>]? = nil
    ) throws -> Range<LogOffset> {
        guard !entries.isEmpty else {
            let end = try log.lastOffset.next
            return end..<end
        }
        let offsets = try committer.append(
            Self.encoded(entries, traceHeaders: traceHeaders, preparedBatch: preparedBatch, recordBytes: recordBytes))
        announce(Appended(entries: entries, offsets: offsets, author: author))
        return offsets
    }

    /// Appends `entries` as `append(_:by:)` does, suspending the calling task instead of
    /// blocking its thread until the commit: any number of tasks can wait for one commit this
    /// way, where blocked threads of the cooperative pool would be one per core. The listeners
    /// hear of the entries in the calling task, once committed, as with `append(_:by:)`.
    ///
    /// Once called, the append is not stopped by the task's cancellation (see
    /// `GroupCommitter.append(_:) async`). Named apart from `append(_:by:)` so that the engine's
    /// synchronous appends in async code keep resolving to the synchronous one.
    ///
    /// - Throws: as `append(_:by:)`; nothing was appended (or announced) then.
    @discardableResult
    package func appendSuspending(
        _ entries: [DeviceEntry], by author: Appended.Author = .engine
    ) async throws -> Range<LogOffset> {
        guard !entries.isEmpty else {
            let end = try log.lastOffset.next
            return end..<end
        }
        let offsets = try await committer.append(entries.map(\.decodedNewEntry))
        announce(Appended(entries: entries, offsets: offsets, author: author))
        return offsets
    }

    /// Appends the entries `make` returns for the offset the first of them will have, so an
    /// entry can name its own offset (a request ID made of it, F103); announces them and returns
    /// their offsets once committed, as `append(_:by:)` does.
    ///
    /// The append is a write transaction of its own, outside group commit (the offset is known
    /// only inside it); `make` may run more than once (when the map grows) and must not append.
    @discardableResult
    package func append(
        by author: Appended.Author = .engine, traceHeaders: [String: String] = [:],
        making make: (LogOffset) throws -> [DeviceEntry]
    ) throws -> Range<LogOffset> {
        var entries: [DeviceEntry] = []
        let offsets = try log.environment.write { transaction in
            entries = try make(try log.lastOffset(in: transaction).next)
            return try log.append(Self.encoded(entries, traceHeaders: traceHeaders), in: transaction)
        }
        guard !entries.isEmpty else { return offsets }
        announce(Appended(entries: entries, offsets: offsets, author: author))
        return offsets
    }

    /// The entries to append, the last one with `traceHeaders` (the trace context of the request
    /// it describes) when there are any, and its records written as `recordBytes` when given.
    private static func encoded(
        _ entries: [DeviceEntry], traceHeaders: [String: String], preparedBatch: PreparedBatchReference? = nil,
        recordBytes: [ArraySlice<UInt8>]? = nil
    ) -> [NewEntry] {
        var encoded = entries.indices.map { index in
            if let batch = preparedBatch {
                entries[index].decodedNewEntry(preparedAt: batch.offset, preparing: batch.recordsToSave)
            } else if let recordBytes, index == entries.count - 1 {
                entries[index].decodedNewEntry(recordBytes: recordBytes)
            } else {
                entries[index].decodedNewEntry
            }
        }
        if !traceHeaders.isEmpty, let last = encoded.indices.last {
            encoded[last] = encoded[last].tracing(traceHeaders)
        }
        return encoded
    }

    /// Calls every listener with `appended`, on this thread.
    private func announce(_ appended: Appended) {
        for listener in listeners.withLock({ $0.all }) { listener(appended) }
    }

    /// Appends one entry; see `append(_:by:)`.
    @discardableResult
    func append(_ entry: DeviceEntry, by author: Appended.Author = .engine) throws -> LogOffset {
        try append([entry], by: author).lowerBound
    }

    /// Appends an entry of the engine's own bookkeeping (a scheduling decision, a push hint) whose
    /// failure must not stop what is under way: it is logged, and the next append fails loudly.
    func note(_ entry: DeviceEntry, logger: Logger) {
        do {
            try append(entry)
        } catch {
            logger.error("could not append \(entry.name) to the device log: \(error)")
        }
    }

    // MARK: Announcements

    /// Entries just committed, as announced to the log's listeners.
    package struct Appended: Sendable {
        /// Who made an append.
        package enum Author: Sendable, Hashable {
            /// The app, through `SyncEngine.State`.
            case app
            /// The engine: its syncs, its scheduler, its push listener.
            case engine
        }

        package let entries: [DeviceEntry]
        package let offsets: Range<LogOffset>
        package let author: Author
    }

    /// Calls `listener` after every append made through this object, on the appending thread,
    /// once the entries are committed, until the returned registration is cancelled.
    ///
    /// A listener must not block; it may append (its own entries are announced too).
    func listen(_ listener: @escaping @Sendable (Appended) -> Void) -> Listening {
        let id = listeners.withLock { state in
            let id = state.next
            state.next += 1
            state.ids.append(id)
            state.all.append(listener)
            return id
        }
        return Listening(log: self, id: id)
    }

    /// A listener's registration (see ``listen(_:)``).
    struct Listening: Sendable {
        fileprivate weak var log: DeviceLog?
        fileprivate let id: UInt64

        /// Stops the announcements to this listener.
        func cancel() {
            log?.listeners.withLock { state in
                guard let index = state.ids.firstIndex(of: id) else { return }
                state.ids.remove(at: index)
                state.all.remove(at: index)
            }
        }
    }
}

/// The `batchPrepared` entry of the batch a `batchResult` reports, and the records it holds to
/// save: the result is written against it (`batchSaved`, kind 15), each saved record as what the
/// server changed in it.
package struct PreparedBatchReference: Sendable {
    package var offset: LogOffset
    package var recordsToSave: [Record]

    package init(offset: LogOffset, recordsToSave: [Record]) {
        self.offset = offset
        self.recordsToSave = recordsToSave
    }
}
