import CLMDB
import Foundation
import KeyValueLog
import TemporaryDirectory
import Testing

@testable import LogStore

/// An environment's tables are the ones its catalogue lists (Docs/LogFormat.md, "The table
/// catalogue"): a damaged table name is refused by every open, read-only or not, naming the
/// tables, and nothing is written into the file; new logs and projections in a sound file are
/// catalogued as they are created.
@Suite("Table catalogue")
struct TableCatalogueTests {
    /// A closed environment in `directory` with log `main` (two projection tables) and 50 entries.
    static func writeLog(in directory: URL) throws {
        let log = try Log.open(
            at: directory, options: .init(durability: .fast, initialMapSize: 1 << 20),
            projections: [LatestValueProjection()])
        for index in 0..<50 {
            _ = try log.append(KeyValueEntry.set(key: "k\(index % 7)", value: [UInt8(index)]).newEntry)
        }
    }

    /// The offsets in `bytes` where `needle` starts and the byte after it is not `excluding`.
    static func occurrences(of needle: String, in bytes: [UInt8], notFollowedBy excluding: UInt8? = nil) -> [Int] {
        let pattern = Array(needle.utf8)
        guard bytes.count >= pattern.count else { return [] }
        return (0...(bytes.count - pattern.count)).filter { start in
            bytes[start..<start + pattern.count].elementsEqual(pattern)
                && (excluding == nil || start + pattern.count >= bytes.count
                    || bytes[start + pattern.count] != excluding)
        }
    }

    /// Rewrites `data.mdb` in `directory` with every occurrence of `name` as a table name (not
    /// the catalogue's copy, which a newline follows) changed to `damaged`, of the same length.
    static func damageTableName(_ name: String, to damaged: String, in directory: URL) throws -> [UInt8] {
        let file = directory.appendingPathComponent("data.mdb")
        var bytes = [UInt8](try Data(contentsOf: file))
        let places = occurrences(of: name, in: bytes, notFollowedBy: UInt8(ascii: "\n"))
        #expect(!places.isEmpty, "\(name) is nowhere in the file")
        for place in places { bytes.replaceSubrange(place..<place + damaged.utf8.count, with: Array(damaged.utf8)) }
        try Data(bytes).write(to: file)
        return bytes
    }

