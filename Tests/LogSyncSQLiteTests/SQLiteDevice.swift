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
        let folder = directory.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        path = folder.appendingPathComponent("app.sqlite").path
        store = try SyncedDatabase(
            path: path, tables: tables ?? Self.tables(conflicts, version2: version2),
            privateDatabase: server.database(for: user, scope: .private, device: DeviceID(name)),
            sharedDatabase: server.database(for: user, scope: .shared, device: DeviceID(name)),
            logDirectory: folder.appendingPathComponent("logs", isDirectory: true),
            options: .init(configure: { $0.automaticallySync = false }, handsOffOnCommit: handsOffOnCommit),
            migrate: Self.migrate(version2: version2))
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
    func contents() throws -> [String] {
        try store.writer.read { db in
            var lines: [String] = []
            for table in try ["folders", "notes", "tags"].filter({ try db.tableExists($0) }) {
                for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY id") {
                    lines.append("\(table) \(row)")
                }
            }
            return lines
        }
    }

    func count(_ table: String) throws -> Int {
        try store.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM \(table)") ?? 0 }
    }
}
