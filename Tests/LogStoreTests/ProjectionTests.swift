import Foundation
import KeyValueLog
import TemporaryDirectory
import Testing

@testable import LogStore

/// A random key–value history, reproducible from its seed.
func randomHistory(count: Int, keys: Int, seed: UInt64) -> [[NewEntry]] {
    var random = SeededRandom(seed: seed)
    var batches: [[NewEntry]] = []
    var produced = 0
    while produced < count {
        let size = min(count - produced, [1, 1, 3, 17, 250].randomElement(using: &random)!)
        batches.append(
            (0..<size).map { _ in
                let key = "key-\(Int.random(in: 0..<keys, using: &random))"
                switch Int.random(in: 0..<10, using: &random) {
                case 0, 1: return KeyValueEntry.remove(key: key).newEntry
                case 2: return KeyValueEntry.note([UInt8.random(in: 0...255, using: &random)]).newEntry
                default:
                    let value = (0..<Int.random(in: 0...40, using: &random)).map { _ in
                        UInt8.random(in: 0...255, using: &random)
                    }
                    return KeyValueEntry.set(key: key, value: value).newEntry
                }
            })
        produced += size
    }
    return batches
}

/// The latest values computed directly from the entries: the model the projection must match.
func modelValues(_ batches: [[NewEntry]]) -> [String: [UInt8]] {
    var values: [String: [UInt8]] = [:]
    for entry in batches.joined() {
        switch KeyValueEntry(
            LogEntry(offset: 1, kind: entry.kind, time: .init(microsecondsSince1970: 0), payload: entry.payload))
        {
        case .set(let key, let value): values[key] = value
        case .remove(let key): values[key] = nil
        default: break
        }
    }
    return values
}

@Suite("Projections")
struct ProjectionTests {
    @Test(arguments: [1 as UInt64, 2, 3])
    func incrementalEqualsRebuildAfterRandomHistories(seed: UInt64) async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(
                at: directory, options: .init(durability: .fast), projections: [LatestValueProjection()])
            let batches = randomHistory(count: 12_000, keys: 300, seed: seed)
            var appended = 0
            var nextCheck = 1
            for batch in batches {
                try log.append(batch)
                appended += batch.count
                if appended >= nextCheck {
                    // Checked at growing intervals, from the first entries to the end.
                    let mismatch = try log.verifyProjections()
                    #expect(mismatch == nil, "seed \(seed) at \(appended): \(String(describing: mismatch))")
                    nextCheck *= 3
                }
            }
            #expect(try log.verifyProjections() == nil)
            #expect(try log.appliedOffsets() == ["latest": LogOffset(UInt64(appended))])
            let model = modelValues(batches)
            #expect(try log.read { try LatestValueProjection.allValues(in: $0) } == model)

