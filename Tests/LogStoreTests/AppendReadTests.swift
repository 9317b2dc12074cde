import Foundation
import KeyValueLog
import TemporaryDirectory
import Testing

@testable import LogStore

@Suite("Append, read and reopen")
struct AppendReadTests {
    @Test func offsetsAreDenseFromOne() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            #expect(try log.lastOffset == .zero)
            let first = try log.append(NewEntry(kind: 7, payload: [1, 2, 3]))
            #expect(first == .first)
            let batch = try log.append((0..<5).map { NewEntry(kind: 8, payload: [UInt8($0)]) })
            #expect(batch == LogOffset(2)..<LogOffset(7))
            #expect(Array(batch) == [2, 3, 4, 5, 6])
            #expect(try log.lastOffset == 6)
            #expect(try log.entryCount == 6)
            let empty = try log.append([])
            #expect(empty.isEmpty && empty.lowerBound == 7)
        }
    }

    @Test func entriesReadBackExactly() async throws {
        try withTemporaryDirectory { directory in
            let time = EntryTime(microsecondsSince1970: 1_790_000_000_123_456)
            let log = try Log.open(at: directory, options: .init(durability: .fast), clock: { time })
            let payloads: [[UInt8]] = [[], [0], Array("hello".utf8), [UInt8](repeating: 0xAB, count: 100_000)]
            let offsets = try log.append(
                payloads.enumerated().map { NewEntry(kind: EntryKind(UInt16($0.offset)), payload: $0.element) })
            for (index, offset) in offsets.enumerated() {
                let entry = try #require(try log.entry(at: offset))
                #expect(
                    entry
                        == LogEntry(
                            offset: offset, kind: EntryKind(UInt16(index)), time: time, payload: payloads[index]))
            }
            #expect(try log.entry(at: .zero) == nil)
            #expect(try log.entry(at: 5) == nil)
        }
    }

    @Test func explicitTimesWinOverTheClock() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(
                at: directory, options: .init(durability: .fast), clock: { EntryTime(microsecondsSince1970: 42) })
            let given = EntryTime(Date(timeIntervalSince1970: 1_000_000.25))
            try log.append([NewEntry(kind: 1, payload: [], time: given), NewEntry(kind: 1, payload: [])])
            #expect(try log.entry(at: 1)?.time == given)
            #expect(try log.entry(at: 1)?.time.date == Date(timeIntervalSince1970: 1_000_000.25))
            #expect(try log.entry(at: 2)?.time == EntryTime(microsecondsSince1970: 42))
        }
    }

    @Test func entriesSurviveReopening() async throws {
        try withTemporaryDirectory { directory in
            do {
                let log = try Log.open(at: directory)  // .durable, the default
                for i in 0..<50 { try log.append(KeyValueEntry.set(key: "k\(i % 7)", value: [UInt8(i)]).newEntry) }
            }
            let reopened = try Log.open(at: directory)
            #expect(try reopened.lastOffset == 50)
            var cursor = try reopened.entries()
            var expected = LogOffset.first
            while let entry = try cursor.next() {
                #expect(entry.offset == expected)
                #expect(
                    KeyValueEntry(entry)
                        == .set(key: "k\((expected.rawValue - 1) % 7)", value: [UInt8(expected.rawValue - 1)]))
                expected = expected.next
            }
            #expect(expected == 51)
        }
    }

    @Test func oneEnvironmentPerPathAndProcess() async throws {
        try withTemporaryDirectory { directory in
            let first = try LogEnvironment.open(at: directory, options: .init(durability: .fast))
            let second = try LogEnvironment.open(
                at: directory.appendingPathComponent("./"), options: .init(durability: .fast))
            #expect(first === second)
            let log = try first.openLog(named: "main")
            #expect(try second.openLog(named: "main") === log)
            #expect(throws: LogStoreError.self) {
                try LogEnvironment.open(at: directory, options: .init(durability: .durable))
            }
            do {
                _ = try LogEnvironment.open(at: directory, options: .init(durability: .fast, readOnly: true))
                Issue.record("a read-only open of a path open read-write must fail")
            } catch let error as LogStoreError {
                #expect(error.code == .alreadyOpen)
                #expect(error.description.contains(first.path))
            }
            #expect(throws: LogStoreError.self) {
                try first.openLog(named: "main", projections: [LatestValueProjection()])
            }
        }
    }

    @Test func theEnvironmentClosesWithItsLastReference() async throws {
        try withTemporaryDirectory { directory in
            do {
                let log = try Log.open(at: directory, options: .init(durability: .fast))
                try log.append(NewEntry(kind: 1, payload: [1]))
            }
            // Closed: opening with other options now works.
            let readOnly = try Log.open(at: directory, options: .init(readOnly: true))
            #expect(try readOnly.lastOffset == 1)
            do {
                try readOnly.append(NewEntry(kind: 1, payload: [2]))
                Issue.record("append on a read-only log must fail")
            } catch let error as LogStoreError {
                #expect(error.code == .readOnly)
            }
        }
    }

    @Test func severalLogsShareOneEnvironment() async throws {
        try withTemporaryDirectory { directory in
            let environment = try LogEnvironment.open(at: directory, options: .init(durability: .fast))
            let a = try environment.openLog(named: "a")
            let b = try environment.openLog(named: "b", projections: [LatestValueProjection()])
            // One transaction appends to both: atomic across logs.
            try environment.write { transaction in
                try a.append([NewEntry(kind: 1, payload: [1]), NewEntry(kind: 1, payload: [2])], in: transaction)
                try b.append([KeyValueEntry.set(key: "x", value: [9]).newEntry], in: transaction)
            }
            #expect(try a.lastOffset == 2)
            #expect(try b.lastOffset == 1)
            #expect(try b.read { try LatestValueProjection.latest("x", in: $0)?.value } == [9])
            #expect(try environment.logNames().sorted() == ["a", "b"])
        }
    }

    @Test func aFailedTransactionAppendsNothing() async throws {
        struct Refused: Error {}
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            try log.append(NewEntry(kind: 1, payload: [1]))
            #expect(throws: Refused.self) {
                try log.environment.write { transaction in
                    try log.append([NewEntry(kind: 1, payload: [2])], in: transaction)
                    throw Refused()
                }
            }
            #expect(try log.lastOffset == 1)
            #expect(try log.append(NewEntry(kind: 1, payload: [3])) == 2)
        }
    }

    @Test func badPathsGiveTypedErrors() async throws {
        try withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("nope")
            #expect {
                try Log.open(at: missing, options: .init(readOnly: true))
            } throws: { error in
                (error as? LogStoreError)?.code == .missingPath && "\(error)".contains(missing.path)
            }
            let empty = directory.appendingPathComponent("empty")
            try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
            #expect { try Log.open(at: empty, options: .init(readOnly: true)) } throws: { error in
                (error as? LogStoreError)?.code == .notALog
            }
            let file = directory.appendingPathComponent("file")
            try Data("not a log".utf8).write(to: file)
            #expect { try Log.open(at: file) } throws: { error in (error as? LogStoreError)?.code == .notALog }
            let garbage = directory.appendingPathComponent("garbage")
            try FileManager.default.createDirectory(at: garbage, withIntermediateDirectories: true)
            try Data(repeating: 0x5A, count: 16_384).write(to: garbage.appendingPathComponent("data.mdb"))
            #expect { try Log.open(at: garbage, options: .init(readOnly: true)) } throws: { error in
                (error as? LogStoreError)?.code == .notALog
            }
            // A log environment that holds other logs but not the one asked for.
            do {
                let environment = try LogEnvironment.open(at: directory.appendingPathComponent("env"))
                _ = try environment.openLog(named: "device")
            }
            #expect {
                try Log.open(
                    at: directory.appendingPathComponent("env"), named: "server", options: .init(readOnly: true))
            } throws: { error in
                (error as? LogStoreError)?.code == .notALog && "\(error)".contains("device")
            }
        }
    }

    @Test(arguments: ["", "a.b", "with space", String(repeating: "x", count: 101)])
    func invalidLogNamesAreRejected(_ name: String) async throws {
        try withTemporaryDirectory { directory in
            #expect { try Log.open(at: directory, named: name) } throws: { error in
                (error as? LogStoreError)?.code == .invalidArgument
            }
        }
    }
}
