import Foundation
import SwiftProtobuf
import SyncModel

/// The bodies of the HTTP protocol: every request and response of `CloudDatabase`, the error
/// body and the push frames, encoded in either ``WireFormat`` (Proto/wire.proto).
///
/// ```swift
/// let body = Wire.encode(request, as: .protobuf)                       // client
/// let request = try Wire.decode(ModifyRecordsRequest.self, from: body, as: .protobuf)  // server
/// ```
///
/// Encoding is total and lossless. Decoding rejects, with `SyncError` `invalidArguments` whose
/// message names the message and the field, only what no encoder writes: bytes that are not a
/// message, a missing required field, an empty oneof, an unknown enum value, an item named twice,
/// a token that is not a token. It never checks limits or naming rules: the server does, with the
/// same errors as in process. Decoding never traps, whatever the bytes.
public enum Wire {
    // MARK: Zones

    /// Encodes a `ModifyZonesRequest`.
    public static func encode(_ value: ModifyZonesRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_ModifyZonesRequest()
        message.zonesToSave = value.zonesToSave.map(\.proto)
        message.zoneIdsToDelete = value.zoneIDsToDelete.map(\.proto)
        if let group = value.operationGroup { message.operationGroup = group.proto }
        return format.encode(message)
    }

    /// Decodes a `ModifyZonesRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: ModifyZonesRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> ModifyZonesRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_ModifyZonesRequest) throws(SyncError) -> ModifyZonesRequest in
            ModifyZonesRequest(
                zonesToSave: try ProtoDecoding.each(message.zonesToSave, "zones_to_save", RecordZone.init(proto:)),
                zoneIDsToDelete: message.zoneIdsToDelete.map(RecordZone.ID.init(proto:)),
                operationGroup: try operationGroup(message.hasOperationGroup, message.operationGroup))
        }
    }

    /// Encodes a `ModifyZonesResponse`, each list sorted by zone ID.
    public static func encode(_ value: ModifyZonesResponse, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_ModifyZonesResponse()
        message.saveResults = zoneSaveResults(value.saveResults)
        message.deleteResults = zoneResults(value.deleteResults.mapValues { $0.map { nil } })
        return format.encode(message)
    }

    /// Decodes a `ModifyZonesResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: ModifyZonesResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> ModifyZonesResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_ModifyZonesResponse) throws(SyncError) -> ModifyZonesResponse in
            ModifyZonesResponse(
                saveResults: try zoneResults(message.saveResults, "save_results", expecting: .zone)
                    .mapValues { result in result.map { $0! } },
                deleteResults: try zoneResults(message.deleteResults, "delete_results", expecting: .deleted)
                    .mapValues { $0.map { _ in () } })
        }
    }

    /// Encodes a `FetchZonesRequest`.
    public static func encode(_ value: FetchZonesRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchZonesRequest()
        message.allZones = value.zoneIDs == nil
        message.zoneIds = (value.zoneIDs ?? []).map(\.proto)
        if let group = value.operationGroup { message.operationGroup = group.proto }
        return format.encode(message)
    }

    /// Decodes a `FetchZonesRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` for `all_zones` with zone IDs.
    public static func decode(
        _: FetchZonesRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchZonesRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchZonesRequest) throws(SyncError) -> FetchZonesRequest in
            let group = try operationGroup(message.hasOperationGroup, message.operationGroup)
            if message.allZones {
                guard message.zoneIds.isEmpty else {
                    throw SyncError(
                        .invalidArguments, "all_zones is true but \(message.zoneIds.count) zone_ids are named")
                }
                return FetchZonesRequest(zoneIDs: nil, operationGroup: group)
            }
            return FetchZonesRequest(zoneIDs: message.zoneIds.map(RecordZone.ID.init(proto:)), operationGroup: group)
        }
    }

    /// Encodes a `FetchZonesResponse`, sorted by zone ID.
    public static func encode(_ value: FetchZonesResponse, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchZonesResponse()
        message.results = zoneSaveResults(value.results)
        return format.encode(message)
    }

    /// Decodes a `FetchZonesResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: FetchZonesResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchZonesResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchZonesResponse) throws(SyncError) -> FetchZonesResponse in
            FetchZonesResponse(
                results: try zoneResults(message.results, "results", expecting: .zone)
                    .mapValues { result in result.map { $0! } })
        }
    }

    // MARK: Records

    /// Encodes a `ModifyRecordsRequest`.
    public static func encode(_ value: ModifyRecordsRequest, as format: WireFormat) -> [UInt8] {
        if format == .protobuf { return serializedProto(value) }
        var message = Logsync_Wire_ModifyRecordsRequest()
        message.recordsToSave = value.recordsToSave.map(\.proto)
        message.recordIdsToDelete = value.recordIDsToDelete.map(\.proto)
        message.savePolicy =
            switch value.savePolicy {
            case .ifServerRecordUnchanged: .ifServerRecordUnchanged
            case .changedKeys: .changedKeys
            case .allKeys: .allKeys
            }
        message.atomically = value.atomically
        if let requestID = value.requestID { message.requestID = requestID.rawValue }
        if let token = value.clientChangeToken { message.clientChangeToken = token }
        if let group = value.operationGroup { message.operationGroup = group.proto }
        return format.encode(message)
    }

    /// A ``ModifyRecordsRequest``'s protobuf bytes, exactly those of its
    /// `Logsync_Wire_ModifyRecordsRequest` (deterministic), written directly: the records by
    /// `Record.write(to:)` instead of building and encoding the generated messages.
    static func serializedProto(_ value: ModifyRecordsRequest) -> [UInt8] {
        var writer = ProtoWriter(
            capacity: 64 + value.recordsToSave.reduce(0) { $0 + 64 + $1.estimatedSize * 5 / 4 }
                + value.recordIDsToDelete.count * 64)
        for record in value.recordsToSave { writer.message(1) { record.write(to: &$0) } }
        for id in value.recordIDsToDelete { writer.message(2) { id.write(to: &$0) } }
        let policy: Logsync_Wire_SavePolicy =
            switch value.savePolicy {
            case .ifServerRecordUnchanged: .ifServerRecordUnchanged
            case .changedKeys: .changedKeys
            case .allKeys: .allKeys
            }
        writer.int64(3, Int64(policy.rawValue))
        if value.atomically { writer.bool(4, true) }
        if let requestID = value.requestID { writer.string(5, requestID.rawValue) }
        if let token = value.clientChangeToken { writer.data(6, token) }
        if let group = value.operationGroup { writer.lengthDelimited(7, group.protoBytes()) }
        return writer.bytes
    }

    /// Decodes a `ModifyRecordsRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong, such as
    ///   `records_to_save[3]: Record.record_id is missing`.
    public static func decode(
        _: ModifyRecordsRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> ModifyRecordsRequest {
        if format == .protobuf, let request = readDirectly(ModifyRecordsRequest.self, from: bytes) { return request }
        return try decodeGenerated(ModifyRecordsRequest.self, from: bytes, as: format)
    }

    /// Decodes a `ModifyRecordsRequest` with the generated decoder alone, as
    /// ``decode(_:from:as:)-(ModifyRecordsRequest.Type,_,_)`` does with what it does not read
    /// directly.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    package static func decodeGenerated(
        _: ModifyRecordsRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> ModifyRecordsRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_ModifyRecordsRequest) throws(SyncError) -> ModifyRecordsRequest in
            let records = try ProtoDecoding.each(message.recordsToSave, "records_to_save", Record.init(proto:))
            let deletions = try ProtoDecoding.each(
                message.recordIdsToDelete, "record_ids_to_delete", Record.ID.init(proto:))
            let policy: SavePolicy
            switch message.savePolicy {
            case .ifServerRecordUnchanged: policy = .ifServerRecordUnchanged
            case .changedKeys: policy = .changedKeys
            case .allKeys: policy = .allKeys
            case .unspecified: throw SyncError(.invalidArguments, "save_policy is missing")
            case .UNRECOGNIZED(let value): throw SyncError(.invalidArguments, "save_policy has unknown value \(value)")
            }
            return ModifyRecordsRequest(
                recordsToSave: records, recordIDsToDelete: deletions, savePolicy: policy,
                atomically: message.atomically,
                requestID: message.hasRequestID ? RequestID(message.requestID) : nil,
                clientChangeToken: message.hasClientChangeToken ? message.clientChangeToken : nil,
                operationGroup: try operationGroup(message.hasOperationGroup, message.operationGroup))
        }
    }

    /// Encodes a `ModifyRecordsResponse` (model.proto's message), sorted by record ID.
    public static func encode(_ value: ModifyRecordsResponse, as format: WireFormat) -> [UInt8] {
        format == .protobuf ? value.serializedProto() : format.encode(value.proto)
    }

    /// Decodes a `ModifyRecordsResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: ModifyRecordsResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> ModifyRecordsResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Model_ModifyRecordsResponse) throws(SyncError) -> ModifyRecordsResponse in
            try ModifyRecordsResponse(proto: message)
        }
    }

    // MARK: Change feeds

    /// Encodes a `FetchDatabaseChangesRequest`.
    public static func encode(_ value: FetchDatabaseChangesRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchDatabaseChangesRequest()
        if let since = value.since { message.since = since.data }
        if let limit = value.resultsLimit { message.resultsLimit = Int64(limit) }
        if let group = value.operationGroup { message.operationGroup = group.proto }
        return format.encode(message)
    }

    /// Decodes a `FetchDatabaseChangesRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` for a token that is not a database token.
    public static func decode(
        _: FetchDatabaseChangesRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchDatabaseChangesRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchDatabaseChangesRequest) throws(SyncError) -> FetchDatabaseChangesRequest in
            FetchDatabaseChangesRequest(
                since: message.hasSince
                    ? try within("since") { () throws(SyncError) in try DatabaseChangeToken(data: message.since) }
                    : nil,
                resultsLimit: message.hasResultsLimit ? try int(message.resultsLimit, "results_limit") : nil,
                operationGroup: try operationGroup(message.hasOperationGroup, message.operationGroup))
        }
    }

    /// Encodes a `FetchDatabaseChangesResponse`.
    public static func encode(_ value: FetchDatabaseChangesResponse, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchDatabaseChangesResponse()
        message.modifications = value.modifications.map(\.zoneID.proto)
        message.deletions = value.deletions.map { deletion in
            var entry = Logsync_Wire_ZoneDeletion()
            entry.zoneID = deletion.zoneID.proto
            entry.reason = deletion.reason.proto
            return entry
        }
        message.changeToken = value.changeToken.data
        message.moreComing = value.moreComing
        return format.encode(message)
    }

    /// Decodes a `FetchDatabaseChangesResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: FetchDatabaseChangesResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchDatabaseChangesResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchDatabaseChangesResponse) throws(SyncError) -> FetchDatabaseChangesResponse in
            let deletions = try ProtoDecoding.each(message.deletions, "deletions") {
                deletion throws(SyncError) -> DatabaseChange.Deletion in
                guard deletion.hasZoneID else { throw SyncError(.invalidArguments, "zone_id is missing") }
                return DatabaseChange.Deletion(
                    zoneID: RecordZone.ID(proto: deletion.zoneID),
                    reason: try ZoneDeletionReason(proto: deletion.reason))
            }
            return FetchDatabaseChangesResponse(
                modifications: message.modifications.map {
                    DatabaseChange.Modification(zoneID: RecordZone.ID(proto: $0))
                },
                deletions: deletions,
                changeToken: try within("change_token") { () throws(SyncError) in
                    try DatabaseChangeToken(data: message.changeToken)
                },
                moreComing: message.moreComing)
        }
    }

    /// Encodes a `FetchZoneChangesRequest`.
    public static func encode(_ value: FetchZoneChangesRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchZoneChangesRequest()
        message.zoneID = value.zoneID.proto
        if let since = value.since { message.since = since.data }
        if let limit = value.resultsLimit { message.resultsLimit = Int64(limit) }
        if let keys = value.desiredKeys {
            var desired = Logsync_Wire_DesiredKeys()
            desired.keys = keys
            message.desiredKeys = desired
        }
        if let group = value.operationGroup { message.operationGroup = group.proto }
        return format.encode(message)
    }

    /// Decodes a `FetchZoneChangesRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` for a missing zone or a token that is not a
    ///   zone token.
    public static func decode(
        _: FetchZoneChangesRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchZoneChangesRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchZoneChangesRequest) throws(SyncError) -> FetchZoneChangesRequest in
            guard message.hasZoneID else { throw SyncError(.invalidArguments, "zone_id is missing") }
            return FetchZoneChangesRequest(
                zoneID: RecordZone.ID(proto: message.zoneID),
                since: message.hasSince
                    ? try within("since") { () throws(SyncError) in try ZoneChangeToken(data: message.since) } : nil,
                resultsLimit: message.hasResultsLimit ? try int(message.resultsLimit, "results_limit") : nil,
                desiredKeys: message.hasDesiredKeys ? message.desiredKeys.keys : nil,
                operationGroup: try operationGroup(message.hasOperationGroup, message.operationGroup))
        }
    }

    /// Encodes a `FetchZoneChangesResponse`.
    public static func encode(_ value: FetchZoneChangesResponse, as format: WireFormat) -> [UInt8] {
        guard format == .json else { return encode(value, storedRecords: nil) }
        var message = Logsync_Wire_FetchZoneChangesResponse()
        message.zoneID = value.zoneID.proto
        message.modifications = value.modifications.map(\.record.proto)
        message.deletions = value.deletions.map { deletion in
            var entry = Logsync_Wire_RecordDeletion()
            entry.recordID = deletion.recordID.proto
            entry.recordType = deletion.recordType
            return entry
        }
        message.changeToken = value.changeToken.data
        message.moreComing = value.moreComing
        if let token = value.clientChangeToken { message.clientChangeToken = token }
        return format.encode(message)
    }

    /// Encodes a ``FetchZoneChangesResponse`` as Protocol Buffers, written directly (the bytes
    /// of `Logsync_Wire_FetchZoneChangesResponse`'s deterministic serialization): the records
    /// of `value.modifications`, or, when `storedRecords` is not `nil`, those bytes in their place,
    /// each already a record's encoded message (`Record.serializedProto()`, as a server log
    /// stores it), copied without being decoded and encoded again.
    package static func encode(_ value: FetchZoneChangesResponse, storedRecords: [ArraySlice<UInt8>]?) -> [UInt8] {
        let recordBytes =
            storedRecords?.reduce(0) { $0 + $1.count + 4 }
            ?? value.modifications.reduce(0) { $0 + $1.record.estimatedSize * 5 / 4 + 64 }
        var writer = ProtoWriter(capacity: 128 + recordBytes + value.deletions.count * 64)
        writer.message(1) { value.zoneID.write(to: &$0) }
        if let storedRecords {
            for record in storedRecords { writer.lengthDelimited(2, record) }
        } else {
            for modification in value.modifications { writer.message(2) { modification.record.write(to: &$0) } }
        }
        for deletion in value.deletions {
            writer.message(3) { entry in
                entry.message(1) { deletion.recordID.write(to: &$0) }
                if !deletion.recordType.isEmpty { entry.string(2, deletion.recordType) }
            }
        }
        let token = value.changeToken.data
        if !token.isEmpty { writer.data(4, token) }
        if value.moreComing { writer.bool(5, true) }
        if let clientToken = value.clientChangeToken { writer.data(6, clientToken) }
        return writer.bytes
    }

    /// Decodes a `FetchZoneChangesResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: FetchZoneChangesResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchZoneChangesResponse {
        if format == .protobuf, let page = readDirectly(FetchZoneChangesResponse.self, from: bytes) { return page }
        return try decodeGenerated(FetchZoneChangesResponse.self, from: bytes, as: format)
    }

    /// Decodes a `FetchZoneChangesResponse` as ``decode(_:from:as:)-(FetchZoneChangesResponse.Type,_,_)``
    /// does, with the bytes of each of its records (slices of `bytes`) when the page was read
    /// directly: each decodes to exactly its record, so a device logging the page can write them
    /// instead of encoding the records again. `recordBytes` is `nil` otherwise (JSON, or a page
    /// left to the generated decoder).
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    package static func decodeKeepingRecordBytes(
        _: FetchZoneChangesResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchedZoneChanges {
        if format == .protobuf {
            var ranges: [Range<Int>]? = []
            if let page = readDirectly(FetchZoneChangesResponse.self, from: bytes, recordRanges: &ranges) {
                return FetchedZoneChanges(response: page, recordBytes: ranges?.map { bytes[$0] })
            }
        }
        return FetchedZoneChanges(
            response: try decodeGenerated(FetchZoneChangesResponse.self, from: bytes, as: format), recordBytes: nil)
    }

    /// Decodes a `FetchZoneChangesResponse` with the generated decoder alone, as
    /// ``decode(_:from:as:)-(FetchZoneChangesResponse.Type,_,_)`` does with what it does not
    /// read directly (and as the decode benchmark measures it against the direct reader).
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    package static func decodeGenerated(
        _: FetchZoneChangesResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchZoneChangesResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchZoneChangesResponse) throws(SyncError) -> FetchZoneChangesResponse in
            guard message.hasZoneID else { throw SyncError(.invalidArguments, "zone_id is missing") }
            let modifications = try ProtoDecoding.each(message.modifications, "modifications") {
                record throws(SyncError) in RecordZoneChange.Modification(record: try Record(proto: record))
            }
            let deletions = try ProtoDecoding.each(message.deletions, "deletions") {
                deletion throws(SyncError) -> RecordZoneChange.Deletion in
                guard deletion.hasRecordID else { throw SyncError(.invalidArguments, "record_id is missing") }
                return RecordZoneChange.Deletion(
                    recordID: try Record.ID(proto: deletion.recordID), recordType: deletion.recordType)
            }
            return FetchZoneChangesResponse(
                zoneID: RecordZone.ID(proto: message.zoneID), modifications: modifications, deletions: deletions,
                changeToken: try within("change_token") { () throws(SyncError) in
                    try ZoneChangeToken(data: message.changeToken)
                },
                moreComing: message.moreComing,
                clientChangeToken: message.hasClientChangeToken ? message.clientChangeToken : nil)
        }
    }

    // MARK: Subscriptions and the account

    /// Encodes a `ModifySubscriptionsRequest`.
    public static func encode(_ value: ModifySubscriptionsRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_ModifySubscriptionsRequest()
        message.subscriptionsToSave = value.subscriptionsToSave.map(\.proto)
        message.subscriptionIdsToDelete = value.subscriptionIDsToDelete.map(\.rawValue)
        return format.encode(message)
    }

    /// Decodes a `ModifySubscriptionsRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: ModifySubscriptionsRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> ModifySubscriptionsRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_ModifySubscriptionsRequest) throws(SyncError) -> ModifySubscriptionsRequest in
            ModifySubscriptionsRequest(
                subscriptionsToSave: try ProtoDecoding.each(
                    message.subscriptionsToSave, "subscriptions_to_save", Subscription.init(proto:)),
                subscriptionIDsToDelete: message.subscriptionIdsToDelete.map(Subscription.ID.init(rawValue:)))
        }
    }

    /// Encodes a `ModifySubscriptionsResponse`, each list sorted by subscription ID.
    public static func encode(_ value: ModifySubscriptionsResponse, as format: WireFormat) -> [UInt8] {
        func results(
            _ results: [Subscription.ID: Result<Subscription?, SyncError>]
        ) -> [Logsync_Wire_SubscriptionResult] {
            resultEntries(
                results, sortedBy: { [$0.rawValue] }, { id in .with { $0.subscriptionID = id.rawValue } },
                saved: { $0.subscription = $1.proto })
        }
        var message = Logsync_Wire_ModifySubscriptionsResponse()
        message.saveResults = results(value.saveResults.mapValues { $0.map { $0 } })
        message.deleteResults = results(value.deleteResults.mapValues { $0.map { nil } })
        return format.encode(message)
    }

    /// Decodes a `ModifySubscriptionsResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: ModifySubscriptionsResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> ModifySubscriptionsResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_ModifySubscriptionsResponse) throws(SyncError) -> ModifySubscriptionsResponse in
            func results(
                _ entries: [Logsync_Wire_SubscriptionResult], _ field: String, saves: Bool
            ) throws(SyncError) -> [Subscription.ID: Result<Subscription?, SyncError>] {
                try ProtoDecoding.keyed(entries, field, naming: { "subscription \"\($0.rawValue)\"" }) {
                    entry throws(SyncError) -> (Subscription.ID, Result<Subscription?, SyncError>) in
                    let result: Result<Subscription?, SyncError> =
                        switch entry.outcome {
                        case .subscription(let subscription)? where saves:
                            .success(try Subscription(proto: subscription))
                        case .deleted? where !saves: .success(nil)
                        case .error(let error)?: .failure(try resultError(error))
                        case nil: throw SyncError(.invalidArguments, "has no outcome set")
                        default:
                            throw SyncError(.invalidArguments, "has the outcome of a \(saves ? "deletion" : "save")")
                        }
                    return (Subscription.ID(rawValue: entry.subscriptionID), result)
                }
            }
            return ModifySubscriptionsResponse(
                saveResults: try results(message.saveResults, "save_results", saves: true).mapValues { $0.map { $0! } },
                deleteResults: try results(message.deleteResults, "delete_results", saves: false).mapValues {
                    $0.map { _ in () }
                })
        }
    }

    /// Encodes the answer of `allSubscriptions`.
    public static func encode(_ value: [Subscription], as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_AllSubscriptionsResponse()
        message.subscriptions = value.map(\.proto)
        return format.encode(message)
    }

    /// Decodes the answer of `allSubscriptions`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: [Subscription].Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> [Subscription] {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_AllSubscriptionsResponse) throws(SyncError) -> [Subscription] in
            try ProtoDecoding.each(message.subscriptions, "subscriptions", Subscription.init(proto:))
        }
    }

    /// Encodes the answer of `currentUserRecordID`.
    public static func encode(_ value: Record.ID, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_CurrentUserRecordIDResponse()
        message.recordID = value.proto
        return format.encode(message)
    }

    /// Decodes the answer of `currentUserRecordID`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: Record.ID.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> Record.ID {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_CurrentUserRecordIDResponse) throws(SyncError) -> Record.ID in
            guard message.hasRecordID else { throw SyncError(.invalidArguments, "record_id is missing") }
            return try within("record_id") { () throws(SyncError) in try Record.ID(proto: message.recordID) }
        }
    }

    // MARK: Errors

    /// Encodes the body of a failed request: the whole-request error.
    public static func encode(_ value: SyncError, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_ErrorResponse()
        message.error = value.proto
        return format.encode(message)
    }

    /// Decodes the body of a failed request.
    ///
    /// - Throws: `SyncError` `invalidArguments` if the body is not an error body.
    public static func decode(
        _: SyncError.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> SyncError {
        try decodeMessage(bytes, format) { (message: Logsync_Wire_ErrorResponse) throws(SyncError) -> SyncError in
            guard message.hasError else { throw SyncError(.invalidArguments, "error is missing") }
            return try within("error") { () throws(SyncError) in try SyncError(proto: message.error) }
        }
    }

    // MARK: Helpers

    /// Parses `bytes` as `Message` and converts it, prefixing any error with the message's name.
    static func decodeMessage<Message: SwiftProtobuf.Message, Value>(
        _ bytes: [UInt8], _ format: WireFormat, _ convert: (Message) throws(SyncError) -> Value
    ) throws(SyncError) -> Value {
        let message = try format.decode(Message.self, from: bytes)
        return try within("cannot decode \(Message.protoMessageName)") { () throws(SyncError) in try convert(message) }
    }

    /// Runs `body`, prefixing the message of any error it throws with `context`.
    static func within<T>(
        _ context: @autoclosure () -> String, _ body: () throws(SyncError) -> T
    ) throws(SyncError) -> T {
        try ProtoDecoding.within(context(), body)
    }

    /// The request's operation group, when its message has one (F69).
    static func operationGroup(
        _ present: Bool, _ message: Logsync_Model_OperationGroup
    ) throws(SyncError) -> OperationGroup? {
        guard present else { return nil }
        return try within("operation_group") { () throws(SyncError) in try OperationGroup(proto: message) }
    }

    private static func int(_ value: Int64, _ field: String) throws(SyncError) -> Int {
        guard let converted = Int(exactly: value) else {
            throw SyncError(.invalidArguments, "\(field) \(value) does not fit this platform's Int")
        }
        return converted
    }

    /// Zone results sorted by zone ID; a `nil` success is a deletion.
    private static func zoneResults(
        _ results: [RecordZone.ID: Result<RecordZone?, SyncError>]
    ) -> [Logsync_Wire_ZoneResult] {
        resultEntries(
            results, sortedBy: { [$0.ownerName, $0.zoneName] }, { id in .with { $0.zoneID = id.proto } },
            saved: { $0.zone = $1.proto })
    }

    /// Per-item result entries sorted by `key`: each made by `entry` for its item, then given
    /// its outcome, the saved value (set by `saved`), `deleted` for a `nil` success, or the error.
    private static func resultEntries<ID, Value, Entry: ResultEntry>(
        _ results: [ID: Result<Value?, SyncError>], sortedBy key: (ID) -> [String], _ entry: (ID) -> Entry,
        saved: (inout Entry, Value) -> Void
    ) -> [Entry] {
        ProtoOrder.sorted(results, by: key).map { id, result in
            var message = entry(id)
            switch result {
            case .success(let value?): saved(&message, value)
            case .success(nil): message.deleted = true
            case .failure(let error): message.error = error.proto
            }
            return message
        }
    }

    private static func zoneSaveResults(
        _ results: [RecordZone.ID: Result<RecordZone, SyncError>]
    ) -> [Logsync_Wire_ZoneResult] {
        zoneResults(results.mapValues { $0.map { Optional($0) } })
    }

    private enum ZoneOutcome { case zone, deleted }

    /// Decodes zone results; a success is a zone (`expecting: .zone`) or `nil` (`.deleted`).
    private static func zoneResults(
        _ entries: [Logsync_Wire_ZoneResult], _ field: String, expecting expected: ZoneOutcome
    ) throws(SyncError) -> [RecordZone.ID: Result<RecordZone?, SyncError>] {
        try ProtoDecoding.keyed(entries, field) {
            entry throws(SyncError) -> (RecordZone.ID, Result<RecordZone?, SyncError>) in
            guard entry.hasZoneID else { throw SyncError(.invalidArguments, "zone_id is missing") }
            let result: Result<RecordZone?, SyncError> =
                switch (entry.outcome, expected) {
                case (.zone(let zone)?, .zone):
                    .success(try ProtoDecoding.within("zone") { () throws(SyncError) in try RecordZone(proto: zone) })
                case (.deleted?, .deleted): .success(nil)
                case (.error(let error)?, _): .failure(try resultError(error))
                case (nil, _): throw SyncError(.invalidArguments, "has no outcome set")
                default:
                    throw SyncError(
                        .invalidArguments, "has the outcome of a \(expected == .zone ? "deletion" : "save")")
                }
            return (RecordZone.ID(proto: entry.zoneID), result)
        }
    }

    /// The error of a per-item result entry.
    static func resultError(_ error: Logsync_Model_SyncError) throws(SyncError) -> SyncError {
        try ProtoDecoding.within("error") { () throws(SyncError) in try SyncError(proto: error) }
    }
}

/// The outcome fields that the zone and subscription result entries share.
private protocol ResultEntry: SwiftProtobuf.Message {
    var deleted: Bool { get set }
    var error: Logsync_Model_SyncError { get set }
}

extension Logsync_Wire_ZoneResult: ResultEntry {}
extension Logsync_Wire_SubscriptionResult: ResultEntry {}
