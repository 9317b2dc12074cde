import CLMDB
import Foundation

/// How a log commits.
public enum Durability: Sendable, Hashable {
    /// Every commit is flushed to disk before it returns (LMDB's default). The default.
    case durable
    /// Commits are not flushed (`MDB_NOSYNC`): a process crash loses nothing, an OS crash or
    /// power loss may lose recent commits or corrupt the file. For tests and benchmarks.
    case fast
}

/// One LMDB environment: a directory holding one or more logs and their projections.
///
/// An environment is opened once per process and path: opening the same directory again
/// returns the environment already open (LMDB forbids two environments on one file in one
/// process), or fails with `.alreadyOpen` if the options differ. It closes when the last
/// reference to it, or to a `Log` in it, goes away.
///
/// Concurrency rules:
/// 1. Transactions are synchronous closures. Never `await` inside one (LMDB ties a write
///    transaction's lock to its thread).
/// 2. One write transaction at a time per process; readers never block writers or each other.
/// 3. Do not start a write from inside a `read` closure: a write that must grow the map waits
///    for every open read transaction of this process to end.
/// 4. A `write` body may run more than once: when the map is full the transaction is aborted,
///    the map grows and the body runs again. Keep effects outside the transaction out of it.
public final class LogEnvironment: Sendable {
    /// How to open an environment.
    public struct Options: Sendable, Hashable {
        public var durability: Durability
        /// Open without writing: no file is created, appends fail with `.readOnly`.
        public var readOnly: Bool
        /// The map size to start with, in bytes; the map doubles whenever it is full.
        public var initialMapSize: Int
        /// The size past which the map does not grow; an append that needs more fails with `.mapFull`.
        public var maximumMapSize: Int
        /// How many named tables (logs and projection tables) the environment can hold.
        public var maxTables: Int
        /// How many read transactions may be open at once in all processes.
        public var maxReaders: Int
        /// How much of `data.mdb` opening checks before LMDB reads it (see Docs/LogFormat.md,
        /// "The structural check"). By default a read-only open (the tools) checks every page,
        /// and a read-write open (an engine, a server) checks what its own open reads, in a time
        /// bounded by the number of tables, not the file's size.
        public var structureCheck: StructureCheckScope

        public init(
            durability: Durability = .durable, readOnly: Bool = false,
            initialMapSize: Int = 64 << 20, maximumMapSize: Int = 1 << 40,
            maxTables: Int = 1024, maxReaders: Int = 510, structureCheck: StructureCheckScope? = nil
        ) {
            self.durability = durability
            self.readOnly = readOnly
            self.initialMapSize = initialMapSize
            self.maximumMapSize = maximumMapSize
            self.maxTables = maxTables
            self.maxReaders = maxReaders
            self.structureCheck = structureCheck ?? (readOnly ? .everyPage : .tableEnds)
        }
    }

    /// The directory, with symbolic links resolved.
    public let path: String
    public let options: Options

    // `OpaquePointer` to the MDB_env; immutable after init, LMDB's environment is thread-safe.
    nonisolated(unsafe) let handle: OpaquePointer
    /// Serializes write transactions and table opening (LMDB requires both).
    let writerLock = PlainLock()
    /// Shared by read transactions, exclusive while the map is resized.
    let mapLock = MapLock()
    /// Table handles by name, published only after the transaction that opened them committed.
    let tables = Protected<[String: Table]>([:])
    /// Logs opened in this environment, so each is opened once.
    let logs = Protected<[String: Weak<Log>]>([:])
    /// The table holding per-log metadata (projection versions and applied offsets).
    let meta: Table

    private static let registry = Protected<[String: Weak<LogEnvironment>]>([:])

