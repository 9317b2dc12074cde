import Foundation
import LogSync
import Synchronization

/// The notes app's own data on one device: each note's fields, and which fields were edited here
/// and not yet saved to the server; the share of the user's Notes zone; the Notes zones other
/// users share with this user. Kept in `notes.json` next to the device logs, rewritten
/// (atomically) after every change, so an edit survives the process ending before it is sent.
///
/// The engines' device logs keep what the engines need (pending changes, tokens, the last known
/// server record of each note); this file is what an app keeps in its own store.
final class NotesStore: Sendable {
    struct Contents: Codable, Equatable {
        /// Note name → field → text: the notes of the user's own Notes zone.
        var notes: [String: [String: String]] = [:]
        /// Note name → the fields edited on this device and not yet saved.
        var unsaved: [String: Set<String>] = [:]
        /// Whether the server has confirmed the zone "Notes" (saved by this device or fetched).
        var zoneCreated: Bool? = nil
        /// The share of the user's Notes zone, if the user shares it (F119).
        var share: OwnShare? = nil
        /// The Notes zones other users share with this user, by the owner's user record name
        /// (the `ownerName` of the zone's ID in the shared database, F120).
        var shared: [String: SharedNotes]? = nil

        /// The notes and unsaved fields of a zone: the own Notes zone, or one shared with the
        /// user; `nil` for a shared zone the device does not hold. Setting `nil` forgets a
        /// shared zone.
        subscript(notebook zoneID: RecordZone.ID) -> Notebook? {
            get {
                if zoneID == NotesStore.zoneID { return Notebook(notes: notes, unsaved: unsaved) }
                return shared?[zoneID.ownerName].map { Notebook(notes: $0.notes, unsaved: $0.unsaved) }
            }
            set {
                if zoneID == NotesStore.zoneID {
                    notes = newValue?.notes ?? [:]
                    unsaved = newValue?.unsaved ?? [:]
                } else if let newValue {
                    var zone = shared?[zoneID.ownerName] ?? SharedNotes()
                    zone.notes = newValue.notes
                    zone.unsaved = newValue.unsaved
                    shared = (shared ?? [:]).merging([zoneID.ownerName: zone]) { $1 }
                } else {
                    shared?[zoneID.ownerName] = nil
                }
            }
        }
    }

    /// The notes of one zone.
    struct Notebook: Equatable {
        var notes: [String: [String: String]] = [:]
        var unsaved: [String: Set<String>] = [:]
    }

    /// The user's share of their Notes zone, as this device last saw it, and the changes to its
    /// participants made here and not yet saved.
    struct OwnShare: Codable, Equatable {
        /// The share's URL, once the server has saved the share.
        var url: String? = nil
        /// Each participant but the owner (e-mail address, or user record name when it has
        /// none) → permission and acceptance status, such as `read-write accepted`.
        var participants: [String: String] = [:]
        /// Participant → the permission given here (`read-write`, `read-only`) or `remove`.
        var unsaved: [String: String] = [:]
    }

    /// A Notes zone another user shares with this user.
    struct SharedNotes: Codable, Equatable {
        /// The owner's e-mail address, when the server told it.
        var owner: String? = nil
        /// What this user may do, as the share's metadata said on acceptance.
        var permission: String? = nil
        var notes: [String: [String: String]] = [:]
        var unsaved: [String: Set<String>] = [:]
    }

    /// The user's own zone every note is in.
    static let zoneID = RecordZone.ID(zoneName: "Notes")
    /// The ID of the zone-wide share of the user's Notes zone (CloudKit's reserved name).
    static let shareID = Record.ID(recordName: Share.zoneWideShareRecordName, zoneID: zoneID)

    /// Whether a zone is one the app keeps notes in: its own, or another user's Notes zone.
    static func isNotesZone(_ zoneID: RecordZone.ID) -> Bool { zoneID.zoneName == Self.zoneID.zoneName }

    let file: URL
    private let contents: Mutex<Contents>

    /// Opens the store in `file`, empty if the file does not exist yet.
    init(file: URL) throws {
        self.file = file
        if FileManager.default.fileExists(atPath: file.path) {
            do {
                contents = Mutex(try JSONDecoder().decode(Contents.self, from: Data(contentsOf: file)))
            } catch {
                throw NotesDeviceError("cannot read \(file.path): \(error)")
            }
        } else {
            contents = Mutex(Contents())
        }
    }

