import Foundation
import Testing

@testable import LogSyncWire
@testable import SyncModel

/// A page of zone changes and a request saving records are read directly when they are in the
/// form the encoders write, and by the generated decoder otherwise: whatever the bytes, the
/// answer (the value, or the error and its message) must be the generated decoder's.
@Suite("Wire: pages and requests read directly")
struct WireDirectReadingTests {
    typealias Fixture = WireRoundTripTests

    /// Records of the kinds the direct reader reads itself, and one it leaves to the generated
    /// decoder (a list).
    static var plainRecords: [Record] {
        WireDirectEncodingTests.records.map { record in
            var plain = record
            plain["tags"] = nil
            return plain
        }
    }

    /// Compares both decoders on `bytes` and on every truncation and flipped bit of them; returns
    /// whether the direct reader read the whole `bytes` itself.
    @discardableResult
    static func expectSameAsGenerated<Value>(
        _ bytes: [UInt8], mutated: Bool = true, read direct: ([UInt8]) -> Value?,
        decode: ([UInt8]) throws(SyncError) -> Value, generated: ([UInt8]) throws(SyncError) -> Value,
        encode: (Value) -> [UInt8], sourceLocation: SourceLocation = #_sourceLocation
    ) -> Bool {
        func compare(_ input: [UInt8], _ what: String) {
            let expected = Result { () throws(SyncError) in try generated(input) }
            let decoded = Result { () throws(SyncError) in try decode(input) }
            switch (expected, decoded) {
            case (.success(let expected), .success(let value)):
                // By their bytes: a NaN is not equal to itself.
                #expect(encode(value) == encode(expected), "\(what)", sourceLocation: sourceLocation)
            case (.failure(let expected), .failure(let error)):
                #expect(error == expected, "\(what)", sourceLocation: sourceLocation)
            default:
                Issue.record(
                    "the decoders disagree on \(what): \(expected) against \(decoded)", sourceLocation: sourceLocation)
            }
        }
        compare(bytes, "the bytes as encoded")
        if mutated {
            for length in 0..<bytes.count { compare(Array(bytes[..<length]), "cut at \(length)") }
            for bit in 0..<(bytes.count * 8) {
                var flipped = bytes
                flipped[bit / 8] ^= 1 << (bit % 8)
                compare(flipped, "bit \(bit) flipped")
            }
        }
        return direct(bytes) != nil
    }

    static func expectSamePage(_ page: FetchZoneChangesResponse, mutated: Bool = true) -> Bool {
        expectSameAsGenerated(
            Wire.encode(page, as: .protobuf), mutated: mutated,
            read: { Wire.readDirectly(FetchZoneChangesResponse.self, from: $0) },
            decode: { bytes throws(SyncError) in
                try Wire.decode(FetchZoneChangesResponse.self, from: bytes, as: .protobuf)
            },
            generated: { bytes throws(SyncError) in
                try Wire.decodeGenerated(FetchZoneChangesResponse.self, from: bytes, as: .protobuf)
            },
            encode: { Wire.encode($0, as: .protobuf) })
    }

    static func expectSameRequest(_ request: ModifyRecordsRequest, mutated: Bool = true) -> Bool {
        expectSameAsGenerated(
            Wire.encode(request, as: .protobuf), mutated: mutated,
            read: { Wire.readDirectly(ModifyRecordsRequest.self, from: $0) },
            decode: { bytes throws(SyncError) in try Wire.decode(ModifyRecordsRequest.self, from: bytes, as: .protobuf)
            },
            generated: { bytes throws(SyncError) in
                try Wire.decodeGenerated(ModifyRecordsRequest.self, from: bytes, as: .protobuf)
            },
            encode: { Wire.encode($0, as: .protobuf) })
    }

    @Test("pages: records, deletions, tokens, more coming; then every cut and flipped bit")
    func pages() {
        let token = ZoneChangeToken(zoneID: Fixture.notes, incarnation: 2, offset: 40)
        let deletions = [
            RecordZoneChange.Deletion(
                recordID: Record.ID(recordName: "gone", zoneID: Fixture.notes), recordType: "Note"),
            RecordZoneChange.Deletion(recordID: Record.ID(recordName: "", zoneID: Fixture.notes), recordType: ""),
        ]
        let plain = FetchZoneChangesResponse(
            zoneID: Fixture.notes, modifications: Self.plainRecords.map { .init(record: $0) }, deletions: deletions,
            changeToken: token, moreComing: true, clientChangeToken: Data([1, 2]))
        #expect(Self.expectSamePage(plain))
        let empty = FetchZoneChangesResponse(
            zoneID: Fixture.notes, modifications: [], deletions: [], changeToken: token, moreComing: false,
            clientChangeToken: Data())
        #expect(Self.expectSamePage(empty))
        // A list value: the page goes to the generated decoder whole.
        let withList = FetchZoneChangesResponse(
            zoneID: Fixture.notes, modifications: WireDirectEncodingTests.records.map { .init(record: $0) },
            deletions: [], changeToken: token, moreComing: false, clientChangeToken: nil)
        #expect(!Self.expectSamePage(withList, mutated: false))
    }

