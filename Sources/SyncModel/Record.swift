import Foundation

/// A record: a typed bag of fields with an identity and server-assigned system fields.
///
/// Mirrors `CKRecord`, as a value type. Setting a field through the subscript marks its key as
/// changed (F133); a save sends only the changed keys, and the server keeps every other key
/// (F132). Setting a field to `nil` removes it and marks it changed, so the save removes it on
/// the server too. The system fields — change tag, creation and modification dates and users —
/// are set by the server (F130, F158) and cannot be set by apps.
///
/// ```swift
/// var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
/// note["title"] = .string("Groceries")
/// note["done"] = false
/// note.changedKeys()          // ["done", "title"]
/// let archive = note.systemFieldsCopy()   // keep this as the last known server record
/// ```
public struct Record: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The name of a record type, such as `"Note"`.
    public typealias RecordType = String

    /// The fields a server sets on every successful save (F130, F158).
    ///
    /// A record with all of these `nil` has never been saved (or was built on the device).
    public struct SystemFields: Sendable, Hashable, Codable {
        /// The server's version tag of the record; changes on every successful save.
        public let recordChangeTag: String?
        /// When the record was first saved to the server.
        public let creationDate: Date?
        /// When the record was last saved to the server.
        public let modificationDate: Date?
        /// The user who first saved the record.
        public let creatorUserRecordID: ID?
        /// The user who last saved the record.
        public let lastModifiedUserRecordID: ID?
        /// The share record of the hierarchy this record is the root of (`CKRecord.share`, F123).
        public let share: Reference?

        /// Creates system fields; only the server assigns them.
        package init(
            recordChangeTag: String? = nil, creationDate: Date? = nil, modificationDate: Date? = nil,
            creatorUserRecordID: ID? = nil, lastModifiedUserRecordID: ID? = nil, share: Reference? = nil
        ) {
            self.recordChangeTag = recordChangeTag
            self.creationDate = creationDate
            self.modificationDate = modificationDate
            self.creatorUserRecordID = creatorUserRecordID
            self.lastModifiedUserRecordID = lastModifiedUserRecordID
            self.share = share
        }

        /// The same fields with another change tag and share (the server, as it appends a save).
        package func with(tag: String?, share: Reference?) -> SystemFields {
            SystemFields(
                recordChangeTag: tag, creationDate: creationDate, modificationDate: modificationDate,
                creatorUserRecordID: creatorUserRecordID, lastModifiedUserRecordID: lastModifiedUserRecordID,
                share: share)
        }
    }

    /// The record's identity.
    public let recordID: ID
    /// The record's type.
    public let recordType: RecordType
    /// The server-assigned system fields.
    public package(set) var systemFields: SystemFields
    /// The parent record, used to share a record hierarchy (F135); setting it marks it changed.
    public var parent: Reference? {
        didSet { parentChanged = true }
    }

    private var values: [String: RecordValue]
    private var changed: Set<String>
    private var parentChanged: Bool

    /// Creates a record that has not been saved yet.
    ///
    /// - Parameters:
    ///   - recordType: The record's type.
    ///   - recordID: The record's ID; defaults to a new random name in the default zone.
    public init(recordType: RecordType, recordID: ID = ID()) {
        self.recordID = recordID
        self.recordType = recordType
        self.systemFields = SystemFields()
        self.parent = nil
        self.values = [:]
        self.changed = []
        self.parentChanged = false
    }

    /// A record with every part given, as decoding rebuilds it: `changed` and `parentChanged`
    /// say what is marked changed, whatever `values` and `parent` hold (a changed key without a
    /// value is a field set to `nil`).
    package init(
        recordType: RecordType, recordID: ID, values: [String: RecordValue], changed: Set<String>, parent: Reference?,
        parentChanged: Bool, systemFields: SystemFields
    ) {
        self.recordID = recordID
        self.recordType = recordType
        self.systemFields = systemFields
        self.parent = parent
        self.values = values
        self.changed = changed
        self.parentChanged = parentChanged
    }

    // MARK: Fields

    /// The value of a field, or `nil` if the record has no such field.
    ///
    /// Setting a value (even `nil`, even the same value) marks the key as changed.
    public subscript(key: String) -> RecordValue? {
        get { values[key] }
        set {
            values[key] = newValue
            changed.insert(key)
        }
    }

    /// Replaces a field's value without marking its key as changed (the engine filling in an
    /// asset's digest or local file).
    package mutating func setValueKeepingChangeState(_ value: RecordValue, forKey key: String) {
        values[key] = value
    }

    /// The keys of every field the record holds, sorted.
    public func allKeys() -> [String] {
        values.keys.sorted()
    }

    /// The record's string fields by key; fields of other types are left out.
    public var stringFields: [String: String] {
        values.compactMapValues { value in
            if case .string(let text) = value { text } else { nil }
        }
    }

    /// The keys set since the record was created or its system fields were last applied, sorted.
    ///
    /// A key set to `nil` is included: saving the record removes that field on the server.
    public func changedKeys() -> [String] {
        changed.sorted()
    }

    /// Whether ``parent`` was set since the record was created or its system fields were applied.
    public var isParentChanged: Bool { parentChanged }

    /// Every field the record holds, keyed by name.
    package var fields: [String: RecordValue] { values }

    // MARK: System fields

    /// The server's version tag of the record; `nil` until the record has been saved.
    public var recordChangeTag: String? { systemFields.recordChangeTag }
    /// When the record was first saved to the server.
    public var creationDate: Date? { systemFields.creationDate }
    /// When the record was last saved to the server.
    public var modificationDate: Date? { systemFields.modificationDate }
    /// The user who first saved the record.
    public var creatorUserRecordID: ID? { systemFields.creatorUserRecordID }
    /// The user who last saved the record.
    public var lastModifiedUserRecordID: ID? { systemFields.lastModifiedUserRecordID }
    /// The share that shares the hierarchy this record is the root of, as `CKRecord.share`
    /// (F123); `nil` for every other record.
    ///
    /// The server sets it when it saves the root: save the root in the same request as a new
    /// hierarchy share (as CloudKit asks), and again in the request that deletes the share to
    /// clear it. It is set on the root only: the records that reach the root through `parent`
    /// are shared with it but do not name the share, and the records of a zone shared whole do
    /// not name the zone's share either (the zone's ``RecordZone/share`` does), as in CloudKit.
    /// A participant sees it with the zone named as their shared database names it (F120).
    public var share: Reference? { systemFields.share }

    /// A copy holding only the ID, type, system fields and parent: no fields and no changed keys.
    ///
    /// The analogue of `encodeSystemFields(with:)` (F131): keep the copy (it is `Codable`) as the
    /// last known server record, and rebuild an edit from it by setting fields; the save then
    /// carries exactly those keys and passes the change-tag check.
    public func systemFieldsCopy() -> Record {
        var copy = Record(recordType: recordType, recordID: recordID)
        copy.systemFields = systemFields
        copy.parent = parent
        copy.parentChanged = false
        return copy
    }

    /// Replaces the system fields and marks every field and the parent as unchanged.
    ///
    /// The engine calls this with the server's copy after a successful save; the server calls it
    /// when it assigns new system fields (F158).
    package mutating func applySystemFields(_ systemFields: SystemFields) {
        self.systemFields = systemFields
        changed.removeAll()
        parentChanged = false
    }

    /// Copies another copy's system fields onto this record and marks everything unchanged.
    ///
    /// - Precondition: `other` has the same record ID.
    package mutating func applySystemFields(from other: Record) {
        precondition(other.recordID == recordID, "applySystemFields: \(other.recordID) is not \(recordID)")
        applySystemFields(other.systemFields)
    }

    /// The same record with every ID in zone `old` (its own ID, its parent, its share, its
    /// references, in lists too) moved to zone `new`; everything else, changed keys included, stays as it is.
    ///
    /// A server uses it when two IDs name one zone, such as `__defaultOwner__` and the user's
    /// record name as owner of a private database's zone: it keeps one spelling and answers in
    /// the request's.
    package func renamingZone(_ old: RecordZone.ID, to new: RecordZone.ID) -> Record {
        func moved(_ id: ID) -> ID { id.zoneID == old ? ID(recordName: id.recordName, zoneID: new) : id }
        func moved(_ value: RecordValue) -> RecordValue {
            switch value {
            case .reference(var reference):
                reference.recordID = moved(reference.recordID)
                return .reference(reference)
            case .list(let elements):
                return .list(elements.map(moved))
            default:
                return value
            }
        }
        var copy = Record(recordType: recordType, recordID: moved(recordID))
        copy.systemFields = systemFields.with(
            tag: systemFields.recordChangeTag,
            share: systemFields.share.map { Reference(recordID: moved($0.recordID), action: $0.action) })
        copy.parent = parent.map { Reference(recordID: moved($0.recordID), action: $0.action) }
        copy.values = values.mapValues(moved)
        copy.changed = changed
        copy.parentChanged = parentChanged
        return copy
    }

    // MARK: Size

    /// The approximate size of the record's non-asset field data in bytes, for the 1 MB limit.
    ///
    /// The sum, over the fields, of the key's UTF-8 length and ``RecordValue/estimatedSize``, plus
    /// the parent reference if any. The ID, type and system fields are not counted (F134).
    ///
    /// - Complexity: O(n) in the size of the fields.
    public var estimatedSize: Int {
        var total = parent?.estimatedSize ?? 0
        for (key, value) in values {
            total += key.utf8.count + value.estimatedSize
        }
        return total
    }

    /// A one-line rendering, for example
    /// `Record(Note, record "n1" in zone "Notes", tag "12", 2 fields, changed [title])`.
    public var description: String {
        var text = "Record(\(recordType), \(recordID)"
        if let tag = recordChangeTag { text += ", tag \(quoted(tag))" }
        text += ", \(values.count) field\(values.count == 1 ? "" : "s")"
        if !changed.isEmpty { text += ", changed [\(changedKeys().joined(separator: ", "))]" }
        return text + ")"
    }
}
