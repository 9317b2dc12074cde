import Foundation
import LogSyncPlatform

/// How much of an environment's `data.mdb` the structural check reads (Docs/LogFormat.md, "The
/// structural check").
public enum StructureCheckScope: Sendable, Hashable {
    /// Every page of the snapshot: O(the file's size). What read-only opens (the tools) and
    /// `LogEnvironment.checkStructure()` do.
    case everyPage
    /// The meta pages, the free-page and main tables and every table of at most
    /// ``StructureCheckScope/wholeTablePages`` pages whole, and each larger table's root and the
    /// paths from it to its first and last leaf: the pages an open reads (a log's tail, the
    /// projections' small tables), in time bounded by the tables' number and depth, never by the
    /// file's size. Pages of a large table read later (a lookup in the middle of a projection)
    /// are trusted as LMDB trusts them. What read-write opens (engines, servers) do.
    case tableEnds
    /// No check: LMDB trusts the file.
    case none

    /// The size up to which `.tableEnds` checks a table whole.
    public static let wholeTablePages: UInt64 = 64
}

/// What the structural check of an environment's `data.mdb` found: the snapshot it walked and
/// each table's shape. See Docs/LogFormat.md, "The structural check".
public struct StructureReport: Sendable, Hashable {
    /// One B-tree: the free-page table, the main table, or a named table.
    public struct TableShape: Sendable, Hashable {
        /// `(free pages)`, `(main)` or the table's name (`log.device`, `meta`, …).
        public var name: String
        public var depth: Int
        public var branchPages: Int
        public var leafPages: Int
        public var overflowPages: Int
        public var entries: Int
        /// Whether every page of the table was checked; if not (`StructureCheckScope.tableEnds`
        /// on a large table), the counts are of the pages checked.
        public var checkedWhole: Bool = true
    }

    /// The data file checked.
    public var file: String
    public var fileSize: UInt64
    public var pageSize: Int
    /// The transaction that committed the snapshot checked (the newer meta page's).
    public var transactionID: UInt64
    /// The last page the snapshot uses (`mm_last_pg`).
    public var lastPage: UInt64
    /// Pages listed as free, reusable by a later writer.
    public var freePages: Int
    /// The free-page table, the main table, then the named tables in name order.
    public var tables: [TableShape]

    /// Pages reachable from the snapshot's trees, overflow pages included, plus the two meta pages.
    public var pagesInUse: Int {
        2 + tables.reduce(0) { $0 + $1.branchPages + $1.leafPages + $1.overflowPages }
    }
}

/// A check of an LMDB data file's structure that trusts nothing in it, and never LMDB: it reads
/// the file with `pread`, so no corrupt byte can make it read outside the file.
///
/// It checks both meta pages (page number, type, magic, format version, page size, that their
/// transaction IDs are consecutive with the newer one on the page LMDB writes it to, the roots
/// and page counts in range), then walks every tree of the newer snapshot: the free-page table,
/// the main table and each named table. Each page must be within the file and the snapshot
/// (`mm_last_pg`), carry its own number, be of the type its depth requires (branch above, leaf
/// at the bottom, overflow where a value points), be reached once, and hold node pointers,
/// keys and values inside the page. Keys must be in order within each page and within the
/// bounds its parent gives; overflow chains must fit the file; each table's record (depth,
/// page and entry counts) must match what its pages hold; free pages must be in range and not
/// in use.
///
/// A writer in another process may commit while the file is read: the check reads the meta
/// pages again at the end and starts over when they changed (the snapshot it read could then
/// have been reused), so what it reports is about one committed snapshot.
enum StructureCheck {
    // LMDB's layout (mdb.c, 0.9): a 16-byte page header, meta pages 0 and 1.
    static let headerSize = 16
    static let nodeHeaderSize = 8
    static let metaSize = 136
    static let magic: UInt32 = 0xBEEF_C0DE
    static let dataVersion: UInt32 = 1
    static let invalidPage = UInt64.max
    static let maxKeySize = 511
    static let maxDepth = 32  // CURSOR_STACK

    // Page flags.
    static let branchPage: UInt16 = 0x01
    static let leafPage: UInt16 = 0x02
    static let overflowPage: UInt16 = 0x04
    static let metaPage: UInt16 = 0x08
    // Node flags.
    static let bigData: UInt16 = 0x01
    static let subData: UInt16 = 0x02
    // Database flags.
    static let integerKey: UInt16 = 0x08
    /// Environment flags LMDB keeps in the free table's flags (`MDB_FIXEDMAP`, `MDB_NOSUBDIR`).
    static let environmentFlags: UInt16 = 0x01 | 0x4000

    /// One table's record (`MDB_db`), 48 bytes.
    struct TableRecord: Hashable {
        var pad: UInt32
        var flags: UInt16
        var depth: UInt16
        var branchPages: UInt64
        var leafPages: UInt64
        var overflowPages: UInt64
        var entries: UInt64
        var root: UInt64

