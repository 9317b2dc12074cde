import Foundation
import LogStore
import Testing

@testable import SyncModel

/// `Record.serializedProto()` writes the record's bytes directly: they must be exactly
/// SwiftProtobuf's (`ProtoWire.serialize(record.proto)`), since a server fingerprints requests
/// with them and compares fingerprints written by either (F160).
@Suite("A record's protobuf bytes, written directly")
struct ProtoRecordWriterTests {
    static let zone = RecordZone.ID(zoneName: "Notes")
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000.123456)

    static func expectSameBytes(_ record: Record, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let direct = record.serializedProto()
        #expect(direct == ProtoWire.serialize(record.proto), "\(record)", sourceLocation: sourceLocation)
        // And they read back as the record (compared by bytes: a NaN is not equal to itself).
        #expect(try Record(protoBytes: direct).protoBytes() == direct, sourceLocation: sourceLocation)
    }

    /// Every kind of value, with its edge cases.
    static let values: [(String, RecordValue)] = [
        ("string", .string("Groceries")), ("empty", .string("")), ("unicode", .string("café ☕️ 𝄞")),
        ("int", .int64(42)), ("zero", .int64(0)), ("negative", .int64(-1)), ("min", .int64(.min)),
        ("max", .int64(.max)),
        ("double", .double(3.25)), ("negativeZero", .double(-0.0)), ("nan", .double(.nan)),
        ("infinity", .double(-.infinity)),
        ("true", .bool(true)), ("false", .bool(false)),
        ("bytes", .bytes(Data([0, 1, 0xFF]))), ("noBytes", .bytes(Data())),
        ("long", .bytes(Data(repeating: 7, count: 300))),
        ("date", .date(t0)), ("epoch", .date(Date(timeIntervalSince1970: 0))),
        ("before", .date(Date(timeIntervalSince1970: -5.5))),
        ("reference", .reference(Record.Reference(recordID: Record.ID(recordName: "r", zoneID: zone)))),
        (
            "deleteSelf",
            .reference(Record.Reference(recordID: Record.ID(recordName: "r", zoneID: zone), action: .deleteSelf))
        ),
        ("asset", .asset(Asset(digest: AssetHasher.digest(of: Array("asset-1".utf8)), size: 7))),
        ("localAsset", .asset(Asset(fileURL: URL(fileURLWithPath: "/tmp/photo.jpg")))),
        (
            "emptyAsset",
            .asset(Asset(digest: AssetHasher.digest(of: [UInt8]()), size: 0, fileURL: URL(fileURLWithPath: "/tmp/e")))
        ),
        (
            "location",
            .location(
                Location(
                    latitude: 48.8584, longitude: -0.0, altitude: -12, horizontalAccuracy: 5, verticalAccuracy: 3,
                    course: 0, speed: 0,
                    timestamp: t0))
        ),
        ("origin", .location(Location(latitude: 0, longitude: 0))),
        ("list", .list([.string("a"), .int64(-2), .list([.bool(false), .list([])])])), ("emptyList", .list([])),
        ("opened", .encrypted(.opened(.string("secret")))),
        ("openedList", .encrypted(.opened(.list([.int64(1), .int64(0)])))),
        ("sealed", .encrypted(.sealed(SealedValue(keyVersion: 3, box: Data(repeating: 9, count: 40))))),
        ("sealedEmpty", .encrypted(.sealed(SealedValue(keyVersion: 0, box: Data())))),
    ]

    @Test(arguments: values.indices)
    func eachKindOfValue(index: Int) throws {
        let (key, value) = Self.values[index]
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.zone))
        record[key] = value
        try Self.expectSameBytes(record)
    }

    @Test func identitiesParentsAndSystemFields() throws {
        let owned = RecordZone.ID(zoneName: "Shared", ownerName: "_bob")
        var record = Record(
            recordType: "", recordID: Record.ID(recordName: "", zoneID: RecordZone.ID(zoneName: "", ownerName: "")))
        try Self.expectSameBytes(record)
        record = Record(recordType: "Note", recordID: Record.ID(recordName: "n", zoneID: owned))
        try Self.expectSameBytes(record)
        record.parent = nil  // changed to none
        try Self.expectSameBytes(record)
        record.parent = Record.Reference(recordID: Record.ID(recordName: "folder", zoneID: owned))
        try Self.expectSameBytes(record)
        record.applySystemFields(Record.SystemFields(recordChangeTag: ""))  // present though empty
        try Self.expectSameBytes(record)
        record.applySystemFields(
            Record.SystemFields(
                recordChangeTag: "123", creationDate: Date(timeIntervalSince1970: 0), modificationDate: Self.t0,
                creatorUserRecordID: Record.ID(recordName: "_alice"),
                lastModifiedUserRecordID: Record.ID(recordName: "_bob", zoneID: owned)))
        try Self.expectSameBytes(record)
        // F123: the share of a hierarchy's root, a system field.
        record.applySystemFields(
            record.systemFields.with(
                tag: "124", share: Record.Reference(recordID: Record.ID(recordName: "share-1", zoneID: owned))))
        try Self.expectSameBytes(record)
        record["title"] = "x"
        record["removed"] = nil  // changed, absent
        try Self.expectSameBytes(record)
    }

    /// Lengths that take two and three bytes (over 127 and over 16,383): `ProtoWriter.message`
    /// keeps one byte for the length and moves a longer content up. And the two parts a server
    /// writes apart (type, ID and fields; the rest) make the whole.
    @Test(arguments: [100, 127, 128, 200, 16_383, 16_384, 20_000, 2_100_000])
    func longLengths(length: Int) throws {
        var record = Record(recordType: "Item", recordID: Record.ID(recordName: "long", zoneID: Self.zone))
        record["text"] = .string(String(repeating: "x", count: length))
        record["list"] = .list((0..<(length / 64)).map { .int64(Int64($0)) })
        record.applySystemFields(Record.SystemFields(recordChangeTag: "7", creationDate: Self.t0))
        try Self.expectSameBytes(record)
        var parts = ProtoWriter()
        record.writeTypeIDAndFields(to: &parts)
        record.writeMarksAndSystemFields(to: &parts)
        #expect(parts.bytes == record.serializedProto())
    }

    /// Many records of random shape: keys of every length (a map entry over 127 bytes takes a
    /// two-byte length), keys that sort differently by bytes and by Swift's `<`, values of every
    /// kind, changed keys with and without values.
    @Test(arguments: [1 as UInt64, 2, 3])
    func randomRecords(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        func next(_ bound: Int) -> Int { Int(random.next(upperBound: UInt64(bound))) }
        let keys = [
            "a", "B", "é", "e\u{301}x", "z", "Z9", "title", "_", String(repeating: "k", count: 130), "ß", "日本", "",
        ]
        for round in 0..<300 {
            var record = Record(
                recordType: ["Item", "", "cloudkit.share"][next(3)],
                recordID: Record.ID(
                    recordName: "r\(round)",
                    zoneID: RecordZone.ID(zoneName: "z\(next(3))", ownerName: ["", "_u1"][next(2)])))
            for _ in 0..<next(8) {
                let key = keys[next(keys.count)]
                record[key] = next(6) == 0 ? nil : Self.values[next(Self.values.count)].1
            }
            if next(3) == 0 {
                record.parent = Record.Reference(
                    recordID: Record.ID(recordName: "p\(next(5))", zoneID: record.recordID.zoneID))
            }
            if next(2) == 0 {
                record.applySystemFields(
                    Record.SystemFields(
                        recordChangeTag: String(next(100_000)), creationDate: Self.t0,
                        modificationDate: Self.t0.addingTimeInterval(Double(next(1000))),
                        creatorUserRecordID: Record.ID(recordName: "_alice"),
                        lastModifiedUserRecordID: Record.ID(recordName: "_alice")))
                if next(2) == 0 { record["after"] = .int64(Int64(next(1 << 30)) - (1 << 29)) }
            }
            try Self.expectSameBytes(record)
        }
    }
}
