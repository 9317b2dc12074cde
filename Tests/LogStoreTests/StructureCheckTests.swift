import Foundation
import TemporaryDirectory
import Testing

@testable import LogStore

/// The structural check of `data.mdb` (Docs/LogFormat.md, "The structural check") and the tail
/// record, on logs damaged by hand. `LogToolTests.CorruptFileTests` flips every header bit of a
/// real device log.
@Suite("Structure of the data file")
struct StructureCheckTests {
    /// Writes `commits` appends of three entries each (one in ten with a payload that needs
    /// overflow pages), then closes the log.
    func writeLog(_ directory: URL, commits: Int = 30) throws {
        let log = try Log.open(at: directory, options: .init(durability: .fast, initialMapSize: 1 << 20))
        for commit in 0..<commits {
            try log.append(
                (0..<3).map { index in
                    let size = commit % 10 == 9 && index == 0 ? 9000 : 40
                    return NewEntry(
                        kind: 1, payload: [UInt8](repeating: UInt8(truncatingIfNeeded: commit), count: size))
                })
        }
    }

    func dataFile(_ directory: URL) -> URL { directory.appendingPathComponent("data.mdb") }

    func flip(_ directory: URL, byte: Int, bit: Int) throws {
        var bytes = try [UInt8](Data(contentsOf: dataFile(directory)))
        bytes[byte] ^= UInt8(1 << bit)
        try Data(bytes).write(to: dataFile(directory))
    }

    /// The error opening the log read-only throws, or `nil` if it opens and reads.
    func openError(_ directory: URL, readOnly: Bool = true) -> LogStoreError? {
        logStoreError {
            let log = try Log.open(at: directory, options: .init(durability: .fast, readOnly: readOnly))
            try log.forEachEntry { _ in }
        }
    }

    /// The error opening the environment in `directory` with `scope` throws, or `nil`.
    func environmentOpenError(_ directory: URL, readOnly: Bool, scope: StructureCheckScope) -> LogStoreError? {
        logStoreError {
            _ = try LogEnvironment.open(
                at: directory, options: .init(durability: .fast, readOnly: readOnly, structureCheck: scope))
        }
    }

    /// The `LogStoreError` that `body` throws, or `nil`; any other error is an issue.
    func logStoreError(_ body: () throws -> Void) -> LogStoreError? {
        do {
            try body()
            return nil
        } catch let error as LogStoreError {
            return error
        } catch {
            Issue.record("not a LogStoreError: \(error)")
            return nil
        }
    }

