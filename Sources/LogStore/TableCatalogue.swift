import CLMDB

/// The tables an environment holds, kept in its `meta` table (key `tables`) and checked at every
/// open, before anything is written (Docs/LogFormat.md, "The table catalogue").
///
/// LMDB finds a named table by its name in the main database. A damaged name (a flipped bit turns
/// `log.device` into `log.dewice`) leaves a file whose pages are all sound but whose log is gone
/// under its name: a reader would see no log, or an unknown one, and a writer would create an
/// empty table in the damaged file. The catalogue lists every table this library created, with a
/// checksum; an environment whose tables differ from it is refused, read-only or not, naming the
/// unexpected and the missing tables, and nothing is written into it.
///
/// Files written before the catalogue existed have none: their tables are checked against what
/// `meta` says of each log (its tail record, its projections' offsets and versions), and a
/// read-write open then writes the catalogue.
enum TableCatalogue {
    /// The key of the catalogue in `meta`.
    static let key = Array("tables".utf8)

    /// The catalogue's bytes: the CRC-32C of the rest (big-endian), then the names, sorted, each
    /// followed by a newline.
    static func encode(_ names: Set<String>) -> [UInt8] {
        let body = Array(names.sorted().map { $0 + "\n" }.joined().utf8)
        return withUnsafeBytes(of: CRC32C.checksum(body).bigEndian, Array.init) + body
    }