    @Test("requests: every policy and option; then every cut and flipped bit")
    func requests() {
        for (index, policy) in SavePolicy.allCases.enumerated() {
            let request = ModifyRecordsRequest(
                recordsToSave: Self.plainRecords,
                recordIDsToDelete: [Record.ID(recordName: "gone", zoneID: Fixture.notes)],
                savePolicy: policy, atomically: index % 2 == 0,
                requestID: index == 0 ? nil : RequestID(rawValue: "device-\(index)"),
                clientChangeToken: index == 1 ? Data([7]) : nil,
                operationGroup: index == 2 ? OperationGroup(operationGroupID: "g1", name: "Import", quantity: 3) : nil)
            #expect(Self.expectSameRequest(request, mutated: index == 0))
        }
        let withList = ModifyRecordsRequest(recordsToSave: WireDirectEncodingTests.records)
        #expect(!Self.expectSameRequest(withList, mutated: false))
    }

    /// `decodeKeepingRecordBytes` on `bytes`: the page (or the error) `decode` gives, and where it
    /// keeps the records' bytes, one slice of `bytes` per record that decodes to it. Returns
    /// whether it kept them.
    @discardableResult
    static func expectSameKeepingRecordBytes(
        _ bytes: [UInt8], as format: WireFormat = .protobuf, _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Bool {
        let expected = Result { () throws(SyncError) in
            try Wire.decode(FetchZoneChangesResponse.self, from: bytes, as: format)
        }
        let kept = Result { () throws(SyncError) in
            try Wire.decodeKeepingRecordBytes(FetchZoneChangesResponse.self, from: bytes, as: format)
        }
        switch (expected, kept) {
        case (.success(let expected), .success(let fetched)):
            // By their bytes: a NaN is not equal to itself.
            #expect(
                Wire.encode(fetched.response, as: .protobuf) == Wire.encode(expected, as: .protobuf), "\(what)",
                sourceLocation: sourceLocation)
            guard let recordBytes = fetched.recordBytes else { return false }
            #expect(
                recordBytes.count == fetched.response.modifications.count, "\(what)", sourceLocation: sourceLocation)
            for (slice, modification) in zip(recordBytes, fetched.response.modifications) {
                #expect(
                    (try? Record(protoBytes: Array(slice)).protoBytes()) == modification.record.protoBytes(),
                    "\(what)", sourceLocation: sourceLocation)
                #expect(
                    bytes.withUnsafeBufferPointer { $0.baseAddress }
                        == slice.withUnsafeBufferPointer {
                            $0.baseAddress.map { $0 - slice.startIndex }
                        }, "\(what): a slice of the answer, not a copy", sourceLocation: sourceLocation)
            }
            return true
        case (.failure(let expected), .failure(let error)):
            #expect(error == expected, "\(what)", sourceLocation: sourceLocation)
        default:
            Issue.record(
                "the decoders disagree on \(what): \(expected) against \(kept)", sourceLocation: sourceLocation)
        }
        return false
    }

    @Test(
        "pages with their records' bytes: the page decode gives, each record's bytes decoding to it; then every cut and flipped bit"
    )
    func pagesKeepingRecordBytes() {
        let token = ZoneChangeToken(zoneID: Fixture.notes, incarnation: 2, offset: 40)
        let page = FetchZoneChangesResponse(
            zoneID: Fixture.notes, modifications: Self.plainRecords.map { .init(record: $0) },
            deletions: [
                RecordZoneChange.Deletion(
                    recordID: Record.ID(recordName: "gone", zoneID: Fixture.notes), recordType: "Note")
            ], changeToken: token, moreComing: true, clientChangeToken: Data([1, 2]))
        let bytes = Wire.encode(page, as: .protobuf)
        #expect(Self.expectSameKeepingRecordBytes(bytes, "the bytes as encoded"))
        // The stored records a server copies into its page are the bytes kept.
        let stored = Self.plainRecords.map { $0.protoBytes()[...] }
        let fromStored = Wire.encode(
            FetchZoneChangesResponse(
                zoneID: page.zoneID, deletions: page.deletions, changeToken: token, moreComing: true,
                clientChangeToken: Data([1, 2])), storedRecords: stored)
        #expect(fromStored == bytes)
        #expect(
            (try? Wire.decodeKeepingRecordBytes(FetchZoneChangesResponse.self, from: bytes, as: .protobuf))?
                .recordBytes?.map(Array.init) == stored.map(Array.init))
        for length in 0..<bytes.count {
            Self.expectSameKeepingRecordBytes(Array(bytes[..<length]), "cut at \(length)")
        }
        for bit in 0..<(bytes.count * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << (bit % 8)
            Self.expectSameKeepingRecordBytes(flipped, "bit \(bit) flipped")
        }
        // A page the direct reader leaves to the generated decoder (a list value), and JSON:
        // decoded as ever, no bytes kept.
        let withList = FetchZoneChangesResponse(
            zoneID: Fixture.notes, modifications: WireDirectEncodingTests.records.map { .init(record: $0) },
            deletions: [], changeToken: token, moreComing: false, clientChangeToken: nil)
        #expect(!Self.expectSameKeepingRecordBytes(Wire.encode(withList, as: .protobuf), "a page with a list"))
        #expect(!Self.expectSameKeepingRecordBytes(Wire.encode(page, as: .json), as: .json, "JSON"))
    }
}