    @Test(
        "a flipped byte in a log's table name is refused by a read-write and a read-only open, and nothing is written")
    func damagedLogTableName() async throws {
        try withTemporaryDirectory { directory in
            try Self.writeLog(in: directory)
            let damaged = try Self.damageTableName("log.main", to: "log.maim", in: directory)
            for readOnly in [false, true] {
                let error = try #require(throws: LogStoreError.self) {
                    _ = try Log.open(
                        at: directory, options: .init(durability: .fast, readOnly: readOnly),
                        projections: [LatestValueProjection()])
                }
                #expect(error.code == .corruptFile)
                #expect(error.table == "log.maim")
                #expect(
                    error.message.contains("table \"log.maim\"")
                        && error.message.contains("table \"log.main\" is missing"), "\(error)")
                #expect(error.description.contains(directory.lastPathComponent), "\(error)")
            }
            #expect(
                [UInt8](try Data(contentsOf: directory.appendingPathComponent("data.mdb"))) == damaged,
                "the open wrote into the damaged file")
        }
    }

    @Test("a flipped byte in a projection table's name, or in the catalogue itself, is refused")
    func damagedProjectionTableOrCatalogue() async throws {
        try withTemporaryDirectory { directory in
            let projection = directory.appendingPathComponent("projection")
            try Self.writeLog(in: projection)
            _ = try Self.damageTableName("proj.main.latest.values", to: "proj.main.latest.valuez", in: projection)
            let error = try #require(throws: LogStoreError.self) {
                _ = try LogEnvironment.open(at: projection, options: .init(readOnly: true))
            }
            #expect(error.code == .corruptFile && error.table == "proj.main.latest.valuez", "\(error)")

            let catalogue = directory.appendingPathComponent("catalogue")
            try Self.writeLog(in: catalogue)
            let file = catalogue.appendingPathComponent("data.mdb")
            var bytes = [UInt8](try Data(contentsOf: file))
            let copies = Self.occurrences(of: "log.main\nmeta\n", in: bytes)
            #expect(!copies.isEmpty)
            for place in copies { bytes[place + 9] ^= 0x01 }  // the catalogue's "meta" becomes "leta"
            try Data(bytes).write(to: file)
            let damaged = try #require(throws: LogStoreError.self) {
                _ = try LogEnvironment.open(at: catalogue, options: .init(durability: .fast))
            }
            #expect(
                damaged.code == .corruptFile && damaged.table == "meta" && damaged.message.contains("catalogue"),
                "\(damaged)")
            #expect([UInt8](try Data(contentsOf: file)) == bytes)
        }
    }

    @Test("an LMDB environment without LogStore's metadata table is not a log, and stays as it was")
    func foreignEnvironment() async throws {
        try withTemporaryDirectory { directory in
            // A plain LMDB environment with a table of its own, as another program would make it.
            var environment: OpaquePointer?
            #expect(mdb_env_create(&environment) == MDB_SUCCESS)
            mdb_env_set_maxdbs(environment, 4)
            #expect(mdb_env_open(environment, directory.path, 0, 0o644) == MDB_SUCCESS)
            var txn: OpaquePointer?
            var dbi: MDB_dbi = 0
            #expect(mdb_txn_begin(environment, nil, 0, &txn) == MDB_SUCCESS)
            #expect(mdb_dbi_open(txn, "theirs", UInt32(MDB_CREATE), &dbi) == MDB_SUCCESS)
            #expect(mdb_txn_commit(txn) == MDB_SUCCESS)
            mdb_env_close(environment)
            let before = [UInt8](try Data(contentsOf: directory.appendingPathComponent("data.mdb")))

            let error = try #require(throws: LogStoreError.self) {
                _ = try LogEnvironment.open(at: directory, options: .init(durability: .fast))
            }
            #expect(error.code == .notALog && error.message.contains("table \"theirs\""), "\(error)")
            #expect([UInt8](try Data(contentsOf: directory.appendingPathComponent("data.mdb"))) == before)
        }
    }

    @Test("a new log and a new projection in a sound environment are catalogued as they are created")
    func newTablesAreCatalogued() async throws {
        try withTemporaryDirectory { directory in
            try Self.writeLog(in: directory)
            do {
                let environment = try LogEnvironment.open(at: directory, options: .init(durability: .fast))
                let second = try environment.openLog(named: "second")
                _ = try second.append(KeyValueEntry.set(key: "a", value: [1]).newEntry)
            }
            let environment = try LogEnvironment.open(at: directory, options: .init(readOnly: true))
            #expect(Set(try environment.logNames()) == ["main", "second"])
            let stored = try #require(
                try environment.read { try $0.value(forKey: TableCatalogue.key, in: environment.meta) })
            let catalogued = try stored.withUnsafeBytes { bytes throws(LogStoreError) in
                try TableCatalogue.decode(bytes, path: directory.path)
            }
            #expect(
                catalogued == ["meta", "log.main", "log.second", "proj.main.latest.values", "proj.main.latest.counts"])
        }
    }

    @Test("a file written before the catalogue is checked against what its meta table says of each log")
    func filesWithoutCatalogue() throws {
        let path = "/tmp/log"
        let meta: Set<String> = ["tail.device", "applied.device.index", "version.device.index"]
        // Sound: the log, its projection's tables.
        try TableCatalogue.checkWithoutCatalogue(
            present: ["meta", "log.device", "proj.device.index.records"], metaKeys: meta, path: path)
        // A bare log from before tail records, in a file with nothing else.
        try TableCatalogue.checkWithoutCatalogue(present: ["meta", "log.main"], metaKeys: [], path: path)
        // The damaged name: the log meta speaks of is missing, and an unknown one is there.
        let renamed = try #require(throws: LogStoreError.self) {
            try TableCatalogue.checkWithoutCatalogue(
                present: ["meta", "log.dewice", "proj.device.index.records"], metaKeys: meta, path: path)
        }
        #expect(
            renamed.code == .corruptFile && renamed.message.contains("\"log.dewice\"")
                && renamed.message.contains("\"log.device\" is missing"))
        // A projection table of a log that is not there; a table of no known form.
        #expect(throws: LogStoreError.self) {
            try TableCatalogue.checkWithoutCatalogue(
                present: ["meta", "log.device", "proj.other.index.records"], metaKeys: meta, path: path)
        }
        #expect(throws: LogStoreError.self) {
            try TableCatalogue.checkWithoutCatalogue(
                present: ["meta", "log.device", "mxta"], metaKeys: meta, path: path)
        }
    }
}
