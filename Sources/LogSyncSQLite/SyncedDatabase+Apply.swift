import Foundation
import GRDB
import LogSync

/// Fetched records into rows, and conflicts settled.
extension SyncedDatabase {
    /// What applying one record did.
    enum Applied {
        /// The row now holds the record (and, with `unsaved`, edits of this device to send).
        case applied(unsaved: Bool)
        /// Kept in `logsync_kept` until its table is declared or its parent arrives.
        case kept
    }

    /// Applies a page of fetched changes in one transaction: parents before children, deletions
    /// children first, then any kept record that can now go in. Returns the saves to queue
    /// again (rows whose unsaved edits survived a merge) and the saves to drop (rows deleted).
    func apply(
        _ changes: SyncEngine.Event.FetchedRecordZoneChanges, shared: Bool
    ) throws -> (
        requeue: [Record.ID], drop: [Record.ID], rows: [String: Set<String>]
    ) {
        let rank = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
        func rankOf(_ type: String) -> Int { byRecordType[type].flatMap { rank[$0] } ?? Int.max }
        let modifications = changes.modifications.map(\.record).enumerated().sorted {
            (rankOf($0.element.recordType), $0.offset) < (rankOf($1.element.recordType), $1.offset)
        }.map(\.element)
        let deletions = changes.deletions.enumerated().sorted {
            (rankOf($0.element.recordType), $0.offset) > (rankOf($1.element.recordType), $1.offset)
        }.map(\.element)
        var requeue: [Record.ID] = []
        var drop: [Record.ID] = []
        var rows: [String: Set<String>] = [:]
        try applying { db in
            // Most pages meet no unsaved edit and no kept record (an initial sync meets none):
            // asked once per page instead of once per record.
            var page = PageState(
                hasUnsaved: try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM logsync_unsaved)") ?? true,
                hasKept: try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM logsync_kept)") ?? true)
            for record in modifications {
                if record.recordType == Share.recordType {
                    try keepShare(record, shared: shared, db)
                    continue
                }
                let name = TableSchema.split(record.recordID.recordName)
                let before = try name.flatMap { try storedRow($0.table, $0.key, db) }
                if case .applied(let unsaved) = try apply(record, shared: shared, db, page: &page, row: before) {
                    if unsaved { requeue.append(record.recordID) }
                    // A record that leaves its row as it was (this device's own save fetched
                    // back) changed nothing an observer should hear of; a new row always did.
                    if let (key, table) = name, try before == nil || storedRow(table, key, db) != before {
                        rows[table, default: []].insert(key)
                    }
                }
            }
            for deletion in deletions {
                let id = deletion.recordID
                try forget(id, in: .kept, db)
                if deletion.recordType == Share.recordType {
                    try forget(id, in: .shares, db)
                    continue
                }
                guard let (key, table) = TableSchema.split(id.recordName), let schema = schemas[table] else { continue }
                let existed = try storedRow(table, key, db) != nil
                try deleteRow(schema, schema.keyValue(key), db)
                drop.append(id)
                if existed { rows[table, default: []].insert(key) }
            }
            let kept = try retryKept(db)
            requeue += kept.requeue
            rows.merge(kept.rows) { $0.union($1) }
        }
        return (requeue, drop, rows)
    }

    /// The row of a synced table whose primary key's text is `key`, as it is now.
    private func storedRow(_ table: String, _ key: String, _ db: Database) throws -> Row? {
        guard let schema = schemas[table] else { return nil }
        return try schema.row(schema.keyValue(key), db)
    }

    /// Runs `body` in a write transaction that applies server changes: the row it names with
    /// ``quiet(_:_:_:)`` is written without being captured as a local edit.
    func applying<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.write { db in
            let result = try body(db)
            try db.execute(sql: "UPDATE logsync_control SET tbl = NULL, pk = NULL")
            return result
        }
    }

    /// Names the row the next writes apply a server change to: the triggers leave it alone.
    func quiet(_ table: String, _ key: DatabaseValue, _ db: Database) throws {
        try db.cachedExecute("UPDATE logsync_control SET tbl = ?, pk = ?", [table, key])
    }

    func deleteRow(_ schema: TableSchema, _ key: DatabaseValue, _ db: Database) throws {
        try quiet(schema.name, key, db)
        try db.cachedExecute(
            "DELETE FROM \(schema.name.quotedDatabaseIdentifier) WHERE \(schema.primaryKey.quotedDatabaseIdentifier) = ?",
            [key])
        try db.cachedExecute("DELETE FROM logsync_rows WHERE tbl = ? AND pk = ?", [schema.name, key])
        try db.cachedExecute("DELETE FROM logsync_unsaved WHERE tbl = ? AND pk = ?", [schema.name, key])
    }

    /// Applies one server record to its row, merging this device's unsaved edits of the row by
    /// the table's policy.
    /// What a page's transaction knows before its first record: whether any row has unsaved
    /// columns, whether any record is kept. A record kept by this page sets `hasKept`.
    struct PageState {
        var hasUnsaved = true
        var hasKept = true
    }

    func apply(_ record: Record, shared: Bool, _ db: Database) throws -> Applied {
        var page = PageState()
        return try apply(record, shared: shared, db, page: &page)
    }

    /// `row` is the row as the caller already read it, if it did.
    func apply(
        _ record: Record, shared: Bool, _ db: Database, page: inout PageState, row: Row? = nil
    ) throws -> Applied {
        guard let table = byRecordType[record.recordType], let schema = schemas[table],
            let (keyText, named) = TableSchema.split(record.recordID.recordName), named == table
        else {
            try keep(record, shared: shared, why: "no table syncs records of type \(record.recordType)", db)
            page.hasKept = true
            return .kept
        }
        let key = schema.keyValue(keyText)
        var server: [String: DatabaseValue] = [:]
        for column in schema.columns {
            let value = schema.column(column, record[column.name])
            if record[column.name] == nil, schema.notNull.contains(column.name) { continue }
            if let target = schema.references[column.name], !value.isNull, !(try rowExists(target, value, db)) {
                try keep(record, shared: shared, why: "waiting for its \(target) row", db)
                page.hasKept = true
                return .kept
            }
            server[column.name] = value
        }
        let unsaved =
            page.hasUnsaved
            ? Set(
                try String.fetchAll(
                    db.cachedStatement(sql: "SELECT col FROM logsync_unsaved WHERE tbl = ? AND pk = ?"),
                    arguments: [table, key])) : []
        var values = server
        var stillUnsaved: Set<String> = []
        // The local row matters only to merge this device's unsaved edits: a row without any
        // (every row of an initial sync) is not read.
        if !unsaved.isEmpty, let local = try row ?? schema.row(key, db) {
            (values, stillUnsaved) = try settle(schema, keyText, local: local, server: server, unsaved: unsaved)
        }
        try quiet(table, key, db)
        try upsert(schema, key, values, db)
        if !unsaved.isEmpty {
            try db.cachedExecute("DELETE FROM logsync_unsaved WHERE tbl = ? AND pk = ?", [table, key])
        }
        for column in stillUnsaved {
            try db.cachedExecute("INSERT INTO logsync_unsaved(tbl, pk, col) VALUES (?, ?, ?)", [table, key, column])
        }
        if !stillUnsaved.isEmpty {
            // The merged row goes again: through the outbox, in this transaction, so a process
            // ending before the engine queues the save sends it from the next hand-off.
            try db.cachedExecute("INSERT INTO logsync_outbox(tbl, pk, deleted) VALUES (?, ?, 0)", [table, key])
        }
        let zoneID = record.recordID.zoneID
        try setPlace(Place(zone: zoneID.zoneName, owner: zoneID.ownerName, shared: shared), of: table, key, db)
        if page.hasKept { try forget(record.recordID, in: .kept, db) }
        return .applied(unsaved: !stillUnsaved.isEmpty)
    }

    private func rowExists(_ table: String, _ key: DatabaseValue, _ db: Database) throws -> Bool {
        guard let schema = schemas[table] else { return true }
        return try Bool.fetchOne(
            db.cachedStatement(
                sql:
                    "SELECT EXISTS (SELECT 1 FROM \(table.quotedDatabaseIdentifier) WHERE \(schema.primaryKey.quotedDatabaseIdentifier) = ?)"
            ),
            arguments: [key]) ?? false
    }

    private func upsert(
        _ schema: TableSchema, _ key: DatabaseValue, _ values: [String: DatabaseValue], _ db: Database
    ) throws {
        let columns = schema.columns.map(\.name).filter { values[$0] != nil }
        let sql =
            columns.count == schema.columns.count ? schema.upsertEveryColumn : schema.upsertSQL(columns: columns)
        try db.cachedExecute(sql, StatementArguments([key] + columns.map { values[$0]! }))
    }

    /// The row to keep and the columns still to send, when the server's copy meets this
    /// device's unsaved edits.
    private func settle(
        _ schema: TableSchema, _ key: String, local row: Row, server: [String: DatabaseValue], unsaved: Set<String>
    ) throws -> ([String: DatabaseValue], Set<String>) {
        var local: [String: DatabaseValue] = [:]
        for column in schema.columns { local[column.name] = row[column.name] }
        func differing(_ merged: [String: DatabaseValue]) -> Set<String> {
            Set(schema.columns.map(\.name).filter { merged[$0] != nil && merged[$0] != (server[$0] ?? .null) })
        }
        switch schema.declaration.conflicts.rule {
        case .serverWins:
            return (server, [])
        case .fieldByField:
            var merged = server
            for column in unsaved where local[column] != nil { merged[column] = local[column] }
            return (merged, differing(merged).intersection(unsaved))
        case .lastEditWins(let column):
            guard let mine = local[column], Self.isLater(mine, than: server[column] ?? .null) else {
                return (server, [])
            }
            return (local, differing(local))
        case .custom:
            guard let merge = schema.declaration.conflicts.merge else { return (server, []) }
            let merged = merge(
                ConflictPolicy.Conflict(
                    table: schema.name, primaryKey: key, local: local.mapValues(SQLValue.init),
                    server: server.mapValues(SQLValue.init), unsavedColumns: unsaved)
            ).mapValues(\.databaseValue)
            let complete = server.merging(merged) { $1 }
            return (complete, differing(complete))
        }
    }

    /// Whether `value` sorts after `other` as SQLite compares them (NULL first, numbers before
    /// text before blobs).
    static func isLater(_ value: DatabaseValue, than other: DatabaseValue) -> Bool {
        func rank(_ value: DatabaseValue) -> Int {
            switch value.storage {
            case .null: 0
            case .int64, .double: 1
            case .string: 2
            case .blob: 3
            }
        }
        switch (value.storage, other.storage) {
        case (.int64(let a), .int64(let b)): return a > b
        case (.int64(let a), .double(let b)): return Double(a) > b
        case (.double(let a), .int64(let b)): return a > Double(b)
        case (.double(let a), .double(let b)): return a > b
        case (.string(let a), .string(let b)): return a > b
        case (.blob(let a), .blob(let b)): return a.lexicographicallyPrecedes(b) == false && a != b
        default: return rank(value) > rank(other)
        }
    }

    // MARK: Kept records

    /// The store's tables of whole records, keyed by record ID.
    enum RecordTable: String {
        case kept = "logsync_kept"
        case shares = "logsync_shares"
    }

    /// Deletes a record's row from one of the store's record tables.
    func forget(_ id: Record.ID, in table: RecordTable, _ db: Database) throws {
        try db.cachedExecute(
            "DELETE FROM \(table.rawValue) WHERE name = ? AND zone = ? AND owner = ?",
            [id.recordName, id.zoneID.zoneName, id.zoneID.ownerName])
    }

    func keep(_ record: Record, shared: Bool, why: String, _ db: Database) throws {
        let zoneID = record.recordID.zoneID
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO logsync_kept(name, zone, owner, shared, type, why, record)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                record.recordID.recordName, zoneID.zoneName, zoneID.ownerName, shared, record.recordType, why,
                try JSONEncoder().encode(record),
            ])
    }

    /// Applies the kept records that now can go in (their table declared, their parent
    /// arrived), until none can; returns the saves to queue again and the rows applied.
    func retryKept(_ db: Database) throws -> (requeue: [Record.ID], rows: [String: Set<String>]) {
        var requeue: [Record.ID] = []
        var rows: [String: Set<String>] = [:]
        while true {
            let kept = try Row.fetchAll(db, sql: "SELECT shared, type, record FROM logsync_kept")
                .filter { byRecordType[$0["type"] as String] != nil }
            var progress = false
            for row in kept {
                let record = try JSONDecoder().decode(Record.self, from: row["record"] as Data)
                if case .applied(let unsaved) = try apply(record, shared: row["shared"], db) {
                    progress = true
                    if unsaved { requeue.append(record.recordID) }
                    if let (key, table) = TableSchema.split(record.recordID.recordName) {
                        rows[table, default: []].insert(key)
                    }
                }
            }
            if !progress { return (requeue, rows) }
        }
    }

    /// ``retryKept(_:)`` in a transaction of its own (on open: a table declared by this version).
    func retryKept() throws {
        let kept = try applying { db in try retryKept(db) }
        if !kept.requeue.isEmpty { try handOff() }
        if !kept.rows.isEmpty { notify(AppliedChanges(reason: .serverChange, rows: kept.rows)) }
    }

    func keepShare(_ record: Record, shared: Bool, _ db: Database) throws {
        let zoneID = record.recordID.zoneID
        try db.execute(
            sql: "INSERT OR REPLACE INTO logsync_shares(name, zone, owner, shared, record) VALUES (?, ?, ?, ?, ?)",
            arguments: [
                record.recordID.recordName, zoneID.zoneName, zoneID.ownerName, shared, try JSONEncoder().encode(record),
            ])
    }
}
