import Foundation
import LogStore
import Testing

@testable import SyncModel

/// The Protocol Buffers form of the model types (Proto/model.proto, ProtoConversions*.swift):
/// every value survives the bytes unchanged, and no bytes crash the decoder.
@Suite("Protocol Buffers conversions")
struct ProtoConversionTests {
    /// Encodes a value to bytes and decodes it back.
    static func roundTrip<T: ProtoConvertible>(_ value: T) throws(SyncError) -> T {
        try T(protoBytes: value.protoBytes())
    }

    /// The error that decoding `bytes` as `T` throws, or `nil` if it decodes.
    static func decodingError<T: ProtoConvertible>(_ type: T.Type, _ bytes: [UInt8]) -> SyncError? {
        do {
            _ = try T(protoBytes: bytes)
            return nil
        } catch {
            return error
        }
    }

    // A date on a whole microsecond, before and after 1970.
    static let date = Date(timeIntervalSince1970: 1_700_000_000.123456)
    static let oldDate = Date(timeIntervalSince1970: -86_400.5)

    static let values: [RecordValue] = [
        .string("Groceries"), .string(""), .string("naïve 日本 🎉"),
        .int64(0), .int64(.min), .int64(.max),
        .double(3.25), .double(-0.0), .double(.infinity), .double(-.greatestFiniteMagnitude),
        .bool(true), .bool(false),
        .bytes(Data()), .bytes(Data([0, 1, 0xFF, 0x80])),
        .date(date), .date(oldDate), .date(Date(timeIntervalSince1970: 0)),
        .reference(Record.Reference(recordID: Fixture.n2)),
        .reference(Record.Reference(recordID: Fixture.n2, action: .deleteSelf)),
        .asset(
            Asset(
                digest: AssetHasher.digest(of: Array("asset-7f3a".utf8)), size: 12,
                fileURL: URL(fileURLWithPath: "/tmp/a.jpg"))),
        .asset(Asset(fileURL: URL(fileURLWithPath: "/tmp/not uploaded.png"))),
        .location(
            Location(
                latitude: -33.8568, longitude: 151.2153, altitude: 4.5, horizontalAccuracy: 10, verticalAccuracy: -1,
                course: 359.5,
                speed: 1.25, timestamp: date)),
        .location(Location(latitude: 0, longitude: 0)),
        .list([.location(Location(latitude: 90, longitude: -180, timestamp: oldDate))]),
        .list([]), .list([.string("home"), .string("food")]), .list([.int64(1), .int64(2)]),
        .list([.date(date)]),
        .list([.reference(Record.Reference(recordID: Fixture.n1, action: .deleteSelf))]),
        .list([.list([.bool(true)])]),  // invalid by validate(), but representable: kept
    ]

    // MARK: Values

    @Test("every record value round-trips", arguments: values)
    func valueRoundTrip(value: RecordValue) throws {
        #expect(try Self.roundTrip(value) == value)

        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["value"] = value
        let copy = try Self.roundTrip(record)
        #expect(copy == record)
        #expect(copy["value"] == value)
    }

    @Test func datesKeepWholeMicroseconds() throws {
        let value = RecordValue.date(Date(timeIntervalSince1970: 10.000_000_4))
        #expect(try Self.roundTrip(value) == .date(Date(timeIntervalSince1970: 10)))
        #expect(ProtoTime.microseconds(Date(timeIntervalSince1970: 1e300)) == .max)
        #expect(ProtoTime.microseconds(Date(timeIntervalSince1970: -1e300)) == .min)
        #expect(ProtoTime.microseconds(Date(timeIntervalSince1970: .nan)) == 0)
    }

    // MARK: Records

    @Test func newRecordKeepsFieldsAndChangedKeys() throws {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["title"] = "Groceries"
        record["done"] = false
        let copy = try Self.roundTrip(record)
        #expect(copy == record)
        #expect(copy.changedKeys() == ["done", "title"])
        #expect(copy.systemFields == Record.SystemFields())
        #expect(!copy.isParentChanged)
    }

