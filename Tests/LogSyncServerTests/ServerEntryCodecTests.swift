import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

/// The byte form of the server's log entries (ServerEntryCodec.swift, Proto/server_log.proto).
@Suite("Server entry codec")
struct ServerEntryCodecTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let n1 = Record.ID(recordName: "n1", zoneID: notes)
    static let n2 = Record.ID(recordName: "n2", zoneID: notes)
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000.25)

    static func savedRecord(tag: String) -> Record {
        var record = Record(recordType: "Note", recordID: n1)
        record["title"] = "Groceries"
        record["tags"] = .list([.string("home"), .string("food")])
        record["due"] = .date(t0)
        record.parent = Record.Reference(recordID: n2, action: .deleteSelf)
        record.applySystemFields(
            Record.SystemFields(
                recordChangeTag: tag, creationDate: t0, modificationDate: t0,
                creatorUserRecordID: Record.ID(recordName: "_alice"),
                lastModifiedUserRecordID: Record.ID(recordName: "_alice")))
        return record
    }

    static let deviceKey = try! DevicePublicKey(
        rawRepresentation: Data(repeating: 7, count: 32), userRecordName: "_user1")

    /// A wrap of the right shape (its bytes open nothing), for a recipient key ID of one digit repeated.
    static func wrap(version: UInt32, recipient: Character) -> WrappedZoneKey {
        WrappedZoneKey(
            zoneID: notes, version: version, recipientKeyID: String(repeating: recipient, count: 32),
            check: Data(repeating: UInt8(version), count: 8),
            wrapped: Data(repeating: 0xA5, count: WrappedZoneKey.wrappedSize))
    }

    /// One entry of every case, each with its kind.
    struct Sample: Sendable, CustomTestStringConvertible {
        var entry: ServerEntry
        var kind: EntryKind
        var testDescription: String { "\(entry)".prefix(60).description }
    }

    static let samples: [Sample] = {
        var conflict = SyncError.serverRecordChanged(
            serverRecord: savedRecord(tag: "7"), clientRecord: savedRecord(tag: "6"))
        conflict.requestID = "dev1-1"
        var edited = savedRecord(tag: "6")
        edited["title"] = nil  // a removed key, as a failed save's client record may carry
        let response = ModifyRecordsResponse(
            saveResults: [
                n1: .success(savedRecord(tag: "12")),
                n2: .failure(.serverRecordChanged(serverRecord: savedRecord(tag: "7"), clientRecord: edited)),
            ],
            deleteResults: [
                Record.ID(recordName: "old", zoneID: notes): .success(()),
                Record.ID(recordName: "gone", zoneID: notes): .failure(SyncError(.unknownItem)),
            ])
        let kinds = ServerEntry.Kind.self
        return [
            Sample(
                entry: .zoneSaved(RecordZone(zoneID: notes, capabilities: .customZoneDefault)), kind: kinds.zoneSaved),
            Sample(
                entry: .zoneSaved(
                    RecordZone(
                        zoneID: notes, capabilities: .customZoneDefault,
                        share: Record.Reference(recordID: Record.ID(recordName: "cloudkit.zoneshare", zoneID: notes)))),
                kind: kinds.zoneSaved),
            Sample(entry: .zoneDeleted(notes, reason: .deleted), kind: kinds.zoneDeleted),
            Sample(entry: .zoneDeleted(notes, reason: .purged), kind: kinds.zoneDeleted),
            Sample(entry: .zoneDeleted(notes, reason: .encryptedDataReset), kind: kinds.zoneDeleted),
            Sample(entry: .recordSaved(savedRecord(tag: "3")), kind: kinds.recordSaved),
            Sample(entry: .recordDeleted(n1, recordType: "Note"), kind: kinds.recordDeleted),
            Sample(entry: .subscriptionSaved(Subscription(subscriptionID: "engine")), kind: kinds.subscriptionSaved),
            Sample(
                entry: .subscriptionSaved(Subscription(subscriptionID: "z", kind: .recordZone(notes))),
                kind: kinds.subscriptionSaved),
            Sample(entry: .subscriptionDeleted("engine"), kind: kinds.subscriptionDeleted),
            Sample(
                entry: .requestCompleted("dev1-42", fingerprint: 0xDEAD_BEEF, response: response),
                kind: kinds.requestCompleted),
            Sample(
                entry: .requestCompleted("empty", fingerprint: 0, response: ModifyRecordsResponse()),
                kind: kinds.requestCompleted),
            Sample(entry: .tombstonesCompacted(horizon: LogOffset(1234)), kind: kinds.tombstonesCompacted),
            Sample(entry: .tombstonesCompacted(horizon: LogOffset(UInt64.max)), kind: kinds.tombstonesCompacted),
            Sample(
                entry: .clientChangeTokenUpdated(notes, device: "phone", token: [0, 1, 2, 0xFF]),
                kind: kinds.clientChangeTokenUpdated),
            Sample(
                entry: .clientChangeTokenUpdated(notes, device: nil, token: []), kind: kinds.clientChangeTokenUpdated),
            Sample(
                entry: .requestCompleted("bob-1", fingerprint: 7, response: ModifyRecordsResponse(), actor: 3),
                kind: kinds.requestCompleted),
            Sample(
                entry: .sharedZoneJoined(
                    RecordZone.ID(zoneName: "Notes", ownerName: "_user1"),
                    share: Record.ID(
                        recordName: "cloudkit.zoneshare", zoneID: RecordZone.ID(zoneName: "Notes", ownerName: "_user1")),
                    ownerOffset: 12), kind: kinds.sharedZoneJoined),
            Sample(
                entry: .sharedZoneChanged(RecordZone.ID(zoneName: "Notes", ownerName: "_user1"), ownerOffset: 99),
                kind: kinds.sharedZoneChanged),
            Sample(
                entry: .sharedZoneLeft(RecordZone.ID(zoneName: "Notes", ownerName: "_user1"), reason: .left),
                kind: kinds.sharedZoneLeft),
            Sample(
                entry: .sharedZoneLeft(RecordZone.ID(zoneName: "Notes", ownerName: "_user1"), reason: .zoneDeleted),
                kind: kinds.sharedZoneLeft),
            // The same response as the first requestCompleted, compact: n1 saved at offset 40.
            Sample(
                entry: .requestOutcome(
                    "dev1-43", fingerprint: 0xDEAD_BEEF,
                    outcome: RequestOutcome(
                        saved: [
                            RequestOutcome.Saved(n1, at: 40),
                            RequestOutcome.Saved(Record.ID(recordName: "n4", zoneID: notes), at: 41),
                        ],
                        others: ModifyRecordsResponse(
                            saveResults: [n2: response.saveResults[n2]!], deleteResults: response.deleteResults))),
                kind: kinds.requestOutcome),
            Sample(
                entry: .requestOutcome("empty", fingerprint: 0, outcome: RequestOutcome()), kind: kinds.requestOutcome),
            Sample(
                entry: .requestOutcome(
                    "bob-2", fingerprint: 8, outcome: RequestOutcome(saved: [RequestOutcome.Saved(n1, at: 1)]), actor: 3
                ),
                kind: kinds.requestOutcome),
            // F69: a request's group on its outcome; a group's first sighting.
            Sample(
                entry: .requestOutcome(
                    "dev1-44", fingerprint: 9,
                    outcome: RequestOutcome(
                        saved: [RequestOutcome.Saved(n1, at: 2)], operationGroupID: "import-1")),
                kind: kinds.requestOutcome
            ),
            Sample(
                entry: .operationGroupStarted(
                    OperationGroup(
                        operationGroupID: "import-1", name: "Import ✓", quantity: 3, expectedSendSize: .gigabytes,
                        expectedReceiveSize: .tensOfMegabytes),
                    firstRequest: "modifyZones", device: "phone"), kind: kinds.operationGroupStarted),
            Sample(
                entry: .operationGroupStarted(
                    OperationGroup(operationGroupID: "g"), firstRequest: "fetchZoneChanges", device: nil),
                kind: kinds.operationGroupStarted),
            // F137: every kind of field, an open list, a type without fields.
            Sample(
                entry: .schemaDeployed(
                    RecordSchema([
                        "Note": [
                            "title": .value(.string), "count": .value(.int64), "ratio": .value(.double),
                            "done": .value(.bool),
                            "blob": .value(.bytes), "due": .value(.date), "folder": .value(.reference),
                            "photo": .value(.asset),
                            "place": .value(.location), "tags": .list(.string), "empty": .list(nil),
                        ],
                        "Folder": [:],
                    ])), kind: kinds.schemaDeployed),
            Sample(entry: .schemaDeployed(RecordSchema()), kind: kinds.schemaDeployed),
            Sample(entry: .deviceKeyRegistered(deviceKey), kind: kinds.deviceKeyRegistered),
            Sample(
                entry: .zoneKeysSaved([wrap(version: 1, recipient: "a"), wrap(version: 2, recipient: "b")]),
                kind: kinds.zoneKeysSaved),
        ]
    }()

    @Test("requestOutcome, written directly, is byte for byte what SwiftProtobuf writes")
    func requestOutcomeAsSwiftProtobufWritesIt() throws {
        var outcomes = 0
        for sample in Self.samples {
            guard case .requestOutcome(let requestID, let fingerprint, let outcome, let actor) = sample.entry else {
                continue
            }
            let message = Logsync_Server_RequestOutcome.with {
                $0.requestID = requestID.rawValue
                $0.fingerprint = fingerprint
                $0.actor = actor
                $0.saved = outcome.saved.map { saved in
                    Logsync_Server_SavedRecordRef.with {
                        $0.recordID = saved.recordID.proto
                        $0.offset = saved.offset.rawValue
                    }
                }
                $0.others = outcome.others.proto
                $0.operationGroupID = outcome.operationGroupID ?? ""
            }
            #expect(sample.entry.newEntry.payload == ProtoWire.serialize(message), "\(requestID)")
            outcomes += 1
        }
        #expect(outcomes == 4)
    }

    /// The entry as the log returns it after an append at `offset`.
    static func logEntry(_ new: NewEntry, offset: LogOffset = 42) -> LogEntry {
        LogEntry(offset: offset, kind: new.kind, time: EntryTime(microsecondsSince1970: 1), payload: new.payload)
    }

    /// The error decoding `entry` throws, or `nil` if it decodes.
    static func decodingError(_ entry: LogEntry) -> LogStoreError? {
        do {
            _ = try ServerEntry(entry)
            return nil
        } catch {
            return error
        }
    }

    @Test("every case round-trips", arguments: samples)
    func roundTrip(sample: Sample) throws {
        let new = sample.entry.newEntry
        #expect(new.kind == sample.kind)
        #expect(new.time == nil)
        let decoded = try ServerEntry(Self.logEntry(new))
        #expect(decoded == sample.entry)
        #expect(decoded.newEntry.payload == new.payload)  // deterministic bytes
    }

    /// `recordSaved` payloads are written directly, not by SwiftProtobuf: the bytes are the same.
    @Test func recordSavedBytesAreSwiftProtobufs() {
        var shared = Self.savedRecord(tag: "9")
        shared["removed"] = nil
        for record in [Self.savedRecord(tag: "3"), shared, Record(recordType: "", recordID: Self.n2)] {
            let expected = ProtoWire.serialize(Logsync_Server_RecordSaved.with { $0.record = record.proto })
            #expect(ServerEntry.recordSaved(record).newEntry.payload == expected)
        }
    }

    /// A record saved as sent has its `recordSaved` entry made from the bytes of its type, ID
    /// and fields that the request's fingerprint wrote (F160): the payload is the record's own.
    @Test func recordSavedFromTheRequestsBytes() {
        var client = Record(recordType: "Note", recordID: Self.n1)
        client["title"] = .string(String(repeating: "long title ", count: 40))
        client["due"] = .date(Self.t0)
        client.parent = Record.Reference(recordID: Self.n2)
        var written = ProtoWriter()
        client.writeTypeIDAndFields(to: &written)
        var saved = client
        saved.applySystemFields(Self.savedRecord(tag: "12").systemFields)
        let entry = ServerEntry.recordSavedEntry(
            saved, estimatedSize: saved.estimatedSize, typeIDAndFields: written.bytes[...])
        #expect(entry.payload == ServerEntry.recordSaved(saved).newEntry.payload)
        #expect(entry.kind == ServerEntry.Kind.recordSaved)
    }

    @Test func removedKeysSurviveInStoredResponses() throws {
        let sample = try #require(Self.samples.first { $0.kind == ServerEntry.Kind.requestCompleted })
        let decoded = try ServerEntry(Self.logEntry(sample.entry.newEntry))
        guard case .requestCompleted(_, _, let response, _) = decoded,
            case .failure(let error)? = response.saveResults[Self.n2]
        else {
            Issue.record("unexpected \(decoded)")
            return
        }
        let client = try #require(error.clientRecord)
        #expect(client.changedKeys() == ["title"])
        #expect(client["title"] == nil)
    }

    @Test("unknown kinds are corrupt entries naming the offset", arguments: [0 as UInt16, 1, 100, 120, 199, 999])
    func unknownKind(kind: UInt16) throws {
        let entry = LogEntry(offset: 7, kind: EntryKind(kind), time: EntryTime(microsecondsSince1970: 1), payload: [])
        let error = try #require(Self.decodingError(entry))
        #expect(error.code == .corruptEntry)
        #expect(error.offset == 7)
        #expect(error.message.contains("entry kind \(kind) is not a server entry kind"))
        #expect(error.description.contains("at offset 7"))
    }

    @Test("garbage payloads are corrupt entries naming the kind and offset", arguments: samples)
    func garbagePayload(sample: Sample) throws {
        let entry = LogEntry(
            offset: 9, kind: sample.kind, time: EntryTime(microsecondsSince1970: 1), payload: [0xFF, 0xFF, 0xFF])
        let error = try #require(Self.decodingError(entry))
        #expect(error.code == .corruptEntry)
        #expect(error.offset == 9)
        #expect(error.message.contains("(kind \(sample.kind.rawValue)) payload"), "\(error.message)")
        #expect(error.description.contains("at offset 9"))
    }

    @Test func missingRequiredFieldsAreCorruptEntries() throws {
        let kinds = ServerEntry.Kind.self
        let expectations: [(EntryKind, String)] = [
            (kinds.zoneSaved, "zoneSaved (kind 101) payload: ZoneSaved.zone is missing"),
            (kinds.zoneDeleted, "zoneDeleted (kind 102) payload: ZoneDeleted.zone_id is missing"),
            (kinds.recordSaved, "recordSaved (kind 103) payload: RecordSaved.record is missing"),
            (kinds.recordDeleted, "recordDeleted (kind 104) payload: RecordDeleted.record_id is missing"),
            (
                kinds.subscriptionSaved,
                "subscriptionSaved (kind 105) payload: SubscriptionSaved.subscription is missing"
            ),
            (kinds.requestCompleted, "requestCompleted (kind 107) payload: RequestCompleted.response is missing"),
            (kinds.requestOutcome, "requestOutcome (kind 113) payload: RequestOutcome.others is missing"),
            (
                kinds.clientChangeTokenUpdated,
                "clientChangeTokenUpdated (kind 109) payload: ClientChangeTokenUpdated.zone_id is missing"
            ),
            (kinds.deviceKeyRegistered, "deviceKeyRegistered (kind 118) payload: DeviceKeyRegistered.key is missing"),
            (kinds.zoneKeysSaved, "zoneKeysSaved (kind 119) payload: ZoneKeysSaved.keys is empty"),
        ]
        for (kind, expected) in expectations {
            let entry = LogEntry(offset: 3, kind: kind, time: EntryTime(microsecondsSince1970: 1), payload: [])
            let error = try #require(Self.decodingError(entry))
            #expect(error.code == .corruptEntry)
            #expect(error.offset == 3)
            #expect(error.message == expected)
        }
    }

    /// The kinds in the message of an unknown kind are the kinds there are.
    @Test func unknownKindMessageListsTheKinds() throws {
        let entry = LogEntry(offset: 5, kind: EntryKind(150), time: EntryTime(microsecondsSince1970: 1), payload: [])
        let error = try #require(Self.decodingError(entry))
        #expect(error.message == "entry kind 150 is not a server entry kind (101–119)")
    }

    /// A key or a wrap of the wrong shape is a corrupt entry naming the offset and what is wrong.
    @Test func malformedKeysAreCorruptEntries() throws {
        var shortKey = Logsync_Server_DeviceKeyRegistered()
        shortKey.key.raw = Data(repeating: 1, count: 31)
        var badWrap = Self.wrap(version: 1, recipient: "c")
        badWrap.wrapped = Data(count: 91)
        var wraps = Logsync_Server_ZoneKeysSaved()
        wraps.keys = [Self.wrap(version: 1, recipient: "a").proto, badWrap.proto]
        let cases: [(EntryKind, [UInt8], String)] = [
            (
                ServerEntry.Kind.deviceKeyRegistered, ProtoWire.serialize(shortKey),
                "DeviceKeyRegistered.key: a device public key has 32 bytes, not 31"
            ),
            (ServerEntry.Kind.zoneKeysSaved, ProtoWire.serialize(wraps), "ZoneKeysSaved.keys[1]"),
        ]
        for (kind, payload, expected) in cases {
            let entry = LogEntry(offset: 11, kind: kind, time: EntryTime(microsecondsSince1970: 1), payload: payload)
            let error = try #require(Self.decodingError(entry))
            #expect(error.code == .corruptEntry)
            #expect(error.offset == 11)
            #expect(error.message.contains(expected), "\(error.message)")
        }
    }

    /// A compact request outcome that would not read back as one response is a corrupt entry:
    /// a saved record with no offset before the entry, named twice, or also among the others;
    /// a successful save among the others; a saved reference without its record ID.
    @Test(arguments: [
        ("an offset of 0", "RequestOutcome.saved[0].offset is 0, not an entry before this one (20)"),
        ("the entry's own offset", "RequestOutcome.saved[0].offset is 20, not an entry before this one (20)"),
        ("an offset after the entry", "RequestOutcome.saved[0].offset is 21, not an entry before this one (20)"),
        (
            "a record saved twice",
            #"RequestOutcome.saved[1] names record "n1" in zone "Notes", which has another result"#
        ),
        (
            "a saved record that also failed",
            #"RequestOutcome.saved[0] names record "n2" in zone "Notes", which has another result"#
        ),
        (
            "a success among the others",
            #"RequestOutcome.others holds the successful save of record "n1" in zone "Notes"; saved records belong in RequestOutcome.saved"#
        ),
        ("a reference without its record", "RequestOutcome.saved[0].record_id is missing"),
    ])
    func invalidRequestOutcomes(problem: String, expected: String) throws {
        func reference(_ id: Record.ID?, _ offset: UInt64) -> Logsync_Server_SavedRecordRef {
            Logsync_Server_SavedRecordRef.with {
                if let id { $0.recordID = id.proto }
                $0.offset = offset
            }
        }
        var message = Logsync_Server_RequestOutcome()
        message.requestID = "r"
        message.others = ModifyRecordsResponse().proto
        switch problem {
        case "an offset of 0": message.saved = [reference(Self.n1, 0)]
        case "the entry's own offset": message.saved = [reference(Self.n1, 20)]
        case "an offset after the entry": message.saved = [reference(Self.n1, 21)]
        case "a record saved twice": message.saved = [reference(Self.n1, 3), reference(Self.n1, 4)]
        case "a saved record that also failed":
            message.saved = [reference(Self.n2, 3)]
            message.others = ModifyRecordsResponse(saveResults: [Self.n2: .failure(SyncError(.unknownItem))]).proto
        case "a success among the others":
            message.others = ModifyRecordsResponse(saveResults: [Self.n1: .success(Self.savedRecord(tag: "3"))]).proto
        default: message.saved = [reference(nil, 3)]
        }
        let error = try #require(
            Self.decodingError(
                LogEntry(
                    offset: 20, kind: ServerEntry.Kind.requestOutcome, time: EntryTime(microsecondsSince1970: 1),
                    payload: ProtoWire.serialize(message))))
        #expect(error.code == .corruptEntry)
        #expect(error.offset == 20)
        #expect(error.message == "requestOutcome (kind 113) payload: \(expected)")
    }

    @Test func invalidModelPartsAreCorruptEntries() throws {
        var deleted = Logsync_Server_ZoneDeleted()
        deleted.zoneID = Self.notes.proto
        deleted.reason = .unspecified
        var error = try #require(
            Self.decodingError(
                LogEntry(
                    offset: 5, kind: ServerEntry.Kind.zoneDeleted, time: EntryTime(microsecondsSince1970: 1),
                    payload: ProtoWire.serialize(deleted))))
        #expect(error.code == .corruptEntry)
        #expect(error.message == "zoneDeleted (kind 102) payload: ZoneDeleted.reason: ZoneDeletionReason is missing")

        var saved = Logsync_Server_RecordSaved()
        saved.record = Self.savedRecord(tag: "1").proto
        saved.record.fields["title"] = Logsync_Model_RecordValue()
        error = try #require(
            Self.decodingError(
                LogEntry(
                    offset: 6, kind: ServerEntry.Kind.recordSaved, time: EntryTime(microsecondsSince1970: 1),
                    payload: ProtoWire.serialize(saved))))
        #expect(error.offset == 6)
        #expect(
            error.message
                == "recordSaved (kind 103) payload: Record.fields[\"title\"]: RecordValue has no value set")
    }

    @Test("random payloads never crash the decoder", arguments: [1 as UInt64, 2])
    func randomPayloads(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var wrong: [String] = []
        for round in 0..<2_000 {
            let sample = Self.samples[round % Self.samples.count]
            var payload = sample.entry.newEntry.payload
            if payload.isEmpty || round % 3 == 0 {
                payload = (0..<Int.random(in: 0...48, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            } else {
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    payload[Int.random(in: 0..<payload.count, using: &random)] = UInt8.random(
                        in: 0...255, using: &random)
                }
            }
            let entry = LogEntry(
                offset: LogOffset(UInt64(round + 1)), kind: sample.kind,
                time: EntryTime(microsecondsSince1970: 1), payload: payload)
            if let error = Self.decodingError(entry),
                error.code != .corruptEntry || error.offset != entry.offset
            {
                wrong.append(error.description)
            }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(3))")
    }

    /// A schema of the one record type `Note`, with these fields and kinds.
    static func noteSchema(
        _ fields: [(name: String, kind: Logsync_Server_SchemaValueKind)]
    )
        -> Logsync_Server_SchemaDeployed
    {
        .with {
            $0.recordTypes = [
                .with { type in
                    type.name = "Note"
                    type.fields = fields.map { field in
                        .with {
                            $0.name = field.name
                            $0.kind = field.kind
                        }
                    }
                }
            ]
        }
    }

    /// F137: a `schemaDeployed` payload that names no schema is a corrupt entry naming its offset and
    /// the element at fault.
    @Test(
        "F137 a corrupt schemaDeployed payload is a corruptEntry naming the offset and the element",
        arguments: [
            (
                "a type without a name",
                Logsync_Server_SchemaDeployed.with { $0.recordTypes = [.with { $0.name = "" }] },
                "SchemaDeployed.record_types[0].name is missing"
            ),
            (
                "a type twice",
                Logsync_Server_SchemaDeployed.with {
                    $0.recordTypes = [.with { $0.name = "Note" }, .with { $0.name = "Note" }]
                },
                #"SchemaDeployed.record_types[1].name repeats "Note""#
            ),
            (
                "a field without a kind",
                noteSchema([("title", .unspecified)]),
                "SchemaDeployed.record_types[0].fields[0].kind is missing"
            ),
            (
                "an unknown kind",
                noteSchema([("title", .UNRECOGNIZED(42))]),
                "SchemaDeployed.record_types[0].fields[0].kind is 42, not a kind (1–9)"
            ),
            (
                "a field twice",
                noteSchema([("a", .string), ("a", .int64)]),
                #"SchemaDeployed.record_types[0].fields[1].name repeats "a""#
            ),
        ])
    func corruptSchema(problem: String, message: Logsync_Server_SchemaDeployed, expected: String) throws {
        let entry = LogEntry(
            offset: 12, kind: ServerEntry.Kind.schemaDeployed, time: EntryTime(microsecondsSince1970: 1),
            payload: ProtoWire.serialize(message))
        let error = try #require(Self.decodingError(entry), "\(problem)")
        #expect(error.code == .corruptEntry)
        #expect(error.offset == 12)
        #expect(error.message == "schemaDeployed (kind 117) payload: \(expected)", "\(problem)")
    }
}