        init(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
            pad = bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
            flags = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self)
            depth = bytes.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self)
            branchPages = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
            leafPages = bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)
            overflowPages = bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)
            entries = bytes.loadUnaligned(fromByteOffset: offset + 32, as: UInt64.self)
            root = bytes.loadUnaligned(fromByteOffset: offset + 40, as: UInt64.self)
        }
    }

    /// A meta page's header and `MDB_meta`.
    struct Meta: Hashable {
        var page: Int
        var pageNumber: UInt64
        var pageFlags: UInt16
        var magic: UInt32
        var version: UInt32
        var mapSize: UInt64
        var free: TableRecord
        var main: TableRecord
        var lastPage: UInt64
        var transactionID: UInt64
        var pageSize: Int { Int(free.pad) }

        init(page: Int, _ bytes: UnsafeRawBufferPointer) {
            self.page = page
            pageNumber = bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
            pageFlags = bytes.loadUnaligned(fromByteOffset: 10, as: UInt16.self)
            let m = StructureCheck.headerSize
            magic = bytes.loadUnaligned(fromByteOffset: m, as: UInt32.self)
            version = bytes.loadUnaligned(fromByteOffset: m + 4, as: UInt32.self)
            mapSize = bytes.loadUnaligned(fromByteOffset: m + 16, as: UInt64.self)
            free = TableRecord(bytes, at: m + 24)
            main = TableRecord(bytes, at: m + 72)
            lastPage = bytes.loadUnaligned(fromByteOffset: m + 120, as: UInt64.self)
            transactionID = bytes.loadUnaligned(fromByteOffset: m + 128, as: UInt64.self)
        }
    }

    /// The file, read with `pread` only.
    final class DataFile {
        let path: String
        let descriptor: Int32
        let size: UInt64

        /// `nil` when there is no file or it is empty (a new environment: LMDB creates it).
        init?(path: String) throws(LogStoreError) {
            self.path = path
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            if descriptor < 0 {
                if errno == ENOENT { return nil }
                throw LogStoreError(.io, "cannot open \(path): \(String(cString: strerror(errno)))")
            }
            var status = stat()
            guard fstat(descriptor, &status) == 0 else {
                let text = String(cString: strerror(errno))
                close(descriptor)
                throw LogStoreError(.io, "cannot stat \(path): \(text)")
            }
            if status.st_size == 0 {
                close(descriptor)
                return nil
            }
            self.descriptor = descriptor
            self.size = UInt64(status.st_size)
        }

        deinit { close(descriptor) }

        /// Reads exactly `count` bytes at `offset` into `buffer` (which holds at least `count`).
        func read(_ count: Int, at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(LogStoreError) {
            var done = 0
            while done < count {
                let result = pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if result < 0 {
                    if errno == EINTR { continue }
                    throw LogStoreError(
                        .io, "cannot read \(path) at byte \(offset + UInt64(done)): \(String(cString: strerror(errno)))"
                    )
                }
                if result == 0 {
                    throw LogStoreError(
                        .corruptFile,
                        "the file ends at byte \(size), inside bytes \(offset)..<\(offset + UInt64(count))",
                        page: nil)
                }
                done += result
            }
        }

        func bytes(_ count: Int, at offset: UInt64) throws(LogStoreError) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            try StructureCheck.typed {
                try bytes.withUnsafeMutableBytes { (buffer) in try read(count, at: offset, into: buffer) }
            }
            return bytes
        }
    }

    /// Runs `body`, whose only errors are `LogStoreError` (the standard library's buffer
    /// methods rethrow them untyped).
    static func typed<R>(_ body: () throws -> R) throws(LogStoreError) -> R {
        do { return try body() } catch let error as LogStoreError { throw error } catch {
            throw LogStoreError(.io, "\(error)")
        }
    }

    // MARK: Meta pages

    static func corrupt(_ message: String, page: UInt64?, offset: LogOffset? = nil, log: String? = nil) -> LogStoreError
    {
        LogStoreError(.corruptFile, message, offset: offset, log: log, page: page)
    }

    /// Reads and checks both meta pages; returns them with the newer one first.
    static func readMetas(_ file: DataFile) throws(LogStoreError) -> (newer: Meta, older: Meta) {
        let span = headerSize + metaSize
        guard file.size >= UInt64(span) else {
            throw LogStoreError(.notALog, "data.mdb holds \(file.size) bytes, too few for an LMDB file")
        }
        let first = try file.bytes(span, at: 0).withUnsafeBytes { Meta(page: 0, $0) }
        if first.magic != magic {
            // Not LMDB's file at all, unless a meta page of some page size follows.
            let sizes = (9...16).map { 1 << $0 }.filter { file.size >= UInt64($0 + span) }
            let followed = sizes.contains { size in
                (try? file.bytes(span, at: UInt64(size)).withUnsafeBytes { Meta(page: 1, $0) }.magic == magic) == true
            }
            if !followed {
                throw LogStoreError(.notALog, "data.mdb is not an LMDB file (magic 0x\(hex(first.magic)) on page 0)")
            }
        }
        try checkMetaHeader(first)
        guard file.size >= UInt64(first.pageSize + span) else {
            throw corrupt(
                "the file holds \(file.size) bytes, too few for the second meta page (page size \(first.pageSize))",
                page: 1)
        }
        let second = try file.bytes(span, at: UInt64(first.pageSize)).withUnsafeBytes { Meta(page: 1, $0) }
        try checkMetaHeader(second)
        guard second.pageSize == first.pageSize else {
            throw corrupt(
                "the meta pages disagree on the page size: \(first.pageSize) on page 0, \(second.pageSize) on page 1",
                page: 1)
        }
        guard second.free.flags == first.free.flags else {
            throw corrupt(
                "the meta pages disagree on the environment flags: 0x\(hex(first.free.flags)) on page 0, 0x\(hex(second.free.flags)) on page 1",
                page: 1)
        }
        // Transaction N writes meta page N % 2, so the pages hold N and N - 1 (both 0 before the
        // first commit). Anything else means a transaction ID was damaged, and LMDB could pick
        // the older snapshot without a word.
        let (a, b) = (first.transactionID, second.transactionID)
        let newer = b > a ? second : first
        let older = b > a ? first : second
        let consistent =
            (a == 0 && b == 0)
            || (newer.transactionID - older.transactionID == 1
                && Int(newer.transactionID & 1) == newer.page)
        guard consistent else {
            // Which page was damaged cannot be told; name the one LMDB would have opened.
            let suspect = newer.page
            throw corrupt(
                "the meta pages disagree: page 0 was committed by transaction \(a), page 1 by transaction \(b) "
                    + "(transaction N writes page N % 2, so they must be consecutive); the newer snapshot cannot be trusted",
                page: UInt64(suspect))
        }
        for meta in [newer, older] {
            try checkMetaBounds(meta, fileSize: file.size)
        }
        // A transaction never gives pages back to the end of the file.
        guard older.lastPage <= newer.lastPage else {
            throw corrupt(
                "meta page \(older.page) (transaction \(older.transactionID)) gives \(older.lastPage) as the last page in use, "
                    + "past the \(newer.lastPage) of meta page \(newer.page) (transaction \(newer.transactionID))",
                page: UInt64(older.page))
        }
        return (newer, older)
    }

    static func hex<T: BinaryInteger>(_ value: T) -> String { String(value, radix: 16) }

    static func checkMetaHeader(_ meta: Meta) throws(LogStoreError) {
        let page = UInt64(meta.page)
        guard meta.pageNumber == page else {
            throw corrupt("meta page \(page) carries page number \(meta.pageNumber)", page: page)
        }
        guard meta.pageFlags == metaPage else {
            throw corrupt("meta page \(page) has page flags 0x\(hex(meta.pageFlags)), not 0x8 (meta)", page: page)
        }
        guard meta.magic == magic else {
            throw corrupt("meta page \(page) has magic 0x\(hex(meta.magic)), not LMDB's 0xbeefc0de", page: page)
        }
        guard meta.version == dataVersion else {
            throw corrupt("meta page \(page) has LMDB data format version \(meta.version), not 1", page: page)
        }
        let size = meta.pageSize
        guard size >= 512, size <= 65536, size & (size - 1) == 0 else {
            throw corrupt(
                "meta page \(page) gives a page size of \(size) bytes (a power of two from 512 to 65536)", page: page)
        }
        guard meta.free.flags & integerKey != 0, meta.free.flags & ~(integerKey | environmentFlags) == 0 else {
            throw corrupt("meta page \(page) has free-table flags 0x\(hex(meta.free.flags))", page: page)
        }
    }

    /// The bounds of one meta page's numbers, without reading the pages they name.
    static func checkMetaBounds(_ meta: Meta, fileSize: UInt64) throws(LogStoreError) {
        let page = UInt64(meta.page)
        let pageSize = UInt64(meta.pageSize)
        // The address space: 2^47 bytes.
        guard meta.lastPage >= 1, meta.lastPage < (1 << 47) / pageSize else {
            throw corrupt("meta page \(page) gives \(meta.lastPage) as the last page in use", page: page)
        }
        guard meta.mapSize <= 1 << 47 else {
            throw corrupt("meta page \(page) gives a map size of \(meta.mapSize) bytes", page: page)
        }
        guard meta.main.flags == 0 else {
            throw corrupt(
                "meta page \(page) has main-table flags 0x\(hex(meta.main.flags)) (LogStore sets none)", page: page)
        }
        for (name, record) in [("free-page", meta.free), ("main", meta.main)] {
            if let problem = recordProblem(record, lastPage: meta.lastPage) {
                throw corrupt("meta page \(page): the \(name) table's record \(problem)", page: page)
            }
        }
    }

    /// What is impossible about a table's record, or `nil`.
    static func recordProblem(_ record: TableRecord, lastPage: UInt64) -> String? {
        if record.root == invalidPage {
            guard record.depth == 0, record.branchPages == 0, record.leafPages == 0, record.overflowPages == 0,
                record.entries == 0
            else {
                return "has no root page but depth \(record.depth), \(record.entries) entries, "
                    + "\(record.branchPages)/\(record.leafPages)/\(record.overflowPages) branch/leaf/overflow pages"
            }
            return nil
        }
        guard record.root >= 2, record.root <= lastPage else {
            return "names root page \(record.root), outside pages 2...\(lastPage)"
        }
        guard record.depth >= 1, Int(record.depth) <= maxDepth else { return "gives depth \(record.depth)" }
        let pages = record.branchPages.addingReportingOverflow(record.leafPages)
        let total = pages.partialValue.addingReportingOverflow(record.overflowPages)
        guard record.leafPages >= 1, !pages.overflow, !total.overflow, total.partialValue <= lastPage,
            record.branchPages >= UInt64(record.depth - 1), record.entries >= 1
        else {
            return
                "counts \(record.branchPages) branch, \(record.leafPages) leaf and \(record.overflowPages) overflow pages, "
                + "\(record.entries) entries at depth \(record.depth) (the file has \(lastPage + 1) pages)"
        }
        return nil
    }

    // MARK: The whole check

    static func dataFile(in directory: String) -> String { (directory as NSString).appendingPathComponent("data.mdb") }

    /// Reads the meta pages of the data file in `directory`, reading again when a read may have
    /// been torn by a writer; `nil` when there is no data file yet (or an empty one).
    static func checkedMetas(_ file: DataFile) throws(LogStoreError) -> (newer: Meta, older: Meta) {
        var attempts = 0
        while true {
            attempts += 1
            do throws(LogStoreError) {
                let first = try readMetas(file)
                // Two reads that agree cannot be a torn write of a meta page.
                if let second = try? readMetas(file), second.newer == first.newer, second.older == first.older {
                    return first
                }
            } catch {
                // A torn read of a meta page being written reads well the next time.
                if attempts >= 20 || (try? readMetas(file)) == nil { throw error }
            }
            if attempts >= 1000 { throw LogStoreError(.io, "the meta pages kept changing while they were read") }
            sched_yield()
        }
    }

    /// The check LMDB needs before `mdb_env_open`, which trusts the meta pages: both meta pages.
    static func checkMetas(directory: String) throws(LogStoreError) {
        let path = dataFile(in: directory)
        do throws(LogStoreError) {
            guard let file = try DataFile(path: path) else { return }
            _ = try checkedMetas(file)
        } catch {
            throw error.located(path: directory, log: nil)
        }
    }

    /// Checks the snapshot committed by transaction `snapshot` of the data file in `directory`,
    /// which the caller holds open in a read transaction (so no writer reuses its pages).
    ///
    /// - Returns: the report, or `nil` when neither meta page holds the snapshot any more
    ///   (writers committed twice since it began): renew the transaction and call again.
    static func walk(
        directory: String, snapshot: UInt64, scope: StructureCheckScope
    ) throws(LogStoreError) -> StructureReport? {
        let path = dataFile(in: directory)
        do throws(LogStoreError) {
            guard let file = try DataFile(path: path) else {
                throw LogStoreError(.corruptFile, "the data file is missing or empty")
            }
            let metas = try checkedMetas(file)
            let target: Meta
            if metas.newer.transactionID == snapshot {
                target = metas.newer
            } else if metas.older.transactionID == snapshot {
                target = metas.older
            } else {
                return nil
            }
            // A transaction records the pages it frees under its own ID, so a meta page whose
            // free-page table holds a later ID than the page's own was damaged: a newer snapshot
            // whose ID lost a bit passes for the older one (both snapshots are intact while the
            // caller's read transaction is open).
            for meta in [metas.newer, metas.older] {
                if let largest = largestFreeKey(file, meta), largest > meta.transactionID {
                    throw corrupt(
                        "meta page \(meta.page) says it was committed by transaction \(meta.transactionID), but its free-page "
                            + "table holds pages freed by transaction \(largest); the meta pages cannot be told apart",
                        page: UInt64(meta.page))
                }
            }
            return try Walker(
                file: file, meta: target, endsOnlyAbove: scope == .tableEnds ? StructureCheckScope.wholeTablePages : nil
            ).run()
        } catch {
            throw error.located(path: directory, log: nil)
        }
    }

    /// The largest key of a snapshot's free-page table, found along its rightmost path, or
    /// `nil` when the table is empty or the path is not sound (the walk reports that).
    static func largestFreeKey(_ file: DataFile, _ meta: Meta) -> UInt64? {
        var number = meta.free.root
        guard number != invalidPage else { return nil }
        let pageSize = meta.pageSize
        var page = [UInt8](repeating: 0, count: pageSize)
        for level in 1...max(1, Int(meta.free.depth)) {
            guard number >= 2, number <= meta.lastPage, (number + 1) * UInt64(pageSize) <= file.size,
                (try? typed({
                    try page.withUnsafeMutableBytes { try file.read(pageSize, at: number * UInt64(pageSize), into: $0) }
                })) != nil
            else { return nil }
            let next: UInt64?? = page.withUnsafeBytes { bytes in
                let flags = bytes.loadUnaligned(fromByteOffset: 10, as: UInt16.self)
                let lower = Int(bytes.loadUnaligned(fromByteOffset: 12, as: UInt16.self))
                guard bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self) == number, lower > headerSize,
                    lower <= pageSize, flags == (level == Int(meta.free.depth) ? leafPage : branchPage)
                else { return nil }
                let at = Int(bytes.loadUnaligned(fromByteOffset: lower - 2, as: UInt16.self))
                guard at + nodeHeaderSize + 8 <= pageSize else { return nil }
                let low = UInt64(bytes.loadUnaligned(fromByteOffset: at, as: UInt16.self))
                let high = UInt64(bytes.loadUnaligned(fromByteOffset: at + 2, as: UInt16.self))
                let nodeFlags = UInt64(bytes.loadUnaligned(fromByteOffset: at + 4, as: UInt16.self))
                if flags == branchPage { return .some(.some(low | high << 16 | nodeFlags << 32)) }
                guard bytes.loadUnaligned(fromByteOffset: at + 6, as: UInt16.self) == 8 else { return nil }
                return .some(.none)  // the leaf: its key follows
            }
            guard let next else { return nil }
            if let child = next {
                number = child
                continue
            }
            return page.withUnsafeBytes { bytes in
                let lower = Int(bytes.loadUnaligned(fromByteOffset: 12, as: UInt16.self))
                let at = Int(bytes.loadUnaligned(fromByteOffset: lower - 2, as: UInt16.self))
                return bytes.loadUnaligned(fromByteOffset: at + nodeHeaderSize, as: UInt64.self)
            }
        }
        return nil
    }

    // MARK: Walking the trees

    /// What kind of table a tree is, which decides its keys and values.
    enum TableKind {
        /// The free-page table: 8-byte integer keys, page lists as values.
        case free
        /// The main table: one record per named table.
        case main
        /// A named table; `log` is the log's name when it is a log's entries table.
        case named(log: String?)
    }

    final class Walker {
        let file: DataFile
        let meta: Meta
        let pageSize: Int
        /// One past the last page a tree may use: within the snapshot and within the file.
        let pageLimit: UInt64
        var used: [UInt64]
        var freeListed: [UInt64]
        var page: [UInt8]
        var freePages = 0
        /// Tables of more pages than this (by their record) are checked along their first and
        /// last paths only; `nil` checks every table whole.
        let endsOnlyAbove: UInt64?
        /// Whether the table being walked is checked along its ends only.
        var endsOnly = false

        init(file: DataFile, meta: Meta, endsOnlyAbove: UInt64?) {
            self.file = file
            self.meta = meta
            self.endsOnlyAbove = endsOnlyAbove
            pageSize = meta.pageSize
            pageLimit = min(meta.lastPage + 1, file.size / UInt64(meta.pageSize))
            let words = Int((meta.lastPage + 1 + 63) / 64)
            used = [UInt64](repeating: 0, count: words)
            freeListed = [UInt64](repeating: 0, count: words)
            page = [UInt8](repeating: 0, count: meta.pageSize)
            mark(0, in: &used)
            mark(1, in: &used)
        }

        /// Sets the bit of `page`; returns whether it was set already.
        @discardableResult
        func mark(_ page: UInt64, in bits: inout [UInt64]) -> Bool {
            let word = Int(page / 64)
            let bit = UInt64(1) << (page % 64)
            let was = bits[word] & bit != 0
            bits[word] |= bit
            return was
        }

        func isSet(_ page: UInt64, in bits: [UInt64]) -> Bool { bits[Int(page / 64)] & (UInt64(1) << (page % 64)) != 0 }

        func run() throws(LogStoreError) -> StructureReport {
            var shapes: [StructureReport.TableShape] = []
            shapes.append(try walkTable(meta.free, name: "(free pages)", kind: .free))
            var named: [(String, TableRecord, UInt64)] = []
            let mainShape = try walkTable(meta.main, name: "(main)", kind: .main) { name, record, page in
                named.append((name, record, page))
            }
            shapes.append(mainShape)
            for (name, record, page) in named {
                let log = name.hasPrefix(Log.tablePrefix) ? String(name.dropFirst(Log.tablePrefix.count)) : nil
                if let problem = recordProblem(record, lastPage: meta.lastPage) {
                    throw corrupt("the record of table \"\(name)\" \(problem)", page: page, log: log)
                }
                guard record.flags == 0 else {
                    throw corrupt(
                        "table \"\(name)\" has flags 0x\(hex(record.flags)) (LogStore sets none)", page: page, log: log)
                }
                shapes.append(try walkTable(record, name: name, kind: .named(log: log)))
            }
            // The pages past the end of the file must be free pages not yet written (a flipped
            // last page would make LMDB map and allocate past them).
            let filePages = file.size / UInt64(pageSize)
            if filePages <= meta.lastPage {
                for page in filePages...meta.lastPage where !isSet(page, in: freeListed) {
                    throw corrupt(
                        "meta page \(meta.page) gives \(meta.lastPage) as the last page in use, but the file ends before page "
                            + "\(filePages) and page \(page) is not a free page",
                        page: UInt64(meta.page))
                }
            }
            // Pages listed free must be in the snapshot and not in use.
            for word in freeListed.indices where freeListed[word] != 0 {
                let overlap = freeListed[word] & used[word]
                if overlap != 0 {
                    let page = UInt64(word * 64 + overlap.trailingZeroBitCount)
                    throw corrupt("page \(page) is listed as free but is in use", page: page)
                }
            }
            return StructureReport(
                file: file.path, fileSize: file.size, pageSize: pageSize, transactionID: meta.transactionID,
                lastPage: meta.lastPage, freePages: freePages, tables: shapes)
        }

        struct Counts {
            var branch: UInt64 = 0
            var leaf: UInt64 = 0
            var overflow: UInt64 = 0
            var entries: UInt64 = 0
        }

        /// Where an error is, in words and as an offset: the table, and for a log the offset of
        /// the entry concerned or the first one the page may hold.
        struct Place {
            var table: String
            var kind: TableKind
            var log: String? { if case .named(let log) = kind { return log } else { return nil } }
        }

        func offset(ofKey key: [UInt8]?, _ place: Place) -> LogOffset? {
            guard place.log != nil, let key, key.count == 8 else { return nil }
            return LogOffset(key.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) })
        }

        func walkTable(
            _ record: TableRecord, name: String, kind: TableKind,
            table: (_ name: String, _ record: TableRecord, _ page: UInt64) throws(LogStoreError) -> Void = { _, _, _ in
            }
        ) throws(LogStoreError) -> StructureReport.TableShape {
            var counts = Counts()
            let place = Place(table: name, kind: kind)
            // The free-page and main tables are always checked whole: LMDB reads them at every
            // write and every table's opening.
            let pages = record.branchPages &+ record.leafPages &+ record.overflowPages
            if case .named = kind, let limit = endsOnlyAbove, pages > limit {
                endsOnly = true
            } else {
                endsOnly = false
            }
            if record.root != invalidPage {
                try visit(
                    record.root, level: 1, depth: Int(record.depth), lower: nil, upper: nil, place, &counts, table)
            }
            let shape = StructureReport.TableShape(
                name: name, depth: Int(record.depth), branchPages: Int(counts.branch), leafPages: Int(counts.leaf),
                overflowPages: Int(counts.overflow), entries: Int(counts.entries), checkedWhole: !endsOnly)
            if endsOnly { return shape }
            let claimed = (record.branchPages, record.leafPages, record.overflowPages, record.entries)
            if claimed != (counts.branch, counts.leaf, counts.overflow, counts.entries) {
                throw corrupt(
                    "table \"\(name)\" (root page \(record.root)): its record counts \(record.branchPages) branch, "
                        + "\(record.leafPages) leaf and \(record.overflowPages) overflow pages and \(record.entries) entries; "
                        + "its pages hold \(counts.branch), \(counts.leaf), \(counts.overflow) and \(counts.entries)",
                    page: record.root, log: place.log)
            }
            return shape
        }

        /// Claims `count` pages from `first` for a tree, checking they are in the snapshot and file.
        func claim(
            _ first: UInt64, count: UInt64, _ what: String, _ place: Place, offset: LogOffset?
        ) throws(LogStoreError) {
            let end = first.addingReportingOverflow(count)
            guard first >= 2, !end.overflow, end.partialValue <= pageLimit else {
                throw corrupt(
                    "table \"\(place.table)\" points to \(what) page \(first)\(count > 1 ? " (\(count) pages)" : ""), "
                        + "outside the pages 2..<\(pageLimit) of the snapshot and the file",
                    page: first, offset: offset, log: place.log)
            }
            for page in first..<end.partialValue where mark(page, in: &used) {
                throw corrupt(
                    "page \(page) of table \"\(place.table)\" is reached twice (a cycle or a page shared by two parents)",
                    page: page, offset: offset, log: place.log)
            }
        }

        func readPage(_ number: UInt64) throws(LogStoreError) {
            try StructureCheck.typed {
                try page.withUnsafeMutableBytes { (buffer) in
                    try file.read(pageSize, at: number * UInt64(pageSize), into: buffer)
                }
            }
        }

        func visit(
            _ number: UInt64, level: Int, depth: Int, lower: [UInt8]?, upper: [UInt8]?, _ place: Place,
            _ counts: inout Counts,
            _ table: (_ name: String, _ record: TableRecord, _ page: UInt64) throws(LogStoreError) -> Void
        ) throws(LogStoreError) {
            let isLeaf = level == depth
            let firstOffset = offset(ofKey: lower, place)
            func fail(_ message: String, offset: LogOffset? = nil) -> LogStoreError {
                let pageText =
                    "page \(number) (\(isLeaf ? "a leaf" : "a branch") of table \"\(place.table)\""
                    + (firstOffset.map { ", entries from offset \($0)" } ?? "") + ")"
                return corrupt("\(pageText): \(message)", page: number, offset: offset ?? firstOffset, log: place.log)
            }
            try claim(number, count: 1, isLeaf ? "leaf" : "branch", place, offset: firstOffset)
            try readPage(number)
            // Copy what the page says before descending (the buffer is reused).
            var children: [(page: UInt64, key: [UInt8]?)] = []
            try StructureCheck.typed {
                try page.withUnsafeBytes { (bytes) in
                    let stored = bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
                    let flags = bytes.loadUnaligned(fromByteOffset: 10, as: UInt16.self)
                    let lowerEdge = Int(bytes.loadUnaligned(fromByteOffset: 12, as: UInt16.self))
                    let upperEdge = Int(bytes.loadUnaligned(fromByteOffset: 14, as: UInt16.self))
                    guard stored == number else { throw fail("it carries page number \(stored)") }
                    let expected = isLeaf ? leafPage : branchPage
                    guard flags == expected else {
                        throw fail(
                            "its flags are 0x\(hex(flags)), not 0x\(hex(expected)) (\(isLeaf ? "leaf" : "branch") at depth \(level) of \(depth))"
                        )
                    }
                    guard lowerEdge >= headerSize, lowerEdge <= upperEdge, upperEdge <= pageSize,
                        (lowerEdge - headerSize) % 2 == 0
                    else {
                        throw fail("its free space runs from byte \(lowerEdge) to \(upperEdge) of \(pageSize)")
                    }
                    let count = (lowerEdge - headerSize) / 2
                    guard count >= 1 else { throw fail("it holds no nodes") }
                    var previous: [UInt8]? = nil
                    for index in 0..<count {
                        let at = Int(bytes.loadUnaligned(fromByteOffset: headerSize + 2 * index, as: UInt16.self))
                        guard at >= upperEdge, at % 2 == 0, at + nodeHeaderSize <= pageSize else {
                            throw fail(
                                "node \(index) starts at byte \(at), outside bytes \(upperEdge)..<\(pageSize - nodeHeaderSize)"
                            )
                        }
                        let low = UInt64(bytes.loadUnaligned(fromByteOffset: at, as: UInt16.self))
                        let high = UInt64(bytes.loadUnaligned(fromByteOffset: at + 2, as: UInt16.self))
                        let nodeFlags = bytes.loadUnaligned(fromByteOffset: at + 4, as: UInt16.self)
                        let keySize = Int(bytes.loadUnaligned(fromByteOffset: at + 6, as: UInt16.self))
                        let keyStart = at + nodeHeaderSize
                        guard keySize <= maxKeySize, keyStart + keySize <= pageSize else {
                            throw fail(
                                "node \(index) has a key of \(keySize) bytes from byte \(keyStart), past the page")
                        }
                        // A branch's first key is never compared (it stands for everything below the second).
                        let hasKey = isLeaf || index > 0
                        let key: [UInt8]? = hasKey ? Array(bytes[keyStart..<keyStart + keySize]) : nil
                        let nodeOffset = offset(ofKey: key, place)
                        if let key {
                            guard !key.isEmpty else { throw fail("node \(index) has an empty key", offset: nodeOffset) }
                            if case .free = place.kind, key.count != 8 {
                                throw fail("node \(index) has a key of \(key.count) bytes, not 8", offset: nodeOffset)
                            }
                            if let previous, !precedes(previous, key, place) {
                                throw fail("node \(index)'s key is not after node \(index - 1)'s", offset: nodeOffset)
                            }
                            if let lower, precedes(key, lower, place) {
                                throw fail(
                                    "node \(index)'s key is before the lower bound its parent gives", offset: nodeOffset
                                )
                            }
                            if let upper, !precedes(key, upper, place) {
                                throw fail(
                                    "node \(index)'s key is not before the upper bound its parent gives",
                                    offset: nodeOffset)
                            }
                            previous = key
                        }
                        if !isLeaf {
                            let child = low | high << 16 | UInt64(nodeFlags) << 32
                            children.append((child, key))
                            continue
                        }
                        // A leaf node: its value.
                        let valueSize = Int(low | high << 16)
                        let valueStart = keyStart + keySize
                        counts.entries += 1
                        switch place.kind {
                        case .main:
                            guard nodeFlags == subData, valueSize == 48, valueStart + 48 <= pageSize else {
                                throw fail(
                                    "node \(index) has flags 0x\(hex(nodeFlags)) and a value of \(valueSize) bytes, not a table's 48-byte record"
                                )
                            }
                            let name = String(decoding: key!, as: UTF8.self)
                            try table(name, TableRecord(bytes, at: valueStart), number)
                            continue
                        case .free, .named:
                            break
                        }
                        if nodeFlags == bigData {
                            guard valueStart + 8 <= pageSize else {
                                throw fail("node \(index)'s overflow page number is past the page", offset: nodeOffset)
                            }
                            let first = bytes.loadUnaligned(fromByteOffset: valueStart, as: UInt64.self)
                            overflowValues.append((index, first, valueSize, key))
                        } else if nodeFlags == 0 {
                            guard valueStart + valueSize <= pageSize else {
                                throw fail(
                                    "node \(index)'s value of \(valueSize) bytes runs past the page", offset: nodeOffset
                                )
                            }
                            if case .free = place.kind {
                                try checkFreeList(
                                    Array(bytes[valueStart..<valueStart + valueSize]),
                                    fail: { fail("node \(index): \($0)") })
                            }
                        } else {
                            throw fail("node \(index) has flags 0x\(hex(nodeFlags))", offset: nodeOffset)
                        }
                    }
                }
            }
            if isLeaf {
                counts.leaf += 1
                let values = overflowValues
                overflowValues = []
                for (index, first, size, key) in values {
                    // A value rewritten smaller in place keeps its overflow pages: at least as many as it needs.
                    let needed = UInt64((headerSize - 1 + size) / pageSize + 1)
                    let nodeOffset = offset(ofKey: key, place)
                    try claim(first, count: 1, "overflow", place, offset: nodeOffset)
                    var header = [UInt8](repeating: 0, count: headerSize)
                    try StructureCheck.typed {
                        try header.withUnsafeMutableBytes { (buffer) in
                            try file.read(headerSize, at: first * UInt64(pageSize), into: buffer)
                        }
                    }
                    let (stored, flags, count) = header.withUnsafeBytes {
                        (
                            $0.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                            $0.loadUnaligned(fromByteOffset: 10, as: UInt16.self),
                            UInt64($0.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
                        )
                    }
                    guard stored == first, flags == overflowPage, count >= needed else {
                        throw corrupt(
                            "page \(first) (overflow of node \(index) of page \(number), table \"\(place.table)\"): it carries page "
                                + "number \(stored), flags 0x\(hex(flags)) and \(count) pages; a value of \(size) bytes needs \(needed) "
                                + "overflow pages from page \(first)",
                            page: first, offset: nodeOffset, log: place.log)
                    }
                    if count > 1 { try claim(first + 1, count: count - 1, "overflow", place, offset: nodeOffset) }
                    counts.overflow += count
                    if case .free = place.kind {
                        let value = try file.bytes(size, at: first * UInt64(pageSize) + UInt64(headerSize))
                        try checkFreeList(value) { message in
                            corrupt(
                                "page \(first) (overflow of node \(index) of page \(number), the free-page table): \(message)",
                                page: first)
                        }
                    }
                }
                return
            }
            counts.branch += 1
            guard children.count >= 1 else { throw fail("it holds no children") }
            for (index, child) in children.enumerated() where !endsOnly || index == 0 || index == children.count - 1 {
                let childLower = index == 0 ? lower : child.key
                let childUpper = index + 1 < children.count ? children[index + 1].key : upper
                try visit(
                    child.page, level: level + 1, depth: depth, lower: childLower, upper: childUpper, place, &counts,
                    table)
            }
        }

        /// Overflow values of the leaf being read, checked once it has been read.
        var overflowValues: [(index: Int, first: UInt64, size: Int, key: [UInt8]?)] = []

        /// Key order: bytes for every table but the free-page table, whose keys are integers.
        func precedes(_ a: [UInt8], _ b: [UInt8], _ place: Place) -> Bool {
            if case .free = place.kind, a.count == 8, b.count == 8 {
                let x = a.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                let y = b.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                return x < y
            }
            return a.lexicographicallyPrecedes(b)
        }

        /// A free-page list: a count, then that many page numbers.
        func checkFreeList(_ value: [UInt8], fail: (String) -> LogStoreError) throws(LogStoreError) {
            guard value.count >= 8, value.count % 8 == 0 else { throw fail("a free-page list of \(value.count) bytes") }
            let numbers = value.withUnsafeBytes { bytes in
                (0..<value.count / 8).map { bytes.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self) }
            }
            guard numbers[0] == UInt64(numbers.count - 1) else {
                throw fail("a free-page list of \(numbers.count - 1) pages says it holds \(numbers[0])")
            }
            for number in numbers.dropFirst() {
                guard number >= 2, number <= meta.lastPage else {
                    throw fail("page \(number) is listed as free, outside the pages 2...\(meta.lastPage)")
                }
                if mark(number, in: &freeListed) { throw fail("page \(number) is listed as free twice") }
                freePages += 1
            }
        }
    }
}
