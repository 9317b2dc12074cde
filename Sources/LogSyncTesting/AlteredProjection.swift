import LogStore

/// Another projection with a change a test makes to it: its name and tables, the version it
/// gives (an earlier version's number, to stand for the index an older release kept), and an
/// `apply` that decides what to do with each entry, usually calling the base's own and then
/// changing the tables as that older or broken version would have.
///
/// ```swift
/// // The device index with a bug: from offset 100 on it ignores removals of pending changes.
/// let broken = AlteredProjection(DeviceLog.standardIndex) { base, entry, tables in
///     if entry.offset.rawValue >= 100 && entry.kind == DeviceEntry.Kind.pendingRecordZoneChangesRemoved { return }
///     try base.apply(entry, to: tables)
/// }
/// ```
public struct AlteredProjection: Projection {
    /// The projection altered.
    public let base: any Projection
    /// The version this one gives, `nil`: the base's.
    public let alteredVersion: UInt32?
    /// What each entry does to the tables, given the base.
    public let body: @Sendable (_ base: any Projection, _ entry: LogEntry, _ tables: ProjectionTables) throws -> Void

    /// `base` with each entry applied by `body`, under `version` (or the base's version).
    public init(
        _ base: any Projection, version: UInt32? = nil,
        _ body:
            @escaping @Sendable (_ base: any Projection, _ entry: LogEntry, _ tables: ProjectionTables) throws -> Void
    ) {
        self.base = base
        self.alteredVersion = version
        self.body = body
    }

    public var name: String { base.name }
    public var version: UInt32 { alteredVersion ?? base.version }
    public var tableNames: [String] { base.tableNames }
    public func apply(_ entry: LogEntry, to tables: ProjectionTables) throws { try body(base, entry, tables) }
}