    /// Opens the environment in `directory`, or returns the one already open there.
    ///
    /// Unless `options.structureCheck` is `.none`, the file's structure is checked before LMDB
    /// reads anything in it: its meta pages before LMDB opens it, then, in the snapshot the
    /// first read transaction sees, every page (`.everyPage`) or the pages the open reads
    /// (`.tableEnds`).
    ///
    /// - Throws: `LogStoreError` `.missingPath` if a read-only open names no directory,
    ///   `.notALog` if the directory holds no LMDB environment, `.alreadyOpen` if this process
    ///   has it open with other options, `.corruptFile` naming the page (and the entry's offset,
    ///   where known) if the structural check fails.
    public static func open(at directory: URL, options: Options = Options()) throws(LogStoreError) -> LogEnvironment {
        let requested = directory.standardizedFileURL.path
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: requested, isDirectory: &isDirectory) {
            if options.readOnly {
                throw LogStoreError(.missingPath, "the directory does not exist", path: requested)
            }
            do {
                try FileManager.default.createDirectory(atPath: requested, withIntermediateDirectories: true)
            } catch {
                throw LogStoreError(.io, "cannot create the directory: \(error.localizedDescription)", path: requested)
            }
        } else if !isDirectory.boolValue {
            throw LogStoreError(.notALog, "a file, not a log directory", path: requested)
        }
        let path = URL(fileURLWithPath: requested).resolvingSymlinksInPath().path
        while true {
            let outcome: LogEnvironment? = try registry.withLock {
                (environments) throws(LogStoreError) -> LogEnvironment? in
                if let entry = environments[path] {
                    guard let existing = entry.object else {
                        return nil  // the previous one is closing; wait for its deinit to finish
                    }
                    guard existing.options.durability == options.durability,
                        existing.options.readOnly == options.readOnly
                    else {
                        throw LogStoreError(
                            .alreadyOpen,
                            "open in this process with \(existing.options.readOnly ? "read-only" : "read-write"), "
                                + "\(existing.options.durability) access; close it before opening it with other options",
                            path: path)
                    }
                    return existing
                }
                let environment = try LogEnvironment(path: path, options: options)
                environments[path] = Weak(object: environment)
                return environment
            }
            if let outcome { return outcome }
            sched_yield()
        }
    }

    private init(path: String, options: Options) throws(LogStoreError) {
        self.path = path
        self.options = options
        var environment: OpaquePointer?
        try check(mdb_env_create(&environment), "mdb_env_create")
        guard let environment else { throw LogStoreError(.lmdb, "mdb_env_create returned no environment", path: path) }
        do throws(LogStoreError) {
            try check(mdb_env_set_maxdbs(environment, MDB_dbi(options.maxTables)), "mdb_env_set_maxdbs")
            try check(mdb_env_set_maxreaders(environment, UInt32(options.maxReaders)), "mdb_env_set_maxreaders")
            try check(mdb_env_set_mapsize(environment, options.initialMapSize), "mdb_env_set_mapsize")
            var flags = MDB_NOTLS
            if options.durability == .fast { flags |= MDB_NOSYNC }
            if options.readOnly { flags |= MDB_RDONLY }
            // LMDB trusts the meta pages when it opens the file: check them first.
            if options.structureCheck != .none { try StructureCheck.checkMetas(directory: path) }
            let status = mdb_env_open(environment, path, UInt32(flags), 0o644)
            if status == ENOENT {
                throw LogStoreError(.notALog, "no LMDB environment here (data.mdb is missing)", path: path)
            }
            try check(status, "mdb_env_open")
            // A process killed while reading leaves its reader slot behind, pinning old pages.
            var dead: Int32 = 0
            try check(mdb_reader_check(environment, &dead), "mdb_reader_check")
            // Then the snapshot's trees, before LMDB walks any of them.
            if options.structureCheck != .none {
                _ = try Self.checkStructure(of: environment, path: path, scope: options.structureCheck)
            }
        } catch {
            mdb_env_close(environment)
            throw error.located(path: path, log: nil)
        }
        // The metadata table, opened before anything else can open tables, once the tables
        // are the ones the catalogue lists: nothing is written into a file whose are not.
        let metaDBI: MDB_dbi
        do throws(LogStoreError) {
            metaDBI = try TableCatalogue.openMeta(environment, path: path, readOnly: options.readOnly)
        } catch {
            mdb_env_close(environment)
            throw error.located(path: path, log: nil)
        }
        self.handle = environment
        self.meta = Table(name: "meta", dbi: metaDBI)
        tables.withLock { $0["meta"] = self.meta }
    }

    deinit {
        // Close under the registry lock: a new open of this path waits until the file is closed,
        // so two environments never share it (closing one would drop the other's file locks).
        let path = self.path
        let handle = self.handle
        Self.registry.withLock { environments in
            mdb_env_close(handle)
            if environments[path]?.object == nil { environments[path] = nil }
        }
    }

    /// Checks the structure of `data.mdb` without trusting LMDB (Docs/LogFormat.md, "The
    /// structural check"), in the snapshot a new read transaction sees.
    ///
    /// - Returns: what the check found: the page size, the snapshot's transaction, each table's
    ///   depth and page and entry counts.
    /// - Throws: `LogStoreError` `.corruptFile` naming the page (and the entry's offset, where
    ///   known), `.io` if the file cannot be read.
    public func checkStructure() throws(LogStoreError) -> StructureReport {
        for _ in 0..<1000 {
            let report = try read { (transaction) throws(LogStoreError) -> StructureReport? in
                try StructureCheck.walk(
                    directory: path, snapshot: UInt64(mdb_txn_id(transaction.txn)), scope: .everyPage)
            }
            if let report { return report }
            sched_yield()
        }
        throw LogStoreError(.io, "the log kept changing while its structure was checked", path: path)
    }

    /// The structural check of a newly opened environment, in a read transaction of its own
    /// (which keeps writers from reusing the snapshot's pages).
    private static func checkStructure(
        of environment: OpaquePointer, path: String, scope: StructureCheckScope
    ) throws(LogStoreError) -> StructureReport {
        for _ in 0..<1000 {
            var txn: OpaquePointer?
            let status = mdb_txn_begin(environment, nil, UInt32(MDB_RDONLY), &txn)
            if status == MDB_MAP_RESIZED {
                try check(mdb_env_set_mapsize(environment, 0), "mdb_env_set_mapsize")
                continue
            }
            try check(status, "mdb_txn_begin")
            defer { mdb_txn_abort(txn) }
            if let report = try StructureCheck.walk(directory: path, snapshot: UInt64(mdb_txn_id(txn)), scope: scope) {
                return report
            }
            sched_yield()
        }
        throw LogStoreError(.io, "the log kept changing while its structure was checked", path: path)
    }

    /// The current size of the memory map in bytes.
    public var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        return info.me_mapsize
    }

    /// The names of the logs in this environment.
    public func logNames() throws(LogStoreError) -> [String] {
        try read { (transaction) throws(LogStoreError) -> [String] in
            var names: [String] = []
            // The main (unnamed) database lists every named table by name.
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(transaction.txn, 1, &cursor), "mdb_cursor_open")
            defer { mdb_cursor_close(cursor) }
            var key = MDB_val()
            var value = MDB_val()
            var status = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            while status == MDB_SUCCESS {
                let name = String(decoding: try boundedBytes(key, in: handle, "a table name"), as: UTF8.self)
                if name.hasPrefix(Log.tablePrefix) { names.append(String(name.dropFirst(Log.tablePrefix.count))) }
                status = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            if status != MDB_NOTFOUND { try check(status, "mdb_cursor_get") }
            return names
        }
    }

    // MARK: Transactions

    /// Runs `body` in a read transaction: a consistent snapshot of every log and table.
    @discardableResult
    public func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        mapLock.lockShared()
        defer { mapLock.unlock() }
        let txn = try beginRead()
        defer { mdb_txn_abort(txn) }
        return try body(ReadTransaction(txn: txn, environment: self))
    }

    /// `read` for bodies that throw only `LogStoreError`.
    func read<R>(_ body: (ReadTransaction) throws(LogStoreError) -> R) throws(LogStoreError) -> R {
        mapLock.lockShared()
        defer { mapLock.unlock() }
        let txn = try beginRead()
        defer { mdb_txn_abort(txn) }
        return try body(ReadTransaction(txn: txn, environment: self))
    }

    /// Runs `body` in the write transaction and commits it if `body` returns.
    ///
    /// When the map is full the transaction is aborted, the map doubles, and `body` runs again
    /// from the start: nothing is half-written and nothing acknowledged is lost.
    ///
    /// - Throws: what `body` throws (the transaction is then aborted), or `LogStoreError`.
    @discardableResult
    public func write<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        guard !options.readOnly else {
            throw LogStoreError(.readOnly, "the environment was opened read-only", path: path)
        }
        return try writerLock.withLock { () throws -> R in
            while true {
                let txn = try beginWrite()
                let transaction = WriteTransaction(txn: txn, environment: self)
                let result: R
                do {
                    result = try body(transaction)
                } catch {
                    mdb_txn_abort(txn)
                    if transaction.sawMapFull {
                        try grow()
                        continue
                    }
                    throw error
                }
                let status = mdb_txn_commit(txn)  // frees the transaction, even on failure
                if status == MDB_MAP_FULL {
                    try grow()
                    continue
                }
                try check(status, "mdb_txn_commit")
                return result
            }
        }
    }

    private func beginWrite() throws(LogStoreError) -> OpaquePointer {
        while true {
            var txn: OpaquePointer?
            let status = mdb_txn_begin(handle, nil, 0, &txn)
            if status == MDB_MAP_RESIZED {
                adoptResizedMapHoldingWriterLock()
                continue
            }
            try check(status, "mdb_txn_begin")
            return txn!
        }
    }

    /// Begins a read transaction; the caller holds `mapLock` shared.
    private func beginRead() throws(LogStoreError) -> OpaquePointer {
        while true {
            var txn: OpaquePointer?
            let status = mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &txn)
            if status == MDB_MAP_RESIZED {
                // Another process grew the map. Adopting its size needs the map to ourselves.
                mapLock.unlock()
                writerLock.withLock { adoptResizedMapHoldingWriterLock() }
                mapLock.lockShared()
                continue
            }
            try check(status, "mdb_txn_begin")
            return txn!
        }
    }

    private func adoptResizedMapHoldingWriterLock() {
        mapLock.lockExclusive()
        mdb_env_set_mapsize(handle, 0)
        mapLock.unlock()
    }

    /// Doubles the map. Called with the writer lock held and no transaction of ours open.
    private func grow() throws(LogStoreError) {
        let current = mapSize
        guard current < options.maximumMapSize else {
            throw LogStoreError(
                .mapFull, "the map is \(current) bytes, the configured maximum is \(options.maximumMapSize)", path: path
            )
        }
        let target = min(current * 2, options.maximumMapSize)
        mapLock.lockExclusive()
        let status = mdb_env_set_mapsize(handle, target)
        mapLock.unlock()
        do throws(LogStoreError) { try check(status, "mdb_env_set_mapsize") } catch {
            throw error.located(path: path, log: nil)
        }
    }

    // MARK: Tables

    /// Opens (or creates) named tables, returning `nil` for a table that does not exist when
    /// `create` is false. Handles are cached for the environment's lifetime.
    func openTables(_ names: [String], create: Bool) throws(LogStoreError) -> [Table?] {
        for name in names {
            guard !name.isEmpty, name.utf8.count <= 400 else {
                throw LogStoreError(.invalidArgument, "invalid table name \"\(name)\"", path: path)
            }
        }
        let cached = tables.withLock { known in names.map { known[$0] } }
        if !cached.contains(where: { $0 == nil }) { return cached }
        return try writerLock.withLock { () throws(LogStoreError) -> [Table?] in
            if create && options.readOnly {
                throw LogStoreError(.readOnly, "cannot create tables in a read-only environment", path: path)
            }
            while true {
                var txn: OpaquePointer?
                try check(mdb_txn_begin(handle, nil, create ? 0 : UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
                var result: [Table?] = []
                var opened: [String: Table] = [:]
                var status = MDB_SUCCESS
                for name in names {
                    if let table = tables.withLock({ $0[name] }) {
                        result.append(table)
                        continue
                    }
                    var dbi: MDB_dbi = 0
                    status = mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
                    if status == MDB_NOTFOUND {
                        status = MDB_SUCCESS
                        result.append(nil)
                        continue
                    }
                    if status != MDB_SUCCESS { break }
                    let table = Table(name: name, dbi: dbi)
                    opened[name] = table
                    result.append(table)
                }
                if status == MDB_SUCCESS && create && !opened.isEmpty {
                    do throws(LogStoreError) {
                        try TableCatalogue.add(Array(opened.keys), meta: meta.dbi, txn, handle, path: path)
                    } catch {
                        mdb_txn_abort(txn)
                        if error.code == .mapFull {
                            try grow()
                            continue
                        }
                        throw error.located(path: path, log: nil)
                    }
                }
                if status != MDB_SUCCESS {
                    mdb_txn_abort(txn)
                } else {
                    // Handles opened in a transaction become visible to others once it commits.
                    status = mdb_txn_commit(txn)
                }
                if status == MDB_MAP_FULL {
                    try grow()
                    continue
                }
                do throws(LogStoreError) { try check(status, "mdb_dbi_open") } catch {
                    throw error.located(path: path, log: nil)
                }
                tables.withLock { $0.merge(opened) { old, _ in old } }
                return result
            }
        }
    }
}
