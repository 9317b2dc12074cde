import Foundation
import Testing

@testable import SyncModel

/// `Record.share` (F123, `CKRecord.share`): a system field the server sets on the root of a
/// hierarchy share, carried by every encoding of a record, and absent from encodings written
/// before it existed.
struct RecordShareTests {
    static let shareID = Record.ID(recordName: "share-1", zoneID: Fixture.notes)

    static func sharedRoot() -> Record {
        var root = Fixture.savedNote()
        root.applySystemFields(
            root.systemFields.with(tag: "8", share: Record.Reference(recordID: shareID, action: .none)))
        return root
    }

    @Test("F123 a root's share round-trips through protobuf, JSON and its system-fields copy")
    func roundTrips() throws {
        let root = Self.sharedRoot()
        #expect(root.share?.recordID == Self.shareID)
        #expect(try Record(proto: root.proto).share == root.share)
        #expect(try Record(protoBytes: root.serializedProto()).share == root.share)
        #expect(try jsonRoundTrip(root).share == root.share)
        #expect(root.systemFieldsCopy().share == root.share)
        #expect(Fixture.savedNote().share == nil)
    }

    @Test("F123 records encoded before Record.share existed decode with no share")
    func oldEncodingsDecode() throws {
        // The protobuf of a saved record as it was written before: system fields 1-5 only.
        var old = Logsync_Model_Record()
        old.recordType = "Note"
        old.recordID = Fixture.n1.proto
        old.systemFields.recordChangeTag = "7"
        old.systemFields.creatorUserRecordID = Fixture.alice.proto
        let decoded = try Record(protoBytes: ProtoWire.serialize(old))
        #expect(decoded.recordChangeTag == "7")
        #expect(decoded.share == nil)
        // The JSON of system fields as they were written before (Codable, no "share" key).
        let json = Data(#"{"recordChangeTag":"7"}"#.utf8)
        let fields = try JSONDecoder().decode(Record.SystemFields.self, from: json)
        #expect(fields.recordChangeTag == "7")
        #expect(fields.share == nil)
    }

    @Test("F120 F123 renaming a record's zone renames its share reference too")
    func renamedWithItsZone() throws {
        let root = Self.sharedRoot()
        let renamed = root.renamingZone(Fixture.notes, to: Fixture.sharedNotes)
        #expect(renamed.share?.recordID == Record.ID(recordName: "share-1", zoneID: Fixture.sharedNotes))
        #expect(renamed.recordChangeTag == "8")
    }
}
