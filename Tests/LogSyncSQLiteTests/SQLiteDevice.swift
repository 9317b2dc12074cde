import Foundation
import GRDB
import LogSync
import LogSyncSQLite
import LogSyncServer
import Testing

/// One device of a notes app on SQLite in a test: its own SQLite file and device logs in
/// `directory/name`, folders and notes (a foreign key, cascading deletes), syncing by hand.
final class SQLiteDevice: Sendable {
    let name: String
    let store: SyncedDatabase
    let path: String

    /// The app's schema, version 1 (`version2` adds a `color` column to notes, and tags).
    static func migrate(version2: Bool) -> @Sendable (Database) throws -> Void {
        { db in
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS folders(id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL DEFAULT '');
                    CREATE TABLE IF NOT EXISTS notes(
                      id TEXT PRIMARY KEY NOT NULL,
                      folderID TEXT REFERENCES folders(id) ON DELETE CASCADE,
                      title TEXT, body TEXT, modified REAL, attachment BLOB);
                    """)
            if version2, try !db.columns(in: "notes").contains(where: { $0.name == "color" }) {
                try db.execute(sql: "ALTER TABLE notes ADD COLUMN color TEXT")
            }
            if version2 {
                try db.execute(
                    sql: """
                        CREATE TABLE IF NOT EXISTS tags(
                          id TEXT PRIMARY KEY NOT NULL, noteID TEXT REFERENCES notes(id) ON DELETE CASCADE, label TEXT)
                        """)
            }
        }
    }

    static func tables(_ notes: ConflictPolicy, version2: Bool = false) -> [SyncedTable] {
        [
            SyncedTable("folders", zone: .named("Notes")),
            SyncedTable("notes", zone: .named("Notes"), parent: "folderID", conflicts: notes)
                .column("attachment", as: .blobAsset(threshold: 1024)),
        ] + (version2 ? [SyncedTable("tags", zone: .named("Notes"), parent: "noteID")] : [])
    }

    init(
        _ name: String, server: SyncServer, user: UserID = "alice", directory: URL,
        conflicts: ConflictPolicy = .fieldByField,
        version2: Bool = false, handsOffOnCommit: Bool = true, tables: [SyncedTable]? = nil
    ) throws {
        self.name = name
        path = Self.file(name, in: directory)
        store = try Self.openStore(
            name, in: directory, tables: tables ?? Self.tables(conflicts, version2: version2),
            privateDatabase: server.database(for: user, scope: .private, device: DeviceID(name)),
            sharedDatabase: server.database(for: user, scope: .shared, device: DeviceID(name)),
            handsOffOnCommit: handsOffOnCommit, migrate: Self.migrate(version2: version2))
    }

    /// The SQLite file of the device `name`: `directory/name/app.sqlite`.
    static func file(_ name: String, in directory: URL) -> String {
        directory.appendingPathComponent(name, isDirectory: true).appendingPathComponent("app.sqlite").path
    }

    /// Opens the store of the device `name`: its SQLite file (``file(_:in:)``) and its device
    /// logs in `directory/name/logs`, its engines syncing by hand unless `configure` says
    /// otherwise.
    static func openStore(
        _ name: String, in directory: URL, tables: [SyncedTable], privateDatabase: any CloudDatabase,
        sharedDatabase: (any CloudDatabase)? = nil, handsOffOnCommit: Bool = true,
        configure: @escaping @Sendable (inout SyncEngine.Configuration) -> Void = { $0.automaticallySync = false },
        migrate: @escaping (Database) throws -> Void
    ) throws -> SyncedDatabase {
        let folder = directory.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return try SyncedDatabase(
            path: file(name, in: directory), tables: tables, privateDatabase: privateDatabase,
            sharedDatabase: sharedDatabase, logDirectory: folder.appendingPathComponent("logs", isDirectory: true),
            options: .init(configure: configure, handsOffOnCommit: handsOffOnCommit), migrate: migrate)
    }

    func sync() async throws { try await store.sync() }

    func execute(_ sql: String, _ arguments: StatementArguments = []) throws {
        try store.writer.write { try $0.execute(sql: sql, arguments: arguments) }
    }

    func addFolder(_ id: String, _ name: String) throws {
        try execute("INSERT INTO folders(id, name) VALUES (?, ?)", [id, name])
    }

    func addNote(_ id: String, in folder: String?, title: String, body: String = "", modified: Double = 0) throws {
        try execute(
            "INSERT INTO notes(id, folderID, title, body, modified) VALUES (?, ?, ?, ?, ?)",
            [id, folder, title, body, modified])
    }

    func title(_ id: String) throws -> String? {
        try store.writer.read { try String.fetchOne($0, sql: "SELECT title FROM notes WHERE id = ?", arguments: [id]) }
    }

    func column(_ column: String, of id: String) throws -> DatabaseValue? {
        try store.writer.read {
            try DatabaseValue.fetchOne($0, sql: "SELECT \(column) FROM notes WHERE id = ?", arguments: [id])
        }
    }

    /// Every note and folder, as `table id: column=value …` lines, for comparing devices.
    func contents() throws -> [String] { try Self.contents(of: store) }

    /// Every row of a store's notes tables (those it has), as `table id: column=value …` lines.
    static func contents(of store: SyncedDatabase) throws -> [String] {
        try store.writer.read { db in
            try ["folders", "notes", "tags"].filter { try db.tableExists($0) }.flatMap { table in
                try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY id").map { "\(table) \($0)" }
            }
        }
    }

    func count(_ table: String) throws -> Int {
        try store.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM \(table)") ?? 0 }
    }
}