    @Test func removedKeyStaysChangedAndAbsent() throws {
        var record = Fixture.savedNote()
        record["count"] = nil  // removed: the save must remove it on the server
        record["never"] = nil  // set to nil without ever having had a value
        record["title"] = "Shopping"
        #expect(record.changedKeys() == ["count", "never", "title"])

        let copy = try Self.roundTrip(record)
        #expect(copy == record)
        #expect(copy.changedKeys() == ["count", "never", "title"])
        #expect(copy.allKeys() == ["title"])
        #expect(copy["count"] == nil)
        #expect(copy["title"] == "Shopping")
    }

    @Test func systemFieldsSurvive() throws {
        let record = Fixture.savedNote(tag: "42")
        let copy = try Self.roundTrip(record)
        #expect(copy == record)
        #expect(copy.recordChangeTag == "42")
        #expect(copy.creationDate == Fixture.t0)
        #expect(copy.modificationDate == Fixture.t0.addingTimeInterval(60))
        #expect(copy.creatorUserRecordID == Fixture.alice)
        #expect(copy.lastModifiedUserRecordID == Fixture.bob)
        #expect(copy.changedKeys().isEmpty)
        #expect(!copy.isParentChanged)
        #expect(copy.parent == Record.Reference(recordID: Fixture.n2))
        #expect(try Self.roundTrip(record.systemFieldsCopy()) == record.systemFieldsCopy())
    }

    @Test func partialSystemFieldsSurvive() throws {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record.applySystemFields(Record.SystemFields(recordChangeTag: "", modificationDate: Self.oldDate))
        let copy = try Self.roundTrip(record)
        #expect(copy == record)
        #expect(copy.recordChangeTag == "")
        #expect(copy.creationDate == nil)
        #expect(copy.creatorUserRecordID == nil)
    }

    @Test func parentChangeIsKept() throws {
        var cleared = Fixture.savedNote()
        cleared.parent = nil  // changed to none
        let clearedCopy = try Self.roundTrip(cleared)
        #expect(clearedCopy == cleared)
        #expect(clearedCopy.parent == nil)
        #expect(clearedCopy.isParentChanged)

        var moved = Fixture.savedNote()
        moved.parent = Record.Reference(recordID: Fixture.n1, action: .deleteSelf)
        let movedCopy = try Self.roundTrip(moved)
        #expect(movedCopy == moved)
        #expect(movedCopy.isParentChanged)
    }

    @Test func recordAndReferenceOfOtherOwnerAndEmptyNames() throws {
        // What validate() refuses must still cross the wire, so the server can refuse it per item.
        var record = Record(recordType: "", recordID: Record.ID(recordName: "", zoneID: Fixture.sharedNotes))
        record[""] = .reference(Record.Reference(recordID: Record.ID(recordName: "x", zoneID: Fixture.photos)))
        #expect(try Self.roundTrip(record) == record)
    }

    // MARK: Zones and subscriptions

    @Test(arguments: [
        RecordZone(zoneName: "Notes"),
        RecordZone(zoneID: Fixture.notes, capabilities: .customZoneDefault),
        RecordZone(zoneID: .default, capabilities: [.fetchChanges, .atomic, .sharing, .zoneWideSharing]),
        RecordZone(
            zoneID: Fixture.sharedNotes, capabilities: RecordZone.Capabilities(rawValue: 0x1_0000_0002),
            share: Record.Reference(recordID: Record.ID(recordName: "cloudkit.zoneshare", zoneID: Fixture.sharedNotes))),
    ])
    func zoneRoundTrip(zone: RecordZone) throws {
        #expect(try Self.roundTrip(zone) == zone)
    }

    @Test(arguments: [
        Subscription(subscriptionID: "engine"),
        Subscription(subscriptionID: "notes", kind: .recordZone(Fixture.notes)),
        Subscription(subscriptionID: "", kind: .recordZone(Fixture.sharedNotes)),
    ])
    func subscriptionRoundTrip(subscription: Subscription) throws {
        #expect(try Self.roundTrip(subscription) == subscription)
    }

    // MARK: Errors

    static let conflict: SyncError = {
        var client = Fixture.savedNote(tag: "6")
        client["title"] = "Mine"
        client["count"] = nil
        return .serverRecordChanged(
            serverRecord: Fixture.savedNote(tag: "7"), clientRecord: client,
            ancestorRecord: Fixture.savedNote(tag: "6"), "tag \"6\" is stale")
    }()

