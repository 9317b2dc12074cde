import Foundation
import Testing

@testable import SyncModel

/// Request checks and the wire form of requests and responses (F139–F151, F159, F160).
struct RequestTests {
    static func notes(_ count: Int) -> [Record] {
        (0..<count).map { Record(recordType: "Note", recordID: Record.ID(recordName: "n\($0)", zoneID: Fixture.notes)) }
    }

    // F145, F146 and the lower-level CloudKit defaults.
    @Test func modifyRecordsDefaults() {
        let request = ModifyRecordsRequest()
        #expect(request.savePolicy == .ifServerRecordUnchanged)
        #expect(request.atomically)
        #expect(request.requestID == nil)
        #expect(request.clientChangeToken == nil)
        #expect(SavePolicy.allCases.map(\.rawValue) == [0, 1, 2])
    }

    // F151: 400 items pass, 401 get limitExceeded naming the request.
    @Test("F151 item count boundary", arguments: [(400, true), (401, false)])
    func itemCountBoundary(count: Int, passes: Bool) throws {
        let records = Self.notes(count)
        let request = ModifyRecordsRequest(
            recordsToSave: Array(records.prefix(count / 2)),
            recordIDsToDelete: records.dropFirst(count / 2).map(\.recordID), requestID: "dev1-1")
        if passes {
            try request.validate()
        } else {
            let error = try #require(throws: SyncError.self) { try request.validate() }
            #expect(error.code == .limitExceeded)
            #expect(error.requestID == "dev1-1")
            #expect(
                error.description.hasPrefix(#"limitExceeded (27) in request "dev1-1": modifyRecords carries 401 items"#)
            )
        }
    }

    // F151: exactly 2 MB of field data passes, 2 MB + 1 B gets limitExceeded.
    @Test("F151 request size boundary", arguments: [(0, true), (1, false)])
    func requestSizeBoundary(extra: Int, passes: Bool) throws {
        var records = [
            Fixture.record(named: "a", size: 1_000_000),
            Fixture.record(named: "b", size: 999_990),
        ]
        records.append(Fixture.record(named: "c", size: 10 + extra))
        let request = ModifyRecordsRequest(recordsToSave: records)
        #expect(request.estimatedSize == Limits.maxRequestBytes + extra)
        if passes {
            try request.validate()
        } else {
            let error = try #require(throws: SyncError.self) { try request.validate() }
            #expect(error.code == .limitExceeded)
            #expect(error.message.contains("2000001 bytes"))
        }
    }

    @Test func recordNamedTwiceIsRejected() throws {
        let save = ModifyRecordsRequest(recordsToSave: [Fixture.savedNote()], recordIDsToDelete: [Fixture.n1])
        let error = try #require(throws: SyncError.self) { try save.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.item == .record(Fixture.n1))
        #expect(error.message == #"modifyRecords names record "n1" in zone "Notes" more than once"#)
    }

    @Test func modifyZonesChecks() throws {
        try ModifyZonesRequest(zonesToSave: [RecordZone(zoneName: "A")], zoneIDsToDelete: [Fixture.notes]).validate()
        let twice = ModifyZonesRequest(
            zonesToSave: [RecordZone(zoneID: Fixture.notes)], zoneIDsToDelete: [Fixture.notes])
        #expect(throws: SyncError.self) { try twice.validate() }
        let many = ModifyZonesRequest(zoneIDsToDelete: (0...400).map { RecordZone.ID(zoneName: "z\($0)") })
        let error = try #require(throws: SyncError.self) { try many.validate() }
        #expect(error.code == .limitExceeded)
    }

    @Test func modifySubscriptionsChecks() throws {
        try ModifySubscriptionsRequest(subscriptionsToSave: [Subscription(subscriptionID: "a")]).validate()
        let twice = ModifySubscriptionsRequest(
            subscriptionsToSave: [Subscription(subscriptionID: "a")], subscriptionIDsToDelete: ["a"])
        let error = try #require(throws: SyncError.self) { try twice.validate() }
        #expect(error.item == .subscription("a"))
    }

    // F142: a zone token of another zone is rejected before it reaches the server's log.
    @Test func zoneFetchRejectsTokenOfAnotherZone() throws {
        let token = ZoneChangeToken(zoneID: Fixture.photos, incarnation: 1, offset: 9)
        let request = FetchZoneChangesRequest(zoneID: Fixture.notes, since: token)
        let error = try #require(throws: SyncError.self) { try request.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.item == .zone(Fixture.notes))
        #expect(error.message.contains(#"token of zone "Photos""#))
        try FetchZoneChangesRequest(zoneID: Fixture.photos, since: token, resultsLimit: 5, desiredKeys: []).validate()
    }

