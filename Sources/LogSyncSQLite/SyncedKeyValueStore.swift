import Foundation
import GRDB
import LogSync
import SyncModel
import Synchronization

/// A small synced store of settings, as `NSUbiquitousKeyValueStore` is: property-list values
/// by key, on the same engines as the app's synced tables.
///
/// ```swift
/// let store = try SyncedDatabase(
///     path: path, tables: [SyncedKeyValueStore.table] + appTables, privateDatabase: database,
///     logDirectory: logs, migrate: { db in
///         try SyncedKeyValueStore.createTable(db)
///         try appMigrations(db)
///     })
/// let settings = try SyncedKeyValueStore(database: store)
/// try settings.set("dark", forKey: "theme")
/// for await change in settings.changes() where change.keys.contains("theme") { … }
/// ```
///
/// The values are rows of one synced table, `logsync_kv`, in a zone of their own
/// (`KeyValueStore`): every set and removal is a local write the store captures and sends, and
/// every change another device made arrives in a fetch, both entries in the device logs that
/// `logtool` dumps, replays and blames. A conflict goes to the later edit
/// (``table`` settles it by the `modified` column); a removal is a deletion of the
/// row, which wins over edits of other devices not sent yet, as in any synced table.
///
/// Limits, as Apple documents them for `NSUbiquitousKeyValueStore`: at most
/// ``maximumKeyCount`` keys, a key at most ``maximumKeyBytes`` bytes of UTF-8, and at most
/// ``maximumTotalBytes`` bytes of keys and values together (1 MB, decimal, as the server's limits
/// are). A write that would pass one throws a ``KeyValueStoreError`` naming the key and the limit,
/// and writes nothing.
public final class SyncedKeyValueStore: Sendable {
    /// The SQLite table holding the values.
    public static let tableName = "logsync_kv"
    /// The zone of the private database the values are in.
    public static let zoneName = "KeyValueStore"
    /// The record type of a value.
    public static let recordType = "KeyValue"

    /// The declaration to pass to ``SyncedDatabase`` with the app's tables: `logsync_kv` in zone
    /// `KeyValueStore`, each row a record of type `KeyValue`, a conflict won by the later
    /// `modified` date (last edit wins, as `NSUbiquitousKeyValueStore` settles one).
    public static let table = SyncedTable(
        tableName, recordType: recordType, zone: .named(zoneName), conflicts: .lastEditWins(by: "modified")
    )
    .column("value", as: .json)

