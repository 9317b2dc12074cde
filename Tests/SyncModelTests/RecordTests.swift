import Foundation
import Testing

@testable import SyncModel

/// Fields, changed-key tracking and system fields of `Record` (F130–F133).
struct RecordTests {
    // F133
    @Test func settingFieldsMarksKeysChanged() {
        var note = Record(recordType: "Note", recordID: Fixture.n1)
        #expect(note.changedKeys().isEmpty)
        note["title"] = .string("Groceries")
        note["done"] = false
        note["title"] = "Groceries, again"
        #expect(note.changedKeys() == ["done", "title"])
        #expect(note.allKeys() == ["done", "title"])
        #expect(note["title"] == .string("Groceries, again"))
        #expect(note["missing"] == nil)
    }

    // F132, F133: setting nil removes the field but keeps the key changed, so the save removes it.
    @Test func settingNilRemovesFieldAndStaysChanged() {
        var note = Fixture.savedNote()
        note["count"] = nil
        #expect(note.allKeys() == ["title"])
        #expect(note.changedKeys() == ["count"])
    }

    @Test func literalsBuildValues() {
        var record = Record(recordType: "T", recordID: Fixture.n1)
        record["s"] = "x"
        record["i"] = 42
        record["d"] = 1.5
        record["b"] = true
        #expect(record["s"] == .string("x"))
        #expect(record["i"] == .int64(42))
        #expect(record["d"] == .double(1.5))
        #expect(record["b"] == .bool(true))
    }

    // F130: a record built on the device has no system fields.
    @Test func newRecordHasNoSystemFields() {
        let note = Record(recordType: "Note", recordID: Fixture.n1)
        #expect(note.recordChangeTag == nil)
        #expect(note.creationDate == nil)
        #expect(note.modificationDate == nil)
        #expect(note.creatorUserRecordID == nil)
        #expect(note.lastModifiedUserRecordID == nil)
        #expect(note.parent == nil)
        #expect(!note.isParentChanged)
    }

    // F130, F158: applying system fields sets them and clears changed keys.
    @Test func applyingSystemFieldsClearsChangedKeys() {
        let note = Fixture.savedNote()
        #expect(note.recordChangeTag == "7")
        #expect(note.creationDate == Fixture.t0)
        #expect(note.modificationDate == Fixture.t0.addingTimeInterval(60))
        #expect(note.creatorUserRecordID == Fixture.alice)
        #expect(note.lastModifiedUserRecordID == Fixture.bob)
        #expect(note.changedKeys().isEmpty)
        #expect(!note.isParentChanged)
        #expect(note.allKeys() == ["count", "title"])
    }

    @Test func applyingSystemFieldsFromAServerCopy() {
        var local = Record(recordType: "Note", recordID: Fixture.n1)
        local["title"] = "Draft"
        local.applySystemFields(from: Fixture.savedNote(tag: "8"))
        #expect(local.recordChangeTag == "8")
        #expect(local["title"] == "Draft")
        #expect(local.changedKeys().isEmpty)
    }

    @Test func parentChangesAreTracked() {
        var note = Fixture.savedNote()
        note.parent = nil
        #expect(note.isParentChanged)
        #expect(note.changedKeys().isEmpty)
    }

    // F131: the system-fields copy keeps identity and metadata but no fields or changed keys.
    @Test func systemFieldsCopyHoldsOnlyMetadata() {
        var note = Fixture.savedNote()
        note["title"] = "Edited"
        let copy = note.systemFieldsCopy()
        #expect(copy.recordID == note.recordID)
        #expect(copy.recordType == "Note")
        #expect(copy.systemFields == note.systemFields)
        #expect(copy.parent == note.parent)
        #expect(copy.allKeys().isEmpty)
        #expect(copy.changedKeys().isEmpty)
        #expect(!copy.isParentChanged)
        #expect(copy.estimatedSize == note.parent!.estimatedSize)
    }

    // F131, F133: decode the archive, set two keys, and exactly those two keys are sent.
    @Test func archiveThenEditSendsExactlyTheEditedKeys() throws {
        let archive = try JSONEncoder().encode(Fixture.savedNote().systemFieldsCopy())
        var edit = try JSONDecoder().decode(Record.self, from: archive)
        #expect(edit.recordChangeTag == "7")
        #expect(edit.allKeys().isEmpty)
        edit["title"] = "Milk"
        edit["done"] = true
        #expect(edit.changedKeys() == ["done", "title"])
        let request = ModifyRecordsRequest(recordsToSave: [edit])
        let sent = try jsonRoundTrip(request).recordsToSave[0]
        #expect(sent.changedKeys() == ["done", "title"])
        #expect(sent.recordChangeTag == "7")
    }

    @Test func recordRoundTripsEveryValueType() throws {
        var record = Fixture.savedNote()
        record["s"] = "text"
        record["i"] = .int64(.min)
        record["d"] = .double(-0.5)
        record["b"] = .bool(false)
        record["bytes"] = .bytes(Data([0, 1, 255]))
        record["date"] = .date(Fixture.t0)
        record["ref"] = .reference(Record.Reference(recordID: Fixture.n2, action: .deleteSelf))
        record["asset"] = .asset(Asset(digest: AssetHasher.digest(of: Array("asset-1".utf8)), size: 7))
        record["list"] = .list([.int64(1), .int64(2)])
        let decoded = try jsonRoundTrip(record)
        #expect(decoded == record)
        #expect(decoded.changedKeys() == record.changedKeys())
    }

    @Test func descriptionIsOneLine() {
        var note = Fixture.savedNote()
        note["title"] = "x"
        #expect(note.description == #"Record(Note, record "n1" in zone "Notes", tag "7", 2 fields, changed [title])"#)
    }

    @Test func referenceInitializers() {
        let note = Fixture.savedNote()
        let reference = Record.Reference(record: note, action: .deleteSelf)
        #expect(reference.recordID == Fixture.n1)
        #expect(Record.Reference(recordID: Fixture.n1).action == .none)
        #expect(Record.Reference.Action.allCases.map(\.rawValue) == [0, 1])
        #expect(reference.description == #"Reference(record "n1" in zone "Notes", deleteSelf)"#)
    }
}
