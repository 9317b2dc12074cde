import CLMDB
import Foundation

/// An append-only log of entries in an LMDB environment, with its projections.
///
/// ```swift
/// let log = try Log.open(at: directory, projections: [LatestValue()])
/// let offsets = try log.append([NewEntry(kind: 1, payload: Array("hello".utf8))])
/// let entry = try log.entry(at: offsets.lowerBound)
/// ```
///
/// Offsets are dense and start at 1. Each append is one write transaction that stores the
/// entries and updates every projection, so a projection never lags the log it was read with.
public final class Log: Sendable {
    static let tablePrefix = "log."

    /// The environment the log lives in.
    public let environment: LogEnvironment
    /// The log's name in its environment.
    public let name: String
    /// The projections kept with the log, in the order they are applied.
    public var projections: [any Projection] { projectionSet.members.map(\.projection) }

    let entriesTable: Table
    let projectionSet: ProjectionSet
    let clock: @Sendable () -> EntryTime
    /// The key of the log's tail record in the `meta` table: its last offset, written in the
    /// transaction of every append, so that a reader can tell a lost tail from a shorter log.
    let tailKey: [UInt8]

    /// Opens (creating it unless read-only) the log `name` in the environment at `directory`.
    ///
    /// - Parameters:
    ///   - directory: the environment's directory; created if missing (unless read-only).
    ///   - name: the log's name in the environment.
    ///   - options: durability, read-only access and map sizes of the environment.
    ///   - projections: kept in the same transaction as every append; a projection that is new
    ///     or whose version changed is rebuilt, one that lags the log catches up.
    ///   - clock: the time given to entries appended without one.
    /// - Throws: `LogStoreError` (`.missingPath`, `.notALog`, `.alreadyOpen`, `.invalidArgument`).
    public static func open(
        at directory: URL, named name: String = "main", options: LogEnvironment.Options = .init(),
        projections: [any Projection] = [], clock: @escaping @Sendable () -> EntryTime = { .now() }
    ) throws(LogStoreError) -> Log {
        let environment = try LogEnvironment.open(at: directory, options: options)
        return try environment.openLog(named: name, projections: projections, clock: clock)
    }

    init(
        environment: LogEnvironment, name: String, entriesTable: Table, projectionSet: ProjectionSet,
        clock: @escaping @Sendable () -> EntryTime
    ) {
        self.environment = environment
        self.name = name
        self.entriesTable = entriesTable
        self.projectionSet = projectionSet
        self.clock = clock
        self.tailKey = Array("tail.\(name)".utf8)
    }

    func located(_ error: LogStoreError) -> LogStoreError {
        error.located(path: environment.path, log: name)
    }

    // MARK: Appending

    /// Appends `entries` in one write transaction and returns their offsets.
    ///
    /// When this returns the entries and every projection's update are committed (and, with
    /// `.durable`, on disk). Complexity: O(entries · log n) plus the projections' work.
    @discardableResult
    public func append(_ entries: [NewEntry]) throws -> Range<LogOffset> {
        try environment.write { transaction in try append(entries, in: transaction) }
    }

    /// Appends one entry in its own transaction.
    @discardableResult
    public func append(_ entry: NewEntry) throws -> LogOffset {
        try append([entry]).lowerBound
    }

    /// Appends `entries` inside a write transaction of this log's environment, so several logs
    /// and tables can change atomically. Projections are updated in the same transaction.
    @discardableResult
    public func append(_ entries: [NewEntry], in transaction: WriteTransaction) throws -> Range<LogOffset> {
        precondition(transaction.environment === environment, "a transaction of another environment")
        let previous = try lastOffset(in: transaction)
        var offset = previous
        let now = entries.contains { $0.time == nil } ? clock() : EntryTime(microsecondsSince1970: 0)
        for entry in entries {
            guard entry.payload.count <= Envelope.maxPayloadSize else {
                throw located(
                    LogStoreError(.invalidArgument, "a payload of \(entry.payload.count) bytes is over the limit"))
            }
            offset = offset.next
            var key = offset.key
            let size = Envelope.overhead + entry.payload.count
            var value = MDB_val(mv_size: size, mv_data: nil)
            let status = withUnsafeMutableBytes(of: &key) { keyBytes in
                var k = MDB_val(mv_size: 8, mv_data: keyBytes.baseAddress)
                return mdb_put(transaction.txn, entriesTable.dbi, &k, &value, UInt32(MDB_APPEND | MDB_RESERVE))
            }
            do throws(LogStoreError) { try transaction.check(status, "mdb_put") } catch { throw located(error) }
            Envelope.encode(
                offset: offset, kind: entry.kind, time: entry.time ?? now, payload: entry.payload,
                into: UnsafeMutableRawBufferPointer(start: value.mv_data, count: size))
        }
        if offset > previous {
            do throws(LogStoreError) {
                try transaction.put(
                    withUnsafeBytes(of: offset.key) { Array($0) }, forKey: tailKey, in: environment.meta)
            } catch {
                throw located(error)
            }
        }
        if !projectionSet.members.isEmpty && offset > previous {
            var stored: [LogEntry] = []
            stored.reserveCapacity(entries.count)
            var next = previous
            for entry in entries {
                next = next.next
                stored.append(
                    LogEntry(
                        offset: next, kind: entry.kind, time: entry.time ?? now, payload: entry.payload,
                        decoded: entry.decoded))
            }
            for member in projectionSet.members {
                try catchUp(member, through: previous, in: transaction)
                try projectionSet.apply(stored, to: member, in: transaction)
            }
        }
        return previous.next..<offset.next
    }

