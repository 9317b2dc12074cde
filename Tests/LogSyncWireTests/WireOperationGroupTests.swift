import Foundation
import LogSyncWire
import SyncModel
import Testing

/// F69: a request's operation group crosses the wire unchanged in both formats, in the body of
/// every operation that carries one and in the header of asset requests; a group no encoder
/// writes is refused naming the field.
@Suite("Wire: operation groups (F69)")
struct WireOperationGroupTests {
    typealias Fixture = WireRoundTripTests

    static let groups: [OperationGroup] = [
        OperationGroup(
            operationGroupID: "import-1", name: "Import photos ✓", quantity: 120,
            expectedSendSize: .hundredsOfMegabytes,
            expectedReceiveSize: .kilobytes),
        OperationGroup(operationGroupID: "bare"),
        OperationGroup(operationGroupID: "empty-name", name: ""),  // kept as sent; the server refuses it
    ]

    @Test("F69 every request that carries a group decodes to the same group", arguments: WireFormat.allCases)
    func requestsKeepTheirGroup(format: WireFormat) throws {
        for group in Self.groups {
            let zones = ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: Fixture.notes)], operationGroup: group)
            #expect(try Wire.decode(ModifyZonesRequest.self, from: Wire.encode(zones, as: format), as: format) == zones)
            for fetch in [
                FetchZonesRequest(zoneIDs: nil, operationGroup: group),
                FetchZonesRequest(zoneIDs: [Fixture.notes], operationGroup: group),
            ] {
                #expect(
                    try Wire.decode(FetchZonesRequest.self, from: Wire.encode(fetch, as: format), as: format) == fetch)
            }
            let records = ModifyRecordsRequest(
                recordsToSave: [Fixture.record("n1")], requestID: "phone-3", operationGroup: group)
            let decoded = try Wire.decode(ModifyRecordsRequest.self, from: Wire.encode(records, as: format), as: format)
            #expect(decoded == records)
            #expect(decoded.operationGroup == group)
            let database = FetchDatabaseChangesRequest(resultsLimit: 5, operationGroup: group)
            #expect(
                try Wire.decode(FetchDatabaseChangesRequest.self, from: Wire.encode(database, as: format), as: format)
                    == database)
            let zone = FetchZoneChangesRequest(zoneID: Fixture.notes, desiredKeys: ["title"], operationGroup: group)
            #expect(
                try Wire.decode(FetchZoneChangesRequest.self, from: Wire.encode(zone, as: format), as: format) == zone)
        }
        // No group stays no group.
        let plain = FetchDatabaseChangesRequest()
        #expect(
            try Wire.decode(FetchDatabaseChangesRequest.self, from: Wire.encode(plain, as: format), as: format)
                .operationGroup == nil)
    }

    @Test("F69 the directly written modifyRecords bytes equal SwiftProtobuf's with a group")
    func directEncodingWithGroup() throws {
        for group in Self.groups {
            let request = ModifyRecordsRequest(
                recordsToSave: [Fixture.record("n1")], requestID: "phone-3", clientChangeToken: Data([1]),
                operationGroup: group)
            let message = try WireFormat.json.decode(
                Logsync_Wire_ModifyRecordsRequest.self, from: Wire.encode(request, as: .json))
            #expect(Wire.encode(request, as: .protobuf) == WireFormat.protobuf.encode(message))
        }
    }

    @Test("F69 the asset requests' header holds the group")
    func headerRoundTrip() throws {
        for group in Self.groups {
            #expect(try Wire.decodeHeader(OperationGroup.self, from: Wire.encodeHeader(group)) == group)
        }
    }

    @Test("F69 a group no encoder writes is refused naming the field")
    func malformedGroups() throws {
        var unknownSize = Logsync_Wire_FetchDatabaseChangesRequest()
        unknownSize.operationGroup.operationGroupID = "g"
        unknownSize.operationGroup.expectedSendSize = 9
        let error = try #require(throws: SyncError.self) {
            try Wire.decode(
                FetchDatabaseChangesRequest.self, from: WireFormat.protobuf.encode(unknownSize), as: .protobuf)
        }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("operation_group"), "\(error.message)")
        #expect(error.message.contains("expected_send_size"), "\(error.message)")

        var missingID = Logsync_Wire_ModifyZonesRequest()
        missingID.operationGroup.name = "no ID"
        let missing = try #require(throws: SyncError.self) {
            try Wire.decode(ModifyZonesRequest.self, from: WireFormat.protobuf.encode(missingID), as: .protobuf)
        }
        #expect(missing.code == .invalidArguments)
        #expect(missing.message.contains("operation_group_id"), "\(missing.message)")

        let header = try #require(throws: SyncError.self) {
            try Wire.decodeHeader(OperationGroup.self, from: "not base64!")
        }
        #expect(header.code == .invalidArguments)
        #expect(header.message.contains(WireProtocol.operationGroupHeader))
    }
}
