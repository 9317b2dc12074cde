/// A named set of tables derived from a log by a pure function of its entries.
///
/// Every projection of a log is applied in the same write transaction as the append, so its
/// tables always reflect the log exactly through the offset it has applied through. The rule
/// every projection must keep: **built incrementally, it equals the projection rebuilt by
/// replaying the log from offset 1** (`Log.verifyProjections()` checks it).
///
/// ```swift
/// struct LatestValue: Projection {
///     let name = "latest"
///     let tableNames = ["values"]
///     func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
///         try tables.put(entry.payload, forKey: Array("last".utf8), in: "values")
///     }
/// }
/// ```
public protocol Projection: Sendable {
    /// A stable name, unique among the log's projections (1–100 characters, no `.`).
    var name: String { get }
    /// The version of `apply`'s meaning. When it changes, the projection is rebuilt at open.
    var version: UInt32 { get }
    /// The tables the projection writes (1–100 characters each, no `.`).
    var tableNames: [String] { get }
    /// Updates the tables for one entry. Must depend on nothing but the entry and the tables:
    /// no clock, no randomness, no outside state. Throwing aborts the whole append.
    func apply(_ entry: LogEntry, to tables: ProjectionTables) throws
    /// Updates the tables for consecutive entries (those of one append, or a batch of a rebuild
    /// or catch-up). The tables must end exactly as `apply(_:to:)` entry by entry leaves them;
    /// a projection may implement it to share work between the entries. The default applies
    /// each in turn.
    func apply(_ entries: [LogEntry], to tables: ProjectionTables) throws
}

extension Projection {
    public var version: UInt32 { 1 }

    public func apply(_ entries: [LogEntry], to tables: ProjectionTables) throws {
        for entry in entries { try apply(entry, to: tables) }
    }
}

/// A projection's own tables inside the append's write transaction: LMDB tables of the log's
/// environment, or tables kept elsewhere (``ExternalProjectionTables``, a server's PostgreSQL
/// store), so that one projection's code maintains its index whatever holds it.
public struct ProjectionTables {
    // One of the two: the append's transaction with the projection's LMDB tables, or tables
    // kept elsewhere. Kept as separate fields, not an enum, so that each get or put reads the
    // one it needs instead of copying the whole case.
    private let transaction: WriteTransaction?
    private let lmdbTables: [String: Table]
    private let projectionName: String
    private let external: (any ExternalProjectionTables)?

    init(transaction: WriteTransaction, member: ProjectionSet.Member) {
        self.transaction = transaction
        lmdbTables = member.tables
        projectionName = member.projection.name
        external = nil
    }

    /// Tables kept by `external` inside its own transaction.
    public init(external: any ExternalProjectionTables) {
        transaction = nil
        lmdbTables = [:]
        projectionName = ""
        self.external = external
    }

    /// The LMDB table named `name`, which the projection must have declared in `tableNames`.
    ///
    /// - Throws: `LogStoreError(.invalidArgument)` for an undeclared name, or for tables not
    ///   kept in LMDB.
    public func table(_ name: String) throws(LogStoreError) -> Table {
        guard transaction != nil else {
            throw LogStoreError(.invalidArgument, "table \"\(name)\" is not kept in LMDB")
        }
        guard let table = lmdbTables[name] else {
            throw LogStoreError(.invalidArgument, "projection \"\(projectionName)\" declared no table \"\(name)\"")
        }
        return table
    }

    /// The table named `name`, found once, for the gets and puts of a projection that uses it
    /// many times in one `apply` (each call by name looks the name up again). A handle is for
    /// these tables only: the tables of another `apply` call may be kept elsewhere.
    ///
    /// - Throws: `LogStoreError(.invalidArgument)` when the projection declared no table `name`.
    public func handle(_ name: String) throws(LogStoreError) -> ProjectionTable {
        if transaction == nil { return ProjectionTable(name: name, table: nil) }
        return ProjectionTable(name: name, table: try table(name))
    }

    /// The LMDB table of `handle`, or `nil` when these tables are kept elsewhere.
    private func lmdb(_ handle: ProjectionTable) throws(LogStoreError) -> (WriteTransaction, Table)? {
        guard let transaction else { return nil }
        guard let table = handle.table else {
            throw LogStoreError(
                .invalidArgument, "table \"\(handle.name)\" was found in tables not kept in LMDB")
        }
        return (transaction, table)
    }

    public func value(forKey key: [UInt8], in table: String) throws(LogStoreError) -> [UInt8]? {
        if let transaction { return try transaction.value(forKey: key, in: self.table(table)) }
        return try external!.value(forKey: key, in: table)
    }

