import Foundation
import SyncModel

// The bodies of the key directory's operations (`ZoneKeyDirectory`, F129): device keys and
// wrapped zone keys.
extension Wire {
    /// Encodes the request of `registerDeviceKey`: the key.
    public static func encode(_ value: DevicePublicKey, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_RegisterDeviceKeyRequest()
        message.key = value.proto
        message.key.userRecordName = ""  // the server names the user
        return format.encode(message)
    }

    /// Decodes the request of `registerDeviceKey`.
    ///
    /// - Throws: `SyncError` `invalidArguments` without a key or for a key that is not 32 bytes.
    public static func decode(
        _: DevicePublicKey.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> DevicePublicKey {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_RegisterDeviceKeyRequest) throws(SyncError) -> DevicePublicKey in
            guard message.hasKey else { throw SyncError(.invalidArguments, "key is missing") }
            return try within("key") { () throws(SyncError) in try DevicePublicKey(rawRepresentation: message.key.raw) }
        }
    }

    /// The (empty) answer of `registerDeviceKey`.
    public static func encodeRegisterDeviceKeyResponse(as format: WireFormat) -> [UInt8] {
        format.encode(Logsync_Wire_RegisterDeviceKeyResponse())
    }

    /// Checks the (empty) answer of `registerDeviceKey`.
    ///
    /// - Throws: `SyncError` `invalidArguments` when it is not a `RegisterDeviceKeyResponse`.
    public static func decodeRegisterDeviceKeyResponse(_ bytes: [UInt8], as format: WireFormat) throws(SyncError) {
        try decodeMessage(bytes, format) { (_: Logsync_Wire_RegisterDeviceKeyResponse) throws(SyncError) in }
    }

    /// Encodes a `FetchZoneKeysRequest`.
    public static func encode(_ value: FetchZoneKeysRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchZoneKeysRequest()
        message.allZones = value.zoneIDs == nil
        message.zoneIds = (value.zoneIDs ?? []).map(\.proto)
        return format.encode(message)
    }

    /// Decodes a `FetchZoneKeysRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` for `all_zones` with zone IDs.
    public static func decode(
        _: FetchZoneKeysRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchZoneKeysRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchZoneKeysRequest) throws(SyncError) -> FetchZoneKeysRequest in
            if message.allZones {
                guard message.zoneIds.isEmpty else {
                    throw SyncError(
                        .invalidArguments, "all_zones is true but \(message.zoneIds.count) zone_ids are named")
                }
                return FetchZoneKeysRequest(zoneIDs: nil)
            }
            return FetchZoneKeysRequest(zoneIDs: message.zoneIds.map(RecordZone.ID.init(proto:)))
        }
    }

    /// Encodes a `FetchZoneKeysResponse`, sorted by zone ID.
    public static func encode(_ value: FetchZoneKeysResponse, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchZoneKeysResponse()
        message.results = value.results.sorted { zoneOrder($0.key, $1.key) }.map { zoneID, result in
            var entry = Logsync_Wire_ZoneKeysResult()
            entry.zoneID = zoneID.proto
            switch result {
            case .success(let keys):
                var zoneKeys = Logsync_Wire_ZoneKeys()
                zoneKeys.wrappedKeys = keys.wrappedKeys.map(\.proto)
                zoneKeys.recipients = keys.recipients.map(\.proto)
                entry.keys = zoneKeys
            case .failure(let error):
                entry.error = error.proto
            }
            return entry
        }
        return format.encode(message)
    }

    /// Decodes a `FetchZoneKeysResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: FetchZoneKeysResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchZoneKeysResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchZoneKeysResponse) throws(SyncError) -> FetchZoneKeysResponse in
            FetchZoneKeysResponse(
                results: try ProtoDecoding.keyed(message.results, "results") {
                    entry throws(SyncError) -> (RecordZone.ID, Result<ZoneKeys, SyncError>) in
                    guard entry.hasZoneID else { throw SyncError(.invalidArguments, "zone_id is missing") }
                    switch entry.outcome {
                    case .keys(let keys)?:
                        let wraps = try ProtoDecoding.each(keys.wrappedKeys, "wrapped_keys") {
                            wrap throws(SyncError) in try WrappedZoneKey(proto: wrap)
                        }
                        let recipients = try ProtoDecoding.each(keys.recipients, "recipients") {
                            key throws(SyncError) in try DevicePublicKey(proto: key)
                        }
                        return (
                            RecordZone.ID(proto: entry.zoneID),
                            .success(ZoneKeys(wrappedKeys: wraps, recipients: recipients))
                        )
                    case .error(let error)?:
                        return (RecordZone.ID(proto: entry.zoneID), .failure(try resultError(error)))
                    case nil:
                        throw SyncError(.invalidArguments, "has no outcome set")
                    }
                })
        }
    }

    /// Encodes a `SaveZoneKeysRequest`.
    public static func encode(_ value: SaveZoneKeysRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_SaveZoneKeysRequest()
        message.keys = value.keys.map(\.proto)
        return format.encode(message)
    }

    /// Decodes a `SaveZoneKeysRequest`; each wrap's shape is the server's to check, per wrap.
    ///
    /// - Throws: `SyncError` `invalidArguments` for a wrap without a zone ID.
    public static func decode(
        _: SaveZoneKeysRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> SaveZoneKeysRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_SaveZoneKeysRequest) throws(SyncError) -> SaveZoneKeysRequest in
            SaveZoneKeysRequest(
                keys: try ProtoDecoding.each(message.keys, "keys") { wrap throws(SyncError) in
                    try WrappedZoneKey(proto: wrap)
                })
        }
    }

    /// Encodes a `SaveZoneKeysResponse`, sorted by zone ID, version and recipient.
    public static func encode(_ value: SaveZoneKeysResponse, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_SaveZoneKeysResponse()
        message.results = value.results.sorted { a, b in
            if a.key.zoneID != b.key.zoneID { return zoneOrder(a.key.zoneID, b.key.zoneID) }
            if a.key.version != b.key.version { return a.key.version < b.key.version }
            return a.key.recipientKeyID < b.key.recipientKeyID
        }.map { id, result in
            var entry = Logsync_Wire_SavedZoneKeyResult()
            entry.zoneID = id.zoneID.proto
            entry.version = id.version
            entry.recipientKeyID = id.recipientKeyID
            switch result {
            case .success(let wrap): entry.key = wrap.proto
            case .failure(let error): entry.error = error.proto
            }
            return entry
        }
        return format.encode(message)
    }

    /// Decodes a `SaveZoneKeysResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: SaveZoneKeysResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> SaveZoneKeysResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_SaveZoneKeysResponse) throws(SyncError) -> SaveZoneKeysResponse in
            SaveZoneKeysResponse(
                results: try ProtoDecoding.keyed(message.results, "results") {
                    entry throws(SyncError) -> (WrappedZoneKey.ID, Result<WrappedZoneKey, SyncError>) in
                    guard entry.hasZoneID else { throw SyncError(.invalidArguments, "zone_id is missing") }
                    let id = WrappedZoneKey.ID(
                        zoneID: RecordZone.ID(proto: entry.zoneID), version: entry.version,
                        recipientKeyID: entry.recipientKeyID)
                    switch entry.outcome {
                    case .key(let wrap)?:
                        return (
                            id, .success(try within("key") { () throws(SyncError) in try WrappedZoneKey(proto: wrap) })
                        )
                    case .error(let error)?:
                        return (id, .failure(try resultError(error)))
                    case nil:
                        throw SyncError(.invalidArguments, "has no outcome set")
                    }
                })
        }
    }

    /// Zone IDs in the order the answers list them: by owner, then name, bytewise.
    private static func zoneOrder(_ a: RecordZone.ID, _ b: RecordZone.ID) -> Bool {
        [a.ownerName, a.zoneName].lexicographicallyPrecedes([b.ownerName, b.zoneName]) {
            $0.utf8.lexicographicallyPrecedes($1.utf8)
        }
    }
}
