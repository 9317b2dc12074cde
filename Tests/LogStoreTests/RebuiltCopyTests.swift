import Foundation
import KeyValueLog
import TemporaryDirectory
import Testing

@testable import LogStore

/// `Log.rebuiltCopy(through:at:options:)`: the log and its projections as they were after an
/// offset, in another directory.
@Suite("Rebuilt copies")
struct RebuiltCopyTests {
    /// Every entry of `log`: offset, kind, time and payload.
    static func entries(of log: Log) throws -> [LogEntry] {
        var entries: [LogEntry] = []
        try log.forEachEntry { entries.append($0) }
        return entries
    }

    /// The `latest` projection's two tables, key → value, in key order.
    static func tables(of log: Log) throws -> [String: [[UInt8]: [UInt8]]] {
        try log.read { reader in
            var tables: [String: [[UInt8]: [UInt8]]] = [:]
            for name in ["values", "counts"] {
                let table = try reader.table(name, of: "latest")
                var rows: [[UInt8]: [UInt8]] = [:]
                try reader.transaction.forEach(in: table) { key, value in
                    rows[Array(key)] = Array(value)
                    return true
                }
                tables[name] = rows
            }
            return tables
        }
    }

    /// A log with the `latest` projection in `directory/name`, with fast durability.
    static func open(_ name: String, in directory: URL) throws -> Log {
        try Log.open(
            at: directory.appendingPathComponent(name), options: .init(durability: .fast),
            projections: [LatestValueProjection()])
    }

    /// The log `directory/original` holding five entries, k1 = [1] to k5 = [5].
    static func fiveEntryOriginal(in directory: URL) throws -> Log {
        let log = try open("original", in: directory)
        try log.append((1...5).map { KeyValueEntry.set(key: "k\($0)", value: [UInt8($0)]).newEntry })
        return log
    }

    @Test(arguments: [0 as UInt64, 1, 4095, 4096, 4097, 6000])
    func theCopyIsTheOriginalsPrefix(through: UInt64) async throws {
        try withTemporaryDirectory { directory in
            let batches = randomHistory(count: 6000, keys: 50, seed: 7)
            let log = try Self.open("original", in: directory)
            for batch in batches { try log.append(batch) }
            // A log built incrementally from the prefix only: what the copy's projection must equal.
            let prefix = Array(batches.joined().prefix(Int(through)))
            let reference = try Self.open("reference", in: directory)
            if !prefix.isEmpty { try reference.append(prefix) }

            let copy = try log.rebuiltCopy(through: LogOffset(through), at: directory.appendingPathComponent("copy"))
            #expect(try copy.lastOffset == LogOffset(through))
            #expect(copy.name == log.name)
            let original = try Self.entries(of: log)
            #expect(try Self.entries(of: copy) == Array(original.prefix(Int(through))))
            #expect(try copy.appliedOffsets() == ["latest": LogOffset(through)])
            #expect(try Self.tables(of: copy) == Self.tables(of: reference))
            #expect(try copy.read { try LatestValueProjection.allValues(in: $0) } == modelValues([prefix]))
            #expect(try copy.verifyProjections() == nil)
            // The original is only read.
            #expect(try log.lastOffset == LogOffset(6000))
        }
    }

    @Test func anOffsetPastTheEndIsATypedErrorAndCreatesNothing() async throws {
        try withTemporaryDirectory { directory in
            let log = try Self.fiveEntryOriginal(in: directory)
            let target = directory.appendingPathComponent("copy")
            let error = try #require(throws: LogStoreError.self) {
                try log.rebuiltCopy(through: LogOffset(6), at: target)
            }
            #expect(error.code == .invalidArgument)
            #expect(error.offset == LogOffset(6))
            #expect(error.path == log.environment.path)
            #expect(error.log == "main")
            #expect(error.description.contains("the log ends at 5"), "\(error)")
            #expect(!FileManager.default.fileExists(atPath: target.path))
        }
    }

    @Test func aDirectoryThatHoldsEntriesIsRefused() async throws {
        try withTemporaryDirectory { directory in
            let log = try Self.fiveEntryOriginal(in: directory)
            let target = directory.appendingPathComponent("copy")
            do {
                let existing = try Log.open(
                    at: target, options: .init(durability: .fast), projections: [LatestValueProjection()])
                try existing.append(KeyValueEntry.set(key: "other", value: [9]).newEntry)
            }
            let error = try #require(throws: LogStoreError.self) {
                try log.rebuiltCopy(through: LogOffset(3), at: target)
            }
            #expect(error.code == .invalidArgument)
            #expect(error.description.contains("already holds 1 entries"), "\(error)")
            #expect(error.path == URL(fileURLWithPath: target.path).resolvingSymlinksInPath().path)

            // What was there is left as it was.
            let existing = try Log.open(
                at: target, options: .init(durability: .fast), projections: [LatestValueProjection()])
            #expect(try existing.lastOffset == LogOffset(1))
            #expect(try existing.read { try LatestValueProjection.allValues(in: $0) } == ["other": [9]])

            // An empty log of the same name there is fine.
            let empty = directory.appendingPathComponent("empty")
            do {
                _ = try Log.open(at: empty, options: .init(durability: .fast), projections: [LatestValueProjection()])
            }
            #expect(try log.rebuiltCopy(through: LogOffset(3), at: empty).lastOffset == LogOffset(3))
        }
    }

    /// Without options the copy takes the original's, made writable: a read-only log copies.
    @Test func aReadOnlyLogCopiesIntoAWritableOne() async throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("original")
            do {
                let log = try Log.open(
                    at: path, options: .init(durability: .fast), projections: [LatestValueProjection()])
                try log.append((1...10).map { KeyValueEntry.set(key: "k\($0 % 3)", value: [UInt8($0)]).newEntry })
            }
            let readOnly = try Log.open(
                at: path, options: .init(durability: .fast, readOnly: true), projections: [LatestValueProjection()])
            let copy = try readOnly.rebuiltCopy(through: LogOffset(7), at: directory.appendingPathComponent("copy"))
            #expect(!copy.environment.options.readOnly)
            #expect(try copy.read { try LatestValueProjection.allValues(in: $0) } == ["k0": [6], "k1": [7], "k2": [5]])
            try copy.append(KeyValueEntry.remove(key: "k0").newEntry)
            #expect(try copy.lastOffset == LogOffset(8))
        }
    }
}
