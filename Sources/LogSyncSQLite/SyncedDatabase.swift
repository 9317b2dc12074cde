import Foundation
import GRDB
import LogSync
import Synchronization

/// SQLite tables that sync themselves through a `SyncEngine`.
///
/// ```swift
/// let store = try SyncedDatabase(
///     path: "notes.sqlite", tables: [SyncedTable("folders"), SyncedTable("notes", parent: "folderID")],
///     privateDatabase: client.database(scope: .private), logDirectory: logs)
/// try store.writer.write { db in
///     try db.execute(sql: "INSERT INTO notes(id, folderID, title) VALUES (?, ?, ?)", arguments: [id, folder, "Groceries"])
/// }
/// try await store.sync()
/// ```
///
/// The app reads and writes its tables with GRDB as it always does (``writer``); the store does
/// the rest:
/// - **Local writes** are captured by triggers in the transaction that makes them (the row into
///   `logsync_outbox`, the columns it changed into `logsync_unsaved`), then handed to the engine
///   as pending changes (``handOff()``, after every commit and on open): a process killed
///   between the commit and the engine's append hands them off when it opens again.
/// - **Fetched changes** are applied in one transaction per fetched page, parents before
///   children, deletions cascading as the schema says; a `ValueObservation` sees them as any
///   other change. A row whose parent has not arrived waits in `logsync_kept` until it does.
/// - **Conflicts** are settled by each table's ``ConflictPolicy``.
/// - **Unknown things are kept**: a record of a type no table declares is kept in `logsync_kept`
///   (and applied once a later version declares its table); fields a table lacks stay on the
///   server, because a save sends only the columns that changed.
/// - **Refusals** (a row the server will not take) are kept in ``refusals()``, the row untouched.
///
/// Every change is an entry in the engines' device logs, so `logtool` dumps, replays and blames
/// the store's history like any engine's.
public final class SyncedDatabase: Sendable {
    /// The SQLite database; read and write the synced tables through it.
    public let writer: any DatabaseWriter
    /// The engine of the user's private database.
    public var privateEngine: SyncEngine { engines.withLock { $0.private! } }
    /// The engine of the shared database (rows other users share), if the store has one.
    public var sharedEngine: SyncEngine? { engines.withLock { $0.shared } }

    let schemas: [String: TableSchema]
    /// Table names, parents before children.
    let order: [String]
    let byRecordType: [String: String]
    let sharedDatabase: (any CloudDatabase)?
    /// Where blobs sent as assets are written.
    let assetDirectory: URL
    let options: Options
    private let engines = Mutex<(private: SyncEngine?, shared: SyncEngine?)>((nil, nil))
    private let delegates: [ScopeDelegate]
    private let handOffLock = Mutex<Void>(())
    private let observers = Mutex<[UUID: @Sendable (AppliedChanges) -> Void]>([:])
    private let eventObservers = Mutex<[UUID: @Sendable (SyncEngine.Event, DatabaseScope) -> Void]>([:])
    private let commitWatcher: CommitWatcher

    /// What the store does where apps differ.
    public struct Options: Sendable {
        /// Changes the engines' configuration (manual sync, a test clock, an asset cache).
        public var configure: @Sendable (inout SyncEngine.Configuration) -> Void
        /// Whether every commit that touches a synced table hands its changes to the engine at
        /// once (the default). `false`: only ``handOff()``, ``sync()`` and opening do.
        public var handsOffOnCommit: Bool

        public init(
            configure: @escaping @Sendable (inout SyncEngine.Configuration) -> Void = { _ in },
            handsOffOnCommit: Bool = true
        ) {
            self.configure = configure
            self.handsOffOnCommit = handsOffOnCommit
        }
    }

    /// Opens (or creates) the SQLite file at `path`, in write-ahead-log mode, runs `migrate`,
    /// and syncs `tables` through engines whose device logs are in `logDirectory` (`private/`,
    /// `shared/`).
    ///
    /// - Throws: ``SyncedDatabaseError/corruptDatabase(path:message:)`` for a file that is not a
    ///   SQLite database; the other ``SyncedDatabaseError``s for declarations the tables do not
    ///   fit; the engines' errors for their logs.
    public convenience init(
        path: String, tables: [SyncedTable], privateDatabase: any CloudDatabase,
        sharedDatabase: (any CloudDatabase)? = nil, logDirectory: URL, options: Options = Options(),
        migrate: ((Database) throws -> Void)? = nil
    ) throws {
        let queue: DatabaseQueue
        do {
            // Write-ahead logging: a fetched page's commit syncs once instead of copying its
            // pages to a journal first (about twice the initial sync's speed, Performance.md),
            // and readers of the file (the app's DatabasePool, the sqlite3 shell) never wait
            // for the store's writes. The file comes with its `-wal` and `-shm` files.
            var configuration = Configuration()
            configuration.journalMode = .wal
            queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.write { db in
                // The first read of the header: a damaged file fails here.
                _ = try Int.fetchOne(db, sql: "PRAGMA schema_version")
                try migrate?(db)
            }
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) {
            throw SyncedDatabaseError.corruptDatabase(path: path, message: error.message ?? "\(error.resultCode)")
        }
        try self.init(
            writer: queue, tables: tables, privateDatabase: privateDatabase, sharedDatabase: sharedDatabase,
            logDirectory: logDirectory, options: options)
    }