    // MARK: Reading

    /// The offset of the last entry, or `.zero` when the log is empty.
    public var lastOffset: LogOffset {
        get throws { try environment.read { (transaction) throws(LogStoreError) in try lastOffset(in: transaction) } }
    }

    /// The number of entries stored.
    public var entryCount: Int {
        get throws {
            try environment.read { (transaction) throws(LogStoreError) in try transaction.count(of: entriesTable) }
        }
    }

    /// The last offset as seen by `transaction`.
    ///
    /// - Throws: `.corruptFile` when the log's tail record (its last offset, written with every
    ///   append) names another offset: entries were lost from the end, or the record was damaged.
    public func lastOffset(in transaction: ReadTransaction) throws(LogStoreError) -> LogOffset {
        var last = LogOffset.zero
        if let key = try transaction.lastKey(in: entriesTable) {
            guard key.count == 8 else {
                throw located(LogStoreError(.corruptEntry, "the last key holds \(key.count) bytes, not 8"))
            }
            last = LogOffset(key.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) })
        }
        // Logs written before the tail record existed have none until their next append.
        guard let tail = try transaction.value(forKey: tailKey, in: environment.meta) else { return last }
        guard tail.count == 8 else {
            throw located(LogStoreError(.corruptFile, "the tail record holds \(tail.count) bytes, not 8"))
        }
        let recorded = LogOffset(tail.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) })
        if recorded > last {
            throw located(
                LogStoreError(
                    .corruptFile,
                    "the log ends at offset \(last), but its tail record says the last append ended at \(recorded): "
                        + "the entries \(last.next)...\(recorded) are lost", offset: last.next))
        }
        if recorded < last {
            throw located(
                LogStoreError(
                    .corruptFile,
                    "the log ends at offset \(last), but its tail record says the last append ended at \(recorded)",
                    offset: recorded.next))
        }
        return last
    }

    /// The entry at `offset`, its checksum verified, or `nil` if there is none.
    ///
    /// - Throws: `.corruptEntry` or `.unknownFormatVersion` naming the offset.
    public func entry(at offset: LogOffset) throws(LogStoreError) -> LogEntry? {
        try environment.read { (transaction) throws(LogStoreError) in try entry(at: offset, in: transaction) }
    }

    /// The entry at `offset` as seen by `transaction`.
    public func entry(at offset: LogOffset, in transaction: ReadTransaction) throws(LogStoreError) -> LogEntry? {
        guard offset > .zero else { return nil }
        do throws(LogStoreError) {
            return try transaction.withValue(forKey: withUnsafeBytes(of: offset.key) { Array($0) }, in: entriesTable) {
                (bytes) throws(LogStoreError) -> LogEntry? in
                guard let bytes else { return nil }
                return try Envelope.decode(offset: offset, bytes: bytes)
            }
        } catch {
            throw located(error)
        }
    }

    /// A cursor over the entries from `start` through `end` (the last offset at this call when
    /// `nil`). It reads in chunks of short read transactions, so memory does not grow with the
    /// range and no transaction stays open between calls to `next()`.
    public func entries(from start: LogOffset = .first, through end: LogOffset? = nil) throws -> EntryCursor {
        let end = try end ?? lastOffset
        return EntryCursor(log: self, next: max(start, .first), end: end)
    }

    /// Calls `body` with each entry from `start` through `end`, in order.
    public func forEachEntry(
        from start: LogOffset = .first, through end: LogOffset? = nil, _ body: (LogEntry) throws -> Void
    ) throws {
        var cursor = try entries(from: start, through: end)
        while let entry = try cursor.next() { try body(entry) }
    }

    /// Reads up to `limit` consecutive entries from `start` through `end` in `transaction`,
    /// stopping early past `byteBudget` payload bytes, or before a missing or corrupt entry
    /// (which the read starting at it reports).
    func readChunk(
        from start: LogOffset, through end: LogOffset, limit: Int, byteBudget: Int, in transaction: ReadTransaction
    ) throws(LogStoreError) -> [LogEntry] {
        guard start <= end else { return [] }
        var chunk: [LogEntry] = []
        var expected = start
        var bytesRead = 0
        var failure: LogStoreError?
        do {
            try transaction.forEach(in: entriesTable, from: withUnsafeBytes(of: start.key) { Array($0) }) {
                key, value in
                guard key.count == 8 else {
                    failure = LogStoreError(
                        .corruptEntry, "a key of \(key.count) bytes after offset \(expected.rawValue - 1)",
                        offset: expected)
                    return false
                }
                let offset = LogOffset(UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)))
                guard offset <= end else { return false }
                guard offset == expected else {
                    failure = LogStoreError(
                        .corruptEntry, "the entry is missing (the next stored offset is \(offset))", offset: expected)
                    return false
                }
                do throws(LogStoreError) {
                    let entry = try Envelope.decode(offset: offset, bytes: value)
                    bytesRead += entry.payload.count
                    chunk.append(entry)
                } catch {
                    failure = error
                    return false
                }
                expected = offset.next
                return chunk.count < limit && bytesRead < byteBudget && offset < end
            }
        } catch let error as LogStoreError {
            throw located(error)
        } catch {
            throw located(LogStoreError(.lmdb, "\(error)"))
        }
        if let failure {
            // Hand out the good entries before the bad one; the next read starts at it and throws.
            if chunk.isEmpty { throw located(failure) }
            return chunk
        }
        if chunk.isEmpty || (chunk.count < limit && bytesRead < byteBudget && expected <= end) {
            throw located(
                LogStoreError(.corruptEntry, "the entry is missing (the log ends before \(end))", offset: expected))
        }
        return chunk
    }

    /// Runs `body` with a reader of this log's entries and projections in one snapshot.
    public func read<R>(_ body: (LogReader) throws -> R) throws -> R {
        try environment.read { transaction in try body(LogReader(log: self, transaction: transaction)) }
    }

    // MARK: Projections

    /// Catches `member` up to `last` (a fallback: entries appended without this projection,
    /// for example by a process that did not declare it).
    func catchUp(_ member: ProjectionSet.Member, through last: LogOffset, in transaction: WriteTransaction) throws {
        var applied = try projectionSet.appliedOffset(of: member, in: transaction)
        if applied > last {
            throw located(
                LogStoreError(
                    .projectionInconsistent,
                    "projection \"\(member.projection.name)\" applied through \(applied), past the log's end \(last)"))
        }
        while applied < last {
            let chunk = try readChunk(
                from: applied.next, through: last, limit: 4096, byteBudget: 16 << 20, in: transaction)
            try projectionSet.apply(chunk, to: member, in: transaction)
            applied = chunk.last!.offset
        }
    }

    /// Brings every projection up to date at open: rebuilds new projections and those whose
    /// version changed, and catches up those that lag. Runs in chunks of write transactions.
    func prepareProjections() throws {
        guard !projectionSet.members.isEmpty else { return }
        try environment.write { transaction in
            for member in projectionSet.members
            where try projectionSet.storedVersion(of: member, in: transaction) != member.projection.version {
                try projectionSet.reset(member, in: transaction)
            }
        }
        try catchUpInChunks()
    }

    private func catchUpInChunks(chunkSize: Int = 8192) throws {
        var done = false
        while !done {
            done = try environment.write { transaction in
                let last = try lastOffset(in: transaction)
                var allDone = true
                for member in projectionSet.members {
                    let applied = try projectionSet.appliedOffset(of: member, in: transaction)
                    let target = LogOffset(min(last.rawValue, applied.rawValue + UInt64(chunkSize)))
                    try catchUp(member, through: target, in: transaction)
                    if target < last { allDone = false }
                }
                return allDone
            }
        }
    }

    /// Empties every projection's tables and replays the whole log into them.
    public func rebuildProjections() throws {
        guard !projectionSet.members.isEmpty else { return }
        try environment.write { transaction in
            for member in projectionSet.members { try projectionSet.reset(member, in: transaction) }
        }
        try catchUpInChunks()
    }

    /// The offset through which each projection has applied the log, by projection name.
    public func appliedOffsets() throws -> [String: LogOffset] {
        try environment.read { transaction in
            var offsets: [String: LogOffset] = [:]
            for member in projectionSet.members {
                offsets[member.projection.name] = try projectionSet.appliedOffset(of: member, in: transaction)
            }
            return offsets
        }
    }
}

