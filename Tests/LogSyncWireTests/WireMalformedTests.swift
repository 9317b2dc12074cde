import Foundation
import LogSyncWire
import SyncModel
import Testing

/// Bodies no client writes are refused with `invalidArguments` naming the message and what was
/// wrong, never a crash; the server answers them with 400 and changes nothing.
@Suite("Wire: malformed bodies")
struct WireMalformedTests {
    /// Decodes `bytes` as the request of every operation and returns the errors.
    static func decodeEveryRequest(_ bytes: [UInt8], as format: WireFormat) -> [SyncError?] {
        func attempt(_ body: () throws(SyncError) -> Void) -> SyncError? {
            do {
                try body()
                return nil
            } catch {
                return error
            }
        }
        return [
            attempt { () throws(SyncError) in _ = try Wire.decode(ModifyZonesRequest.self, from: bytes, as: format) },
            attempt { () throws(SyncError) in _ = try Wire.decode(FetchZonesRequest.self, from: bytes, as: format) },
            attempt { () throws(SyncError) in _ = try Wire.decode(ModifyRecordsRequest.self, from: bytes, as: format) },
            attempt { () throws(SyncError) in
                _ = try Wire.decode(FetchDatabaseChangesRequest.self, from: bytes, as: format)
            },
            attempt { () throws(SyncError) in _ = try Wire.decode(FetchZoneChangesRequest.self, from: bytes, as: format)
            },
            attempt { () throws(SyncError) in
                _ = try Wire.decode(ModifySubscriptionsRequest.self, from: bytes, as: format)
            },
        ]
    }

    @Test("bytes that are not a message are refused, naming the message")
    func garbage() {
        // 0xFF… is an invalid tag; a length-delimited field running past the end is truncated.
        for bytes in [[0xFF, 0xFF, 0xFF, 0xFF], [0x0A, 0x7F, 0x01], Array("hello, server".utf8)] as [[UInt8]] {
            for error in Self.decodeEveryRequest(bytes, as: .protobuf) {
                #expect(error?.code == .invalidArguments)
                #expect(error?.message.contains("cannot decode logsync.wire.") == true, "\(String(describing: error))")
            }
        }
    }

    @Test("malformed JSON and unknown JSON fields are refused")
    func badJSON() {
        for text in ["{", "[1, 2]", #"{"zonesToSave": 5}"#, #"{"noSuchField": true}"#] {
            for error in Self.decodeEveryRequest(Array(text.utf8), as: .json) {
                #expect(error?.code == .invalidArguments)
                #expect(error?.message.contains("JSON") == true, "\(String(describing: error))")
            }
        }
    }

    @Test("a modify request without a save policy is refused")
    func missingSavePolicy() {
        // An empty message decodes to all defaults: the policy is UNSPECIFIED.
        let error = #expect(throws: SyncError.self) {
            try Wire.decode(ModifyRecordsRequest.self, from: [], as: .protobuf)
        }
        #expect(error?.code == .invalidArguments)
        #expect(error?.message == "cannot decode logsync.wire.ModifyRecordsRequest: save_policy is missing")
    }

    @Test("a record without its ID is refused, naming its index")
    func recordWithoutID() throws {
        let json =
            #"{"recordsToSave": [{"recordType": "Note", "recordId": {"recordName": "a", "zoneId": {"zoneName": "Notes"}}}, {"recordType": "Note"}], "savePolicy": "SAVE_POLICY_CHANGED_KEYS"}"#
        let error = #expect(throws: SyncError.self) {
            try Wire.decode(ModifyRecordsRequest.self, from: Array(json.utf8), as: .json)
        }
        #expect(error?.code == .invalidArguments)
        #expect(error?.message.contains("records_to_save[1]") == true, "\(String(describing: error))")
        #expect(error?.message.contains("record_id is missing") == true, "\(String(describing: error))")
    }

    @Test("a token that is not a token is refused with the token's own error")
    func badToken() {
        let database = #"{"since": "AAECAwQ="}"#
        let error = #expect(throws: SyncError.self) {
            try Wire.decode(FetchDatabaseChangesRequest.self, from: Array(database.utf8), as: .json)
        }
        #expect(error?.code == .invalidArguments)
        #expect(error?.message.contains("since: invalid database token") == true, "\(String(describing: error))")

        // A database token where a zone token belongs.
        let zoneRequest = FetchZoneChangesRequest(zoneID: RecordZone.ID(zoneName: "Notes"))
        var bytes = Wire.encode(zoneRequest, as: .protobuf)
        let token = DatabaseChangeToken(offset: 3).data
        bytes += [0x12, UInt8(token.count)] + token  // field 2 (since), length-delimited
        let zoneError = #expect(throws: SyncError.self) {
            try Wire.decode(FetchZoneChangesRequest.self, from: bytes, as: .protobuf)
        }
        #expect(zoneError?.message.contains("not a zone token") == true, "\(String(describing: zoneError))")
    }

    @Test("a zone fetch without its zone, and fetchZones with both all and names, are refused")
    func missingOrContradictoryFields() {
        let noZone = #expect(throws: SyncError.self) {
            try Wire.decode(FetchZoneChangesRequest.self, from: [], as: .protobuf)
        }
        #expect(noZone?.message == "cannot decode logsync.wire.FetchZoneChangesRequest: zone_id is missing")
        let both = #"{"allZones": true, "zoneIds": [{"zoneName": "Notes"}]}"#
        let contradiction = #expect(throws: SyncError.self) {
            try Wire.decode(FetchZonesRequest.self, from: Array(both.utf8), as: .json)
        }
        #expect(contradiction?.message.contains("all_zones is true but 1 zone_ids are named") == true)
    }

    @Test("responses naming an item twice or with no outcome are refused")
    func badResponses() {
        let twice = #"{"saveResults": [{"zoneId": {"zoneName": "A"}, "deleted": true}]}"#
        let error = #expect(throws: SyncError.self) {
            try Wire.decode(ModifyZonesResponse.self, from: Array(twice.utf8), as: .json)
        }
        #expect(error?.message.contains("has the outcome of a deletion") == true, "\(String(describing: error))")
        let duplicate =
            #"{"results": [{"zoneId": {"zoneName": "A"}, "zone": {"zoneId": {"zoneName": "A"}}}, {"zoneId": {"zoneName": "A"}, "zone": {"zoneId": {"zoneName": "A"}}}]}"#
        let duplicateError = #expect(throws: SyncError.self) {
            try Wire.decode(FetchZonesResponse.self, from: Array(duplicate.utf8), as: .json)
        }
        #expect(duplicateError?.message.contains("a second time") == true, "\(String(describing: duplicateError))")
        let noFrame = #expect(throws: SyncError.self) { try Wire.decode(PushFrame.self, from: [], as: .protobuf) }
        #expect(noFrame?.message.contains("no frame is set") == true)
    }
}
