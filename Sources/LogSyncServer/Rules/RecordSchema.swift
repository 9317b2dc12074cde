import LogStore
import SyncModel

/// The record types of a container and their fields, with the kind of value each field holds
/// (F137): what CloudKit's schema holds, without indexes or security roles.
///
/// In development mode (the default) a server grows the schema of each database from the records
/// saved in it: a record type appears with its first saved record, a field with its first saved
/// value, and the field's kind is that value's kind. `logsync-server schema deploy` gathers the
/// development schema of every database and records it in the server's registry log
/// (`ServerEntry.schemaDeployed`); from then on the server is in production mode and refuses, per
/// item, a record of a type the schema does not have, a field it does not have, or a value of
/// another kind than the field's (`invalidArguments`, naming the record, its type and the field).
///
/// System record types (``isSystemType(_:)``, the share records of `cloudkit.share`) are never part
/// of a schema and always allowed.
///
/// ```swift
/// let schema = try server.admin.developmentSchema()   // what the records saved so far use
/// print(schema)                                       // Note: body string, tags list<string>, title string
/// ```
public struct RecordSchema: Sendable, Hashable, CustomStringConvertible {
    /// Record type → field name → the kind of value the field holds.
    public var recordTypes: [Record.RecordType: [String: FieldKind]]

    public init(_ recordTypes: [Record.RecordType: [String: FieldKind]] = [:]) {
        self.recordTypes = recordTypes
    }

    /// The kind of one value: every case of `RecordValue` but a list.
    public enum ValueKind: String, Sendable, Hashable, CaseIterable {
        case string, int64, double, bool, bytes, date, reference, asset, location
        /// A field of `Record.encryptedValues`: sealed, whatever its plaintext (F129).
        case encrypted
    }

    /// The kind of value a field holds: a value of one kind, or a list of values of one kind.
    public struct FieldKind: Sendable, Hashable, CustomStringConvertible {
        /// The kind of the value, or of the list's elements; `nil` for a list only ever saved empty,
        /// whose elements may be of any kind.
        public var element: ValueKind?
        /// Whether the field holds a list.
        public var isList: Bool

        /// A field of single values of `kind`.
        public static func value(_ kind: ValueKind) -> FieldKind { FieldKind(element: kind, isList: false) }
        /// A field of lists of `kind` (`nil`: of any kind).
        public static func list(_ kind: ValueKind?) -> FieldKind { FieldKind(element: kind, isList: true) }

        public init(element: ValueKind?, isList: Bool) {
            precondition(element != nil || isList, "only a list may leave its kind open")
            self.element = element
            self.isList = isList
        }

        /// The kind of `value`: an empty list's elements are of no kind yet.
        public init(of value: RecordValue) {
            if case .list(let elements) = value {
                self = .list(elements.first.map(ValueKind.init(of:)))
            } else {
                self = .value(ValueKind(of: value))
            }
        }

        /// Parses a ``description``: `string`, `list<string>`, `list`.
        public init?(_ text: String) {
            if text == "list" {
                self = .list(nil)
            } else if text.hasPrefix("list<"), text.hasSuffix(">"),
                let kind = ValueKind(rawValue: String(text.dropFirst(5).dropLast()))
            {
                self = .list(kind)
            } else if let kind = ValueKind(rawValue: text) {
                self = .value(kind)
            } else {
                return nil
            }
        }

        /// `string`, `list<string>`, or `list` for a list of no kind yet.
        public var description: String {
            guard isList else { return element!.rawValue }
            return element.map { "list<\($0.rawValue)>" } ?? "list"
        }

        /// Whether a field of this kind takes `value`: the same kind, or any list for a list of no
        /// kind (lists are homogeneous, `Record.validate()`).
        public func admits(_ value: RecordValue) -> Bool {
            let other = FieldKind(of: value)
            guard other.isList == isList else { return false }
            return element == nil || other.element == nil || other.element == element
        }

        /// The kind a field keeps when it meets `other`: an open list takes the first element kind
        /// it sees; any other kind stays as it is.
        func refined(by other: FieldKind) -> FieldKind {
            if isList, element == nil, other.isList, other.element != nil { return other }
            return self
        }
    }

    /// Whether `recordType` is a system type, allowed whatever the schema (`cloudkit.share`).
    public static func isSystemType(_ recordType: Record.RecordType) -> Bool {
        recordType == Share.recordType
    }

    /// Whether the schema has no record type.
    public var isEmpty: Bool { recordTypes.isEmpty }