    /// Syncs `tables` of a database the app opened itself (a `DatabaseQueue` or `DatabasePool`).
    public init(
        writer: any DatabaseWriter, tables: [SyncedTable], privateDatabase: any CloudDatabase,
        sharedDatabase: (any CloudDatabase)? = nil, logDirectory: URL, options: Options = Options()
    ) throws {
        self.writer = writer
        self.options = options
        self.sharedDatabase = sharedDatabase
        self.assetDirectory = logDirectory.appendingPathComponent("outgoing-assets", isDirectory: true)
        var seen = Set<String>()
        for table in tables {
            guard seen.insert(table.name).inserted, seen.insert("type:" + table.recordType).inserted else {
                throw SyncedDatabaseError.duplicateDeclaration(table.name)
            }
        }
        let names = Set(tables.map(\.name))
        let (schemas, order, added): ([String: TableSchema], [String], [String: Set<String>])
        do {
            (schemas, order, added) = try Self.install(tables, names: names, in: writer)
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) {
            throw SyncedDatabaseError.corruptDatabase(
                path: writer.path, message: error.message ?? "\(error.resultCode)")
        }
        self.schemas = schemas
        self.order = order
        self.byRecordType = Dictionary(uniqueKeysWithValues: tables.map { ($0.recordType, $0.name) })
        commitWatcher = CommitWatcher()
        delegates = [ScopeDelegate(scope: .private), ScopeDelegate(scope: .shared)]
        for delegate in delegates { delegate.store = self }
        func engine(_ database: any CloudDatabase, _ delegate: ScopeDelegate, _ folder: String) throws -> SyncEngine {
            var configuration = SyncEngine.Configuration(
                database: database, logDirectory: logDirectory.appendingPathComponent(folder, isDirectory: true),
                delegate: delegate)
            options.configure(&configuration)
            return try SyncEngine(configuration)
        }
        let privateEngine = try engine(privateDatabase, delegates[0], "private")
        let sharedEngine = try sharedDatabase.map { try engine($0, delegates[1], "shared") }
        engines.withLock { $0 = (privateEngine, sharedEngine) }
        commitWatcher.store = self
        if options.handsOffOnCommit { writer.add(transactionObserver: commitWatcher, extent: .databaseLifetime) }
        try fillNewColumns(added)
        try handOff()
        try retryKept()
    }

