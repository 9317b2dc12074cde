import Foundation
import LogSync

/// A SQLite table whose rows sync: each row is a record of ``recordType``, each column a field.
///
/// ```swift
/// let folders = SyncedTable("folders")
/// let notes = SyncedTable("notes", parent: "folderID", conflicts: .fieldByField)
///     .column("attachment", as: .assetFile)
///     .column("secret", encrypted: true)
/// ```
///
/// The primary key is one column holding text (a UUID's text is fine): the record's name is
/// `primaryKey:table`, so two tables never share a record name. Every other column is a field,
/// its kind read from the column's declared type (`TEXT`, `INTEGER`, `REAL`, `BLOB`) unless
/// ``column(_:as:encrypted:)`` says otherwise. A foreign key to another synced table is a
/// reference field; the one named `parent` is also the record's parent, so a share rooted at a
/// row shares the rows below it (F123).
public struct SyncedTable: Sendable, Hashable {
    /// The SQLite table.
    public var name: String
    /// The record type of its rows; the table's name by default.
    public var recordType: String
    /// The zone each row is in.
    public var zone: ZoneRule
    /// The foreign-key column that is the record's parent, if any.
    public var parent: String?
    /// How a conflict between this device's unsaved edit and the server's copy is settled.
    public var conflicts: ConflictPolicy
    /// Columns whose kind is not the one their declared type gives, or that are encrypted.
    public var columns: [String: Column]

    /// How a row's zone is chosen.
    public enum ZoneRule: Sendable, Hashable {
        /// Every row in one zone of the user's private database.
        case named(String)
        /// Each row in the zone named by one of its columns' text (a zone per list, per project).
        case column(String)
    }

    /// What a column holds, as a field.
    public enum Kind: Sendable, Hashable {
        /// A string field (a `TEXT` column).
        case text
        /// An integer field (`INTEGER`).
        case integer
        /// A double field (`REAL`).
        case real
        /// A bytes field (`BLOB`).
        case blob
        /// A date field; the column holds what GRDB writes for a `Date` (text, UTC).
        case date
        /// JSON text, synced as a string and kept byte for byte.
        case json
        /// The path of a file: synced as an asset; a fetched row's column holds the path of the
        /// engine's cached copy.
        case assetFile
        /// Bytes up to `threshold` synced as a bytes field, larger ones as an asset (read back
        /// into the column when fetched).
        case blobAsset(threshold: Int)
    }

    /// How one column syncs.
    public struct Column: Sendable, Hashable {
        /// Its kind, or `nil` for the one its declared type gives.
        public var kind: Kind?
        /// Whether the field is encrypted end to end (F129, Docs/Encryption.md): the server never sees its value.
        public var encrypted: Bool
    }

    /// A table named `name` whose rows are records of `recordType` (the table's name by default)
    /// in the zone `zone`.
    public init(
        _ name: String, recordType: String? = nil, zone: ZoneRule = .named("Default"), parent: String? = nil,
        conflicts: ConflictPolicy = .fieldByField
    ) {
        self.name = name
        self.recordType = recordType ?? name
        self.zone = zone
        self.parent = parent
        self.conflicts = conflicts
        self.columns = [:]
    }

    /// The same table with `column` synced as `kind`, encrypted or not.
    public func column(_ column: String, as kind: Kind? = nil, encrypted: Bool = false) -> SyncedTable {
        var table = self
        table.columns[column] = Column(kind: kind, encrypted: encrypted)
        return table
    }
}

/// How a conflict is settled: the server's copy changed since this device last saw it, and the
/// row has edits here the server has not saved.
public struct ConflictPolicy: Sendable, Hashable {
    enum Rule: Sendable, Hashable {
        case serverWins
        case lastEditWins(column: String)
        case fieldByField
        case custom(name: String)
    }

    let rule: Rule
    let merge: Merge?

    /// The app's own merge: the merged row from the local row, the server's copy and the columns
    /// edited here and not yet saved. Values are `SQLValue`s by column name.
    public typealias Merge = @Sendable (_ conflict: Conflict) -> [String: SQLValue]

    /// What a merge is given.
    public struct Conflict: Sendable {
        /// The table.
        public let table: String
        /// The row's primary key.
        public let primaryKey: String
        /// The row on this device.
        public let local: [String: SQLValue]
        /// The server's copy, as a row.
        public let server: [String: SQLValue]
        /// The columns edited on this device that the server has not saved.
        public let unsavedColumns: Set<String>
    }

    /// The server's copy wins: this device's unsaved edits of the row are dropped.
    public static let serverWins = ConflictPolicy(rule: .serverWins, merge: nil)
    /// The server's copy, with the columns edited here and not yet saved on top (as a text
    /// merge of two people editing different fields).
    public static let fieldByField = ConflictPolicy(rule: .fieldByField, merge: nil)
    /// The whole row whose `column` (a modification date or counter the app keeps) is larger
    /// wins; a tie goes to the server.
    public static func lastEditWins(by column: String) -> ConflictPolicy {
        ConflictPolicy(rule: .lastEditWins(column: column), merge: nil)
    }
    /// The app's merge, named for descriptions and equality.
    public static func custom(_ name: String, _ merge: @escaping Merge) -> ConflictPolicy {
        ConflictPolicy(rule: .custom(name: name), merge: merge)
    }

    public static func == (lhs: ConflictPolicy, rhs: ConflictPolicy) -> Bool { lhs.rule == rhs.rule }
    public func hash(into hasher: inout Hasher) { hasher.combine(rule) }
}

/// One SQLite value, as a conflict merge sees it.
public enum SQLValue: Sendable, Hashable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    public var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let value): "\(value)"
        case .real(let value): "\(value)"
        case .text(let value): "\"\(value)\""
        case .blob(let value): "\(value.count) bytes"
        }
    }
}
