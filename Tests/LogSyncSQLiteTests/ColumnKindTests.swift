import Foundation
import GRDB
import LogSync
import LogSyncSQLite
import LogSyncServer
import SyncTestKit
import Testing

/// Each kind of column as a field, and back into the other device's row.
@Suite("SQLite: column kinds")
struct ColumnKindTests {
    static func migrate(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS entries(
                  id BLOB PRIMARY KEY NOT NULL, at DATETIME, payload JSON, photo TEXT, rating REAL, visits INTEGER,
                  raw BLOB, note TEXT)
                """)
    }

    static let tables = [SyncedTable("entries", zone: .named("Journal")).column("photo", as: .assetFile)]

    static func open(_ name: String, _ server: SyncServer, _ directory: URL) throws -> SyncedDatabase {
        try SQLiteDevice.openStore(
            name, in: directory, tables: tables, privateDatabase: server.database(for: "alice", device: DeviceID(name)),
            migrate: migrate)
    }

    // F129: every value kind the columns hold round-trips; a UUID key stored as 16 bytes.
    @Test("text, integer, real, blob, date, JSON and a file as an asset arrive as they were written, under a UUID key")
    func roundTrip() async throws {
        try await withServer { directory, server in
            let phone = try Self.open("phone", server, directory)
            let laptop = try Self.open("laptop", server, directory)
            let id = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!
            let at = Date(timeIntervalSince1970: 1_790_000_000.25)
            let photo = directory.appendingPathComponent("photo.jpg")
            let bytes = Data((0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try bytes.write(to: photo)
            try await phone.writer.write { db in
                try db.execute(
                    sql:
                        "INSERT INTO entries(id, at, payload, photo, rating, visits, raw, note) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                    arguments: [
                        id, at, #"{"mood": "calm", "tags": [1, 2]}"#, photo.path, 4.5, 12, Data([0, 1, 2, 255]),
                    ])
            }
            try await phone.sync()

            let recordID = try phone.recordID(table: "entries", primaryKey: id.uuidString)
            #expect(recordID.recordName == "\(id.uuidString):entries")
            let sent = try #require(try phone.privateEngine.deviceLog.lastKnownServerRecord(for: recordID))
            #expect(sent["at"] == .date(at))
            #expect(sent["payload"] == .string(#"{"mood": "calm", "tags": [1, 2]}"#))
            #expect(sent["rating"] == .double(4.5))
            #expect(sent["visits"] == .int64(12))
            #expect(sent["raw"] == .bytes(Data([0, 1, 2, 255])))
            #expect(sent["note"] == nil)
            guard case .asset? = sent["photo"] else {
                Issue.record("the photo was sent as \(String(describing: sent["photo"]))")
                return
            }

            try await laptop.sync()
            let row = try #require(try await laptop.writer.read { try Row.fetchOne($0, sql: "SELECT * FROM entries") })
            #expect(row["id"] as Data == withUnsafeBytes(of: id.uuid) { Data($0) })
            #expect(row["at"] as Date == at)
            #expect(row["payload"] as String == #"{"mood": "calm", "tags": [1, 2]}"#)
            #expect(row["rating"] as Double == 4.5)
            #expect(row["visits"] as Int64 == 12)
            #expect(row["raw"] as Data == Data([0, 1, 2, 255]))
            #expect((row["note"] as DatabaseValue).isNull)
            // The laptop's photo is the engine's cached copy, with the same bytes.
            let cached = try #require(row["photo"] as String?)
            #expect(cached != photo.path)
            #expect(try Data(contentsOf: URL(fileURLWithPath: cached)) == bytes)
        }
    }

    @Test("declarations the tables do not fit are typed errors naming the table and column")
    func badDeclarations() async throws {
        try await withServer { directory, server in
            func open(_ tables: [SyncedTable], _ sql: String) throws {
                _ = try SQLiteDevice.openStore(
                    UUID().uuidString, in: directory, tables: tables,
                    privateDatabase: server.database(for: "alice", device: "phone"),
                    migrate: { try $0.execute(sql: sql) })
            }
            #expect(throws: SyncedDatabaseError.unknownTable("missing")) {
                try open([SyncedTable("missing")], "CREATE TABLE other(id TEXT PRIMARY KEY)")
            }
            #expect(throws: SyncedDatabaseError.unknownColumn(table: "notes", column: "folderID")) {
                try open([SyncedTable("notes", parent: "folderID")], "CREATE TABLE notes(id TEXT PRIMARY KEY)")
            }
            #expect {
                try open([SyncedTable("pairs")], "CREATE TABLE pairs(a TEXT, b TEXT, PRIMARY KEY (a, b))")
            } throws: { error in
                guard case SyncedDatabaseError.unsupportedPrimaryKey(let table, _) = error else { return false }
                return table == "pairs"
            }
            #expect {
                try open([SyncedTable("counters")], "CREATE TABLE counters(id INTEGER PRIMARY KEY, n INTEGER)")
            } throws: { error in
                guard case SyncedDatabaseError.unsupportedPrimaryKey(let table, _) = error else { return false }
                return table == "counters"
            }
            #expect(throws: SyncedDatabaseError.duplicateDeclaration("notes")) {
                try open([SyncedTable("notes"), SyncedTable("notes")], "CREATE TABLE notes(id TEXT PRIMARY KEY)")
            }
        }
    }

    @Test("a primary key that cannot name a record is refused with its table and key; the row stays; other rows sync")
    func badKey() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            try phone.addNote("é-note", in: nil, title: "Not ASCII")
            try phone.addNote("fine", in: nil, title: "Fine")
            try await phone.sync()
            let refusals = try phone.store.refusals()
            #expect(refusals.map(\.table) == ["notes"])
            #expect(refusals.map(\.primaryKey) == ["é-note"])
            #expect(refusals.first?.message.contains("ASCII") == true)
            #expect(try phone.title("é-note") == "Not ASCII")
            try await laptop.sync()
            #expect(try laptop.title("fine") == "Fine")
            #expect(try laptop.title("é-note") == nil)
        }
    }
}
