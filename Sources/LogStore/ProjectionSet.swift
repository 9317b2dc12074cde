import CLMDB

/// The projections of one log in one environment: their tables and bookkeeping in `meta`.
struct ProjectionSet: Sendable {
    struct Member: Sendable {
        let projection: any Projection
        let tables: [String: Table]
        let appliedKey: [UInt8]
        let versionKey: [UInt8]
    }

    let members: [Member]
    let meta: Table

    static func tableName(log: String, projection: String, table: String) -> String {
        "proj.\(log).\(projection).\(table)"
    }

    /// Opens the tables of `projections` for the log `log` in `environment`.
    init(environment: LogEnvironment, log: String, projections: [any Projection], create: Bool) throws(LogStoreError) {
        var seen = Set<String>()
        var members: [Member] = []
        for projection in projections {
            try validateName(projection.name, what: "projection name")
            guard seen.insert(projection.name).inserted else {
                throw LogStoreError(.invalidArgument, "two projections are named \"\(projection.name)\"", log: log)
            }
            guard !projection.tableNames.isEmpty, Set(projection.tableNames).count == projection.tableNames.count else {
                throw LogStoreError(
                    .invalidArgument, "projection \"\(projection.name)\" must declare one or more distinct table names",
                    log: log)
            }
            for table in projection.tableNames { try validateName(table, what: "table name") }
            let names = projection.tableNames.map { Self.tableName(log: log, projection: projection.name, table: $0) }
            let opened = try environment.openTables(names, create: create)
            var tables: [String: Table] = [:]
            for (index, table) in opened.enumerated() {
                guard let table else {
                    throw LogStoreError(
                        .notALog,
                        "projection \"\(projection.name)\" has no table \"\(projection.tableNames[index])\" here",
                        path: environment.path, log: log)
                }
                tables[projection.tableNames[index]] = table
            }
            members.append(
                Member(
                    projection: projection, tables: tables,
                    appliedKey: Array("applied.\(log).\(projection.name)".utf8),
                    versionKey: Array("version.\(log).\(projection.name)".utf8)))
        }
        self.members = members
        self.meta = environment.meta
    }

    func appliedOffset(of member: Member, in transaction: ReadTransaction) throws(LogStoreError) -> LogOffset {
        try transaction.withValue(forKey: member.appliedKey, in: meta) { bytes in
            guard let bytes, bytes.count == 8 else { return .zero }
            return LogOffset(UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self)))
        }
    }

    func setAppliedOffset(
        _ offset: LogOffset, of member: Member, in transaction: WriteTransaction
    ) throws(LogStoreError) {
        try transaction.put(withUnsafeBytes(of: offset.key) { Array($0) }, forKey: member.appliedKey, in: meta)
    }

    func storedVersion(of member: Member, in transaction: ReadTransaction) throws(LogStoreError) -> UInt32? {
        try transaction.withValue(forKey: member.versionKey, in: meta) { bytes in
            guard let bytes, bytes.count == 4 else { return nil }
            return UInt32(bigEndian: bytes.loadUnaligned(as: UInt32.self))
        }
    }

    /// Empties a member's tables and marks it as applied through nothing, at its current version.
    func reset(_ member: Member, in transaction: WriteTransaction) throws(LogStoreError) {
        for table in member.tables.values { try transaction.removeAll(in: table) }
        try setAppliedOffset(.zero, of: member, in: transaction)
        try transaction.put(
            withUnsafeBytes(of: member.projection.version.bigEndian) { Array($0) }, forKey: member.versionKey, in: meta)
    }

    /// Applies `entries` (consecutive, starting right after the member's applied offset).
    func apply(_ entries: [LogEntry], to member: Member, in transaction: WriteTransaction) throws {
        guard let last = entries.last else { return }
        let tables = ProjectionTables(transaction: transaction, member: member)
        try member.projection.apply(entries, to: tables)
        try setAppliedOffset(last.offset, of: member, in: transaction)
    }
}

func validateName(_ name: String, what: String) throws(LogStoreError) {
    let valid =
        !name.isEmpty && name.utf8.count <= 100
        && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ".") }
    guard valid else {
        throw LogStoreError(
            .invalidArgument, "invalid \(what) \"\(name)\": use 1–100 printable ASCII characters without spaces or dots"
        )
    }
}