    /// Creates the store's tables and each synced table's triggers; reads the tables' shapes.
    private static func install(
        _ tables: [SyncedTable], names: Set<String>, in writer: any DatabaseWriter
    ) throws -> ([String: TableSchema], [String], [String: Set<String>]) {
        try writer.write { db in
            try db.execute(sql: StoreTables.create)
            var schemas: [String: TableSchema] = [:]
            var added: [String: Set<String>] = [:]
            for table in tables {
                let schema = try TableSchema.read(table, synced: names, in: db)
                schemas[table.name] = schema
                let columns = schema.columns.map(\.name)
                if let before = try String.fetchOne(
                    db, sql: "SELECT columns FROM logsync_tables WHERE tbl = ?", arguments: [table.name])
                {
                    let new = Set(columns).subtracting(before.split(separator: ",").map(String.init))
                    if !new.isEmpty { added[table.name] = new }
                }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO logsync_tables(tbl, columns) VALUES (?, ?)",
                    arguments: [table.name, columns.joined(separator: ",")])
            }
            let forms = schemas.mapValues(\.keyForm)
            for name in schemas.keys { schemas[name]?.referenceForms = forms }
            for schema in schemas.values {
                for trigger in schema.triggerNames {
                    try db.execute(sql: "DROP TRIGGER IF EXISTS \(trigger.quotedDatabaseIdentifier)")
                }
                for trigger in schema.triggers { try db.execute(sql: trigger) }
            }
            return (schemas, Self.parentsFirst(schemas), added)
        }
    }

    /// Fills the columns a new version of the app added to a synced table from the fields the
    /// server already held for each row (another device's newer version wrote them, or this
    /// device kept them unknowingly): a new column syncs from its first open.
    private func fillNewColumns(_ added: [String: Set<String>]) throws {
        for (table, columns) in added {
            guard let schema = schemas[table] else { continue }
            let rows = try writer.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT pk, zone, owner, shared FROM logsync_rows WHERE tbl = ?", arguments: [table])
            }
            try applying { db in
                for row in rows {
                    let key: DatabaseValue = row["pk"]
                    let place = Place(zone: row["zone"], owner: row["owner"], shared: row["shared"])
                    guard let text = TableSchema.text(key), let engine = engine(shared: place.shared),
                        let known = try engine.deviceLog.lastKnownServerRecord(
                            for: place.recordID(schema.recordName(text)))
                    else { continue }
                    try quiet(table, key, db)
                    for column in schema.columns where columns.contains(column.name) && known[column.name] != nil {
                        try db.execute(
                            sql:
                                "UPDATE \(table.quotedDatabaseIdentifier) SET \(column.name.quotedDatabaseIdentifier) = ? "
                                + "WHERE \(schema.primaryKey.quotedDatabaseIdentifier) = ?",
                            arguments: [schema.column(column, known[column.name]), key])
                    }
                }
            }
        }
    }

    /// The tables ordered so that every table comes after the tables it refers to (a cycle is
    /// broken in declaration order).
    private static func parentsFirst(_ schemas: [String: TableSchema]) -> [String] {
        var order: [String] = []
        var placed = Set<String>()
        func place(_ name: String, _ visiting: Set<String>) {
            guard !placed.contains(name), !visiting.contains(name), let schema = schemas[name] else { return }
            for target in schema.references.values.sorted() where target != name {
                place(target, visiting.union([name]))
            }
            placed.insert(name)
            order.append(name)
        }
        for name in schemas.keys.sorted() { place(name, []) }
        return order
    }

    // MARK: Syncing

    /// Hands local writes to the engines, then sends and fetches on each engine.
    public func sync() async throws {
        try await sendChanges()
        try await fetchChanges()
    }

    /// Hands local writes to the engines and sends them.
    ///
    /// A send some of whose rows the server refused does not throw: a conflict is merged (and
    /// its save queued again), a refusal kept in ``refusals()``, each as its row's table says.
    /// Anything else (the network, the account) throws.
    public func sendChanges() async throws {
        try handOff()
        for engine in allEngines {
            do {
                try await engine.sendChanges()
            } catch let error as SyncError where error.code == .partialFailure {
                continue
            }
        }
    }

    /// Fetches on each engine (shared after private).
    public func fetchChanges() async throws {
        for engine in allEngines { try await engine.fetchChanges() }
    }

    var allEngines: [SyncEngine] { engines.withLock { [$0.private, $0.shared].compactMap { $0 } } }

    func engine(shared: Bool) -> SyncEngine? { engines.withLock { shared ? $0.shared : $0.private } }

    /// Hands every captured write to the engines: each written row becomes a pending save or
    /// deletion of its record, each new zone of the private database a pending zone save. Runs
    /// after every commit that touches a synced table and on open; safe to run again (the
    /// engine keeps a change once, F18), so a process killed half-way loses nothing.
    public func handOff() throws {
        try handOffLock.withLock { _ in
            let (changes, last, newZones) = try writer.write { db in try self.pendingChanges(db) }
            guard let last else { return }
            if !newZones.isEmpty {
                try privateEngine.state.add(
                    pendingDatabaseChanges: newZones.map { .saveZone(RecordZone(zoneID: RecordZone.ID(zoneName: $0))) })
            }
            for shared in [false, true] {
                guard let changes = changes[shared], !changes.isEmpty else { continue }
                try engine(shared: shared)?.state.add(pendingRecordZoneChanges: changes)
            }
            try writer.write { db in
                try db.execute(sql: "DELETE FROM logsync_outbox WHERE seq <= ?", arguments: [last])
                for zone in newZones {
                    try db.execute(sql: "INSERT OR IGNORE INTO logsync_zones(zone) VALUES (?)", arguments: [zone])
                }
            }
        }
    }

    /// The outbox as the engines' pending changes, by scope (shared or not); its last
    /// sequence number; the private zones not yet asked for.
    private func pendingChanges(
        _ db: Database
    ) throws -> ([Bool: [SyncEngine.PendingRecordZoneChange]], Int64?, [String]) {
        let rows = try Row.fetchAll(db, sql: "SELECT seq, tbl, pk, deleted FROM logsync_outbox ORDER BY seq")
        var changes: [Bool: [SyncEngine.PendingRecordZoneChange]] = [:]
        var zones: [String] = []
        let known = Set(try String.fetchAll(db, sql: "SELECT zone FROM logsync_zones"))
        for row in rows {
            let table: String = row["tbl"]
            let key: DatabaseValue = row["pk"]
            let deleted: Bool = row["deleted"]
            guard let schema = schemas[table], let text = TableSchema.text(key) else { continue }
            if deleted {
                // A newer server copy waiting for its parent is moot: the row is gone here, and
                // its deletion goes to the server.
                try db.cachedExecute("DELETE FROM logsync_kept WHERE name = ?", [schema.recordName(text)])
                guard let place = try self.place(of: table, key, db) else { continue }  // never synced
                changes[place.shared, default: []].append(.deleteRecord(place.recordID(schema.recordName(text))))
                continue
            }
            let place: Place?
            do {
                place = try self.placeNewRow(schema, key: key, text: text, db)
            } catch let error as SyncedDatabaseError {
                // A key that cannot name a record: the row stays here, reported; the others go.
                try db.execute(
                    sql: "INSERT INTO logsync_refusals(tbl, pk, deletion, code, message) VALUES (?, ?, 0, ?, ?)",
                    arguments: [table, text, SyncError.Code.invalidArguments.rawValue, error.description])
                continue
            }
            guard let place else { continue }
            if !place.shared, !known.contains(place.zone), !zones.contains(place.zone) { zones.append(place.zone) }
            changes[place.shared, default: []].append(.saveRecord(place.recordID(schema.recordName(text))))
        }
        return (changes, rows.last?["seq"], zones)
    }

    /// Where a synced row is: its zone, owner and database.
    struct Place: Hashable {
        let zone: String
        let owner: String
        let shared: Bool
        var zoneID: RecordZone.ID { RecordZone.ID(zoneName: zone, ownerName: owner) }
        func recordID(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: zoneID) }
    }

    func place(of table: String, _ key: DatabaseValue, _ db: Database) throws -> Place? {
        try db.cachedRow("SELECT zone, owner, shared FROM logsync_rows WHERE tbl = ? AND pk = ?", [table, key]).map {
            Place(zone: $0["zone"], owner: $0["owner"], shared: $0["shared"])
        }
    }

    func setPlace(_ place: Place, of table: String, _ key: DatabaseValue, _ db: Database) throws {
        try db.cachedExecute(
            "INSERT OR REPLACE INTO logsync_rows(tbl, pk, zone, owner, shared) VALUES (?, ?, ?, ?, ?)",
            [table, key, place.zone, place.owner, place.shared])
    }

    /// The place of a row written here: where it already is, else its parent's (a row added
    /// below a shared row goes to the share's zone), else its table's zone rule. `nil` for a
    /// row gone since (its deletion follows in the outbox).
    private func placeNewRow(_ schema: TableSchema, key: DatabaseValue, text: String, _ db: Database) throws -> Place? {
        if let place = try place(of: schema.name, key, db) { return place }
        guard let row = try schema.row(key, db) else { return nil }
        try Self.checkRecordName(schema, text)
        var place = Place(zone: "Default", owner: RecordZone.ID.defaultOwnerName, shared: false)
        if let parent = schema.declaration.parent, let target = schema.references[parent],
            let parentPlace = try self.place(of: target, row[parent] as DatabaseValue, db)
        {
            place = parentPlace
        } else {
            switch schema.declaration.zone {
            case .named(let zone): place = Place(zone: zone, owner: RecordZone.ID.defaultOwnerName, shared: false)
            case .column(let column):
                let zone = TableSchema.text(row[column] as DatabaseValue) ?? "Default"
                place = Place(zone: zone, owner: RecordZone.ID.defaultOwnerName, shared: false)
            }
        }
        try setPlace(place, of: schema.name, key, db)
        return place
    }

    static func checkRecordName(_ schema: TableSchema, _ key: String) throws {
        let name = schema.recordName(key)
        if key.isEmpty {
            throw SyncedDatabaseError.invalidPrimaryKey(table: schema.name, primaryKey: key, reason: "it is empty")
        }
        if !name.allSatisfy(\.isASCII) {
            throw SyncedDatabaseError.invalidPrimaryKey(
                table: schema.name, primaryKey: key, reason: "a record name is ASCII only")
        }
        if name.utf8.count > 255 {
            throw SyncedDatabaseError.invalidPrimaryKey(
                table: schema.name, primaryKey: key, reason: "its record name \"\(name)\" is longer than 255 bytes")
        }
    }

    // MARK: What the app observes

    /// What one applied page of fetched changes (or another event) changed, for observers.
    public struct AppliedChanges: Sendable, Hashable {
        /// Why the rows changed.
        public enum Reason: Sendable, Hashable {
            /// Fetched from the server.
            case serverChange
            /// The server refused a save for lack of room (`quotaExceeded`).
            case quotaViolation
            /// The account signed out or changed.
            case accountChange
        }
        public var reason: Reason
        /// Table → primary keys (as text) of rows saved or deleted.
        public var rows: [String: Set<String>]
        /// With ``Reason/serverChange``: whether the page came from the first fetch of its zone
        /// (this device's first download of it, or the first for this account since an account
        /// change), as `NSUbiquitousKeyValueStoreInitialSyncChange` tells apart.
        public var initialSync: Bool = false
        /// With ``Reason/accountChange``: how the account changed (F105).
        public var accountChange: SyncEngine.Event.AccountChange.ChangeType? = nil
        /// Whether the shared database's engine made them (rows of shares accepted; the account
        /// change as that engine saw it), not the private database's.
        public var shared: Bool = false
    }

    /// Calls `observer` after each applied page and each refusal or account change, on the
    /// engine's task; returns a token for ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (AppliedChanges) -> Void) -> UUID {
        let token = UUID()
        observers.withLock { $0[token] = observer }
        return token
    }

    /// Calls `observer` with each event of the store's engines, once the store has handled it
    /// (fetched rows applied, a conflict settled, a refused row restored and kept in
    /// ``refusals()``), on the engine's task: what an app needs to tell its user what happened
    /// to a row (saved, fetched, merged, refused) reads the rows as they now are. Returns a token
    /// for ``removeObserver(_:)``.
    @discardableResult
    public func addEventObserver(
        _ observer: @escaping @Sendable (_ event: SyncEngine.Event, _ scope: DatabaseScope) -> Void
    ) -> UUID {
        let token = UUID()
        eventObservers.withLock { $0[token] = observer }
        return token
    }

    /// Stops calling an observer (of applied changes or of events).
    public func removeObserver(_ token: UUID) {
        _ = observers.withLock { $0.removeValue(forKey: token) }
        _ = eventObservers.withLock { $0.removeValue(forKey: token) }
    }

    func notify(_ event: SyncEngine.Event, scope: DatabaseScope) {
        for observer in eventObservers.withLock({ Array($0.values) }) { observer(event, scope) }
    }

    func notify(_ changes: AppliedChanges) {
        for observer in observers.withLock({ Array($0.values) }) { observer(changes) }
    }

    /// The rows the server refused for good, oldest first.
    public func refusals() throws -> [RowRefusal] {
        try writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM logsync_refusals ORDER BY seq").map {
                RowRefusal(
                    table: $0["tbl"], primaryKey: $0["pk"], deletion: $0["deletion"],
                    code: SyncError.Code(rawValue: $0["code"]), message: $0["message"])
            }
        }
    }

    /// Forgets the refusals reported so far.
    public func clearRefusals() throws {
        try writer.write { try $0.execute(sql: "DELETE FROM logsync_refusals") }
    }

    /// The records kept because no table takes them (an unknown type) or their parent row has
    /// not arrived: `(record type, why)`.
    public func keptRecords() throws -> [(recordType: String, why: String)] {
        try writer.read { db in
            try Row.fetchAll(db, sql: "SELECT type, why FROM logsync_kept ORDER BY type, name").map {
                ($0["type"], $0["why"])
            }
        }
    }
}

/// Hands off after every commit that touched a synced table.
///
/// It watches the outbox, where the capture triggers write, not the synced tables: the store's
/// own writes of fetched changes touch the tables but not the outbox (unless a foreign-key
/// action changed another row), and need no hand-off.
final class CommitWatcher: TransactionObserver, @unchecked Sendable {
    weak var store: SyncedDatabase?
    private var touched = false

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        if case .insert(let table) = eventKind { table == "logsync_outbox" } else { false }
    }

    func databaseDidChange(with event: DatabaseEvent) { touched = true }

    func databaseDidCommit(_ db: Database) {
        guard touched else { return }
        touched = false
        guard let store else { return }
        // After the writer's queue is free: the hand-off writes too. A failure leaves the
        // outbox as it is, for the next hand-off (the next commit, sync or open).
        Task.detached {
            do { try store.handOff() } catch { storeLogger.error("the hand-off after a commit failed: \(error)") }
        }
    }

    func databaseDidRollback(_ db: Database) { touched = false }
}