    /// The schema with every type and field of `other` added. A field both have keeps its kind
    /// (an open list takes `other`'s element kind).
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming the type, the field and both kinds when a
    ///   field holds another kind of value in `other`: records saved under one kind would break the
    ///   other.
    public func adding(_ other: RecordSchema) throws(SyncError) -> RecordSchema {
        var merged = self
        for (recordType, fields) in other.recordTypes.sorted(by: { $0.key < $1.key }) {
            var kept = merged.recordTypes[recordType] ?? [:]
            for (field, kind) in fields.sorted(by: { $0.key < $1.key }) {
                guard let existing = kept[field] else {
                    kept[field] = kind
                    continue
                }
                guard existing.isList == kind.isList,
                    existing.element == nil || kind.element == nil || existing.element == kind.element
                else {
                    throw SyncError(
                        .invalidArguments,
                        "field \"\(field)\" of record type \"\(recordType)\" holds \(existing) in one schema and \(kind) in the other"
                    )
                }
                kept[field] = existing.refined(by: kind)
            }
            merged.recordTypes[recordType] = kept
        }
        return merged
    }

    /// Why this schema, as a production schema, refuses to save `record`: its type is not in it,
    /// or one of its fields is not, or holds a value of another kind. `nil` when it may be saved.
    ///
    /// Every field the record carries is checked, whatever the save policy sends of it.
    func violation(saving record: Record) -> SyncError? {
        let recordType = record.recordType
        if Self.isSystemType(recordType) || record.recordID.recordName == Share.zoneWideShareRecordName { return nil }
        let recordID = record.recordID
        guard let fields = recordTypes[recordType] else {
            return SyncError(
                .invalidArguments,
                "\(recordID) is of record type \"\(recordType)\", which the production schema does not have (it has \(Self.list(recordTypes.keys)))",
                item: .record(recordID))
        }
        for field in record.fields.keys.sorted() {
            let value = record.fields[field]!
            guard let kind = fields[field] else {
                return SyncError(
                    .invalidArguments,
                    "\(recordID) sets field \"\(field)\", which record type \"\(recordType)\" of the production schema does not have (it has \(Self.list(fields.keys)))",
                    item: .record(recordID))
            }
            guard kind.admits(value) else {
                return SyncError(
                    .invalidArguments,
                    "\(recordID) sets field \"\(field)\" of record type \"\(recordType)\" to a \(FieldKind(of: value)) value; the production schema has it as \(kind)",
                    item: .record(recordID))
            }
        }
        return nil
    }

    private static func list(_ names: some Collection<String>) -> String {
        names.isEmpty ? "none" : names.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
    }

    /// One line per record type, sorted: `Note: body string, tags list<string>, title string`.
    public var description: String {
        recordTypes.keys.sorted().map { recordType in
            let fields = recordTypes[recordType]!.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            return fields.isEmpty ? "\(recordType):" : "\(recordType): " + fields.joined(separator: ", ")
        }.joined(separator: "\n")
    }
}

extension RecordSchema.ValueKind {
    /// The kind of a value that is not a list (a list's: of its elements).
    init(of value: RecordValue) {
        switch value {
        case .string: self = .string
        case .int64: self = .int64
        case .double: self = .double
        case .bool: self = .bool
        case .bytes: self = .bytes
        case .date: self = .date
        case .reference: self = .reference
        case .asset: self = .asset
        case .location: self = .location
        case .encrypted: self = .encrypted
        case .list(let elements): self = elements.first.map(Self.init(of:)) ?? .string
        }
    }
}

// MARK: Development growth, as the index keeps it

extension RecordSchema {
    /// Adds `record`'s fields to `fields`, the fields of its type so far (development mode): a
    /// new field with the kind of its value, an open list refined by a list's first element.
    /// Returns whether `fields` changed.
    static func grow(_ fields: inout [String: FieldKind], with record: Record) -> Bool {
        var changed = false
        for (field, value) in record.fields {
            let kind = FieldKind(of: value)
            guard let existing = fields[field] else {
                fields[field] = kind
                changed = true
                continue
            }
            let refined = existing.refined(by: kind)
            if refined != existing {
                fields[field] = refined
                changed = true
            }
        }
        return changed
    }

    /// The fields of one record type as the index's `schema` table keeps them: the count, then
    /// each field's name and kind (``FieldKind/description``), sorted by name.
    static func encode(fields: [String: FieldKind]) -> [UInt8] {
        var writer = ByteWriter()
        writer.u64(UInt64(fields.count))
        for (name, kind) in fields.sorted(by: { $0.key < $1.key }) {
            writer.string(name)
            writer.string(kind.description)
        }
        return writer.bytes
    }

