import Foundation
import GRDB
import LogSync

/// A synced table as the database has it now: its declaration, its columns and their kinds, its
/// primary key's form, and its foreign keys to other synced tables.
struct TableSchema: Sendable {
    let declaration: SyncedTable
    /// The primary-key column.
    let primaryKey: String
    /// How the primary key is stored: text, or a UUID as 16 bytes.
    let keyForm: KeyForm
    /// Every column but the primary key, in the table's order, with its kind.
    let columns: [(name: String, kind: SyncedTable.Kind, encrypted: Bool)]
    /// Each of ``columns``' position in the table's rows (`SELECT *`), for reading a row by
    /// index: GRDB's lookup by name folds the case of every name it compares.
    let positions: [Int]
    /// Foreign-key column → the synced table it refers to.
    let references: [String: String]
    /// The columns declared `NOT NULL`: a record without their field leaves them as they are.
    let notNull: Set<String>
    /// Each referred table's primary-key form (filled once every table is read).
    var referenceForms: [String: KeyForm] = [:]
    /// The upsert of a row with every column (`upsertSQL(columns:)`), built once: a fetched
    /// record usually has every field.
    var upsertEveryColumn = ""

    enum KeyForm: Sendable, Hashable { case text, uuidBytes }

    var name: String { declaration.name }

    /// The row whose primary key is `key`, as it is now.
    func row(_ key: DatabaseValue, _ db: Database) throws -> Row? {
        try db.cachedRow(
            "SELECT * FROM \(name.quotedDatabaseIdentifier) WHERE \(primaryKey.quotedDatabaseIdentifier) = ?", [key])
    }

    /// The record name of a row: `primaryKey:table`.
    func recordName(_ key: String) -> String { "\(key):\(name)" }

    /// Reads the table's shape from the database and checks the declaration against it.
    static func read(_ declaration: SyncedTable, synced: Set<String>, in db: Database) throws -> TableSchema {
        let table = declaration.name
        guard try db.tableExists(table) else { throw SyncedDatabaseError.unknownTable(table) }
        let info = try db.columns(in: table)
        let keyColumns = try db.primaryKey(table).columns
        guard keyColumns.count == 1, let key = keyColumns.first, info.contains(where: { $0.name == key }) else {
            throw SyncedDatabaseError.unsupportedPrimaryKey(
                table: table,
                reason: "the primary key must be one text or UUID column, not \(keyColumns.joined(separator: ", "))")
        }
        let keyType = info.first { $0.name == key }?.type.uppercased() ?? ""
        let keyForm: KeyForm
        if keyType.contains("BLOB") || keyType == "UUID" {
            keyForm = .uuidBytes
        } else if keyType.contains("TEXT") || keyType.contains("CHAR") || keyType.contains("CLOB") || keyType.isEmpty {
            keyForm = .text
        } else {
            throw SyncedDatabaseError.unsupportedPrimaryKey(
                table: table, reason: "the primary key \"\(key)\" is \(keyType); it must be TEXT or a UUID (BLOB)")
        }
        let names = Set(info.map(\.name))
        for column in declaration.columns.keys where !names.contains(column) {
            throw SyncedDatabaseError.unknownColumn(table: table, column: column)
        }
        if let parent = declaration.parent, !names.contains(parent) {
            throw SyncedDatabaseError.unknownColumn(table: table, column: parent)
        }
        if case .column(let column) = declaration.zone, !names.contains(column) {
            throw SyncedDatabaseError.unknownColumn(table: table, column: column)
        }
        var references: [String: String] = [:]
        for foreignKey in try db.foreignKeys(on: table) where synced.contains(foreignKey.destinationTable) {
            guard foreignKey.mapping.count == 1, let origin = foreignKey.originColumns.first else { continue }
            references[origin] = foreignKey.destinationTable
        }
        let columns = info.filter { $0.name != key }.map { column in
            let declared = declaration.columns[column.name]
            return (column.name, declared?.kind ?? Self.kind(declaredType: column.type), declared?.encrypted ?? false)
        }
        var schema = TableSchema(
            declaration: declaration, primaryKey: key, keyForm: keyForm, columns: columns,
            positions: info.indices.filter { info[$0].name != key }, references: references,
            notNull: Set(info.filter(\.isNotNull).map(\.name)))
        schema.upsertEveryColumn = schema.upsertSQL(columns: schema.columns.map(\.name))
        return schema
    }

