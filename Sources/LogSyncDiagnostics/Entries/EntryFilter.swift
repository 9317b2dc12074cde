import LogStore

/// Which entries `logtool dump` prints: `--kind` (any of several kinds), `--record` and
/// `--zone` (an entry whose description has that `record` or `zone` field, or names the record
/// or zone in its `recordNames` or `zoneNames`, as device entries do). All given conditions
/// must hold; an empty filter lets every entry through.
public struct EntryFilter: Sendable, Hashable {
    /// The kinds to keep; empty: every kind.
    public var kinds: Set<EntryKind>
    /// Keep only entries whose `record` field is this record name.
    public var recordName: String?
    /// Keep only entries whose `zone` field is this zone name (whoever owns the zone).
    public var zoneName: String?

    public init(kinds: Set<EntryKind> = [], recordName: String? = nil, zoneName: String? = nil) {
        self.kinds = kinds
        self.recordName = recordName
        self.zoneName = zoneName
    }

    /// Whether the filter lets every entry through.
    public var isEmpty: Bool { kinds.isEmpty && recordName == nil && zoneName == nil }

    /// Whether `entry`, described as `description` (`nil`: not decoded), passes the filter.
    /// `--record` and `--zone` never pass an entry without a description.
    public func matches(_ entry: LogEntry, description: EntryDescription?) -> Bool {
        if !kinds.isEmpty && !kinds.contains(entry.kind) { return false }
        if let recordName, description?.mentions(record: recordName) != true { return false }
        if let zoneName, description?.mentions(zone: zoneName) != true { return false }
        return true
    }

    /// The kind that `text` names: a number from 0 to 65535, or a name `decoder` knows (in any
    /// letter case), such as `recordSaved`.
    ///
    /// - Throws: ``DiagnosticsError`` `unknownKind` listing the known names when `text` is neither.
    public static func kind(named text: String, decoder: EntryDecoder?) throws(DiagnosticsError) -> EntryKind {
        if let number = UInt16(text) { return EntryKind(number) }
        let kinds = decoder?.kinds ?? []
        if let known = kinds.first(where: { $0.name.lowercased() == text.lowercased() }) { return known.kind }
        let names = kinds.map { "\($0.name) (\($0.kind))" }.joined(separator: ", ")
        throw DiagnosticsError(
            .unknownKind,
            "unknown kind \"\(text)\": give a number from 0 to 65535"
                + (names.isEmpty ? "" : " or one of \(names)"))
    }
}
