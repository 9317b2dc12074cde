import LogStore
import LogSync
import LogSyncServer

/// What an entry means, as a decoder found it: the name of its kind and its fields in order.
///
/// `EntryFormatter` prints it in place of the payload's hex preview:
/// `recordSaved  zone=Notes record=n1 type=Note tag=12 keys=[body,title]`.
public struct EntryDescription: Sendable, Hashable {
    /// A field's value.
    public enum Value: Sendable, Hashable, CustomStringConvertible {
        /// Text: a name, an ID, a tag (a JSON string).
        case text(String)
        /// A count or an offset (a JSON number).
        case integer(UInt64)
        /// A list of names, such as field keys (a JSON array of strings).
        case list([String])

        /// The value as plain text: the text, the number, or `[a,b]`.
        public var description: String { rendered { $0 } }

        /// The value with its text (and each list item) as `string` renders it, a number in
        /// decimal and a list as `[a,b]`: the layout of `description` and of `EntryFormatter`'s
        /// text and JSON.
        func rendered(string: (String) -> String) -> String {
            switch self {
            case .text(let text): string(text)
            case .integer(let value): String(value)
            case .list(let items): "[" + items.map(string).joined(separator: ",") + "]"
            }
        }
    }

    /// One named value.
    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: Value

        public init(_ name: String, _ value: Value) {
            self.name = name
            self.value = value
        }
    }

    /// The name of the entry's kind, such as `recordSaved`.
    public var kindName: String
    /// The fields, in the decoder's order; no name appears twice.
    public var fields: [Field]
    /// Records the entry is about beyond its `record` field (for `--record`): a device entry
    /// names every record of its lists here, shown or not.
    public var recordNames: Set<String>
    /// Zones the entry is about beyond its `zone` field (for `--zone`).
    public var zoneNames: Set<String>

    public init(kindName: String, fields: [Field] = [], recordNames: Set<String> = [], zoneNames: Set<String> = []) {
        self.kindName = kindName
        self.fields = fields
        self.recordNames = recordNames
        self.zoneNames = zoneNames
    }

    /// Whether the entry is about the record named `name`: its `record` field or `recordNames`.
    public func mentions(record name: String) -> Bool {
        self["record"] == .text(name) || recordNames.contains(name)
    }

    /// Whether the entry is about the zone named `name`: its `zone` field or `zoneNames`.
    public func mentions(zone name: String) -> Bool {
        self["zone"] == .text(name) || zoneNames.contains(name)
    }

    /// The value of the field `name`, if there is one.
    public subscript(name: String) -> Value? {
        fields.first { $0.name == name }?.value
    }
}

/// The hook `EntryFormatter` uses to describe entries: which kinds it knows by name, and a pure
/// function from an entry to its description (`nil` for a kind it does not know).
public struct EntryDecoder: Sendable {
    /// The kinds this decoder knows, with their names, in kind order.
    public let kinds: [(kind: EntryKind, name: String)]
    private let body: @Sendable (LogEntry) throws(LogStoreError) -> EntryDescription?

    /// - Parameters:
    ///   - kinds: The kinds `describe` knows, with their names (for `--kind NAME`).
    ///   - describe: Describes an entry, or returns `nil` for a kind it does not know; throws
    ///     `LogStoreError` naming the offset when the payload is not valid for its kind.
    public init(
        kinds: [(kind: EntryKind, name: String)],
        describe: @escaping @Sendable (LogEntry) throws(LogStoreError) -> EntryDescription?
    ) {
        self.kinds = kinds
        self.body = describe
    }

    /// The description of `entry`, or `nil` when the decoder does not know its kind.
    ///
    /// - Throws: `LogStoreError` (`.corruptEntry`) naming the offset for a payload that is not
    ///   valid for its kind.
    public func describe(_ entry: LogEntry) throws(LogStoreError) -> EntryDescription? {
        try body(entry)
    }

    /// The name of `kind`, if the decoder knows it.
    public func name(of kind: EntryKind) -> String? {
        Self.name(of: kind, in: kinds)
    }

    /// The name of `kind` in `kinds`, if it is there.
    static func name(of kind: EntryKind, in kinds: [(kind: EntryKind, name: String)]) -> String? {
        kinds.first { $0.kind == kind }?.name
    }

    /// The server's entries (`LogSyncServer`): kinds 101–116 and 118–119 of a database's log
    /// (`zoneSaved` … `zoneKeysSaved`) and kinds 117 and 120–121 of the user registry
    /// (`schemaDeployed`, `userRegistered`, `userEmailSet`).
    public static let server = EntryDecoder(kinds: ServerEntryDescription.kinds) {
        (entry: LogEntry) throws(LogStoreError) -> EntryDescription? in try ServerEntryDescription.describe(entry)
    }

    /// The device's entries (`LogSync`): kinds 1–99 of an engine's device log
    /// (`pendingRecordZoneChangesAdded` … `eventsDelivered`).
    public static let device = EntryDecoder(kinds: DeviceEntryDescription.kinds) {
        (entry: LogEntry) throws(LogStoreError) -> EntryDescription? in try DeviceEntryDescription.describe(entry)
    }

    /// The server's and the device's entries: `device` for kinds 1–99, `server` for 100–199
    /// (the ranges do not overlap). `logtool dump` reads a device log (named `device`) with it,
    /// and takes `--kind` names from it.
    public static let standard = EntryDecoder(kinds: device.kinds + server.kinds) {
        (entry: LogEntry) throws(LogStoreError) -> EntryDescription? in
        if let description = try device.describe(entry) { return description }
        return try server.describe(entry)
    }

    /// The decoder for the log named `name`: `standard` for an engine's device log (named
    /// `device`, `DeviceLog.logName`), `server` for any other.
    ///
    /// Device kinds are small numbers that other logs use for their own entries (the demo's
    /// key–value entries are kinds 1–3), so they are decoded only in a device log; server kinds
    /// are decoded in every log.
    public static func forLog(named name: String) -> EntryDecoder {
        name == DeviceLog.logName ? standard : server
    }

    /// The decoder for `log`, as `forLog(named:)`; in a device log, a `batchSaved` entry is read
    /// with the `batchPrepared` it refers to, from `log`.
    public static func forLog(_ log: Log) -> EntryDecoder {
        guard log.name == DeviceLog.logName else { return server }
        return EntryDecoder(kinds: standard.kinds) { (entry: LogEntry) throws(LogStoreError) -> EntryDescription? in
            if let description = try DeviceEntryDescription.describe(entry, in: log) { return description }
            return try ServerEntryDescription.describe(entry)
        }
    }
}

/// One layer's entries as ``EntryDecoder`` describes them (``DeviceEntryDescription``,
/// ``ServerEntryDescription``): the kinds with their names, and the fields of each.
protocol EntryKindCatalog {
    /// Every kind the layer's logs hold, with its name, in kind order.
    static var kinds: [(kind: EntryKind, name: String)] { get }
}

extension EntryKindCatalog {
    typealias Value = EntryDescription.Value
    typealias Field = EntryDescription.Field

    /// The name of `kind` if it is one of the layer's kinds.
    static func kindName(of kind: EntryKind) -> String? {
        EntryDecoder.name(of: kind, in: kinds)
    }
}