    static func decode(fields bytes: [UInt8]) throws(LogStoreError) -> [String: FieldKind] {
        var reader = ByteReader(bytes, what: "schema fields")
        let count = try reader.u64()
        guard count <= UInt64(bytes.count) else {
            throw LogStoreError(.projectionInconsistent, "malformed schema fields")
        }
        var fields: [String: FieldKind] = [:]
        for _ in 0..<count {
            let name = try reader.string()
            let text = try reader.string()
            guard let kind = FieldKind(text) else {
                throw LogStoreError(
                    .projectionInconsistent, "schema field \"\(name)\" has the unknown kind \"\(text)\"")
            }
            fields[name] = kind
        }
        return fields
    }
}

// MARK: Protocol Buffers

extension RecordSchema {
    /// The `SchemaDeployed` message of a `schemaDeployed` entry: types and fields sorted by name.
    var proto: Logsync_Server_SchemaDeployed {
        Logsync_Server_SchemaDeployed.with {
            $0.recordTypes = recordTypes.keys.sorted().map { name in
                Logsync_Server_SchemaRecordType.with {
                    $0.name = name
                    $0.fields = recordTypes[name]!.sorted { $0.key < $1.key }.map { field, kind in
                        Logsync_Server_SchemaField.with {
                            $0.name = field
                            $0.kind = kind.element?.proto ?? .unspecified
                            $0.list = kind.isList
                        }
                    }
                }
            }
        }
    }

    /// Reads a `SchemaDeployed` message.
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming the element at fault: an empty or repeated
    ///   type or field name, an unknown kind, or no kind for a field that is not a list.
    init(proto message: Logsync_Server_SchemaDeployed) throws(SyncError) {
        var recordTypes: [Record.RecordType: [String: FieldKind]] = [:]
        for (index, type) in message.recordTypes.enumerated() {
            let path = "SchemaDeployed.record_types[\(index)]"
            guard !type.name.isEmpty else { throw ProtoDecoding.missing("\(path).name") }
            guard recordTypes[type.name] == nil else {
                throw ProtoDecoding.invalid("\(path).name", "repeats \"\(type.name)\"")
            }
            var fields: [String: FieldKind] = [:]
            for (fieldIndex, field) in type.fields.enumerated() {
                let fieldPath = "\(path).fields[\(fieldIndex)]"
                guard !field.name.isEmpty else { throw ProtoDecoding.missing("\(fieldPath).name") }
                guard fields[field.name] == nil else {
                    throw ProtoDecoding.invalid("\(fieldPath).name", "repeats \"\(field.name)\"")
                }
                let element: ValueKind?
                switch field.kind {
                case .unspecified:
                    guard field.list else { throw ProtoDecoding.missing("\(fieldPath).kind") }
                    element = nil
                case .UNRECOGNIZED(let value):
                    throw ProtoDecoding.invalid("\(fieldPath).kind", "is \(value), not a kind (1–9)")
                default:
                    element = ValueKind(proto: field.kind)
                }
                fields[field.name] = FieldKind(element: element, isList: field.list)
            }
            recordTypes[type.name] = fields
        }
        self.init(recordTypes)
    }
}

extension RecordSchema.ValueKind {
    var proto: Logsync_Server_SchemaValueKind {
        switch self {
        case .string: .string
        case .int64: .int64
        case .double: .double
        case .bool: .bool
        case .bytes: .bytes
        case .date: .date
        case .reference: .reference
        case .asset: .asset
        case .location: .location
        case .encrypted: .encrypted
        }
    }

    /// The kind of a known, specified enum value: the inverse of `proto`.
    init?(proto: Logsync_Server_SchemaValueKind) {
        guard let kind = Self.allCases.first(where: { $0.proto == proto }) else { return nil }
        self = kind
    }
}

// MARK: The server's schema mode

/// Whether a server accepts any record type and field, growing its schema (development), or only
/// those of its deployed schema (production) (F137).
public enum SchemaMode: String, Sendable, Hashable, CustomStringConvertible {
    /// Record types and fields are created by the first record saved with them (the default).
    case development
    /// Record types and fields not in the deployed schema are refused, per item.
    case production

    public var description: String { rawValue }
}

/// What a schema deployment did (`logsync-server schema deploy`, ``SyncServer/deploySchema(_:)``).
public struct SchemaDeployment: Sendable, Hashable {
    /// The schema now deployed: the one deployed before with the new types and fields added.
    public var schema: RecordSchema
    /// The offset of its `schemaDeployed` entry in the registry's log.
    public var offset: UInt64
    /// Whether this deployment appended that entry; `false` when it added nothing to the schema
    /// already deployed.
    public var appended: Bool
}