    static let errors: [SyncError] = [
        SyncError(.internalError),
        SyncError(.networkFailure, "connection reset", cause: "ECONNRESET\nretry"),
        SyncError(.requestRateLimited, "slow down", requestID: "dev1-42", retryAfter: .seconds(30)),
        SyncError(.zoneBusy, retryAfter: .milliseconds(1500)),
        SyncError(.zoneNotFound, item: .zone(Fixture.notes), zoneDeletionReason: .deleted),
        SyncError(.userDeletedZone, item: .zone(Fixture.notes), zoneDeletionReason: .purged),
        SyncError(.zoneNotFound, item: .zone(Fixture.sharedNotes), zoneDeletionReason: .encryptedDataReset),
        SyncError(.unknownItem, item: .subscription("engine")),
        SyncError(SyncError.Code(rawValue: 999), "from a newer server"),
        SyncError(SyncError.Code(rawValue: 0)),
        conflict,
        SyncError(
            .partialFailure, "2 of 3 items failed", requestID: "r1",
            partialErrors: [
                .record(Fixture.n1): conflict,
                .record(Fixture.n2): SyncError(.batchRequestFailed, item: .record(Fixture.n2)),
                .zone(Fixture.photos): SyncError(.quotaExceeded, retryAfter: .seconds(3600)),
                .subscription("s"): SyncError(
                    .partialFailure,
                    partialErrors: [
                        .record(Fixture.n1): SyncError(.limitExceeded)
                    ]),
            ]),
    ]

    @Test("errors round-trip", arguments: errors)
    func errorRoundTrip(error: SyncError) throws {
        let copy = try Self.roundTrip(error)
        #expect(copy == error)
        #expect(copy.userDidResetEncryptedDataKey == error.userDidResetEncryptedDataKey)
        #expect(copy.serverRecord?.changedKeys() == error.serverRecord?.changedKeys())
        #expect(copy.clientRecord?.changedKeys() == error.clientRecord?.changedKeys())
    }

    @Test func resetKeyFlagIsWrittenAndRead() throws {
        let error = SyncError(.zoneNotFound, zoneDeletionReason: .encryptedDataReset)
        #expect(error.proto.userDidResetEncryptedDataKey)

        // A writer that sets only the flag (as CloudKit's user info does) means encryptedDataReset.
        var message = Logsync_Model_SyncError()
        message.code = Int64(SyncError.Code.zoneNotFound.rawValue)
        message.userDidResetEncryptedDataKey = true
        #expect(try SyncError(proto: message).zoneDeletionReason == .encryptedDataReset)
    }

