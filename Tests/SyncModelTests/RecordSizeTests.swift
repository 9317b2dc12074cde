import Foundation
import SyncModel
import Testing

/// Size estimates used by the 1 MB record and 2 MB request limits (F134, F151).
struct RecordSizeTests {
    static let reference = Record.Reference(recordID: Record.ID(recordName: "r", zoneID: RecordZone.ID(zoneName: "Z")))

    // F134
    @Test(
        "value size estimates",
        arguments: [
            (RecordValue.string("héllo"), 6),
            (.string(""), 0),
            (.int64(.max), 8),
            (.double(1), 8),
            (.bool(true), 1),
            (.bytes(Data(count: 1000)), 1000),
            (.date(Date(timeIntervalSince1970: 0)), 8),
            (.reference(reference), 1 + 1 + 16 + 1),
            (.asset(Asset(digest: AssetHasher.digest(of: Array("abc".utf8)), size: 3)), 40),
            (.location(Location(latitude: 1, longitude: 2)), 64),
            (.list([.string("ab"), .string("cde")]), 5),
            (.list([]), 0),
        ])
    func valueSize(_ value: RecordValue, expected: Int) {
        #expect(value.estimatedSize == expected)
    }

    // F134: keys and values count, the parent counts, the ID and type do not.
    @Test func recordSizeSumsKeysValuesAndParent() {
        var record = Record(recordType: "AVeryLongTypeNameThatDoesNotCount", recordID: Fixture.n1)
        #expect(record.estimatedSize == 0)
        record["ab"] = .string("xyz")
        record["n"] = 7
        #expect(record.estimatedSize == (2 + 3) + (1 + 8))
        record.parent = Self.reference
        #expect(record.estimatedSize == 14 + 19)
    }

    // F134: exactly 1 MB passes, 1 MB + 1 B is rejected with limitExceeded naming the record.
    @Test func recordLimitBoundary() throws {
        let atLimit = Fixture.record(named: "big", size: Limits.maxRecordBytes)
        #expect(atLimit.estimatedSize == 1_000_000)
        try atLimit.validate()

        let over = Fixture.record(named: "big", size: Limits.maxRecordBytes + 1)
        let error = try #require(throws: SyncError.self) { try over.validate() }
        #expect(error.code == .limitExceeded)
        #expect(error.item == .record(over.recordID))
        #expect(error.description.contains(#"record "big""#))
        #expect(error.message.contains("1000001 bytes"))
    }

    // F134: a 1 MB + 1 B string field is rejected too.
    @Test func oversizedStringIsRejected() {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["s"] = .string(String(repeating: "a", count: 1_000_000))
        #expect(throws: SyncError.self) { try record.validate() }
    }

    // F134: asset content is stored apart and never counted; a 10 MB asset is accepted.
    @Test func assetsDoNotCount() throws {
        var record = Record(recordType: "Photo", recordID: Fixture.n1)
        record["image"] = .asset(Asset(digest: AssetHasher.digest(of: Array("10 MB".utf8)), size: 10_000_000))
        #expect(record.estimatedSize == 5 + 40)
        try record.validate()
    }

    @Test func limitsMatchTheSpec() {
        #expect(Limits.maxItemsPerRequest == 400)
        #expect(Limits.maxRequestBytes == 2_000_000)
        #expect(Limits.maxRecordBytes == 1_000_000)
        #expect(Limits.maxNameLength == 255)
        #expect(Limits.maxDeleteSelfReferencesPerTarget == 750)
        #expect(Limits.maxHierarchyDepth == 1_000)  // F123, F135
    }
}
