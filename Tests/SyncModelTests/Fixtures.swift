import Foundation

@testable import SyncModel

/// Shared IDs and helpers for the SyncModel tests.
enum Fixture {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let photos = RecordZone.ID(zoneName: "Photos")
    static let sharedNotes = RecordZone.ID(zoneName: "Notes", ownerName: "_owner42")
    static let n1 = Record.ID(recordName: "n1", zoneID: notes)
    static let n2 = Record.ID(recordName: "n2", zoneID: notes)
    static let alice = Record.ID(recordName: "_alice")
    static let bob = Record.ID(recordName: "_bob")
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    /// A note as the server returns it after its first save.
    static func savedNote(_ id: Record.ID = n1, tag: String = "7") -> Record {
        var note = Record(recordType: "Note", recordID: id)
        note["title"] = "Groceries"
        note["count"] = 3
        note.parent = Record.Reference(recordID: n2)
        note.applySystemFields(
            Record.SystemFields(
                recordChangeTag: tag, creationDate: t0, modificationDate: t0.addingTimeInterval(60),
                creatorUserRecordID: alice, lastModifiedUserRecordID: bob))
        return note
    }

    /// A record whose only field `k` makes it exactly `size` bytes by ``Record/estimatedSize``.
    static func record(named name: String, size: Int, zoneID: RecordZone.ID = notes) -> Record {
        var record = Record(recordType: "Blob", recordID: Record.ID(recordName: name, zoneID: zoneID))
        record["k"] = .bytes(Data(count: size - 1))
        return record
    }
}

/// Encodes a value to JSON and decodes it back.
func jsonRoundTrip<T: Codable>(_ value: T) throws -> T {
    try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
}
