import Foundation
import LogSyncWire
import SyncModel
import Testing

/// Every request and response of `CloudDatabase` crosses the wire unchanged, in both formats:
/// what the client encodes, the server decodes to the same value, and back (Docs/Protocol.md).
@Suite("Wire: round trips")
struct WireRoundTripTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let other = RecordZone.ID(zoneName: "Shared", ownerName: "_user7")

    static func record(_ name: String, _ fields: [String: RecordValue] = ["title": "Groceries"]) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
        for (key, value) in fields { record[key] = value }
        return record
    }

    static var conflict: SyncError {
        var server = record(
            "n1", ["title": "server", "count": .int64(3), "when": .date(Date(timeIntervalSince1970: 1_700_000_000))])
        server.applySystemFields(Record.SystemFields(recordChangeTag: "42"))
        return SyncError.serverRecordChanged(
            serverRecord: server, clientRecord: record("n1", ["title": "client"]), "tag 41 is stale")
    }

    @Test("modifyZones request and response", arguments: WireFormat.allCases)
    func modifyZones(format: WireFormat) throws {
        let request = ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: Self.notes)], zoneIDsToDelete: [Self.other])
        #expect(try Wire.decode(ModifyZonesRequest.self, from: Wire.encode(request, as: format), as: format) == request)
        let response = ModifyZonesResponse(
            saveResults: [Self.notes: .success(RecordZone(zoneID: Self.notes))],
            deleteResults: [
                Self.other: .failure(SyncError(.zoneNotFound, "no such zone", item: .zone(Self.other))),
                RecordZone.ID(zoneName: "Old"): .success(()),
            ])
        #expect(
            try Wire.decode(ModifyZonesResponse.self, from: Wire.encode(response, as: format), as: format) == response)
    }

    @Test("fetchZones: all zones and named zones stay apart", arguments: WireFormat.allCases)
    func fetchZones(format: WireFormat) throws {
        for request in [
            FetchZonesRequest(zoneIDs: nil), FetchZonesRequest(zoneIDs: []), FetchZonesRequest(zoneIDs: [Self.notes]),
        ] {
            #expect(
                try Wire.decode(FetchZonesRequest.self, from: Wire.encode(request, as: format), as: format) == request)
        }
        let response = FetchZonesResponse(results: [
            Self.notes: .success(RecordZone(zoneID: Self.notes)),
            Self.other: .failure(
                SyncError(.zoneNotFound, item: .zone(Self.other), zoneDeletionReason: .encryptedDataReset)),
        ])
        #expect(
            try Wire.decode(FetchZonesResponse.self, from: Wire.encode(response, as: format), as: format) == response)
    }

    @Test(
        "modifyRecords request, every policy, and response with a conflict", arguments: WireFormat.allCases,
        SavePolicy.allCases)
    func modifyRecords(format: WireFormat, policy: SavePolicy) throws {
        var removed = Self.record("n2")
        removed["title"] = nil
        let request = ModifyRecordsRequest(
            recordsToSave: [
                Self.record("n1", ["title": "a", "tags": .list(["x", .int64(1)]), "blob": .bytes(Data([0, 1, 2]))]),
                removed,
            ],
            recordIDsToDelete: [Record.ID(recordName: "gone", zoneID: Self.notes)], savePolicy: policy,
            atomically: false,
            requestID: "device-17", clientChangeToken: Data([9, 8, 7]))
        let decoded = try Wire.decode(ModifyRecordsRequest.self, from: Wire.encode(request, as: format), as: format)
        #expect(decoded == request)
        #expect(decoded.recordsToSave[1].changedKeys().contains("title"), "a key set to nil stays a changed key")

        var saved = Self.record("n3")
        saved.applySystemFields(
            Record.SystemFields(recordChangeTag: "7", creationDate: Date(timeIntervalSince1970: 1_700_000_000.5)))
        let response = ModifyRecordsResponse(
            saveResults: [
                saved.recordID: .success(saved), Self.conflict.serverRecord!.recordID: .failure(Self.conflict),
            ],
            deleteResults: [Record.ID(recordName: "gone", zoneID: Self.notes): .success(())])
        #expect(
            try Wire.decode(ModifyRecordsResponse.self, from: Wire.encode(response, as: format), as: format) == response
        )
    }

    @Test("database change feed", arguments: WireFormat.allCases)
    func databaseFeed(format: WireFormat) throws {
        let token = DatabaseChangeToken(offset: 1234, database: 99)
        for request in [FetchDatabaseChangesRequest(), FetchDatabaseChangesRequest(since: token, resultsLimit: 10)] {
            #expect(
                try Wire.decode(FetchDatabaseChangesRequest.self, from: Wire.encode(request, as: format), as: format)
                    == request)
        }
        let response = FetchDatabaseChangesResponse(
            modifications: [DatabaseChange.Modification(zoneID: Self.notes)],
            deletions: [DatabaseChange.Deletion(zoneID: Self.other, reason: .purged)], changeToken: token,
            moreComing: true)
        #expect(
            try Wire.decode(FetchDatabaseChangesResponse.self, from: Wire.encode(response, as: format), as: format)
                == response)
    }

    @Test("zone change feed, with desired keys nil, empty and named", arguments: WireFormat.allCases)
    func zoneFeed(format: WireFormat) throws {
        let token = ZoneChangeToken(zoneID: Self.notes, incarnation: 5, offset: 77, database: 3, listingStart: 80)
        for keys in [nil, [], ["title"]] as [[String]?] {
            let request = FetchZoneChangesRequest(zoneID: Self.notes, since: token, resultsLimit: 2, desiredKeys: keys)
            #expect(
                try Wire.decode(FetchZoneChangesRequest.self, from: Wire.encode(request, as: format), as: format)
                    == request)
        }
        let response = FetchZoneChangesResponse(
            zoneID: Self.notes, modifications: [RecordZoneChange.Modification(record: Self.record("n1"))],
            deletions: [
                RecordZoneChange.Deletion(recordID: Record.ID(recordName: "n2", zoneID: Self.notes), recordType: "Note")
            ],
            changeToken: token, moreComing: false, clientChangeToken: Data([1]))
        #expect(
            try Wire.decode(FetchZoneChangesResponse.self, from: Wire.encode(response, as: format), as: format)
                == response)
    }

    @Test("subscriptions, the account query and error bodies", arguments: WireFormat.allCases)
    func subscriptionsAccountAndErrors(format: WireFormat) throws {
        let zoneSubscription = Subscription(subscriptionID: "notes", kind: .recordZone(Self.notes))
        let request = ModifySubscriptionsRequest(
            subscriptionsToSave: [Subscription(subscriptionID: "engine"), zoneSubscription],
            subscriptionIDsToDelete: ["old"])
        #expect(
            try Wire.decode(ModifySubscriptionsRequest.self, from: Wire.encode(request, as: format), as: format)
                == request)
        let response = ModifySubscriptionsResponse(
            saveResults: [
                "engine": .success(Subscription(subscriptionID: "engine")),
                "notes": .failure(SyncError(.invalidArguments, item: .subscription("notes"))),
            ],
            deleteResults: ["old": .success(())])
        #expect(
            try Wire.decode(ModifySubscriptionsResponse.self, from: Wire.encode(response, as: format), as: format)
                == response)
        let all = [Subscription(subscriptionID: "engine"), zoneSubscription]
        #expect(try Wire.decode([Subscription].self, from: Wire.encode(all, as: format), as: format) == all)
        let user = Record.ID(recordName: "_user3")
        #expect(try Wire.decode(Record.ID.self, from: Wire.encode(user, as: format), as: format) == user)

        let errors = [
            SyncError(.serviceUnavailable, "maintenance", retryAfter: .milliseconds(1500)),
            SyncError(.changeTokenExpired, "compacted", requestID: "r1"),
            SyncError(.limitExceeded, "modifyRecords carries 401 items", cause: "a cause"),
            Self.conflict,
        ]
        for error in errors {
            #expect(try Wire.decode(SyncError.self, from: Wire.encode(error, as: format), as: format) == error)
        }
    }

    @Test("F129 the key directory's requests and responses", arguments: WireFormat.allCases)
    func zoneKeys(format: WireFormat) throws {
        let pair = DeviceKeyPair()
        let key = pair.publicKey
        #expect(try Wire.decode(DevicePublicKey.self, from: Wire.encode(key, as: format), as: format) == key)
        try Wire.decodeRegisterDeviceKeyResponse(Wire.encodeRegisterDeviceKeyResponse(as: format), as: format)
        for request in [
            FetchZoneKeysRequest(zoneIDs: nil), FetchZoneKeysRequest(zoneIDs: []),
            FetchZoneKeysRequest(zoneIDs: [Self.notes]),
        ] {
            #expect(
                try Wire.decode(FetchZoneKeysRequest.self, from: Wire.encode(request, as: format), as: format)
                    == request)
        }
        let wrap = ZoneKey.generate(zoneID: Self.notes, version: 3).wrapped(for: key)
        let participant = try DevicePublicKey(
            rawRepresentation: DeviceKeyPair().publicKey.rawRepresentation, userRecordName: "_user7")
        let fetched = FetchZoneKeysResponse(results: [
            Self.notes: .success(ZoneKeys(wrappedKeys: [wrap], recipients: [key, participant])),
            Self.other: .failure(SyncError(.zoneNotFound, item: .zone(Self.other))),
        ])
        #expect(
            try Wire.decode(FetchZoneKeysResponse.self, from: Wire.encode(fetched, as: format), as: format) == fetched)
        let save = SaveZoneKeysRequest(keys: [wrap])
        #expect(try Wire.decode(SaveZoneKeysRequest.self, from: Wire.encode(save, as: format), as: format) == save)
        var refused = wrap
        refused.version = 4
        let saved = SaveZoneKeysResponse(results: [
            wrap.id: .success(wrap),
            refused.id: .failure(SyncError(.serverRecordChanged, "another key of version 4", item: .zone(Self.notes))),
        ])
        #expect(try Wire.decode(SaveZoneKeysResponse.self, from: Wire.encode(saved, as: format), as: format) == saved)
    }

    @Test("F119 F123 participant lookups, and a root's share in a modify response", arguments: WireFormat.allCases)
    func sharing(format: WireFormat) throws {
        let byEmail = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
        let byName = UserIdentity.LookupInfo(userRecordName: "_user7")
        let unknown = UserIdentity.LookupInfo(emailAddress: "zoe@example.com")
        let request = FetchShareParticipantsRequest(lookupInfos: [byEmail, byName, unknown])
        #expect(
            try Wire.decode(FetchShareParticipantsRequest.self, from: Wire.encode(request, as: format), as: format)
                == request)
        let response = FetchShareParticipantsResponse(results: [
            byEmail: .success(
                Share.Participant(
                    userIdentity: UserIdentity(userRecordName: "_user7", emailAddress: "bob@example.com"),
                    role: .privateUser, permission: .readOnly, acceptanceStatus: .pending)),
            byName: .success(
                Share.Participant(
                    userIdentity: UserIdentity(userRecordName: "_user7"), role: .privateUser, permission: .readWrite,
                    acceptanceStatus: .pending)),
            unknown: .failure(SyncError(.unknownItem, "no user can be found as <zoe@example.com>")),
        ])
        #expect(
            try Wire.decode(FetchShareParticipantsResponse.self, from: Wire.encode(response, as: format), as: format)
                == response)

        var root = Self.record("root")
        root.applySystemFields(
            Record.SystemFields(
                recordChangeTag: "5",
                share: Record.Reference(recordID: Record.ID(recordName: "share-1", zoneID: Self.notes))))
        let saved = ModifyRecordsResponse(saveResults: [root.recordID: .success(root)])
        let decoded = try Wire.decode(ModifyRecordsResponse.self, from: Wire.encode(saved, as: format), as: format)
        #expect(decoded == saved)
        #expect(try decoded.saveResults[root.recordID]?.get().share == root.share)
    }

    @Test("push frames", arguments: WireFormat.allCases)
    func pushFrames(format: WireFormat) throws {
        let frames: [PushFrame] = [
            .subscribed(protocolVersion: WireProtocol.version),
            .hint(PushHint(databaseScope: .private)),
            .hint(
                PushHint(
                    databaseScope: .shared, subscriptionID: "engine", zoneID: Self.notes,
                    changeToken: DatabaseChangeToken(offset: 5, database: 2))),
        ]
        for frame in frames {
            #expect(try Wire.decode(PushFrame.self, from: Wire.encode(frame, as: format), as: format) == frame)
        }
    }

    @Test("JSON bodies are the Protocol Buffers JSON mapping, readable by people")
    func jsonIsReadable() throws {
        let request = FetchZoneChangesRequest(zoneID: Self.notes, resultsLimit: 5, desiredKeys: ["title"])
        let text = String(decoding: Wire.encode(request, as: .json), as: UTF8.self)
        #expect(text.contains("\"zoneName\":\"Notes\""))
        #expect(text.contains("\"resultsLimit\":\"5\""))
        #expect(text.contains("\"desiredKeys\":{\"keys\":[\"title\"]}"))
        let typed = #"{"zoneId":{"zoneName":"Notes","ownerName":"__defaultOwner__"},"resultsLimit":5}"#
        let decoded = try Wire.decode(FetchZoneChangesRequest.self, from: Array(typed.utf8), as: .json)
        #expect(decoded == FetchZoneChangesRequest(zoneID: Self.notes, resultsLimit: 5))
    }
}