/// The entries of a range, read lazily in chunks. Not `Sendable`: use it from one task.
public struct EntryCursor {
    let log: Log
    var nextOffset: LogOffset
    /// The last offset the cursor returns.
    public let end: LogOffset
    var buffer: [LogEntry] = []
    var index = 0

    /// Entries fetched per read transaction, and the payload bytes after which a chunk stops.
    static let chunkLimit = 1024
    static let chunkBytes = 4 << 20

    init(log: Log, next: LogOffset, end: LogOffset) {
        self.log = log
        self.nextOffset = next
        self.end = end
    }

    /// The next entry, or `nil` after `end`.
    ///
    /// - Throws: `.corruptEntry` or `.unknownFormatVersion` naming the offset.
    public mutating func next() throws(LogStoreError) -> LogEntry? {
        if index == buffer.count {
            guard nextOffset <= end else { return nil }
            buffer = []
            index = 0
            let (start, end) = (nextOffset, self.end)
            let log = self.log
            buffer = try log.environment.read { (transaction) throws(LogStoreError) in
                try log.readChunk(
                    from: start, through: end, limit: Self.chunkLimit, byteBudget: Self.chunkBytes, in: transaction)
            }
            nextOffset = buffer.last!.offset.next
        }
        defer { index += 1 }
        return buffer[index]
    }
}

