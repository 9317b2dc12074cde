import CLMDB

/// A named table of an environment: sorted byte keys to byte values.
public struct Table: Sendable, Hashable {
    /// The table's name in the environment.
    public let name: String
    let dbi: MDB_dbi
}

/// The bytes LMDB returned, checked to lie within the map before anything reads or copies them.
/// The structural check at open makes this hold for the snapshot it checked; this catches a
/// file damaged after it (by another process) before a copy runs past the map.
func boundedBytes(
    _ value: MDB_val, in environment: OpaquePointer, _ what: StaticString
) throws(LogStoreError) -> UnsafeRawBufferPointer {
    guard value.mv_size > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
    var info = MDB_envinfo()
    mdb_env_info(environment, &info)
    guard let start = value.mv_data, value.mv_size <= info.me_mapsize else {
        throw LogStoreError(
            .corruptFile, "\(what) of \(value.mv_size) bytes is larger than the map of \(info.me_mapsize) bytes")
    }
    return UnsafeRawBufferPointer(start: start, count: value.mv_size)
}

/// A read-only view of the whole environment, valid only inside the `read` closure that gave it.
///
/// Not `Sendable`: a transaction belongs to the closure that received it.
public class ReadTransaction {
    // The MDB_txn*; valid until the closure returns.
    let txn: OpaquePointer
    public let environment: LogEnvironment

    init(txn: OpaquePointer, environment: LogEnvironment) {
        self.txn = txn
        self.environment = environment
    }

    /// LMDB's largest key (the default build's `MDB_MAXKEYSIZE`).
    public static let maxKeySize = 511

    /// The value stored under `key`, or `nil`.
    public func value(forKey key: [UInt8], in table: Table) throws(LogStoreError) -> [UInt8]? {
        try withValue(forKey: key, in: table) { bytes in bytes.map { [UInt8]($0) } }
    }

    /// Calls `body` with the bytes stored under `key` (valid only inside `body`), or `nil`.
    public func withValue<R>(
        forKey key: [UInt8], in table: Table, _ body: (UnsafeRawBufferPointer?) throws(LogStoreError) -> R
    ) throws(LogStoreError) -> R {
        try Self.checkKey(key, table)
        var found = MDB_val()
        let status = key.withUnsafeBytes { keyBytes in
            var k = MDB_val(mv_size: keyBytes.count, mv_data: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress))
            return mdb_get(txn, table.dbi, &k, &found)
        }
        if status == MDB_NOTFOUND { return try body(nil) }
        try check(status, "mdb_get")
        return try body(boundedBytes(found, in: environment.handle, "a value"))
    }

    /// Visits the table's entries in key order, from the first key ≥ `start` (or the first key),
    /// until `body` returns `false`. The buffers are valid only inside `body`.
    public func forEach(
        in table: Table, from start: [UInt8]? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, table.dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var value = MDB_val()
        var status: Int32
        if let start {
            try Self.checkKey(start, table)
            status = start.withUnsafeBytes { startBytes in
                key = MDB_val(
                    mv_size: startBytes.count, mv_data: UnsafeMutableRawPointer(mutating: startBytes.baseAddress))
                return mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
            }
        } else {
            status = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        }
        while status == MDB_SUCCESS {
            let more = try body(
                boundedBytes(key, in: environment.handle, "a key"),
                boundedBytes(value, in: environment.handle, "a value"))
            if !more { return }
            status = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        if status != MDB_NOTFOUND { try check(status, "mdb_cursor_get") }
    }

    /// The number of entries in the table.
    public func count(of table: Table) throws(LogStoreError) -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(txn, table.dbi, &stat), "mdb_stat")
        return stat.ms_entries
    }

    /// The greatest key in the table, copied, or `nil` if the table is empty.
    func lastKey(in table: Table) throws(LogStoreError) -> [UInt8]? {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, table.dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var value = MDB_val()
        let status = mdb_cursor_get(cursor, &key, &value, MDB_LAST)
        if status == MDB_NOTFOUND { return nil }
        try check(status, "mdb_cursor_get")
        return [UInt8](try boundedBytes(key, in: environment.handle, "a key"))
    }

    static func checkKey(_ key: [UInt8], _ table: Table) throws(LogStoreError) {
        guard !key.isEmpty, key.count <= maxKeySize else {
            throw LogStoreError(
                .invalidArgument, "table \"\(table.name)\": a key must hold 1 to \(maxKeySize) bytes, not \(key.count)")
        }
    }
}

@available(*, unavailable)
extension ReadTransaction: Sendable {}

/// The write transaction, valid only inside the `write` closure that gave it.
public final class WriteTransaction: ReadTransaction {
    /// Set when LMDB reported a full map, so `write` grows the map and runs the body again even
    /// if the body caught the error.
    var sawMapFull = false

    /// Converts an LMDB status, remembering a full map.
    func check(_ status: Int32, _ operation: StaticString) throws(LogStoreError) {
        if status == MDB_SUCCESS { return }
        if status == MDB_MAP_FULL { sawMapFull = true }
        throw lmdbError(status, operation)
    }

    /// Stores `value` under `key`, replacing any value there.
    public func put(_ value: [UInt8], forKey key: [UInt8], in table: Table) throws(LogStoreError) {
        try Self.checkKey(key, table)
        let status = key.withUnsafeBytes { keyBytes in
            value.withUnsafeBytes { valueBytes in
                var k = MDB_val(
                    mv_size: keyBytes.count, mv_data: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress))
                var v = MDB_val(
                    mv_size: valueBytes.count, mv_data: UnsafeMutableRawPointer(mutating: valueBytes.baseAddress))
                return mdb_put(txn, table.dbi, &k, &v, 0)
            }
        }
        try check(status, "mdb_put")
    }

    /// Removes the value under `key`; returns whether there was one.
    @discardableResult
    public func removeValue(forKey key: [UInt8], in table: Table) throws(LogStoreError) -> Bool {
        try Self.checkKey(key, table)
        let status = key.withUnsafeBytes { keyBytes in
            var k = MDB_val(mv_size: keyBytes.count, mv_data: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress))
            return mdb_del(txn, table.dbi, &k, nil)
        }
        if status == MDB_NOTFOUND { return false }
        try check(status, "mdb_del")
        return true
    }

    /// Empties the table (its handle stays valid).
    public func removeAll(in table: Table) throws(LogStoreError) {
        try check(mdb_drop(txn, table.dbi, 0), "mdb_drop")
    }
}

/// A cursor that walks a table in key order, copying each pair (for lockstep comparisons).
struct TableWalker: ~Copyable {
    // The MDB_cursor*, closed in deinit.
    private let cursor: OpaquePointer
    private let environment: OpaquePointer
    private var started = false

    init(_ table: Table, in transaction: ReadTransaction) throws(LogStoreError) {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(transaction.txn, table.dbi, &cursor), "mdb_cursor_open")
        self.cursor = cursor!
        self.environment = transaction.environment.handle
    }

    deinit { mdb_cursor_close(cursor) }

    mutating func next() throws(LogStoreError) -> (key: [UInt8], value: [UInt8])? {
        var key = MDB_val()
        var value = MDB_val()
        let status = mdb_cursor_get(cursor, &key, &value, started ? MDB_NEXT : MDB_FIRST)
        started = true
        if status == MDB_NOTFOUND { return nil }
        try check(status, "mdb_cursor_get")
        return (
            [UInt8](try boundedBytes(key, in: environment, "a key")),
            [UInt8](try boundedBytes(value, in: environment, "a value"))
        )
    }
}