    /// Inserts the row with `columns` (after its primary key), or updates those columns of the
    /// row with that key.
    func upsertSQL(columns: [String]) -> String {
        let names = ([primaryKey] + columns).map(\.quotedDatabaseIdentifier)
        let updates = columns.map { "\($0.quotedDatabaseIdentifier) = excluded.\($0.quotedDatabaseIdentifier)" }
        var sql =
            "INSERT INTO \(name.quotedDatabaseIdentifier)(\(names.joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: names.count).joined(separator: ", ") + ") "
        sql += "ON CONFLICT(\(primaryKey.quotedDatabaseIdentifier)) DO "
        sql += updates.isEmpty ? "NOTHING" : "UPDATE SET \(updates.joined(separator: ", "))"
        return sql
    }

    /// The kind SQLite's affinity rules give a declared type, with `DATE` and `JSON` read as such.
    static func kind(declaredType: String) -> SyncedTable.Kind {
        let type = declaredType.uppercased()
        if type.contains("INT") { return .integer }
        if type.contains("DATE") || type.contains("TIME") { return .date }
        if type.contains("JSON") { return .json }
        if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") { return .text }
        if type.contains("BLOB") || type.isEmpty { return .blob }
        if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") { return .real }
        return .real
    }

    /// The triggers that capture every write to the table in the transaction that makes it:
    /// the row into `logsync_outbox`, each column it changed into `logsync_unsaved`. Writes
    /// the store itself makes to the row it is applying a fetched change to (the row named in
    /// `logsync_control`) are not captured; what the schema's foreign-key actions do to other
    /// rows meanwhile (a cascade, `SET NULL`) is, and goes to the server like any local edit.
    ///
    /// Triggers, not a GRDB transaction observer: they run in the writing transaction itself,
    /// whichever connection or tool writes (a migration, the `sqlite3` shell), and commit or
    /// roll back with it, so no write can commit without its capture.
    var triggerNames: [String] { ["insert", "update", "delete"].map { "logsync_\(name)_\($0)" } }

    var triggers: [String] {
        func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
        let table = name.quotedDatabaseIdentifier
        let label = literal(name)
        let key = primaryKey.quotedDatabaseIdentifier
        func quiet(_ row: String) -> String {
            "WHEN NOT EXISTS (SELECT 1 FROM logsync_control WHERE tbl = \(label) AND pk IS \(row).\(key))"
        }
        // Each unsaved column once: `WHERE NOT EXISTS` rather than `INSERT OR IGNORE`, whose
        // conflict clause the app's own statement overrides (an upsert's `ON CONFLICT DO
        // UPDATE` would fail on the second edit of a column).
        func unsaved(_ column: String) -> String {
            "NOT EXISTS (SELECT 1 FROM logsync_unsaved WHERE tbl = \(label) AND pk IS NEW.\(key) AND col = \(column))"
        }
        let inserted =
            columns.isEmpty
            ? ""
            : "INSERT INTO logsync_unsaved(tbl, pk, col) SELECT \(label), NEW.\(key), column1 FROM (VALUES "
                + columns.map { "(\(literal($0.name)))" }.joined(separator: ", ") + ") WHERE \(unsaved("column1"));"
        let updated = columns.map { column in
            let name = column.name.quotedDatabaseIdentifier
            return "INSERT INTO logsync_unsaved(tbl, pk, col) SELECT \(label), NEW.\(key), \(literal(column.name)) "
                + "WHERE OLD.\(name) IS NOT NEW.\(name) AND \(unsaved(literal(column.name)));"
        }
        let prefix = "logsync_\(name)"
        return [
            """
            CREATE TRIGGER \("\(prefix)_insert".quotedDatabaseIdentifier) AFTER INSERT ON \(table) \(quiet("NEW")) BEGIN
              INSERT INTO logsync_outbox(tbl, pk, deleted) VALUES (\(label), NEW.\(key), 0);
              \(inserted)
            END
            """,
            """
            CREATE TRIGGER \("\(prefix)_update".quotedDatabaseIdentifier) AFTER UPDATE ON \(table) \(quiet("NEW")) BEGIN
              INSERT INTO logsync_outbox(tbl, pk, deleted) SELECT \(label), OLD.\(key), 1 WHERE OLD.\(key) IS NOT NEW.\(key);
              INSERT INTO logsync_outbox(tbl, pk, deleted) VALUES (\(label), NEW.\(key), 0);
              \(updated.joined(separator: "\n  "))
            END
            """,
            """
            CREATE TRIGGER \("\(prefix)_delete".quotedDatabaseIdentifier) AFTER DELETE ON \(table) \(quiet("OLD")) BEGIN
              INSERT INTO logsync_outbox(tbl, pk, deleted) VALUES (\(label), OLD.\(key), 1);
              DELETE FROM logsync_unsaved WHERE tbl = \(label) AND pk = OLD.\(key);
            END
            """,
        ]
    }
}

/// The store's own tables, created on first open.
enum StoreTables {
    static let create = """
        CREATE TABLE IF NOT EXISTS logsync_control(
          id INTEGER PRIMARY KEY CHECK (id = 1), tbl TEXT, pk);
        INSERT OR IGNORE INTO logsync_control(id) VALUES (1);
        CREATE TABLE IF NOT EXISTS logsync_outbox(
          seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, pk NOT NULL, deleted INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS logsync_unsaved(
          tbl TEXT NOT NULL, pk NOT NULL, col TEXT NOT NULL, PRIMARY KEY (tbl, pk, col)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS logsync_rows(
          tbl TEXT NOT NULL, pk NOT NULL, zone TEXT NOT NULL, owner TEXT NOT NULL, shared INTEGER NOT NULL,
          PRIMARY KEY (tbl, pk)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS logsync_zones(zone TEXT PRIMARY KEY) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS logsync_kept(
          name TEXT NOT NULL, zone TEXT NOT NULL, owner TEXT NOT NULL, shared INTEGER NOT NULL,
          type TEXT NOT NULL, why TEXT NOT NULL, record BLOB NOT NULL, PRIMARY KEY (name, zone, owner)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS logsync_refusals(
          seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, pk TEXT NOT NULL, deletion INTEGER NOT NULL,
          code INTEGER NOT NULL, message TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS logsync_tables(tbl TEXT PRIMARY KEY, columns TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS logsync_shares(
          name TEXT NOT NULL, zone TEXT NOT NULL, owner TEXT NOT NULL, shared INTEGER NOT NULL, record BLOB NOT NULL,
          PRIMARY KEY (name, zone, owner)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS logsync_fetched(
          zone TEXT NOT NULL, owner TEXT NOT NULL, shared INTEGER NOT NULL, done INTEGER NOT NULL,
          PRIMARY KEY (zone, owner, shared)) WITHOUT ROWID;
        """
}