    @Test func equalValuesHaveEqualBytes() throws {
        // Dictionaries filled in different orders still encode alike.
        let ids = (0..<50).map { Record.ID(recordName: "r\($0)", zoneID: Fixture.notes) }
        var forward: [SyncError.ItemID: SyncError] = [:]
        var backward: [SyncError.ItemID: SyncError] = [:]
        var saves: [Record.ID: Result<Record, SyncError>] = [:]
        var savesBackward: [Record.ID: Result<Record, SyncError>] = [:]
        for id in ids { forward[.record(id)] = SyncError(.batchRequestFailed) }
        for id in ids.reversed() { backward[.record(id)] = SyncError(.batchRequestFailed) }
        for id in ids {
            var record = Record(recordType: "T", recordID: id)
            for key in 0..<10 { record["k\(key)"] = .int64(Int64(key)) }
            saves[id] = .success(record)
        }
        for id in ids.reversed() { savesBackward[id] = saves[id] }

        #expect(
            SyncError(.partialFailure, partialErrors: forward).protoBytes()
                == SyncError(.partialFailure, partialErrors: backward).protoBytes())
        #expect(
            ModifyRecordsResponse(saveResults: saves).protoBytes()
                == ModifyRecordsResponse(saveResults: savesBackward).protoBytes())
    }

    // MARK: Responses

    @Test func responseRoundTrip() throws {
        var saved = Fixture.savedNote(tag: "9")
        saved.applySystemFields(saved.systemFields)
        let response = ModifyRecordsResponse(
            saveResults: [
                Fixture.n1: .success(saved),
                Fixture.n2: .failure(Self.conflict),
                Record.ID(recordName: "big", zoneID: Fixture.photos): .failure(SyncError(.limitExceeded)),
            ],
            deleteResults: [
                Record.ID(recordName: "gone", zoneID: Fixture.notes): .success(()),
                Record.ID(recordName: "missing", zoneID: Fixture.notes): .failure(SyncError(.unknownItem)),
            ])
        #expect(try Self.roundTrip(response) == response)
        #expect(try Self.roundTrip(ModifyRecordsResponse()) == ModifyRecordsResponse())
    }

    // MARK: Stability

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ hex: String) -> [UInt8] {
        stride(from: 0, to: hex.count, by: 2).map {
            let start = hex.index(hex.startIndex, offsetBy: $0)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    /// Field numbers are forever (Docs/Protobuf.md). The pinned bytes were made by protoc itself
    /// from a text-format description (`protoc --encode=logsync.model.Record model.proto`), so
    /// they check the Swift side against the schema, and fail if a number ever changes.
    @Test func stableBytes() throws {
        let zone = RecordZone.ID(zoneName: "Z", ownerName: "o")
        var record = Record(recordType: "T", recordID: Record.ID(recordName: "r", zoneID: zone))
        record["a"] = .list([.int64(1)])
        record["d"] = .date(Date(timeIntervalSince1970: 2))
        record.parent = Record.Reference(recordID: Record.ID(recordName: "p", zoneID: zone), action: .deleteSelf)
        record.applySystemFields(
            Record.SystemFields(
                recordChangeTag: "5", creationDate: Date(timeIntervalSince1970: 1),
                creatorUserRecordID: Record.ID(recordName: "u", zoneID: zone)))
        record["b"] = nil
        let recordHex =
            "0a0154120b0a017212060a015a12016f1a0b0a016112064a040a0210011a090a016412043080897a2201622a0f0a0b"
            + "0a017012060a015a12016f10013a140a013510c0843d220b0a017512060a015a12016f"
        #expect(Self.hex(record.protoBytes()) == recordHex)
        #expect(try Record(protoBytes: Self.bytes(recordHex)) == record)

        var error = SyncError(
            .zoneNotFound, "m", item: .zone(zone), requestID: "q", retryAfter: .seconds(1),
            partialErrors: [.subscription("s"): SyncError(.unknownItem)],
            zoneDeletionReason: .encryptedDataReset, cause: "c")
        error.serverRecord = Record(recordType: "S", recordID: Record.ID(recordName: "x", zoneID: zone))
        let errorHex =
            "081a12016d1a0812060a015a12016f2201712a100a0153120b0a017812060a015a12016f40c0843d4a090a031a0173"
            + "1202080b50035a01636001"
        #expect(Self.hex(error.protoBytes()) == errorHex)
        #expect(try SyncError(protoBytes: Self.bytes(errorHex)) == error)
    }

    // MARK: Invalid input

    /// A valid message spoilt in one place, and a part of the message the error must carry.
    struct Spoilt: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var expected: String
        var testDescription: String { name }
    }

    static let spoilt: [Spoilt] = {
        var cases: [Spoilt] = []
        func add(_ name: String, _ expected: String, _ bytes: [UInt8]) {
            cases.append(Spoilt(name: name, bytes: bytes, expected: expected))
        }
        var record = Fixture.savedNote().proto
        record.clearRecordID()
        add("record without ID", "Record.record_id is missing", ProtoWire.serialize(record))

        record = Fixture.savedNote().proto
        record.fields["title"] = Logsync_Model_RecordValue()
        add("value without case", "Record.fields[\"title\"]: RecordValue has no value set", ProtoWire.serialize(record))

        record = Fixture.savedNote().proto
        record.parent.action = .UNRECOGNIZED(7)
        add(
            "unknown reference action", "Record.parent: Reference.action has unknown value 7",
            ProtoWire.serialize(record))

        record = Fixture.savedNote().proto
        record.systemFields.creatorUserRecordID.clearZoneID()
        add(
            "user ID without zone",
            "Record.system_fields: SystemFields.creator_user_record_id: RecordID.zone_id is missing",
            ProtoWire.serialize(record))

        var list = Logsync_Model_RecordValueList()
        list.values = [RecordValue.int64(1).proto, Logsync_Model_RecordValue()]
        record = Fixture.savedNote().proto
        record.fields["list"] = {
            var value = Logsync_Model_RecordValue()
            value.listValue = list
            return value
        }()
        add(
            "list element without case", "RecordValue.list_value[1]: RecordValue has no value set",
            ProtoWire.serialize(record))
        return cases
    }()

    @Test("spoilt records name what is wrong", arguments: spoilt)
    func spoiltRecord(spoilt: Spoilt) throws {
        let error = try #require(Self.decodingError(Record.self, spoilt.bytes))
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains(spoilt.expected), "\(error.message)")
        #expect(error.message.hasPrefix("cannot decode logsync.model.Record"))
    }

    @Test func spoiltErrorsNameWhatIsWrong() throws {
        var message = SyncError(.internalError).proto
        message.clearCode()
        #expect(
            Self.decodingError(SyncError.self, ProtoWire.serialize(message))?.message
                .contains("SyncError.code is missing") == true)

        message = SyncError(.zoneNotFound, zoneDeletionReason: .purged).proto
        message.userDidResetEncryptedDataKey = true
        #expect(
            Self.decodingError(SyncError.self, ProtoWire.serialize(message))?.message
                .contains("user_did_reset_encrypted_data_key is true but zone_deletion_reason is purged") == true)

        message = SyncError(.zoneNotFound, zoneDeletionReason: .purged).proto
        message.zoneDeletionReason = .UNRECOGNIZED(9)
        #expect(
            Self.decodingError(SyncError.self, ProtoWire.serialize(message))?.message
                .contains("SyncError.zone_deletion_reason: ZoneDeletionReason has unknown value 9") == true)

        message = SyncError(.partialFailure, partialErrors: [.record(Fixture.n1): SyncError(.unknownItem)]).proto
        message.partialErrors.append(message.partialErrors[0])
        #expect(
            Self.decodingError(SyncError.self, ProtoWire.serialize(message))?.message
                .contains("SyncError.partial_errors[1] names record \"n1\" in zone \"Notes\" a second time") == true)

        message = SyncError(.partialFailure, partialErrors: [.record(Fixture.n1): SyncError(.unknownItem)]).proto
        message.partialErrors[0].item = Logsync_Model_ItemID()
        #expect(
            Self.decodingError(SyncError.self, ProtoWire.serialize(message))?.message
                .contains("SyncError.partial_errors[0].item: ItemID has no item set") == true)

        message = SyncError(.partialFailure, partialErrors: [.record(Fixture.n1): SyncError(.unknownItem)]).proto
        message.partialErrors[0].clearError()
        #expect(
            Self.decodingError(SyncError.self, ProtoWire.serialize(message))?.message
                .contains("SyncError.partial_errors[0].error is missing") == true)
    }

    @Test func spoiltZonesSubscriptionsAndResponsesNameWhatIsWrong() throws {
        var zone = RecordZone(zoneName: "Notes").proto
        zone.clearZoneID()
        #expect(
            Self.decodingError(RecordZone.self, ProtoWire.serialize(zone))?.message
                .contains("RecordZone.zone_id is missing") == true)

        var subscription = Subscription(subscriptionID: "s").proto
        subscription.kind = nil
        #expect(
            Self.decodingError(Subscription.self, ProtoWire.serialize(subscription))?.message
                .contains("Subscription has no kind set") == true)

        var response = ModifyRecordsResponse(
            saveResults: [Fixture.n1: .failure(SyncError(.unknownItem))],
            deleteResults: [Fixture.n2: .success(())]
        ).proto
        response.saveResults[0].outcome = nil
        #expect(
            Self.decodingError(ModifyRecordsResponse.self, ProtoWire.serialize(response))?.message
                .contains("save_results[0]: SaveResult has no outcome set") == true)

        response = ModifyRecordsResponse(deleteResults: [Fixture.n2: .success(())]).proto
        response.deleteResults.append(response.deleteResults[0])
        #expect(
            Self.decodingError(ModifyRecordsResponse.self, ProtoWire.serialize(response))?.message
                .contains("delete_results[1] names record \"n2\" in zone \"Notes\" a second time") == true)

        response = ModifyRecordsResponse(deleteResults: [Fixture.n2: .success(())]).proto
        response.deleteResults[0].clearRecordID()
        #expect(
            Self.decodingError(ModifyRecordsResponse.self, ProtoWire.serialize(response))?.message
                .contains("delete_results[0]: DeleteResult.record_id is missing") == true)
    }

    @Test func malformedBytesNameTheMessage() throws {
        let error = try #require(Self.decodingError(Record.self, [0x0A, 0x05, 0x41]))
        #expect(error.code == .invalidArguments)
        #expect(error.message.hasPrefix("cannot decode logsync.model.Record from 3 bytes"))
    }

    @Test func deepNestingIsRefusedNotFollowed() throws {
        // Lists nested far deeper than SwiftProtobuf's depth limit (100) fail to decode, cleanly.
        var value = RecordValue.int64(1).proto
        for _ in 0..<500 {
            var list = Logsync_Model_RecordValueList()
            list.values = [value]
            var outer = Logsync_Model_RecordValue()
            outer.listValue = list
            value = outer
        }
        let error = try #require(Self.decodingError(RecordValue.self, ProtoWire.serialize(value)))
        #expect(error.code == .invalidArguments)
    }

    // MARK: Garbage

    /// Decodes `bytes` as every model message; any failure must be a typed `invalidArguments`.
    static func decodeAsEverything(_ bytes: [UInt8]) -> (decoded: Int, wrongErrors: [String]) {
        var decoded = 0
        var wrong: [String] = []
        func attempt<T: ProtoConvertible>(_ type: T.Type) {
            if let error = decodingError(type, bytes) {
                if error.code != .invalidArguments { wrong.append("\(T.self): \(error)") }
            } else {
                decoded += 1
            }
        }
        attempt(Record.self)
        attempt(RecordValue.self)
        attempt(Record.ID.self)
        attempt(RecordZone.self)
        attempt(Record.Reference.self)
        attempt(SyncError.self)
        attempt(SyncError.ItemID.self)
        attempt(Subscription.self)
        attempt(ModifyRecordsResponse.self)
        return (decoded, wrong)
    }

    @Test("random bytes give typed errors, never a crash", arguments: [1 as UInt64, 2, 3])
    func randomBytes(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var wrong: [String] = []
        for _ in 0..<1_000 {
            let count = Int.random(in: 0...96, using: &random)
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
            wrong += Self.decodeAsEverything(bytes).wrongErrors
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(3))")
    }

    @Test("mutated valid encodings give typed errors or values, never a crash", arguments: [1 as UInt64, 2])
    func mutatedEncodings(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let samples: [[UInt8]] = [
            Fixture.savedNote().protoBytes(),
            Self.errors.last!.protoBytes(),
            Self.conflict.protoBytes(),
            RecordZone(
                zoneID: Fixture.sharedNotes, capabilities: .customZoneDefault,
                share: Record.Reference(recordID: Fixture.n1)
            ).protoBytes(),
            ModifyRecordsResponse(
                saveResults: [Fixture.n1: .success(Fixture.savedNote()), Fixture.n2: .failure(Self.conflict)],
                deleteResults: [Fixture.alice: .success(())]
            ).protoBytes(),
            RecordValue.list(Self.values.filter { if case .list = $0 { false } else { true } }).protoBytes(),
        ]
        var wrong: [String] = []
        var decoded = 0
        for round in 0..<1_500 {
            var bytes = samples[round % samples.count]
            switch Int.random(in: 0..<4, using: &random) {
            case 0:  // flip a few bytes
                for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            case 1:  // truncate
                bytes = Array(bytes.prefix(Int.random(in: 0..<max(bytes.count, 1), using: &random)))
            case 2:  // insert a byte
                bytes.insert(
                    UInt8.random(in: 0...255, using: &random),
                    at: Int.random(in: 0...bytes.count, using: &random))
            default:  // splice a random run
                let start = Int.random(in: 0..<max(bytes.count, 1), using: &random)
                let end = min(bytes.count, start + Int.random(in: 1...8, using: &random))
                bytes.replaceSubrange(
                    start..<max(start, end),
                    with: (0..<Int.random(in: 0...8, using: &random)).map { _ in
                        UInt8.random(in: 0...255, using: &random)
                    })
            }
            let outcome = Self.decodeAsEverything(bytes)
            decoded += outcome.decoded
            wrong += outcome.wrongErrors
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(3))")
        #expect(decoded > 0)  // some mutations still decode: the mutations are not all rejected early
    }
}
