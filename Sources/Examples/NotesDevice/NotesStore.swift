import Foundation
import GRDB
import LogSync
import LogSyncSQLite

/// The notes app's data on one device: a SQLite file, DATA/notes.sqlite, with a folder per
/// user's Notes zone and its notes (a foreign key, deleting a folder deletes its notes).
///
/// The tables sync themselves (``tables``: that is all the sync code the app has): every write
/// is captured in the transaction that makes it and handed to the engines before the command
/// sends, and a write whose process ended before the hand-off is handed off when the store opens
/// again. The app's own bookkeeping (who the user is, the owners of shared zones) is in tables
/// that do not sync.
///
/// A note's primary key is `name.owner`, its folder's `Notes.owner`, where `owner` is the user
/// record name of the zone's owner: the same note on every device of every user it is shared
/// with, and no two users' notes or folders on the same key.
final class NotesStore: Sendable {
    /// The synced tables: the folder (the root of the share of Notes, F123) and its notes, the
    /// attachment a file synced as an asset (F134).
    static let tables = [
        SyncedTable("folders", recordType: "Folder", zone: .named("Notes")),
        SyncedTable("notes", recordType: "Note", zone: .named("Notes"), parent: "folderID")
            .column("attachment", as: .assetFile),
    ]

    /// The schema, version 1.
    static func migrate(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS folders(id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL DEFAULT 'Notes');
                CREATE TABLE IF NOT EXISTS notes(
                  id TEXT PRIMARY KEY NOT NULL,
                  folderID TEXT NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
                  name TEXT NOT NULL DEFAULT '', title TEXT, body TEXT, attachment TEXT);
                CREATE TABLE IF NOT EXISTS device(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS sharedOwners(
                  ownerName TEXT PRIMARY KEY NOT NULL, email TEXT, permission TEXT);
                """)
    }

    /// The fields `set` edits: the notes table's text columns.
    static let fields = ["body", "title"]
    /// The column holding a note's attachment, the path of its file.
    static let attachment = "attachment"

    let database: SyncedDatabase
    var writer: any DatabaseWriter { database.writer }

    init(database: SyncedDatabase) { self.database = database }

    // MARK: Who owns what

    /// The user's record name (`_user2`), as the server told it once; `nil` before that.
    var me: String? {
        (try? writer.read { try String.fetchOne($0, sql: "SELECT value FROM device WHERE key = 'me'") }) ?? nil
    }

    func remember(me: String) throws {
        try writer.write {
            try $0.execute(sql: "INSERT OR REPLACE INTO device(key, value) VALUES ('me', ?)", arguments: [me])
        }
    }

    /// The folder of the Notes zone `owner` (a user record name) owns.
    static func folderID(owner: String) -> String { "Notes.\(owner)" }
    /// A note's primary key in the Notes zone of `owner`.
    static func noteID(_ name: String, owner: String) -> String { "\(name).\(owner)" }

    /// The owner of a folder or note (its key's last part), and a note's name (the rest).
    static func split(_ key: String) -> (name: String, owner: String) {
        guard let dot = key.lastIndex(of: ".") else { return (key, "") }
        return (String(key[..<dot]), String(key[key.index(after: dot)...]))
    }

    /// How the owner of a shared zone is named: their e-mail address, or their user record name.
    func ownerLabel(_ ownerName: String) -> String {
        let email = try? writer.read {
            try String.fetchOne($0, sql: "SELECT email FROM sharedOwners WHERE ownerName = ?", arguments: [ownerName])
        }
        return (email ?? nil) ?? ownerName
    }

    /// How a note is named in what the device prints: `groceries` in the user's own zone,
    /// `groceries of alice@example.com` in a zone shared by alice.
    func label(_ key: String) -> String {
        let (name, owner) = Self.split(key)
        return owner == me || me == nil ? name : "\(name) of \(ownerLabel(owner))"
    }

    /// The owner's user record name of the shared Notes zone whose owner is `owner` (their
    /// e-mail address, ignoring case, or their user record name), if the user accepted its share.
    func sharedOwner(_ owner: String) throws -> String? {
        try writer.read {
            try String.fetchOne(
                $0, sql: "SELECT ownerName FROM sharedOwners WHERE ownerName = ? OR lower(email) = lower(?)",
                arguments: [owner, owner])
        }
    }

    /// Keeps (or updates) a zone shared with the user: its owner's address and what the user may do.
    func keepShared(ownerName: String, email: String?, permission: String?) throws {
        try writer.write {
            try $0.execute(
                sql: """
                    INSERT INTO sharedOwners(ownerName, email, permission) VALUES (?, ?, ?)
                    ON CONFLICT(ownerName) DO UPDATE SET email = coalesce(excluded.email, email),
                      permission = coalesce(excluded.permission, permission)
                    """, arguments: [ownerName, email, permission])
        }
    }

    func isShared(ownerName: String) throws -> Bool {
        try writer.read {
            try Bool.fetchOne(
                $0, sql: "SELECT EXISTS (SELECT 1 FROM sharedOwners WHERE ownerName = ?)", arguments: [ownerName])
                ?? false
        }
    }

    func forgetShared(ownerName: String) throws {
        try writer.write { try $0.execute(sql: "DELETE FROM sharedOwners WHERE ownerName = ?", arguments: [ownerName]) }
    }

    /// A value the app keeps for itself (not synced).
    func value(_ key: String) -> String? {
        (try? writer.read { try String.fetchOne($0, sql: "SELECT value FROM device WHERE key = ?", arguments: [key]) })
            ?? nil
    }

    func setValue(_ value: String?, _ key: String) throws {
        try writer.write { db in
            if let value {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO device(key, value) VALUES (?, ?)", arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM device WHERE key = ?", arguments: [key])
            }
        }
    }

    // MARK: Notes

    /// A note's fields (those set), or `nil` if the device has no such note.
    func note(_ key: String) -> [String: String]? {
        let row = try? writer.read { try Row.fetchOne($0, sql: "SELECT * FROM notes WHERE id = ?", arguments: [key]) }
        return (row ?? nil).map(Self.fields(of:))
    }

    static func fields(of row: Row) -> [String: String] {
        var fields: [String: String] = [:]
        for column in Self.fields + [Self.attachment] {
            if let text: String = row[column] { fields[column] = text }
        }
        return fields
    }

    /// Sets a field of a note in the folder of `owner`, creating the note (and, in the user's
    /// own zone, the folder): one transaction, captured for the engines as it commits.
    func set(_ field: String, of name: String, owner: String, to text: String) throws {
        let folder = Self.folderID(owner: owner)
        let own = owner == me
        try writer.write { db in
            if own {
                try db.execute(sql: "INSERT OR IGNORE INTO folders(id) VALUES (?)", arguments: [folder])
            }
            try db.execute(
                sql: """
                    INSERT INTO notes(id, folderID, name, \(field)) VALUES (?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET \(field) = excluded.\(field)
                    """, arguments: [Self.noteID(name, owner: owner), folder, name, text])
        }
    }

    /// Deletes a note; `false` if there is none.
    func delete(_ key: String) throws -> Bool {
        try writer.write { db in
            try db.execute(sql: "DELETE FROM notes WHERE id = ?", arguments: [key])
            return db.changesCount > 0
        }
    }

    /// Every note the device holds, own notes first, each as `describe` prints it.
    func descriptions() -> [String] {
        let rows = (try? writer.read { try Row.fetchAll($0, sql: "SELECT * FROM notes ORDER BY name") }) ?? []
        let notes = rows.map { row in (key: row["id"] as String, label: label(row["id"]), fields: Self.fields(of: row))
        }
        let own = notes.filter { me == nil || Self.split($0.key).owner == me }
        let shared = notes.filter { me != nil && Self.split($0.key).owner != me }
            .sorted { (Self.split($0.key).owner, $0.label) < (Self.split($1.key).owner, $1.label) }
        return (own + shared).map { describe($0.label, $0.fields) }
    }
}

/// `groceries {body: "milk", title: "Groceries"}`; an attachment as its size and file,
/// `{attachment: 48213 bytes at /…/assets/1f2e…, title: "Trip"}`.
func describe(_ name: String, _ fields: [String: String]) -> String {
    name + " {"
        + fields.sorted { $0.key < $1.key }.map { key, value in
            guard key == NotesStore.attachment else { return "\(key): \"\(value)\"" }
            guard let size = (try? FileManager.default.attributesOfItem(atPath: value))?[.size] as? NSNumber else {
                return "\(key): missing file \(value)"
            }
            return "\(key): \(size) bytes at \(value)"
        }.joined(separator: ", ") + "}"
}

extension Share.Participant.Permission {
    /// The permission as the command line spells it: `read-write`, `read-only`, `none`.
    var spelled: String {
        switch self {
        case .none: "none"
        case .readOnly: "read-only"
        case .readWrite: "read-write"
        }
    }
}

extension Share.Participant {
    /// How the app names a participant: their e-mail address, or their user record name.
    var label: String { userIdentity.emailAddress ?? userIdentity.userRecordName ?? "nobody" }

    /// `read-write accepted`.
    var standing: String { "\(permission.spelled) \(acceptanceStatus)" }
}

extension Share {
    /// The participants but the owner, as one phrase: `bob@example.com read-write pending, …`.
    var participantsPhrase: String {
        let others = Dictionary(
            participants.filter { $0.role != .owner }.map { ($0.label, $0.standing) }, uniquingKeysWith: { $1 })
        return others.isEmpty
            ? "nobody yet" : others.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}

/// Something the user asked for that cannot be done, with the reason.
struct NotesDeviceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
