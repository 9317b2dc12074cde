import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncDiagnostics
@testable import LogSyncServer

/// `ServerEntryDescription`: every server entry kind described, unknown kinds left alone,
/// undecodable payloads reported at their offset.
@Suite("ServerEntryDescription")
struct ServerEntryDescriptionTests: EntryIDs {
    /// The answer to request phone-7 (with no `saved`: what its outcome keeps besides the saves):
    /// two saves refused, one delete done and one refused, and a success for each of `saved`.
    static func phone7Response(saved: [Record] = []) -> ModifyRecordsResponse {
        var saveResults: [Record.ID: Result<Record, SyncError>] = [
            id("n3"): .failure(SyncError(.serverRecordChanged, "changed")),
            id("n2"): .failure(SyncError(.batchRequestFailed, "atomic")),
        ]
        for record in saved { saveResults[record.recordID] = .success(record) }
        return ModifyRecordsResponse(
            saveResults: saveResults,
            deleteResults: [
                id("old"): .success(()), id("gone", in: bobs): .failure(SyncError(.zoneNotFound, "no zone")),
            ])
    }

    /// A record as the server stores it: tag set, nothing marked changed.
    static func savedNote(_ name: String, tag: String, parent: String? = nil) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
        record["title"] = .string("Groceries")
        record["body"] = .string("milk")
        if let parent { record.parent = Record.Reference(recordID: Record.ID(recordName: parent, zoneID: notes)) }
        record.applySystemFields(Record.SystemFields(recordChangeTag: tag))
        return record
    }

    static let photo = AssetHasher.digest(of: Array("photo".utf8))

    /// A saved record with an asset, as the server keeps it (no local file).
    static var notedPhoto: Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n3", zoneID: notes))
        record["photo"] = .asset(Asset(digest: photo, size: 5))
        record.applySystemFields(Record.SystemFields(recordChangeTag: "14"))
        return record
    }

    static let deviceKey = try! DevicePublicKey(
        rawRepresentation: Data(repeating: 9, count: 32), userRecordName: "_user1")

    static func wrap(_ zoneID: RecordZone.ID, version: UInt32) -> WrappedZoneKey {
        WrappedZoneKey(
            zoneID: zoneID, version: version, recipientKeyID: deviceKey.keyID, check: Data(repeating: 1, count: 8),
            wrapped: Data(repeating: 2, count: WrappedZoneKey.wrappedSize))
    }

    static let cases: [(ServerEntry, String, String)] = [
        (.deviceKeyRegistered(deviceKey), "deviceKeyRegistered", "key=\(deviceKey.keyID) user=_user1 keySize=32"),
        (
            .zoneKeysSaved([wrap(notes, version: 1), wrap(bobs, version: 2)]), "zoneKeysSaved",
            "wraps=[Notes:v1:\(deviceKey.keyID),Shared@_bob:v2:\(deviceKey.keyID)] wrapCount=2 wrapBytes=200"
        ),
        (.assetStored(photo, size: 5, zone: notes), "assetStored", "zone=Notes asset=\(photo) size=5"),
        // Written before contents were granted per zone: no zone.
        (.assetStored(photo, size: 5, zone: nil), "assetStored", "asset=\(photo) size=5"),
        (.assetsDeleted([photo]), "assetsDeleted", "assets=[\(photo)]"),
        // F137: the deployed schema's types, then each field with its kind.
        (
            .schemaDeployed(
                RecordSchema([
                    "Note": ["title": .value(.string), "tags": .list(.string), "old": .list(nil)], "Folder": [:],
                ])),
            "schemaDeployed", "types=[Folder,Note] fields=[Note.old:list,Note.tags:list<string>,Note.title:string]"
        ),
        (
            .recordSaved(notedPhoto), "recordSaved",
            "zone=Notes record=n3 type=Note tag=14 keys=[photo] assets=[n3.photo:\(photo.short)/5B]"
        ),
        (
            .zoneSaved(RecordZone(zoneID: notes, capabilities: .customZoneDefault)),
            "zoneSaved", "zone=Notes capabilities=[fetchChanges,atomic,sharing,zoneWideSharing]"
        ),
        (
            .zoneSaved(
                RecordZone(
                    zoneID: bobs, capabilities: [.sharing, RecordZone.Capabilities(rawValue: 0x30)],
                    share: Record.Reference(recordID: Record.ID(recordName: "cloudkit.zoneshare", zoneID: bobs)))),
            "zoneSaved", "zone=Shared owner=_bob capabilities=[sharing,0x30] share=cloudkit.zoneshare"
        ),
        (.zoneDeleted(notes, reason: .deleted), "zoneDeleted", "zone=Notes reason=deleted"),
        (
            .zoneDeleted(bobs, reason: .encryptedDataReset), "zoneDeleted",
            "zone=Shared owner=_bob reason=encryptedDataReset"
        ),
        (
            .recordSaved(savedNote("n1", tag: "12")), "recordSaved",
            "zone=Notes record=n1 type=Note tag=12 keys=[body,title]"
        ),
        (
            .recordSaved(savedNote("n2", tag: "13", parent: "folder")),
            "recordSaved", "zone=Notes record=n2 type=Note tag=13 keys=[body,title] parent=folder"
        ),
        (
            .recordSaved(
                {
                    var record = Record(recordType: "Task", recordID: Record.ID(recordName: "t1"))
                    record["done"] = .bool(false)
                    return record
                }()), "recordSaved", "zone=_defaultZone record=t1 type=Task keys=[done] changed=[done]"
        ),
        (
            .recordDeleted(Record.ID(recordName: "n1", zoneID: notes), recordType: "Note"),
            "recordDeleted", "zone=Notes record=n1 type=Note"
        ),
        (
            .subscriptionSaved(Subscription(subscriptionID: "engine", kind: .database)),
            "subscriptionSaved", "subscription=engine kind=database"
        ),
        (
            .subscriptionSaved(Subscription(subscriptionID: "notes-push", kind: .recordZone(notes))),
            "subscriptionSaved", "subscription=notes-push kind=zone zone=Notes"
        ),
        (.subscriptionDeleted("engine"), "subscriptionDeleted", "subscription=engine"),
        (
            .requestCompleted(
                "phone-7", fingerprint: 0xBEEF, response: phone7Response(saved: [savedNote("n1", tag: "20")])),
            "requestCompleted",
            "request=phone-7 fingerprint=0x0000beef saved=1 deleted=1 failed=3 errors=[gone:zoneNotFound,n2:batchRequestFailed,n3:serverRecordChanged]"
        ),
        (
            .requestCompleted("empty", fingerprint: 0xFFFF_FFFF, response: ModifyRecordsResponse()),
            "requestCompleted", "request=empty fingerprint=0xffffffff saved=0 deleted=0 failed=0"
        ),
        (.tombstonesCompacted(horizon: 40), "tombstonesCompacted", "horizon=40"),
        (
            .clientChangeTokenUpdated(notes, device: "phone", token: [0x01, 0xAB]),
            "clientChangeTokenUpdated", "zone=Notes device=phone token=01ab tokenSize=2"
        ),
        (
            .clientChangeTokenUpdated(notes, device: nil, token: Array(0..<40)),
            "clientChangeTokenUpdated",
            "zone=Notes token=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f… tokenSize=40"
        ),
        (
            .recordSaved(
                {
                    var share = Share(
                        rootRecordID: Record.ID(recordName: "folder", zoneID: notes),
                        shareID: Record.ID(recordName: "s1", zoneID: notes))
                    share.publicPermission = .readOnly
                    share.participants = [
                        Share.Participant(
                            userIdentity: UserIdentity(userRecordName: "_user1"), role: .owner, permission: .readWrite,
                            acceptanceStatus: .accepted),
                        Share.Participant(
                            userIdentity: UserIdentity(userRecordName: "_user2", emailAddress: "bob@example.com"),
                            role: .privateUser,
                            permission: .readOnly, acceptanceStatus: .pending),
                        Share.Participant(
                            userIdentity: UserIdentity(emailAddress: "carol@example.com"), role: .privateUser,
                            permission: .readWrite, acceptanceStatus: .removed),
                    ]
                    var record = share.record
                    record.applySystemFields(Record.SystemFields(recordChangeTag: "30"))
                    return record
                }()), "recordSaved",
            "zone=Notes record=s1 type=cloudkit.share tag=30 keys=[participantEmails,participantPermissions,participantRoles,participantStatuses,participantUsers,publicPermission,rootRecord] root=folder publicPermission=readOnly participants=[_user1:owner:readWrite:accepted,_user2:privateUser:readOnly:pending,carol@example.com:privateUser:readWrite:removed]"
        ),
        (
            .requestCompleted("bob-1", fingerprint: 1, response: ModifyRecordsResponse(), actor: 2),
            "requestCompleted", "request=bob-1 fingerprint=0x00000001 saved=0 deleted=0 failed=0 actor=_user2"
        ),
        (
            .sharedZoneJoined(bobs, share: Record.ID(recordName: "cloudkit.zoneshare", zoneID: bobs), ownerOffset: 9),
            "sharedZoneJoined", "zone=Shared owner=_bob share=cloudkit.zoneshare ownerOffset=9"
        ),
        (.sharedZoneChanged(bobs, ownerOffset: 15), "sharedZoneChanged", "zone=Shared owner=_bob ownerOffset=15"),
        (.sharedZoneLeft(bobs, reason: .removed), "sharedZoneLeft", "zone=Shared owner=_bob reason=removed"),
        // The first requestCompleted's outcome, compact: the same fields.
        (
            .requestOutcome(
                "phone-7", fingerprint: 0xBEEF,
                outcome: RequestOutcome(
                    saved: [RequestOutcome.Saved(id("n1"), at: 11)], others: phone7Response())),
            "requestOutcome",
            "request=phone-7 fingerprint=0x0000beef saved=1 deleted=1 failed=3 errors=[gone:zoneNotFound,n2:batchRequestFailed,n3:serverRecordChanged]"
        ),
        (
            .requestOutcome(
                "bob-1", fingerprint: 1,
                outcome: RequestOutcome(
                    saved: [
                        RequestOutcome.Saved(Record.ID(recordName: "a", zoneID: bobs), at: 9),
                        RequestOutcome.Saved(Record.ID(recordName: "b", zoneID: bobs), at: 10),
                    ]), actor: 2),
            "requestOutcome", "request=bob-1 fingerprint=0x00000001 saved=2 deleted=0 failed=0 actor=_user2"
        ),
        // F69: a request's group on its outcome, and the group's own entry.
        (
            .requestOutcome(
                "phone-8", fingerprint: 2,
                outcome: RequestOutcome(
                    saved: [RequestOutcome.Saved(Record.ID(recordName: "n1", zoneID: notes), at: 11)],
                    operationGroupID: "import-1")),
            "requestOutcome", "request=phone-8 fingerprint=0x00000002 saved=1 deleted=0 failed=0 group=import-1"
        ),
        (
            .operationGroupStarted(
                OperationGroup(
                    operationGroupID: "import-1", name: "Import photos", quantity: 120,
                    expectedSendSize: .hundredsOfMegabytes,
                    expectedReceiveSize: .kilobytes),
                firstRequest: "uploadAsset", device: "phone"),
            "operationGroupStarted",
            "group=import-1 name=Import photos quantity=120 sendSize=hundredsOfMegabytes receiveSize=kilobytes firstRequest=uploadAsset device=phone"
        ),
        (
            .operationGroupStarted(
                OperationGroup(operationGroupID: "p-7"), firstRequest: "fetchDatabaseChanges", device: nil),
            "operationGroupStarted", "group=p-7 firstRequest=fetchDatabaseChanges"
        ),
    ]

    @Test(arguments: cases.indices)
    func describesEveryCase(index: Int) throws {
        let (serverEntry, kindName, fields) = Self.cases[index]
        let new = serverEntry.newEntry
        let entry = LogEntry(
            offset: 12, kind: new.kind, time: EntryTime(microsecondsSince1970: 0), payload: new.payload)
        let description = try #require(try ServerEntryDescription.describe(entry))
        #expect(description.kindName == kindName)
        #expect(ServerEntryDescription.kindName(of: entry.kind) == kindName)
        #expect(description.fields.map { "\($0.name)=\($0.value)" }.joined(separator: " ") == fields)
        #expect(Set(description.fields.map(\.name)).count == description.fields.count, "a field name appears twice")
    }

    @Test func everyServerEntryCaseHasATableRow() {
        // One kind per ServerEntry case: the table covers all nineteen.
        let kinds = Set(Self.cases.map { $0.0.newEntry.kind })
        #expect(kinds == Set((101...119).map { EntryKind($0) }))
    }

    @Test func countsAndOffsetsAreIntegersTagsAreText() throws {
        let request = ServerEntry.requestCompleted("r", fingerprint: 1, response: ModifyRecordsResponse()).newEntry
        let described = try #require(
            try ServerEntryDescription.describe(
                LogEntry(offset: 5, kind: request.kind, time: .init(microsecondsSince1970: 0), payload: request.payload)
            ))
        #expect(described["saved"] == .integer(0))
        #expect(described["failed"] == .integer(0))
        let compacted = ServerEntry.tombstonesCompacted(horizon: 7).newEntry
        #expect(
            try ServerEntryDescription.describe(
                LogEntry(
                    offset: 8, kind: compacted.kind, time: .init(microsecondsSince1970: 0), payload: compacted.payload))?[
                    "horizon"] == .integer(7))
        let saved = ServerEntry.recordSaved(Self.savedNote("n1", tag: "3")).newEntry
        let record = try #require(
            try ServerEntryDescription.describe(
                LogEntry(offset: 3, kind: saved.kind, time: .init(microsecondsSince1970: 0), payload: saved.payload)))
        #expect(record["tag"] == .text("3"))
        #expect(record["keys"] == .list(["body", "title"]))
        #expect(record["owner"] == nil)
    }

    @Test func userRegisteredNamesTheUserAndTheirDirectory() throws {
        let entry = LogEntry(
            offset: 2, kind: 120, time: .init(microsecondsSince1970: 0), payload: Array("bob@example.com".utf8))
        let description = try #require(try ServerEntryDescription.describe(entry))
        #expect(description.kindName == "userRegistered")
        #expect(description.fields == [.init("user", .text("bob@example.com")), .init("directory", .text("users/u2"))])
    }

    @Test func userEmailSetNamesTheNumberAndTheAddress() throws {
        let entry = LogEntry(
            offset: 5, kind: 121, time: .init(microsecondsSince1970: 0),
            payload: [0, 0, 0, 0, 0, 0, 0, 2] + Array("bob@example.com".utf8))
        let description = try #require(try ServerEntryDescription.describe(entry))
        #expect(description.kindName == "userEmailSet")
        #expect(description.fields == [.init("userNumber", .integer(2)), .init("email", .text("bob@example.com"))])
        let short = LogEntry(offset: 6, kind: 121, time: .init(microsecondsSince1970: 0), payload: [0, 1])
        #expect(throws: LogStoreError.self) { try ServerEntryDescription.describe(short) }
    }

    @Test func userDeletedNamesTheNumberAndTheUser() throws {
        let entry = LogEntry(
            offset: 9, kind: 122, time: .init(microsecondsSince1970: 0),
            payload: [0, 0, 0, 0, 0, 0, 0, 2] + Array("bob".utf8))
        let description = try #require(try ServerEntryDescription.describe(entry))
        #expect(description.kindName == "userDeleted")
        #expect(description.fields == [.init("userNumber", .integer(2)), .init("user", .text("bob"))])
        let short = LogEntry(offset: 10, kind: 122, time: .init(microsecondsSince1970: 0), payload: [0, 1])
        #expect(throws: LogStoreError.self) { try ServerEntryDescription.describe(short) }
    }

    @Test(arguments: [0, 1, 2, 3, 99, 100, 150, 123, 199, 65535] as [UInt16])
    func otherKindsAreNotDescribed(kind: UInt16) throws {
        let entry = LogEntry(
            offset: 1, kind: EntryKind(kind), time: .init(microsecondsSince1970: 0), payload: [0xFF, 0x00])
        #expect(try ServerEntryDescription.describe(entry) == nil)
        #expect(ServerEntryDescription.kindName(of: EntryKind(kind)) == nil)
    }

    @Test(arguments: [101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 116, 118, 119] as [UInt16])
    func anUndecodablePayloadIsACorruptEntryAtItsOffset(kind: UInt16) throws {
        let entry = LogEntry(
            offset: 42, kind: EntryKind(kind), time: .init(microsecondsSince1970: 0), payload: [0xFF, 0xFF, 0xFF])
        let error = try #require(throws: LogStoreError.self) { try ServerEntryDescription.describe(entry) }
        #expect(error.code == .corruptEntry)
        #expect(error.offset == 42)
        let name = try #require(ServerEntryDescription.kindName(of: EntryKind(kind)))
        #expect(error.description.hasPrefix("corrupt entry at offset 42: \(name) (kind \(kind)) payload: "), "\(error)")
    }

    @Test func aMissingRequiredMessageIsACorruptEntry() throws {
        // An empty payload parses as a RecordSaved without its record.
        let entry = LogEntry(offset: 7, kind: 103, time: .init(microsecondsSince1970: 0), payload: [])
        let error = try #require(throws: LogStoreError.self) { try ServerEntryDescription.describe(entry) }
        #expect(error.offset == 7)
        #expect(error.message.contains("RecordSaved.record is missing"), "\(error)")
    }

    @Test(arguments: [([], "an empty user ID"), ([0xC3], "a user ID that is not UTF-8")] as [([UInt8], String)])
    func aBadRegistryEntryIsACorruptEntry(payload: [UInt8], problem: String) throws {
        let entry = LogEntry(offset: 3, kind: 120, time: .init(microsecondsSince1970: 0), payload: payload)
        let error = try #require(throws: LogStoreError.self) { try ServerEntryDescription.describe(entry) }
        #expect(error == LogStoreError(.corruptEntry, "userRegistered (kind 120) payload: \(problem)", offset: 3))
    }

    @Test func kindNamesAreUniqueAndCoverTheServersKinds() {
        let kinds = ServerEntryDescription.kinds
        #expect(Set(kinds.map(\.name)).count == kinds.count)
        #expect(kinds.map(\.kind.rawValue) == Array(101...119) + [120, 121, 122])
        #expect(
            kinds.map(\.name) == [
                "zoneSaved", "zoneDeleted", "recordSaved", "recordDeleted", "subscriptionSaved", "subscriptionDeleted",
                "requestCompleted", "tombstonesCompacted", "clientChangeTokenUpdated", "sharedZoneJoined",
                "sharedZoneChanged",
                "sharedZoneLeft", "requestOutcome", "assetStored", "assetsDeleted", "operationGroupStarted",
                "schemaDeployed",
                "deviceKeyRegistered", "zoneKeysSaved",
                "userRegistered", "userEmailSet", "userDeleted",
            ])
    }
}
