import Foundation
import LogStore
import LogToolCore
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// `EntryDumper` in this process, writing into a string.
@Suite("EntryDumper")
struct EntryDumperTests {
    @Test func dumpsEveryEntryInOrder() throws {
        try withTemporaryDirectory { directory in
            let entries = try writeFixtureLog(at: directory, count: 12)
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            var text = ""
            let count = try EntryDumper().dump(log, to: &text)
            #expect(count == 12)
            #expect(try text == entries.map { try EntryFormatter().textLine($0) + "\n" }.joined())
        }
    }

    @Test(
        arguments: [
            (1, nil, Array(1...10)),
            (4, 6, [4, 5, 6]),
            (10, nil, [10]),
            (8, 1000, [8, 9, 10]),  // --to past the end stops at the last entry
            (11, nil, []),
            (5, 5, [5]),
        ] as [(UInt64, UInt64?, [UInt64])])
    func ranges(from: UInt64, through: UInt64?, expected: [UInt64]) throws {
        try withTemporaryDirectory { directory in
            try writeFixtureLog(at: directory, count: 10)
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            var text = ""
            try EntryDumper(format: .jsonLines).dump(
                log, from: LogOffset(from), through: through.map { LogOffset($0) }, to: &text)
            let offsets = try text.split(separator: "\n").map {
                try JSONDecoder().decode(DumpedEntry.self, from: Data($0.utf8)).offset
            }
            #expect(offsets == expected)
        }
    }

    @Test func anEmptyLogDumpsNothing() throws {
        try withTemporaryDirectory { directory in
            try writeFixtureLog(at: directory, count: 0)
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            var text = ""
            #expect(try EntryDumper().dump(log, to: &text) == 0)
            #expect(text.isEmpty)
        }
    }

    /// The cursor reads 1024 entries per transaction; a bad entry inside a later chunk must
    /// still let every entry before it through, including those of its own chunk.
    @Test(arguments: [1, 2, 3, 1024, 1025, 1500, 2000])
    func entriesBeforeACorruptOneAreWrittenFirst(bad: UInt64) throws {
        try withTemporaryDirectory { directory in
            try writeFixtureLog(at: directory, count: 2000)
            try corruptEntry(at: bad, in: directory, .flippedPayloadByte)
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            var text = ""
            let error = try #require(throws: LogStoreError.self) { try EntryDumper().dump(log, to: &text) }
            #expect(error.code == .corruptEntry)
            #expect(error.offset == LogOffset(bad))
            let offsets = text.split(separator: "\n").map { offsetOfTextLine(String($0)) }
            #expect(offsets == (1..<bad).map { $0 })
        }
    }

    @Test func aCorruptEntryOutsideTheRangeDoesNotMatter() throws {
        try withTemporaryDirectory { directory in
            try writeFixtureLog(at: directory, count: 10)
            try corruptEntry(at: 8, in: directory, .garbage)
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            var text = ""
            #expect(try EntryDumper().dump(log, from: 2, through: 7, to: &text) == 6)
        }
    }
}
