import Foundation
import LogSync

/// Why a synced database cannot open, or cannot take a row.
public enum SyncedDatabaseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The SQLite file is not a database, or is damaged (SQLite's own words in `message`).
    case corruptDatabase(path: String, message: String)
    /// A declared table is not in the database.
    case unknownTable(String)
    /// A declared table has no primary key, or one of several columns.
    case unsupportedPrimaryKey(table: String, reason: String)
    /// A declaration names a column the table does not have.
    case unknownColumn(table: String, column: String)
    /// Two declarations share a table name or a record type.
    case duplicateDeclaration(String)
    /// A row's primary key cannot name a record (not ASCII, too long, empty).
    case invalidPrimaryKey(table: String, primaryKey: String, reason: String)
    /// The share named does not exist, or the row it would be rooted at is not synced yet.
    case noSuchRow(table: String, primaryKey: String)
    /// The database has no shared database to accept shares into.
    case noSharedDatabase

    public var description: String {
        switch self {
        case .corruptDatabase(let path, let message): "\(path) is not a usable SQLite database: \(message)"
        case .unknownTable(let table): "no table \"\(table)\" in the database"
        case .unsupportedPrimaryKey(let table, let reason): "table \"\(table)\": \(reason)"
        case .unknownColumn(let table, let column): "table \"\(table)\" has no column \"\(column)\""
        case .duplicateDeclaration(let name): "\"\(name)\" is declared twice"
        case .invalidPrimaryKey(let table, let key, let reason):
            "table \"\(table)\", primary key \"\(key)\": \(reason)"
        case .noSuchRow(let table, let key): "table \"\(table)\" has no synced row \"\(key)\""
        case .noSharedDatabase: "the synced database was opened without a shared database"
        }
    }
}

/// A row the server refused for good: kept on the device, reported here until the app clears it.
///
/// The row stays as the app wrote it; its edits stay unsaved, so the next edit of the row sends
/// them again. `quotaExceeded` is also queued again at once, to go with a later send once the
/// account has room.
public struct RowRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The table.
    public let table: String
    /// The row's primary key, as text.
    public let primaryKey: String
    /// Whether the refused change was the row's deletion.
    public let deletion: Bool
    /// The server's error code.
    public let code: SyncError.Code
    /// The server's message.
    public let message: String

    public var description: String {
        "\(deletion ? "deleting" : "saving") \(table) row \"\(primaryKey)\" was refused: \(code) (\(message))"
    }
}