    /// The names a catalogue holds.
    ///
    /// - Throws: `.corruptFile` when its checksum does not match.
    static func decode(_ bytes: UnsafeRawBufferPointer, path: String) throws(LogStoreError) -> Set<String> {
        let body = Array(bytes.dropFirst(4))
        guard bytes.count >= 4,
            UInt32(bigEndian: bytes.loadUnaligned(as: UInt32.self)) == CRC32C.checksum(body),
            body.last == UInt8(ascii: "\n") || body.isEmpty
        else {
            throw LogStoreError(
                .corruptFile, "the table catalogue is damaged (its checksum does not match)", path: path, table: "meta")
        }
        return Set(body.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) })
    }

    /// The names of every table in the environment: the keys of LMDB's main database.
    static func tableNames(_ txn: OpaquePointer?, _ environment: OpaquePointer) throws(LogStoreError) -> Set<String> {
        try keys(of: 1, txn, environment, "a table name")  // 1: MAIN_DBI
    }

    /// The keys of table `dbi`, as strings.
    static func keys(
        of dbi: MDB_dbi, _ txn: OpaquePointer?, _ environment: OpaquePointer, _ what: StaticString
    ) throws(LogStoreError) -> Set<String> {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var names = Set<String>()
        var key = MDB_val()
        var value = MDB_val()
        var status = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        while status == MDB_SUCCESS {
            names.insert(String(decoding: try boundedBytes(key, in: environment, what), as: UTF8.self))
            status = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        if status != MDB_NOTFOUND { try check(status, "mdb_cursor_get") }
        return names
    }

    /// Opens `meta` in a new environment's first transaction, after checking the environment's
    /// tables: a new (empty) environment gets `meta` and a catalogue, unless read-only; an
    /// environment with tables must have `meta`, and tables that match its catalogue. Returns
    /// `meta`'s handle.
    ///
    /// - Throws: `.notALog` for an LMDB environment without `meta` (nothing is created in it),
    ///   `.corruptFile` naming the unexpected and missing tables, or a damaged catalogue.
    static func openMeta(_ environment: OpaquePointer, path: String, readOnly: Bool) throws(LogStoreError) -> MDB_dbi {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(environment, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn), "mdb_txn_begin")
        var committed = false
        defer { if !committed { mdb_txn_abort(txn) } }
        let present = try tableNames(txn, environment)
        var dbi: MDB_dbi = 0
        if present.isEmpty && !readOnly {
            try check(mdb_dbi_open(txn, "meta", UInt32(MDB_CREATE), &dbi), "mdb_dbi_open")
            try store(["meta"], in: dbi, txn)
        } else {
            guard present.contains("meta") else {
                let listed = present.isEmpty ? "" : ": it holds \(quotedList(present))"
                throw LogStoreError(
                    .notALog, "an LMDB environment without LogStore's metadata table\(listed)", path: path)
            }
            try check(mdb_dbi_open(txn, "meta", 0, &dbi), "mdb_dbi_open")
            var value = MDB_val()
            var key = MDB_val()
            let status = Self.key.withUnsafeBufferPointer { bytes in
                key = MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                return mdb_get(txn, dbi, &key, &value)
            }
            if status == MDB_SUCCESS {
                let catalogued = try decode(try boundedBytes(value, in: environment, "the table catalogue"), path: path)
                try compare(present: present, expected: catalogued, path: path)
            } else if status == MDB_NOTFOUND {
                try checkWithoutCatalogue(
                    present: present, metaKeys: try keys(of: dbi, txn, environment, "a meta key"), path: path)
                if !readOnly { try store(present, in: dbi, txn) }
            } else {
                try check(status, "mdb_get")
            }
        }
        // Committed even when read-only: a handle opened in an aborted transaction is closed.
        committed = true
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
        return dbi
    }

    /// Adds `names` to the catalogue, in the write transaction that creates those tables.
    static func add(
        _ names: [String], meta: MDB_dbi, _ txn: OpaquePointer?, _ environment: OpaquePointer, path: String
    ) throws(LogStoreError) {
        var value = MDB_val()
        var key = MDB_val()
        let status = Self.key.withUnsafeBufferPointer { bytes in
            key = MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            return mdb_get(txn, meta, &key, &value)
        }
        var catalogued: Set<String> = []
        if status == MDB_SUCCESS {
            catalogued = try decode(try boundedBytes(value, in: environment, "the table catalogue"), path: path)
        } else if status != MDB_NOTFOUND {
            try check(status, "mdb_get")
        }
        let grown = catalogued.union(names)
        if grown != catalogued { try store(grown, in: meta, txn) }
    }

    private static func store(_ names: Set<String>, in meta: MDB_dbi, _ txn: OpaquePointer?) throws(LogStoreError) {
        var bytes = encode(names)
        var keyBytes = key
        let status = keyBytes.withUnsafeMutableBufferPointer { keyBuffer in
            bytes.withUnsafeMutableBufferPointer { valueBuffer in
                var k = MDB_val(mv_size: keyBuffer.count, mv_data: keyBuffer.baseAddress)
                var v = MDB_val(mv_size: valueBuffer.count, mv_data: valueBuffer.baseAddress)
                return mdb_put(txn, meta, &k, &v, 0)
            }
        }
        try check(status, "mdb_put")
    }

    /// Refuses an environment whose tables are not the catalogue's.
    static func compare(present: Set<String>, expected: Set<String>, path: String) throws(LogStoreError) {
        try refuse(unexpected: present.subtracting(expected), missing: expected.subtracting(present), path: path)
    }

    /// The check of a file written before the catalogue: every table is `meta`, a log's
    /// (`log.NAME`) or a projection's (`proj.LOG.PROJECTION.TABLE`); every log `meta` speaks of
    /// (a tail record, a projection's offset or version) and every log a projection table belongs
    /// to has its table; and a log table `meta` says nothing of is refused, unless the file has
    /// neither projections nor records of any log (a bare log from before tail records).
    static func checkWithoutCatalogue(present: Set<String>, metaKeys: Set<String>, path: String) throws(LogStoreError) {
        var known = Set<String>()
        for key in metaKeys {
            let parts = key.split(separator: ".", omittingEmptySubsequences: false)
            if parts.count >= 2, ["tail", "applied", "version"].contains(parts[0]) { known.insert("log.\(parts[1])") }
        }
        var expected = known
        var logs = Set<String>()
        var unexpected = Set<String>()
        for name in present where name != "meta" {
            let parts = name.split(separator: ".", omittingEmptySubsequences: false)
            if parts.count == 2, parts[0] == "log" {
                logs.insert(name)
            } else if parts.count == 4, parts[0] == "proj" {
                expected.insert("log.\(parts[1])")
            } else {
                unexpected.insert(name)
            }
        }
        if !expected.isEmpty { unexpected.formUnion(logs.subtracting(expected)) }
        try refuse(unexpected: unexpected, missing: expected.subtracting(present), path: path)
    }

    private static func refuse(unexpected: Set<String>, missing: Set<String>, path: String) throws(LogStoreError) {
        guard unexpected.isEmpty && missing.isEmpty else {
            var parts: [String] = []
            if !unexpected.isEmpty { parts.append("it holds \(quotedList(unexpected)), which no log here created") }
            if !missing.isEmpty { parts.append("\(quotedList(missing)) \(missing.count == 1 ? "is" : "are") missing") }
            throw LogStoreError(
                .corruptFile,
                "the tables are not the ones this environment made: \(parts.joined(separator: "; ")) (a damaged table name?)",
                path: path, table: (unexpected.sorted() + missing.sorted()).first)
        }
    }

    private static func quotedList(_ names: Set<String>) -> String {
        names.sorted().map { "table \"\($0)\"" }.joined(separator: ", ")
    }
}
