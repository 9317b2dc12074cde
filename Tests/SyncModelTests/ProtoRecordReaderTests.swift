import Foundation
import LogStore
import Testing

@testable import SyncModel

/// `Record(protoBytes:)` reads the form the encoders write directly and leaves everything else to
/// the generated decoder: whatever the bytes, its answer (the record, or the error and its
/// message) must be the generated decoder's.
@Suite("A record read directly from its protobuf bytes")
struct ProtoRecordReaderTests {
    typealias Values = ProtoRecordWriterTests

    /// Compares the two decoders on `bytes`; returns whether the direct reader read them itself.
    @discardableResult
    static func expectSameAsGenerated(
        _ bytes: [UInt8], _ what: @autoclosure () -> String = "", sourceLocation: SourceLocation = #_sourceLocation
    ) -> Bool {
        let generated = Result { () throws(SyncError) in try Record(generatedProtoBytes: bytes) }
        let read = Result { () throws(SyncError) in try Record(protoBytes: bytes) }
        switch (generated, read) {
        case (.success(let expected), .success(let record)):
            // Compared by bytes and by value (a NaN is not equal to itself; the bytes hold it).
            #expect(record.protoBytes() == expected.protoBytes(), "\(what())", sourceLocation: sourceLocation)
            #expect(record.changedKeys() == expected.changedKeys(), sourceLocation: sourceLocation)
            #expect(record.isParentChanged == expected.isParentChanged, sourceLocation: sourceLocation)
        case (.failure(let expected), .failure(let error)):
            #expect(error == expected, "\(what())", sourceLocation: sourceLocation)
        default:
            Issue.record(
                "the decoders disagree on \(what()): \(generated) against \(read)", sourceLocation: sourceLocation)
        }
        return bytes.withUnsafeBytes(Record.readDirectly) != nil
    }

    /// The kinds the direct reader takes itself; lists and encrypted values go to the generated
    /// decoder.
    static func isReadDirectly(_ value: RecordValue) -> Bool {
        switch value {
        case .list, .encrypted: false
        default: true
        }
    }

    @Test(arguments: Values.values.indices)
    func eachKindOfValue(index: Int) throws {
        let (key, value) = Values.values[index]
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Values.zone))
        record[key] = value
        record.applySystemFields(
            Record.SystemFields(recordChangeTag: "7", creationDate: Values.t0, modificationDate: Values.t0))
        record[key] = value
        let direct = Self.expectSameAsGenerated(record.serializedProto(), key)
        #expect(direct == Self.isReadDirectly(value), "\(key)")
    }

    /// Random records, then every truncation and every flipped bit of some of them: the two
    /// decoders give the same record or the same error.
    @Test(arguments: [1 as UInt64, 2, 3])
    func randomRecordsAndTheirMutations(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        func next(_ bound: Int) -> Int { Int(random.next(upperBound: UInt64(bound))) }
        let keys = ["a", "B", "é", "title", "_", String(repeating: "k", count: 130), "日本", ""]
        var readDirectly = 0
        for round in 0..<200 {
            var record = Record(
                recordType: ["Item", "", "cloudkit.share"][next(3)],
                recordID: Record.ID(
                    recordName: "r\(round)",
                    zoneID: RecordZone.ID(zoneName: "z\(next(3))", ownerName: ["", "_u1"][next(2)])
                ))
            for _ in 0..<next(6) {
                record[keys[next(keys.count)]] = next(6) == 0 ? nil : Values.values[next(Values.values.count)].1
            }
            if next(3) == 0 {
                record.parent = Record.Reference(
                    recordID: Record.ID(recordName: "p\(next(5))", zoneID: record.recordID.zoneID),
                    action: next(2) == 0 ? .none : .deleteSelf)
            }
            if next(2) == 0 {
                record.applySystemFields(
                    Record.SystemFields(
                        recordChangeTag: String(next(100_000)), creationDate: Values.t0,
                        modificationDate: Values.t0.addingTimeInterval(Double(next(1000))),
                        creatorUserRecordID: Record.ID(recordName: "_alice"),
                        lastModifiedUserRecordID: Record.ID(recordName: "_alice"),
                        share: next(3) == 0 ? Record.Reference(recordID: Record.ID(recordName: "s")) : nil))
            }
            let bytes = record.serializedProto()
            if Self.expectSameAsGenerated(bytes, "round \(round)") { readDirectly += 1 }
            guard round % 20 == 0 else { continue }
            for length in 0..<bytes.count {
                Self.expectSameAsGenerated(Array(bytes[..<length]), "round \(round) cut at \(length)")
            }
            for bit in 0..<(bytes.count * 8) {
                var flipped = bytes
                flipped[bit / 8] ^= 1 << (bit % 8)
                Self.expectSameAsGenerated(flipped, "round \(round) bit \(bit) flipped")
            }
        }
        #expect(readDirectly > 50, "the direct reader read \(readDirectly) of 200 records")
    }

    /// Forms no encoder writes, which the generated decoder still takes: a field twice, a map key
    /// twice, an unknown field, a value with two kinds, a field of the wrong wire type.
    @Test func formsLeftToTheGeneratedDecoder() throws {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n", zoneID: Values.zone))
        record["title"] = "one"
        let bytes = record.serializedProto()
        func entry(_ key: String, _ value: (inout ProtoWriter) -> Void) -> [UInt8] {
            var writer = ProtoWriter()
            writer.message(3) { entry in
                entry.string(1, key)
                entry.message(2, value)
            }
            return writer.bytes
        }
        var writer = ProtoWriter()
        writer.string(1, "Other")
        let typeTwice = bytes + writer.bytes
        let keyTwice = bytes + entry("title") { $0.string(1, "two") }
        writer = ProtoWriter()
        writer.int64(99, 5)
        let unknownField = bytes + writer.bytes
        let twoKinds =
            bytes
            + entry("both") {
                $0.string(1, "a")
                $0.int64(2, 1)
            }
        let noKind = bytes + entry("none") { _ in }
        writer = ProtoWriter()
        writer.int64(1, 5)
        let wrongWireType = writer.bytes + bytes
        let invalidUTF8 = bytes + entry("bad") { $0.lengthDelimited(1, [0xC3, 0x28]) }
        for (name, form) in [
            ("typeTwice", typeTwice), ("keyTwice", keyTwice), ("unknownField", unknownField), ("twoKinds", twoKinds),
            ("noKind", noKind), ("wrongWireType", wrongWireType), ("invalidUTF8", invalidUTF8),
        ] {
            let direct = Self.expectSameAsGenerated(form, name)
            #expect(!direct, "\(name) was read directly")
        }
        #expect(Self.expectSameAsGenerated(bytes, "the record itself"))
    }
}