@available(*, unavailable)
extension EntryCursor: Sendable {}

/// A snapshot of one log: its entries and its projections' tables, inside `Log.read`.
public struct LogReader {
    public let log: Log
    public let transaction: ReadTransaction

    /// A reader of `log` in `transaction` (which may be a write transaction: it then sees the
    /// writes made so far).
    public init(log: Log, transaction: ReadTransaction) {
        precondition(transaction.environment === log.environment, "a transaction of another environment")
        self.log = log
        self.transaction = transaction
    }

    /// The last offset in this snapshot.
    public var lastOffset: LogOffset { get throws { try log.lastOffset(in: transaction) } }

    public func entry(at offset: LogOffset) throws(LogStoreError) -> LogEntry? {
        try log.entry(at: offset, in: transaction)
    }

    /// The table `table` of the projection `projection`.
    public func table(_ table: String, of projection: String) throws(LogStoreError) -> Table {
        guard let member = log.projectionSet.members.first(where: { $0.projection.name == projection }) else {
            throw log.located(LogStoreError(.invalidArgument, "the log has no projection \"\(projection)\""))
        }
        guard let found = member.tables[table] else {
            throw log.located(LogStoreError(.invalidArgument, "projection \"\(projection)\" has no table \"\(table)\""))
        }
        return found
    }

    /// The offset through which `projection` has applied the log in this snapshot.
    public func appliedOffset(of projection: String) throws(LogStoreError) -> LogOffset {
        guard let member = log.projectionSet.members.first(where: { $0.projection.name == projection }) else {
            throw log.located(LogStoreError(.invalidArgument, "the log has no projection \"\(projection)\""))
        }
        return try log.projectionSet.appliedOffset(of: member, in: transaction)
    }
}

@available(*, unavailable)
extension LogReader: Sendable {}

extension LogEnvironment {
    /// Opens (creating it unless read-only) the log `name` in this environment, or returns the
    /// one already open if it has the same projections.
    public func openLog(
        named name: String = "main", projections: [any Projection] = [],
        clock: @escaping @Sendable () -> EntryTime = { .now() }
    ) throws(LogStoreError) -> Log {
        try validateName(name, what: "log name")
        let log = try logs.withLock { (logs) throws(LogStoreError) -> Log in
            if let existing = logs[name]?.object {
                guard existing.projections.map(\.name) == projections.map(\.name) else {
                    throw LogStoreError(
                        .alreadyOpen,
                        "open with projections \(existing.projections.map(\.name)), not \(projections.map(\.name))",
                        path: path, log: name)
                }
                return existing
            }
            let tableName = Log.tablePrefix + name
            guard let entries = try openTables([tableName], create: !options.readOnly)[0] else {
                let known = (try? logNames()) ?? []
                throw LogStoreError(
                    .notALog,
                    "there is no log named \"\(name)\" (logs here: \(known.isEmpty ? "none" : known.joined(separator: ", ")))",
                    path: path)
            }
            let set = try ProjectionSet(
                environment: self, log: name, projections: projections, create: !options.readOnly)
            let log = Log(environment: self, name: name, entriesTable: entries, projectionSet: set, clock: clock)
            logs[name] = Weak(object: log)
            return log
        }
        if !options.readOnly {
            do { try log.prepareProjections() } catch let error as LogStoreError { throw log.located(error) } catch {
                throw log.located(
                    LogStoreError(.projectionInconsistent, "rebuilding projections at open failed: \(error)"))
            }
        }
        return log
    }
}