    /// The ID of the note `name` in the user's own zone, or in the zone `zoneID`.
    static func recordID(_ name: String, in zoneID: RecordZone.ID = zoneID) -> Record.ID {
        Record.ID(recordName: name, zoneID: zoneID)
    }

    /// Reads the contents.
    func read<T>(_ body: (Contents) -> T) -> T { contents.withLock { body($0) } }

    /// Changes the contents and writes them to the file.
    @discardableResult
    func update<T>(_ body: (inout Contents) -> T) throws -> T {
        try contents.withLock { contents in
            let result = body(&contents)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(contents).write(to: file, options: .atomic)
            return result
        }
    }

    /// Changes the notes of a zone the device holds (nothing for a shared zone it does not).
    @discardableResult
    func update<T>(zone zoneID: RecordZone.ID, _ body: (inout Notebook) -> T) throws -> T? {
        try update { contents in
            guard var notebook = contents[notebook: zoneID] else { return nil }
            let result = body(&notebook)
            contents[notebook: zoneID] = notebook
            return result
        }
    }

    /// Takes the server's copy of a note: its fields, except those edited here and not yet
    /// saved, which are sent next. Returns the note's fields now (`nil` for a zone the device
    /// does not hold).
    @discardableResult
    func merge(_ record: Record) throws -> [String: String]? {
        let name = record.recordID.recordName
        return try update(zone: record.recordID.zoneID) { notebook in
            let mine = notebook.unsaved[name] ?? []
            let local = notebook.notes[name] ?? [:]
            let merged = record.noteFields.merging(local.filter { mine.contains($0.key) }) { $1 }
            notebook.notes[name] = merged
            return merged
        }
    }

    /// A note's fields, or `nil` if the device has no such note.
    func note(_ id: Record.ID) -> [String: String]? { read { $0[notebook: id.zoneID]?.notes[id.recordName] } }

    /// How the owner of a shared zone is named: their e-mail address, or their user record name.
    func ownerLabel(_ ownerName: String) -> String { read { $0.shared?[ownerName]?.owner } ?? ownerName }

    /// How a note is named in what the device prints: `groceries` in the user's own zone,
    /// `groceries of alice@example.com` in a zone shared by alice.
    func label(_ id: Record.ID) -> String {
        id.zoneID == Self.zoneID ? id.recordName : "\(id.recordName) of \(ownerLabel(id.zoneID.ownerName))"
    }

    /// The shared Notes zone whose owner is `owner` (their e-mail address, ignoring case, or
    /// their user record name), if the user has accepted its share.
    func sharedZone(owner: String) -> RecordZone.ID? {
        let ownerName = read { contents in
            contents.shared?.first { name, zone in
                name == owner || zone.owner?.lowercased() == owner.lowercased()
            }?.key
        }
        return ownerName.map { RecordZone.ID(zoneName: Self.zoneID.zoneName, ownerName: $0) }
    }

    /// Every note the device holds, own notes first, each as `describe` prints it.
    func descriptions() -> [String] {
        let (own, shared) = read { ($0.notes, $0.shared ?? [:]) }
        var lines = own.sorted { $0.key < $1.key }.map { describe($0.key, $0.value) }
        for (ownerName, zone) in shared.sorted(by: { $0.key < $1.key }) {
            let owner = zone.owner ?? ownerName
            lines += zone.notes.sorted { $0.key < $1.key }.map { describe("\($0.key) of \(owner)", $0.value) }
        }
        return lines
    }
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

    /// The permission a spelling names.
    init?(spelled: String) {
        guard let permission = Self.allCases.first(where: { $0.spelled == spelled }) else { return nil }
        self = permission
    }
}

extension Share.Participant {
    /// How the app names a participant: their e-mail address, or their user record name.
    var label: String { userIdentity.emailAddress ?? userIdentity.userRecordName ?? "nobody" }

    /// `read-write accepted`.
    var standing: String { "\(permission.spelled) \(acceptanceStatus)" }
}

/// Something the user asked for that cannot be done, with the reason.
struct NotesDeviceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