    /// The page size and the newer meta page's number and transaction.
    func metas(_ directory: URL) throws -> (pageSize: Int, newer: Int, transaction: UInt64) {
        let bytes = try [UInt8](Data(contentsOf: dataFile(directory)))
        func load(_ offset: Int) -> UInt64 {
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        }
        let pageSize = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16 + 24, as: UInt32.self) })
        let first = load(16 + 128)
        let second = load(pageSize + 16 + 128)
        return (pageSize, second > first ? 1 : 0, max(first, second))
    }

    @Test func aSoundLogPassesAndItsTablesAreCounted() async throws {
        try withTemporaryDirectory { directory in
            try writeLog(directory)
            let log = try Log.open(at: directory, options: .init(durability: .fast, readOnly: true))
            let report = try log.environment.checkStructure()
            #expect(report.pageSize == (try metas(directory)).pageSize)
            #expect(report.transactionID == (try metas(directory)).transaction)
            let entries = try #require(report.tables.first { $0.name == "log.main" })
            #expect(entries.entries == 90)
            #expect(entries.overflowPages == 3 * 3, "three 9000-byte payloads of three pages each")
            #expect(report.tables.map(\.name) == ["(free pages)", "(main)", "log.main", "meta"])
            #expect(report.tables.first { $0.name == "(main)" }?.entries == 2)
            #expect(report.pagesInUse <= Int(report.lastPage) + 1)
        }
    }

    @Test func anOlderMetaPageThatClaimsANewerTransactionIsCaught() async throws {
        // LMDB opens the meta page with the higher transaction ID: a flipped bit in the older
        // page's ID made every reader silently see one commit fewer.
        try withTemporaryDirectory { directory in
            try writeLog(directory, commits: 5)
            let (pageSize, newer, transaction) = try metas(directory)
            let older = 1 - newer
            for bit in [1, 2, 7, 40, 63] {
                try flip(directory, byte: older * pageSize + 16 + 128 + bit / 8, bit: bit % 8)
                for readOnly in [true, false] {
                    let error = try #require(openError(directory, readOnly: readOnly), "bit \(bit)")
                    #expect(error.code == .corruptFile)
                    #expect(error.page == 0 || error.page == 1)
                    #expect(error.message.contains("meta pages disagree"), "\(error)")
                    #expect(error.description.contains("transaction \(transaction)"), "\(error)")
                }
                try flip(directory, byte: older * pageSize + 16 + 128 + bit / 8, bit: bit % 8)
                #expect(openError(directory) == nil)
            }
        }
    }

    @Test func aNewerMetaPageThatLostTwoFromItsTransactionIsCaught() async throws {
        // Transaction T with bit 1 set, flipped, reads as T - 2: the pages then hold T - 2 and
        // T - 1, consecutive and each on its own page. The newer page's free-page table, which
        // holds pages freed by transaction T, gives it away.
        try withTemporaryDirectory { directory in
            try writeLog(directory, commits: 5)
            while try metas(directory).transaction & 2 == 0 {
                let log = try Log.open(at: directory, options: .init(durability: .fast))
                try log.append(NewEntry(kind: 1, payload: [1]))
            }
            let (pageSize, newer, transaction) = try metas(directory)
            try flip(directory, byte: newer * pageSize + 16 + 128, bit: 1)
            let error = try #require(openError(directory))
            #expect(error.code == .corruptFile)
            #expect(error.page == UInt64(newer), "\(error)")
            #expect(error.message.contains("holds pages freed by transaction \(transaction)"), "\(error)")
        }
    }

    @Test func aLostTailIsCaughtByTheTailRecord() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            try log.append((1...10).map { NewEntry(kind: 1, payload: [UInt8($0)]) })
            try log.environment.write { transaction in
                for offset in [9, 10] as [LogOffset] {
                    try transaction.removeValue(
                        forKey: withUnsafeBytes(of: offset.key) { Array($0) }, in: log.entriesTable)
                }
            }
            do {
                _ = try log.lastOffset
                Issue.record("a lost tail read as a shorter log")
            } catch let error as LogStoreError {
                #expect(error.code == .corruptFile)
                #expect(error.offset == 9)
                #expect(error.message.contains("the entries 9...10 are lost"), "\(error)")
            }
            #expect(throws: LogStoreError.self) { try log.forEachEntry { _ in } }
        }
    }

    @Test func aPageNumberFlippedInAnyPageHeaderIsNamed() async throws {
        try withTemporaryDirectory { directory in
            try writeLog(directory)
            let pageSize = try metas(directory).pageSize
            let pages = try Data(contentsOf: dataFile(directory)).count / pageSize
            var caught = 0
            for page in 2..<pages {
                try flip(directory, byte: page * pageSize, bit: 0)
                if let error = openError(directory) {
                    if error.code == .corruptFile {
                        #expect(error.page == UInt64(page), "\(error)")
                        caught += 1
                    } else {
                        // The second or third page of an overflow value has no header: the
                        // entry's checksum finds the flip.
                        #expect(error.code == .corruptEntry, "\(error)")
                    }
                }
                try flip(directory, byte: page * pageSize, bit: 0)
            }
            // Pages not in use (free, or past the snapshot) are never read.
            #expect(caught >= 5)
            #expect(openError(directory) == nil)
        }
    }

    @Test func aReadWriteOpenChecksTheEndsOfALargeTableAndAReadOnlyOpenEveryPage() async throws {
        // An engine's open must not grow with the log (Docs/Performance.md, "Opening"): it
        // checks the pages it reads, a read-only open (the tools) every page.
        try withTemporaryDirectory { directory in
            let original = directory.appendingPathComponent("original")
            let log = try Log.open(at: original, options: .init(durability: .fast, initialMapSize: 4 << 20))
            for commit in 0..<30 {
                try log.append(
                    (0..<100).map { _ in NewEntry(kind: 1, payload: [UInt8](repeating: UInt8(commit), count: 200)) })
            }
            let shapes = try log.environment.checkStructure().tables
            let entriesTable = try #require(shapes.first { $0.name == "log.main" })
            #expect(entriesTable.leafPages > Int(StructureCheckScope.wholeTablePages), "the entries table is large")
            let lastOffset = try log.lastOffset
            let bytes = try Data(contentsOf: dataFile(original))
            let pageSize = try metas(original).pageSize
            let copy = directory.appendingPathComponent("copy")
            try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)

            var everyPage: Set<Int> = []
            var tableEnds: [Int: LogStoreError] = [:]
            for page in 2..<bytes.count / pageSize {
                var damaged = bytes
                damaged[page * pageSize] ^= 1
                try damaged.write(to: dataFile(copy))
                if let error = environmentOpenError(copy, readOnly: true, scope: .everyPage) {
                    #expect(error.code == .corruptFile && error.page == UInt64(page), "\(error)")
                    everyPage.insert(page)
                }
                try damaged.write(to: dataFile(copy))
                if let error = environmentOpenError(copy, readOnly: false, scope: .tableEnds) {
                    #expect(error.code == .corruptFile && error.page == UInt64(page), "\(error)")
                    tableEnds[page] = error
                }
            }
            #expect(Set(tableEnds.keys).isSubset(of: everyPage))
            #expect(everyPage.count >= entriesTable.leafPages)
            // The root, the first and the last leaf of the entries table and its branch pages
            // on their paths, the small tables whole: a few pages, not the table.
            #expect(tableEnds.count < 16, "\(tableEnds.keys.sorted())")
            let entryPages = tableEnds.values.filter { $0.log == "main" }
            #expect(
                entryPages.contains { $0.message.contains("a leaf") && $0.offset == nil }, "the first leaf is checked")
            #expect(entryPages.contains { $0.message.contains("a branch") }, "the root is checked")
            #expect(
                entryPages.contains { ($0.offset?.rawValue ?? 0) + 100 > lastOffset.rawValue },
                "the leaf holding the tail is checked")
            #expect(entryPages.count >= 3 && entryPages.count <= 2 * entriesTable.depth, "\(entryPages.map(\.message))")
        }
    }

    @Test func aTruncatedFileIsCorrupt() async throws {
        try withTemporaryDirectory { directory in
            try writeLog(directory)
            let pageSize = try metas(directory).pageSize
            let handle = try FileHandle(forWritingTo: dataFile(directory))
            try handle.truncate(atOffset: UInt64(4 * pageSize))
            try handle.close()
            let error = try #require(openError(directory))
            #expect(error.code == .corruptFile, "\(error)")
            #expect(error.page != nil)
        }
    }

    @Test func theCheckCanBeTurnedOff() async throws {
        try withTemporaryDirectory { directory in
            try writeLog(directory, commits: 3)
            let log = try Log.open(
                at: directory,
                options: .init(durability: .fast, readOnly: true, structureCheck: StructureCheckScope.none))
            #expect(try log.lastOffset == 9)
        }
    }
}
