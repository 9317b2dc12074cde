import Foundation
import LogSync
import Synchronization

/// The notes app's own data on one device: each note's fields, and which fields were edited here
/// and not yet saved to the server. Kept in `notes.json` next to the device log, rewritten
/// (atomically) after every change, so an edit survives the process ending before it is sent.
///
/// The engine's device log keeps what the engine needs (pending changes, tokens, the last known
/// server record of each note); this file is what an app keeps in its own store.
final class NotesStore: Sendable {
    struct Contents: Codable, Equatable {
        /// Note name → field → text.
        var notes: [String: [String: String]] = [:]
        /// Note name → the fields edited on this device and not yet saved.
        var unsaved: [String: Set<String>] = [:]
        /// Whether the server has confirmed the zone "Notes" (saved by this device or fetched).
        var zoneCreated: Bool? = nil
    }

    /// The zone every note is in.
    static let zoneID = RecordZone.ID(zoneName: "Notes")

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

    static func recordID(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: zoneID) }

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

    /// Takes the server's copy of a note: its fields, except those edited here and not yet
    /// saved, which are sent next. Returns the note's fields now.
    func merge(_ record: Record) throws -> [String: String] {
        let name = record.recordID.recordName
        return try update { contents in
            let mine = contents.unsaved[name] ?? []
            let local = contents.notes[name] ?? [:]
            let merged = record.stringFields.merging(local.filter { mine.contains($0.key) }) { $1 }
            contents.notes[name] = merged
            return merged
        }
    }

    /// A note's fields, or `nil` if the device has no such note.
    func note(_ name: String) -> [String: String]? { read { $0.notes[name] } }
}

/// Something the user asked for that cannot be done, with the reason.
struct NotesDeviceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
