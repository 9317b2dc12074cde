import Foundation
import LogSyncWire
import SyncModel
import Testing

/// The messages written directly (`ProtoWriter`, records by `Record.write(to:)`) are byte for
/// byte SwiftProtobuf's deterministic encoding of the same generated message: a reader of either
/// cannot tell them apart.
@Suite("Wire: direct encodings equal SwiftProtobuf's")
struct WireDirectEncodingTests {
    typealias Fixture = WireRoundTripTests

    static var records: [Record] {
        var removed = Fixture.record("n2")
        removed["title"] = nil
        var full = Fixture.record(
            "n4",
            [
                "title": "a ✓", "count": .int64(-3), "ratio": .double(0.25), "done": .bool(false),
                "blob": .bytes(Data()),
                "when": .date(Date(timeIntervalSince1970: 1_700_000_000.25)),
                "asset": .asset(Asset(digest: AssetHasher.digest(of: Array("a1".utf8)), size: 2)),
                "tags": .list(["x", "y"]),
                "link": .reference(
                    Record.Reference(recordID: Record.ID(recordName: "n1", zoneID: Fixture.notes), action: .deleteSelf)),
            ])
        full.parent = Record.Reference(recordID: Record.ID(recordName: "n1", zoneID: Fixture.notes))
        full.applySystemFields(
            Record.SystemFields(recordChangeTag: "9", creationDate: Date(timeIntervalSince1970: 1_700_000_000.5)))
        let empty = Record(recordType: "", recordID: Record.ID(recordName: "e", zoneID: Fixture.other))
        return [Fixture.record("n1"), removed, full, empty]
    }

    @Test("modifyRecords request, every policy and option", arguments: SavePolicy.allCases)
    func modifyRecordsRequest(policy: SavePolicy) throws {
        for (atomically, requestID, token) in [
            (false, nil, nil), (true, "device-17", Data([9, 8, 7])), (false, "", Data()),
        ] as [(Bool, RequestID?, Data?)] {
            let request = ModifyRecordsRequest(
                recordsToSave: Self.records, recordIDsToDelete: [Record.ID(recordName: "gone", zoneID: Fixture.notes)],
                savePolicy: policy, atomically: atomically, requestID: requestID, clientChangeToken: token)
            let message = try WireFormat.json.decode(
                Logsync_Wire_ModifyRecordsRequest.self, from: Wire.encode(request, as: .json))
            #expect(Wire.encode(request, as: .protobuf) == WireFormat.protobuf.encode(message))
        }
    }

    @Test("modifyRecords response with saves, conflicts, deletions and failed deletions")
    func modifyRecordsResponse() throws {
        var saveResults: [Record.ID: Result<Record, SyncError>] = [:]
        for record in Self.records { saveResults[record.recordID] = .success(record) }
        saveResults[Fixture.conflict.serverRecord!.recordID] = .failure(Fixture.conflict)
        let gone = Record.ID(recordName: "gone", zoneID: Fixture.notes)
        let response = ModifyRecordsResponse(
            saveResults: saveResults,
            deleteResults: [
                gone: .success(()),
                Record.ID(recordName: "kept", zoneID: Fixture.other): .failure(
                    SyncError(.permissionFailure, "no", item: .record(gone))),
            ])
        #expect(Wire.encode(response, as: .protobuf) == WireFormat.protobuf.encode(response.proto))
        #expect(
            Wire.encode(ModifyRecordsResponse(), as: .protobuf)
                == WireFormat.protobuf.encode(ModifyRecordsResponse().proto))
    }

    @Test("zone changes response")
    func zoneChanges() throws {
        let token = ZoneChangeToken(zoneID: Fixture.notes, incarnation: 5, offset: 77, database: 3, listingStart: 80)
        for (moreComing, clientToken) in [(false, nil), (true, Data()), (false, Data([1, 2]))] as [(Bool, Data?)] {
            let response = FetchZoneChangesResponse(
                zoneID: Fixture.notes, modifications: Self.records.map(RecordZoneChange.Modification.init(record:)),
                deletions: [
                    RecordZoneChange.Deletion(
                        recordID: Record.ID(recordName: "n2", zoneID: Fixture.notes), recordType: "Note"),
                    RecordZoneChange.Deletion(recordID: Record.ID(recordName: "n3", zoneID: .default), recordType: ""),
                ],
                changeToken: token, moreComing: moreComing, clientChangeToken: clientToken)
            let message = try WireFormat.json.decode(
                Logsync_Wire_FetchZoneChangesResponse.self, from: Wire.encode(response, as: .json))
            let direct = Wire.encode(response, as: .protobuf)
            #expect(direct == WireFormat.protobuf.encode(message))
            var withoutRecords = response
            withoutRecords.modifications = []
            #expect(
                Wire.encode(withoutRecords, storedRecords: Self.records.map { $0.serializedProto()[...] }) == direct)
        }
    }
}
