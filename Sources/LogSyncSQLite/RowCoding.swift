import Foundation
import GRDB
import LogSync

/// Columns to fields and back.
extension TableSchema {
    /// A value's text: a string as it is, a number in decimal, 16 bytes as a UUID's text (a
    /// primary key's text, the record name's first part, or a zone column's).
    static func text(_ value: DatabaseValue) -> String? {
        switch value.storage {
        case .string(let text): return text
        case .blob(let data) where data.count == 16:
            return data.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }.uuidString
        case .int64(let number): return String(number)
        case .double(let number): return String(number)
        default: return nil
        }
    }

    /// A primary key's stored value from its text.
    func keyValue(_ text: String) -> DatabaseValue { Self.keyValue(text, form: keyForm) }

    /// The row's primary key and table from a record name, `primaryKey:table`.
    static func split(_ recordName: String) -> (key: String, table: String)? {
        guard let colon = recordName.lastIndex(of: ":") else { return nil }
        return (String(recordName[..<colon]), String(recordName[recordName.index(after: colon)...]))
    }

    /// A column's value as a field (`nil`: SQL NULL, the field removed).
    func field(
        _ column: (name: String, kind: SyncedTable.Kind, encrypted: Bool), _ value: DatabaseValue,
        referenceZone: (String, String) -> RecordZone.ID?, assets: URL
    ) throws -> RecordValue? {
        let plain: RecordValue?
        if let target = references[column.name], !value.isNull {
            guard let key = Self.text(value), let zoneID = referenceZone(target, key) else {
                // A reference to a row that is not synced (yet): the key as text.
                return Self.text(value).map { .string($0) }
            }
            plain = .reference(Record.Reference(recordID: Record.ID(recordName: "\(key):\(target)", zoneID: zoneID)))
        } else {
            plain = try Self.field(column.kind, value, assets: assets)
        }
        guard column.encrypted, let plain else { return plain }
        return .encrypted(.opened(plain))
    }

    static func field(_ kind: SyncedTable.Kind, _ value: DatabaseValue, assets: URL) throws -> RecordValue? {
        switch value.storage {
        case .null: return nil
        case .int64(let number):
            if kind == .date, let date = Date.fromDatabaseValue(value) { return .date(date) }
            return .int64(number)
        case .double(let number):
            if kind == .date, let date = Date.fromDatabaseValue(value) { return .date(date) }
            return .double(number)
        case .string(let text):
            switch kind {
            case .date: return Date.fromDatabaseValue(value).map { .date($0) } ?? .string(text)
            case .assetFile: return .asset(Asset(fileURL: URL(fileURLWithPath: text)))
            default: return .string(text)
            }
        case .blob(let data):
            if case .blobAsset(let threshold) = kind, data.count > threshold {
                // Written once per content: the file's name is its digest.
                let digest = AssetHasher.digest(of: data)
                let file = assets.appendingPathComponent(digest.hex)
                if !FileManager.default.fileExists(atPath: file.path) {
                    try FileManager.default.createDirectory(at: assets, withIntermediateDirectories: true)
                    try data.write(to: file, options: .atomic)
                }
                return .asset(Asset(fileURL: file))
            }
            return .bytes(data)
        }
    }

    /// A field's value as a column's (`nil`: a value the column cannot hold, kept as NULL).
    func column(
        _ column: (name: String, kind: SyncedTable.Kind, encrypted: Bool), _ field: RecordValue?
    ) -> DatabaseValue {
        guard var field else { return .null }
        if case .encrypted(let encrypted) = field {
            guard let opened = encrypted.plaintext else { return .null }
            field = opened
        }
        if let target = references[column.name], case .reference(let reference) = field,
            let (key, table) = Self.split(reference.recordID.recordName), table == target
        {
            return keyValueOfReference(key, target)
        }
        return Self.column(column.kind, field)
    }

    /// The referenced row's key as the referring column stores it: as the target's key.
    func keyValueOfReference(_ key: String, _ target: String) -> DatabaseValue {
        referenceForms[target].map { TableSchema.keyValue(key, form: $0) } ?? key.databaseValue
    }

    /// A primary key's stored value from its text, for a key of `form`.
    static func keyValue(_ text: String, form: KeyForm) -> DatabaseValue {
        switch form {
        case .text: return text.databaseValue
        case .uuidBytes:
            guard let uuid = UUID(uuidString: text) else { return text.databaseValue }
            return withUnsafeBytes(of: uuid.uuid) { Data($0) }.databaseValue
        }
    }

    static func column(_ kind: SyncedTable.Kind, _ field: RecordValue) -> DatabaseValue {
        switch field {
        case .string(let text): return text.databaseValue
        case .int64(let number): return number.databaseValue
        case .double(let number): return number.databaseValue
        case .bool(let flag): return (flag ? 1 : 0).databaseValue
        case .bytes(let data): return data.databaseValue
        case .date(let date):
            return date.databaseValue
        case .reference(let reference):
            return (split(reference.recordID.recordName)?.key ?? reference.recordID.recordName).databaseValue
        case .asset(let asset):
            guard let file = asset.fileURL else { return .null }
            if case .blobAsset = kind { return ((try? Data(contentsOf: file)) ?? Data()).databaseValue }
            return file.path.databaseValue
        case .location, .list, .encrypted:
            // Not a column's kind: kept as its JSON (the record on the server keeps the value).
            return ((try? JSONEncoder().encode(field)).flatMap { String(data: $0, encoding: .utf8) })?.databaseValue
                ?? .null
        }
    }

    /// Whether a local value and a field hold the same thing (what a save sends is only what
    /// differs from the server's copy).
    func same(
        _ column: (name: String, kind: SyncedTable.Kind, encrypted: Bool), _ value: DatabaseValue, _ field: RecordValue?
    ) -> Bool {
        switch column.kind {
        case .assetFile, .blobAsset:
            // The server's copy holds the asset's digest, the row a path or bytes: an asset
            // changes only through an edit of the column (captured as unsaved).
            return value.isNull == (field == nil)
        default:
            return self.column(column, field) == value
        }
    }
}

extension SQLValue {
    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .real(number)
        case .string(let text): self = .text(text)
        case .blob(let data): self = .blob(data)
        }
    }

    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let number): number.databaseValue
        case .real(let number): number.databaseValue
        case .text(let text): text.databaseValue
        case .blob(let data): data.databaseValue
        }
    }
}