    @Test(
        "results limits", arguments: [(nil, true), (1, true), (100, true), (0, false), (-1, false)] as [(Int?, Bool)])
    func resultsLimit(limit: Int?, passes: Bool) {
        let database = FetchDatabaseChangesRequest(since: nil, resultsLimit: limit)
        let zone = FetchZoneChangesRequest(zoneID: Fixture.notes, resultsLimit: limit)
        if passes {
            #expect(throws: Never.self) { try database.validate() }
            #expect(throws: Never.self) { try zone.validate() }
        } else {
            #expect(throws: SyncError.self) { try database.validate() }
            #expect(throws: SyncError.self) { try zone.validate() }
        }
    }

    // F145, F148, F101: per-item results, including value-less deletions, survive the wire.
    @Test func modifyRecordsResponseRoundTrip() throws {
        let response = ModifyRecordsResponse(
            saveResults: [
                Fixture.n1: .success(Fixture.savedNote()),
                Fixture.n2: .failure(
                    .serverRecordChanged(serverRecord: Fixture.savedNote(Fixture.n2), clientRecord: nil)),
            ],
            deleteResults: [
                Record.ID(recordName: "d1", zoneID: Fixture.notes): .success(()),
                Record.ID(recordName: "d2", zoneID: Fixture.notes): .failure(SyncError(.batchRequestFailed)),
            ])
        let decoded = try jsonRoundTrip(response)
        #expect(decoded == response)
        #expect(decoded != ModifyRecordsResponse(saveResults: response.saveResults))
    }

    @Test func corruptResultEntryIsRejected() {
        let json =
            #"{"saveResults":[{"id":{"recordName":"n1","zoneID":{"zoneName":"Z","ownerName":"o"}}}],"deleteResults":[]}"#
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(ModifyRecordsResponse.self, from: Data(json.utf8))
        }
    }

    @Test func zoneAndSubscriptionResponsesRoundTrip() throws {
        let zone = RecordZone(zoneID: Fixture.notes, capabilities: .customZoneDefault)
        let zones = ModifyZonesResponse(
            saveResults: [Fixture.notes: .success(zone), Fixture.photos: .failure(SyncError(.badDatabase))],
            deleteResults: [Fixture.sharedNotes: .failure(SyncError(.zoneNotFound))])
        #expect(try jsonRoundTrip(zones) == zones)
        let fetched = FetchZonesResponse(results: [Fixture.notes: .success(zone)])
        #expect(try jsonRoundTrip(fetched) == fetched)
        let subscriptions = ModifySubscriptionsResponse(
            saveResults: ["db": .success(Subscription(subscriptionID: "db"))], deleteResults: ["old": .success(())])
        #expect(try jsonRoundTrip(subscriptions) == subscriptions)
    }

    // F140: zone deletions carry their reason; the page carries a token and moreComing.
    @Test func databaseChangesRoundTrip() throws {
        let response = FetchDatabaseChangesResponse(
            modifications: [DatabaseChange.Modification(zoneID: Fixture.notes)],
            deletions: ZoneDeletionReason.allCases.map {
                DatabaseChange.Deletion(zoneID: RecordZone.ID(zoneName: "Z\($0.rawValue)"), reason: $0)
            },
            changeToken: DatabaseChangeToken(offset: 10), moreComing: true)
        let decoded = try jsonRoundTrip(response)
        #expect(decoded == response)
        #expect(decoded.deletions.map(\.reason) == [.deleted, .purged, .encryptedDataReset])
        #expect(decoded.deletions[1].description == #"deleted zone "Z1" (purged)"#)
    }

    // F139, F141, F159: deletions carry the record type; the client change token is echoed.
    @Test func zoneChangesRoundTrip() throws {
        let response = FetchZoneChangesResponse(
            zoneID: Fixture.notes,
            modifications: [RecordZoneChange.Modification(record: Fixture.savedNote())],
            deletions: [RecordZoneChange.Deletion(recordID: Fixture.n2, recordType: "Contact")],
            changeToken: ZoneChangeToken(zoneID: Fixture.notes, incarnation: 1, offset: 12),
            moreComing: false, clientChangeToken: Data([1, 2, 3]))
        let decoded = try jsonRoundTrip(response)
        #expect(decoded == response)
        #expect(decoded.deletions[0].recordType == "Contact")
        #expect(decoded.deletions[0].description == #"deleted Contact record "n2" in zone "Notes""#)
        #expect(decoded.clientChangeToken == Data([1, 2, 3]))
    }

    @Test func requestsRoundTrip() throws {
        let records = ModifyRecordsRequest(
            recordsToSave: [Fixture.savedNote()], recordIDsToDelete: [Fixture.n2], savePolicy: .allKeys,
            atomically: false, requestID: "r9", clientChangeToken: Data([9]))
        #expect(try jsonRoundTrip(records) == records)
        let zone = FetchZoneChangesRequest(
            zoneID: Fixture.notes, since: ZoneChangeToken(zoneID: Fixture.notes, incarnation: 1, offset: 3),
            resultsLimit: 5, desiredKeys: [])
        #expect(try jsonRoundTrip(zone) == zone)
        let database = FetchDatabaseChangesRequest(since: DatabaseChangeToken(offset: 3), resultsLimit: 2)
        #expect(try jsonRoundTrip(database) == database)
    }
}
