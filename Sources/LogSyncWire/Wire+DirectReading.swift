import Foundation
import SyncModel

// The two bodies that carry many records, read directly from their protobuf bytes (a page of a
// zone's changes, which a device decodes for every record it fetches, and a request saving
// records, which a server decodes for every record it is sent), with `Record.read(from:)`. As
// for a record alone (SyncModel's ProtoRecordReader.swift), the direct reader takes only the
// form the encoders write and gives up on anything else; the generated decoder then reads the
// same bytes, so the answer and its errors are exactly the generated decoder's
// (`WireDirectReadingTests`).

extension Wire {
    /// The page `bytes` hold, or `nil` when they are not in the form the encoders write.
    static func readDirectly(_: FetchZoneChangesResponse.Type, from bytes: [UInt8]) -> FetchZoneChangesResponse? {
        var unused: [Range<Int>]? = nil
        return readDirectly(FetchZoneChangesResponse.self, from: bytes, recordRanges: &unused)
    }

    /// The page `bytes` hold, or `nil` when they are not in the form the encoders write; with
    /// `recordRanges` not `nil`, where each record's bytes are in `bytes`, in order.
    static func readDirectly(
        _: FetchZoneChangesResponse.Type, from bytes: [UInt8], recordRanges: inout [Range<Int>]?
    ) -> FetchZoneChangesResponse? {
        bytes.withUnsafeBytes { buffer -> FetchZoneChangesResponse? in
            var reader = ProtoReader(buffer)
            var zoneID: RecordZone.ID?
            var modifications: [RecordZoneChange.Modification] = []
            var deletions: [RecordZoneChange.Deletion] = []
            var token: Data?
            var moreComing: Bool?
            var clientToken: Data?
            do throws(ProtoReader.Irregular) {
                while !reader.isAtEnd {
                    switch try reader.key() {
                    case (1, 2) where zoneID == nil: zoneID = try reader.message(RecordZone.ID.read(from:))
                    case (2, 2):
                        let range = try reader.lengthDelimited()
                        var record = ProtoReader(buffer, range)
                        modifications.append(.init(record: try Record.read(from: &record)))
                        guard record.isAtEnd else { throw ProtoReader.Irregular() }
                        recordRanges?.append(range)
                    case (3, 2):
                        deletions.append(
                            try reader.message { deletion throws(ProtoReader.Irregular) in
                                var recordID: Record.ID?
                                var recordType: String?
                                while !deletion.isAtEnd {
                                    switch try deletion.key() {
                                    case (1, 2) where recordID == nil:
                                        recordID = try deletion.message(Record.ID.read(from:))
                                    case (2, 2) where recordType == nil: recordType = try deletion.string()
                                    default: throw ProtoReader.Irregular()
                                    }
                                }
                                guard let recordID else { throw ProtoReader.Irregular() }
                                return RecordZoneChange.Deletion(recordID: recordID, recordType: recordType ?? "")
                            })
                    case (4, 2) where token == nil: token = try reader.data()
                    case (5, 0) where moreComing == nil: moreComing = try reader.varint() != 0
                    case (6, 2) where clientToken == nil: clientToken = try reader.data()
                    default: throw ProtoReader.Irregular()
                    }
                }
            } catch {
                return nil
            }
            guard let zoneID, let changeToken = try? ZoneChangeToken(data: token ?? Data()) else { return nil }
            return FetchZoneChangesResponse(
                zoneID: zoneID, modifications: modifications, deletions: deletions, changeToken: changeToken,
                moreComing: moreComing ?? false, clientChangeToken: clientToken)
        }
    }

    /// The request `bytes` hold, or `nil` when they are not in the form the encoders write.
    static func readDirectly(_: ModifyRecordsRequest.Type, from bytes: [UInt8]) -> ModifyRecordsRequest? {
        bytes.withUnsafeBytes { buffer -> ModifyRecordsRequest? in
            var reader = ProtoReader(buffer)
            var records: [Record] = []
            var deletions: [Record.ID] = []
            var policy: SavePolicy?
            var atomically: Bool?
            var requestID: String?
            var clientToken: Data?
            var group: OperationGroup?
            do throws(ProtoReader.Irregular) {
                while !reader.isAtEnd {
                    switch try reader.key() {
                    case (1, 2): records.append(try reader.message(Record.read(from:)))
                    case (2, 2): deletions.append(try reader.message(Record.ID.read(from:)))
                    case (3, 0) where policy == nil:
                        switch try reader.varint() {
                        case 1: policy = .ifServerRecordUnchanged
                        case 2: policy = .changedKeys
                        case 3: policy = .allKeys
                        default: return nil
                        }
                    case (4, 0) where atomically == nil: atomically = try reader.varint() != 0
                    case (5, 2) where requestID == nil: requestID = try reader.string()
                    case (6, 2) where clientToken == nil: clientToken = try reader.data()
                    case (7, 2) where group == nil:
                        group = try reader.generated(Logsync_Model_OperationGroup.self, OperationGroup.init(proto:))
                    default: return nil
                    }
                }
            } catch {
                return nil
            }
            guard let policy else { return nil }
            return ModifyRecordsRequest(
                recordsToSave: records, recordIDsToDelete: deletions, savePolicy: policy,
                atomically: atomically ?? false, requestID: requestID.map(RequestID.init(rawValue:)),
                clientChangeToken: clientToken, operationGroup: group)
        }
    }
}