    public func value(forKey key: [UInt8], in handle: ProjectionTable) throws(LogStoreError) -> [UInt8]? {
        if case (let transaction, let table)? = try lmdb(handle) {
            return try transaction.value(forKey: key, in: table)
        }
        return try external!.value(forKey: key, in: handle.name)
    }

    public func put(_ value: [UInt8], forKey key: [UInt8], in table: String) throws(LogStoreError) {
        if let transaction { return try transaction.put(value, forKey: key, in: self.table(table)) }
        try external!.put(value, forKey: key, in: table)
    }

    public func put(_ value: [UInt8], forKey key: [UInt8], in handle: ProjectionTable) throws(LogStoreError) {
        if case (let transaction, let table)? = try lmdb(handle) {
            return try transaction.put(value, forKey: key, in: table)
        }
        try external!.put(value, forKey: key, in: handle.name)
    }

    @discardableResult
    public func removeValue(forKey key: [UInt8], in table: String) throws(LogStoreError) -> Bool {
        if let transaction { return try transaction.removeValue(forKey: key, in: self.table(table)) }
        return try external!.removeValue(forKey: key, in: table)
    }

    @discardableResult
    public func removeValue(forKey key: [UInt8], in handle: ProjectionTable) throws(LogStoreError) -> Bool {
        if case (let transaction, let table)? = try lmdb(handle) {
            return try transaction.removeValue(forKey: key, in: table)
        }
        return try external!.removeValue(forKey: key, in: handle.name)
    }

    /// Visits the keys of `table` from `start` (or the first) in byte order, while `body` returns
    /// `true`.
    public func forEach(
        in table: String, from start: [UInt8]? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        if let transaction { return try transaction.forEach(in: self.table(table), from: start, body) }
        try external!.forEach(in: table, from: start, body)
    }

    public func count(of table: String) throws(LogStoreError) -> Int {
        if let transaction { return try transaction.count(of: self.table(table)) }
        return try external!.count(of: table)
    }
}

/// A projection's table found once by name (``ProjectionTables/handle(_:)``), for the tables it
/// was found in.
public struct ProjectionTable: Sendable, Hashable {
    /// The table's name, as the projection declared it.
    public let name: String
    /// The LMDB table, or `nil` for tables kept elsewhere.
    let table: Table?
}

/// A projection's tables kept outside LMDB, inside the writer's own transaction: what a store
/// other than LMDB gives ``ProjectionTables`` so that the same ``Projection`` maintains them.
///
/// Keys are ordered as LMDB orders them (bytes compared as unsigned, a prefix first). A failure
/// of the store itself is thrown as a `LogStoreError(.io)`; the store may keep the original
/// error and report it once the write transaction ends.
public protocol ExternalProjectionTables: AnyObject {
    func value(forKey key: [UInt8], in table: String) throws(LogStoreError) -> [UInt8]?
    func put(_ value: [UInt8], forKey key: [UInt8], in table: String) throws(LogStoreError)
    func removeValue(forKey key: [UInt8], in table: String) throws(LogStoreError) -> Bool
    func forEach(
        in table: String, from start: [UInt8]?,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws
    func count(of table: String) throws(LogStoreError) -> Int
}

@available(*, unavailable)
extension ProjectionTables: Sendable {}

/// The first place where a projection built incrementally differs from its rebuild.
public struct ProjectionMismatch: Sendable, Hashable, CustomStringConvertible {
    /// The projection that differs.
    public var projection: String
    /// The table that differs, or `nil` when the applied offsets differ.
    public var table: String?
    /// The first key (in key order) whose values differ.
    public var key: [UInt8]?
    /// The value in the incrementally built table (`nil`: absent).
    public var incremental: [UInt8]?
    /// The value in the rebuilt table (`nil`: absent).
    public var rebuilt: [UInt8]?
    /// The offset both were compared at.
    public var offset: LogOffset
    /// What differs, when it is not a key's value.
    public var detail: String?

    public var description: String {
        var text = "projection \"\(projection)\""
        if let table { text += " table \"\(table)\"" }
        text += " differs from its rebuild through offset \(offset)"
        if let key {
            text += " at key \(bytesDescription(key)): incremental "
            text += incremental.map(bytesDescription) ?? "(absent)"
            text += ", rebuilt "
            text += rebuilt.map(bytesDescription) ?? "(absent)"
        }
        if let detail { text += ": \(detail)" }
        return text
    }
}

/// `0x…` followed by the printable text, cut at 32 bytes.
func bytesDescription(_ bytes: [UInt8]) -> String {
    let shown = bytes.prefix(32)
    var hex = "0x"
    for byte in shown {
        hex += String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
    }
    if bytes.count > shown.count { hex += "…(\(bytes.count) bytes)" }
    if shown.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
        hex += " \"\(String(decoding: shown, as: UTF8.self))\""
    }
    return hex
}