    /// Creates the values' table if it is not there; call it from the `migrate` closure given
    /// to ``SyncedDatabase``.
    ///
    /// `key` is the key as its record's name holds it (``recordKey(_:)``), `value` the
    /// value's JSON, `modified` the seconds since 1970 of its last set.
    public static func createTable(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS \(tableName)(
                  key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, modified REAL NOT NULL)
                """)
    }

    /// The most keys the store holds.
    public static let maximumKeyCount = 1_024
    /// The longest key, in bytes of UTF-8.
    public static let maximumKeyBytes = 64
    /// The most bytes of keys (UTF-8) and values (their stored JSON) together: 1 MB.
    public static let maximumTotalBytes = 1_000_000
    /// The largest value, in bytes of its stored JSON: what fits in one record with its
    /// modification date (a record holds at most 1 MB of fields, F134).
    public static let maximumValueBytes = Limits.maxRecordBytes - "value".utf8.count - "modified".utf8.count - 8

    /// The synced database the values are in.
    public let database: SyncedDatabase
    private let now: @Sendable () -> Date
    private let observers = Mutex<[UUID: @Sendable (Change) -> Void]>([:])
    private let observation = Mutex<UUID?>(nil)

    /// A change made by another device, or by the account, as
    /// `NSUbiquitousKeyValueStore.didChangeExternallyNotification` reports one.
    public struct Change: Sendable, Hashable {
        /// Why the values changed.
        public enum Reason: Sendable, Hashable {
            /// Another device set or removed them (`NSUbiquitousKeyValueStoreServerChange`).
            case serverChange
            /// They arrived with the first fetch of the store's zone: this device's first
            /// download, or the first for the account signed in since
            /// (`NSUbiquitousKeyValueStoreInitialSyncChange`).
            case initialSyncChange
            /// The server refused them for lack of room (`quotaExceeded`, F97, F153): the values
            /// stay on this device, and are sent again with the next send
            /// (`NSUbiquitousKeyValueStoreQuotaViolationChange`).
            case quotaViolation
            /// The account changed (F105): after a sign-out or a switch, the previous account's
            /// values are removed from this device (``keys`` names them) and the new account's
            /// arrive with its first fetch; after a sign-in, the values set while signed out
            /// are sent to the account (`NSUbiquitousKeyValueStoreAccountChange`).
            case accountChange
        }

        /// Why.
        public var reason: Reason
        /// The keys changed, sorted.
        public var keys: [String]

        public init(reason: Reason, keys: [String]) {
            self.reason = reason
            self.keys = keys
        }
    }

    /// The store of the values in `database`, which must sync ``table``.
    ///
    /// - Parameters:
    ///   - database: The synced database, opened with ``table`` among its tables.
    ///   - now: The clock of modification dates (a test's own); the system clock by default.
    /// - Throws: ``KeyValueStoreError/tableNotSynced`` if `database` was opened without
    ///   ``table``.
    public init(database: SyncedDatabase, now: @escaping @Sendable () -> Date = { Date() }) throws {
        guard database.schemas[Self.tableName] != nil else { throw KeyValueStoreError.tableNotSynced }
        self.database = database
        self.now = now
        let token = database.addObserver { [weak self] changes in self?.received(changes) }
        observation.withLock { $0 = token }
    }

    deinit {
        if let token = observation.withLock({ $0 }) { database.removeObserver(token) }
    }

    // MARK: Reading

    /// The value of `key`, or `nil` if it has none.
    ///
    /// - Throws: ``KeyValueStoreError/corruptValue(key:message:)`` if the stored bytes are not
    ///   a value; GRDB's errors if the database cannot be read.
    public func value(forKey key: String) throws -> KeyValue? {
        let stored = try database.writer.read { db in
            try DatabaseValue.fetchOne(
                db, sql: "SELECT value FROM \(Self.tableName) WHERE key = ?", arguments: [Self.recordKey(key)])
        }
        return try stored.map { try Self.decode($0, key: key) }
    }

    /// Every key and its value (`NSUbiquitousKeyValueStore.dictionaryRepresentation`).
    ///
    /// - Throws: ``KeyValueStoreError/corruptValue(key:message:)`` naming the first key whose
    ///   stored bytes are not a value.
    public var dictionaryRepresentation: [String: KeyValue] {
        get throws {
            let rows = try database.writer.read { db in
                try Row.fetchAll(db, sql: "SELECT key, value FROM \(Self.tableName) ORDER BY key")
            }
            var values: [String: KeyValue] = [:]
            for row in rows {
                let key = Self.key(fromRecordKey: row["key"])
                values[key] = try Self.decode(row["value"], key: key)
            }
            return values
        }
    }

    /// The text of `key`, or `nil` if it has none or another kind of value.
    public func string(forKey key: String) throws -> String? {
        if case .string(let value)? = try value(forKey: key) { value } else { nil }
    }

    /// The integer of `key` (`longLong(forKey:)`), or `nil` if it has none or another kind of
    /// value.
    public func int(forKey key: String) throws -> Int64? {
        if case .int(let value)? = try value(forKey: key) { value } else { nil }
    }

    /// The double of `key` (an integer's too), or `nil` if it has none or another kind of value.
    public func double(forKey key: String) throws -> Double? {
        switch try value(forKey: key) {
        case .double(let value)?: value
        case .int(let value)?: Double(value)
        default: nil
        }
    }

    /// The Boolean of `key`, or `nil` if it has none or another kind of value.
    public func bool(forKey key: String) throws -> Bool? {
        if case .bool(let value)? = try value(forKey: key) { value } else { nil }
    }

    /// The bytes of `key`, or `nil` if it has none or another kind of value.
    public func data(forKey key: String) throws -> Data? {
        if case .data(let value)? = try value(forKey: key) { value } else { nil }
    }

    /// The date of `key`, or `nil` if it has none or another kind of value.
    public func date(forKey key: String) throws -> Date? {
        if case .date(let value)? = try value(forKey: key) { value } else { nil }
    }

    /// The list of `key`, or `nil` if it has none or another kind of value.
    public func array(forKey key: String) throws -> [KeyValue]? {
        if case .array(let value)? = try value(forKey: key) { value } else { nil }
    }

    /// The dictionary of `key`, or `nil` if it has none or another kind of value.
    public func dictionary(forKey key: String) throws -> [String: KeyValue]? {
        if case .dictionary(let value)? = try value(forKey: key) { value } else { nil }
    }

    // MARK: Writing

    /// Sets `key` to `value` (`nil` removes it), in one transaction that the store syncs.
    ///
    /// - Throws: ``KeyValueStoreError`` if the key or the value passes a limit, with nothing
    ///   written; GRDB's errors if the database cannot be written.
    public func set(_ value: KeyValue?, forKey key: String) throws {
        guard let value else { return try removeValue(forKey: key) }
        try Self.check(key)
        let bytes = try value.encoded()
        if bytes.count > Self.maximumValueBytes {
            throw KeyValueStoreError.valueTooLarge(key: key, bytes: bytes.count, limit: Self.maximumValueBytes)
        }
        let recordKey = Self.recordKey(key)
        let modified = now().timeIntervalSince1970
        try database.writer.write { db in
            var count = 1
            var total = key.utf8.count + bytes.count
            for row in try Row.fetchAll(
                db, sql: "SELECT key, length(CAST(value AS BLOB)) AS size FROM \(Self.tableName) WHERE key != ?",
                arguments: [recordKey])
            {
                count += 1
                total += Self.key(fromRecordKey: row["key"]).utf8.count + (row["size"] as Int? ?? 0)
            }
            if count > Self.maximumKeyCount {
                throw KeyValueStoreError.tooManyKeys(key: key, limit: Self.maximumKeyCount)
            }
            if total > Self.maximumTotalBytes {
                throw KeyValueStoreError.storeFull(key: key, bytes: total, limit: Self.maximumTotalBytes)
            }
            // An update, else an insert: an upsert's conflict clause would override the capture
            // triggers' own (`INSERT OR IGNORE`) and fail on a column already unsaved.
            let json = String(decoding: bytes, as: UTF8.self)
            try db.execute(
                sql: "UPDATE \(Self.tableName) SET value = ?, modified = ? WHERE key = ?",
                arguments: [json, modified, recordKey])
            if db.changesCount == 0 {
                try db.execute(
                    sql: "INSERT INTO \(Self.tableName)(key, value, modified) VALUES (?, ?, ?)",
                    arguments: [recordKey, json, modified])
            }
        }
    }

    /// Removes `key` and its value (`removeObject(forKey:)`); nothing if it has none.
    public func removeValue(forKey key: String) throws {
        try database.writer.write { db in
            try db.execute(sql: "DELETE FROM \(Self.tableName) WHERE key = ?", arguments: [Self.recordKey(key)])
        }
    }

    /// Hands the writes to the engine, sends them and fetches the other devices'
    /// (`synchronize()`; ``SyncedDatabase/sync()`` of every table).
    public func synchronize() async throws { try await database.sync() }

    // MARK: Observing

    /// Calls `observer` with each change another device or the account made, on the engine's
    /// task; returns a token for ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (Change) -> Void) -> UUID {
        let token = UUID()
        observers.withLock { $0[token] = observer }
        return token
    }

    /// Stops calling an observer.
    public func removeObserver(_ token: UUID) { _ = observers.withLock { $0.removeValue(forKey: token) } }

    /// The changes another device or the account makes from now on, until the stream's
    /// consumer stops.
    public func changes() -> AsyncStream<Change> {
        let (stream, continuation) = AsyncStream.makeStream(of: Change.self)
        let token = addObserver { continuation.yield($0) }
        continuation.onTermination = { [weak self] _ in self?.removeObserver(token) }
        return stream
    }

    private func deliver(_ change: Change) {
        for observer in observers.withLock({ Array($0.values) }) { observer(change) }
    }

    /// The store's changes as the values': the rows of `logsync_kv` by their keys, the reason
    /// as `NSUbiquitousKeyValueStore` names it.
    private func received(_ changes: SyncedDatabase.AppliedChanges) {
        let keys = (changes.rows[Self.tableName] ?? []).map(Self.key(fromRecordKey:)).sorted()
        switch changes.reason {
        case .serverChange where !keys.isEmpty:
            deliver(Change(reason: changes.initialSync ? .initialSyncChange : .serverChange, keys: keys))
        case .quotaViolation where !keys.isEmpty:
            deliver(Change(reason: .quotaViolation, keys: keys))
        case .accountChange where !changes.shared:
            // The private database's engine: the shared one reports the same change apart.
            do {
                if case .signIn = changes.accountChange {
                    try sendAllAgain()
                    deliver(Change(reason: .accountChange, keys: []))
                } else {
                    deliver(Change(reason: .accountChange, keys: try removeAll()))
                }
            } catch {
                storeLogger.error("the key-value store could not take an account change: \(error)")
            }
        default:
            break
        }
    }

    /// Removes every value without syncing the removal (the values are the previous
    /// account's); returns their keys.
    private func removeAll() throws -> [String] {
        guard let schema = database.schemas[Self.tableName] else { return [] }
        return try database.applying { db in
            let stored = try String.fetchAll(db, sql: "SELECT key FROM \(Self.tableName)")
            for key in stored { try database.deleteRow(schema, key.databaseValue, db) }
            try db.execute(sql: "DELETE FROM logsync_outbox WHERE tbl = ?", arguments: [Self.tableName])
            try db.execute(sql: "DELETE FROM logsync_zones WHERE zone = ?", arguments: [Self.zoneName])
            return stored.map(Self.key(fromRecordKey:)).sorted()
        }
    }

    /// Queues every value to be sent whole (the account signed in: the engine forgot what it
    /// had pending, F106).
    private func sendAllAgain() throws {
        try database.writer.write { db in
            try db.execute(
                sql: "INSERT INTO logsync_outbox(tbl, pk, deleted) SELECT ?, key, 0 FROM \(Self.tableName)",
                arguments: [Self.tableName])
            for column in ["value", "modified"] {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO logsync_unsaved(tbl, pk, col) SELECT ?, key, ? FROM \(Self.tableName)",
                    arguments: [Self.tableName, column])
            }
            try db.execute(sql: "DELETE FROM logsync_zones WHERE zone = ?", arguments: [Self.zoneName])
        }
        try database.handOff()
    }

    // MARK: Keys and values

    /// Checks a key against the limits.
    static func check(_ key: String) throws {
        if key.isEmpty { throw KeyValueStoreError.emptyKey }
        let bytes = key.utf8.count
        if bytes > maximumKeyBytes {
            throw KeyValueStoreError.keyTooLong(key: key, bytes: bytes, limit: maximumKeyBytes)
        }
    }

    /// A key as its row's primary key and its record's name hold it: printable ASCII as it is
    /// but `%` and a leading `_`, every other byte of its UTF-8 as `%XX` (a record name is ASCII
    /// and does not start with `_`, F126). At most 192 characters for a key of 64 bytes.
    public static func recordKey(_ key: String) -> String {
        let hex = Array("0123456789ABCDEF")
        var text = ""
        for (offset, byte) in key.utf8.enumerated() {
            // A record name does not start with `_` (F126).
            if byte > 0x20, byte < 0x7F, byte != UInt8(ascii: "%"), offset > 0 || byte != UInt8(ascii: "_") {
                text.append(Character(Unicode.Scalar(byte)))
            } else {
                text += "%\(hex[Int(byte >> 4)])\(hex[Int(byte & 0xF)])"
            }
        }
        return text
    }

    /// The key a ``recordKey(_:)`` holds (text that is not one, as it is).
    public static func key(fromRecordKey text: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
                let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A stored value, or a typed error naming its key.
    static func decode(_ stored: DatabaseValue, key: String) throws -> KeyValue {
        let bytes: Data
        switch stored.storage {
        case .string(let text): bytes = Data(text.utf8)
        case .blob(let data): bytes = data
        default: throw KeyValueStoreError.corruptValue(key: key, message: "the stored value is \(stored), not JSON")
        }
        do {
            return try JSONDecoder().decode(KeyValue.self, from: bytes)
        } catch {
            throw KeyValueStoreError.corruptValue(key: key, message: "\(error)")
        }
    }
}

/// Why a ``SyncedKeyValueStore`` refused a write or could not read a value.
public enum KeyValueStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The synced database was opened without ``SyncedKeyValueStore/table``.
    case tableNotSynced
    /// A key is empty.
    case emptyKey
    /// A key is longer than `limit` bytes of UTF-8.
    case keyTooLong(key: String, bytes: Int, limit: Int)
    /// Setting `key` would make more than `limit` keys.
    case tooManyKeys(key: String, limit: Int)
    /// Setting `key` would make `bytes` bytes of keys and values, more than `limit`.
    case storeFull(key: String, bytes: Int, limit: Int)
    /// The value of `key` is `bytes` bytes, more than one record holds.
    case valueTooLarge(key: String, bytes: Int, limit: Int)
    /// The stored bytes of `key` are not a value (written by something else than the store).
    case corruptValue(key: String, message: String)

    public var description: String {
        switch self {
        case .tableNotSynced:
            "the synced database does not sync \(SyncedKeyValueStore.tableName): pass SyncedKeyValueStore.table"
        case .emptyKey: "a key is not empty"
        case .keyTooLong(let key, let bytes, let limit): "key \"\(key)\" is \(bytes) bytes of UTF-8, more than \(limit)"
        case .tooManyKeys(let key, let limit): "setting \"\(key)\" would make more than \(limit) keys"
        case .storeFull(let key, let bytes, let limit):
            "setting \"\(key)\" would make \(bytes) bytes of keys and values, more than \(limit)"
        case .valueTooLarge(let key, let bytes, let limit):
            "the value of \"\(key)\" is \(bytes) bytes, more than \(limit)"
        case .corruptValue(let key, let message): "the stored value of \"\(key)\" is not a value: \(message)"
        }
    }
}