            // An explicit rebuild replays the log into emptied tables: same contents.
            try log.rebuildProjections()
            #expect(try log.read { try LatestValueProjection.allValues(in: $0) } == model)
            #expect(try log.verifyProjections() == nil)
        }
    }

    @Test func verifyNamesTheFirstDifference() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(
                at: directory, options: .init(durability: .fast), projections: [LatestValueProjection()])
            try log.append([
                KeyValueEntry.set(key: "apple", value: [1]).newEntry,
                KeyValueEntry.set(key: "pear", value: [2]).newEntry,
            ])
            // Tamper with the stored projection behind the log's back.
            try log.environment.write { transaction in
                let table = try LogReader(log: log, transaction: transaction).table("values", of: "latest")
                try transaction.put(LatestValueProjection.encodeUInt64(2) + [3], forKey: Array("pear".utf8), in: table)
            }
            let mismatch = try #require(try log.verifyProjections())
            #expect(mismatch.projection == "latest")
            #expect(mismatch.table == "values")
            #expect(mismatch.key == Array("pear".utf8))
            #expect(mismatch.incremental == LatestValueProjection.encodeUInt64(2) + [3])
            #expect(mismatch.rebuilt == LatestValueProjection.encodeUInt64(2) + [2])
            #expect(mismatch.offset == 2)
            #expect(mismatch.description.contains("\"pear\""))

            try log.environment.write { transaction in
                let table = try LogReader(log: log, transaction: transaction).table("values", of: "latest")
                try transaction.put([0], forKey: Array("zzz".utf8), in: table)
                try transaction.removeValue(forKey: Array("pear".utf8), in: table)
            }
            let missing = try #require(try log.verifyProjections())
            #expect(missing.key == Array("pear".utf8) && missing.incremental == nil && missing.rebuilt != nil)

            try log.rebuildProjections()
            #expect(try log.verifyProjections() == nil)
        }
    }

    @Test func aNewProjectionCatchesUpAtOpen() async throws {
        try withTemporaryDirectory { directory in
            let batches = randomHistory(count: 20_000, keys: 50, seed: 9)
            do {
                let plain = try Log.open(at: directory, options: .init(durability: .fast))
                for batch in batches { try plain.append(batch) }
            }
            let projected = try Log.open(
                at: directory, options: .init(durability: .fast), projections: [LatestValueProjection()])
            #expect(try projected.appliedOffsets() == ["latest": 20_000])
            #expect(try projected.read { try LatestValueProjection.allValues(in: $0) } == modelValues(batches))
        }
    }

    @Test func entriesAppendedWithoutTheProjectionAreAppliedByTheNextAppend() async throws {
        try withTemporaryDirectory { directory in
            let environment = try LogEnvironment.open(at: directory, options: .init(durability: .fast))
            let projected = try environment.openLog(named: "main", projections: [LatestValueProjection()])
            try projected.append(KeyValueEntry.set(key: "a", value: [1]).newEntry)
            // Bypass the projection, as a process that does not declare it would.
            try environment.write { transaction in
                try Log(
                    environment: environment, name: "main", entriesTable: projected.entriesTable,
                    projectionSet: try ProjectionSet(
                        environment: environment, log: "main", projections: [], create: false),
                    clock: { .now() }
                )
                .append([KeyValueEntry.set(key: "b", value: [2]).newEntry], in: transaction)
            }
            #expect(try projected.verifyProjections()?.detail?.contains("through offset 1") == true)
            try projected.append(KeyValueEntry.set(key: "c", value: [3]).newEntry)
            #expect(
                try projected.read { try LatestValueProjection.allValues(in: $0) } == ["a": [1], "b": [2], "c": [3]])
            #expect(try projected.verifyProjections() == nil)
        }
    }

    struct CountingProjection: Projection {
        let name = "count"
        var version: UInt32
        let tableNames = ["total"]
        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            let key = Array("n".utf8)
            let current = try tables.value(forKey: key, in: "total").map(LatestValueProjection.decodeUInt64) ?? 0
            // Version 2 counts twice: a change of meaning that needs a rebuild.
            try tables.put(LatestValueProjection.encodeUInt64(current + UInt64(version)), forKey: key, in: "total")
        }
    }

    @Test func aNewVersionRebuildsTheProjection() async throws {
        try withTemporaryDirectory { directory in
            func total(_ log: Log) throws -> UInt64 {
                try log.read { reader in
                    let table = try reader.table("total", of: "count")
                    return LatestValueProjection.decodeUInt64(
                        try reader.transaction.value(forKey: Array("n".utf8), in: table) ?? [])
                }
            }
            do {
                let log = try Log.open(
                    at: directory, options: .init(durability: .fast), projections: [CountingProjection(version: 1)])
                try log.append((0..<100).map { _ in NewEntry(kind: 1, payload: []) })
                #expect(try total(log) == 100)
            }
            let log = try Log.open(
                at: directory, options: .init(durability: .fast), projections: [CountingProjection(version: 2)])
            #expect(try total(log) == 200)
            #expect(try log.verifyProjections() == nil)
        }
    }

    struct FailingProjection: Projection {
        struct Refused: Error {}
        let name = "picky"
        let tableNames = ["seen"]
        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            if entry.payload == [0xFF] { throw Refused() }
            try tables.put(entry.payload, forKey: withUnsafeBytes(of: entry.offset.key) { Array($0) }, in: "seen")
        }
    }

    @Test func aThrowingProjectionAbortsTheWholeAppend() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast), projections: [FailingProjection()])
            try log.append(NewEntry(kind: 1, payload: [1]))
            #expect(throws: FailingProjection.Refused.self) {
                try log.append([NewEntry(kind: 1, payload: [2]), NewEntry(kind: 1, payload: [0xFF])])
            }
            #expect(try log.lastOffset == 1)
            #expect(try log.appliedOffsets() == ["picky": 1])
            #expect(try log.verifyProjections() == nil)
        }
    }

    struct UndeclaredTable: Projection {
        let name = "sloppy"
        let tableNames = ["a"]
        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            try tables.put([1], forKey: [1], in: "b")
        }
    }

    @Test func projectionsMayOnlyTouchTheirOwnTables() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast), projections: [UndeclaredTable()])
            #expect { try log.append(NewEntry(kind: 1, payload: [])) } throws: { error in
                (error as? LogStoreError)?.code == .invalidArgument && "\(error)".contains("\"b\"")
            }
            #expect(try log.lastOffset == .zero)
        }
    }

    /// Counts entries by name and through a handle found once per `apply`: both tables must end
    /// alike, in LMDB and in tables kept elsewhere.
    struct HandleProjection: Projection {
        let name = "handles"
        let tableNames = ["byName", "byHandle"]
        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            try apply([entry], to: tables)
        }
        func apply(_ entries: [LogEntry], to tables: ProjectionTables) throws {
            let handle = try tables.handle("byHandle")
            #expect(handle.name == "byHandle")
            for entry in entries {
                let key = entry.payload
                let byName = try tables.value(forKey: key, in: "byName").map(LatestValueProjection.decodeUInt64) ?? 0
                try tables.put(LatestValueProjection.encodeUInt64(byName + 1), forKey: key, in: "byName")
                let byHandle = try tables.value(forKey: key, in: handle).map(LatestValueProjection.decodeUInt64) ?? 0
                try tables.put(LatestValueProjection.encodeUInt64(byHandle + 1), forKey: key, in: handle)
                if entry.payload == [9] {
                    #expect(try tables.removeValue(forKey: key, in: handle))
                    #expect(try tables.removeValue(forKey: key, in: "byName"))
                }
            }
        }
    }

    final class MemoryTables: ExternalProjectionTables {
        var tables: [String: [[UInt8]: [UInt8]]] = [:]
        func value(forKey key: [UInt8], in table: String) throws(LogStoreError) -> [UInt8]? { tables[table]?[key] }
        func put(_ value: [UInt8], forKey key: [UInt8], in table: String) throws(LogStoreError) {
            tables[table, default: [:]][key] = value
        }
        func removeValue(forKey key: [UInt8], in table: String) throws(LogStoreError) -> Bool {
            tables[table, default: [:]].removeValue(forKey: key) != nil
        }
        func forEach(
            in table: String, from start: [UInt8]?,
            _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            for (key, value) in (tables[table] ?? [:]).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) })
            where start.map({ !key.lexicographicallyPrecedes($0) }) ?? true {
                let more = try key.withUnsafeBytes { key in try value.withUnsafeBytes { try body(key, $0) } }
                if !more { return }
            }
        }
        func count(of table: String) throws(LogStoreError) -> Int { tables[table]?.count ?? 0 }
    }

    @Test func aTableFoundOnceByItsHandleEndsAsOneFoundByName() async throws {
        let payloads: [[UInt8]] = [[1], [2], [1], [9], [3], [1], [9]]
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast), projections: [HandleProjection()])
            try log.append(payloads.prefix(3).map { NewEntry(kind: 1, payload: $0) })
            for payload in payloads.dropFirst(3) { try log.append(NewEntry(kind: 1, payload: payload)) }
            try log.read { reader in
                for key in [[1], [2], [3], [9]] as [[UInt8]] {
                    let byName = try reader.transaction.value(
                        forKey: key, in: try reader.table("byName", of: "handles"))
                    let byHandle = try reader.transaction.value(
                        forKey: key, in: try reader.table("byHandle", of: "handles"))
                    #expect(byName == byHandle)
                }
                #expect(
                    try reader.transaction.value(forKey: [1], in: try reader.table("byHandle", of: "handles"))
                        == LatestValueProjection.encodeUInt64(3))
            }
            #expect(try log.verifyProjections() == nil)
        }
        let memory = MemoryTables()
        let entries = payloads.enumerated().map { index, payload in
            LogEntry(
                offset: LogOffset(rawValue: UInt64(index + 1)), kind: 1, time: .init(microsecondsSince1970: 0),
                payload: payload)
        }
        try HandleProjection().apply(entries, to: ProjectionTables(external: memory))
        #expect(memory.tables["byName"] == memory.tables["byHandle"])
        #expect(memory.tables["byHandle"]?[[1]] == LatestValueProjection.encodeUInt64(3))
    }

    @Test func aHandleNeedsADeclaredTable() async throws {
        struct UndeclaredHandle: Projection {
            let name = "sloppy"
            let tableNames = ["a"]
            func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
                try tables.put([1], forKey: [1], in: try tables.handle("b"))
            }
        }
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast), projections: [UndeclaredHandle()])
            #expect { try log.append(NewEntry(kind: 1, payload: [])) } throws: { error in
                (error as? LogStoreError)?.code == .invalidArgument && "\(error)".contains("\"b\"")
            }
            #expect(try log.lastOffset == .zero)
        }
    }
}
