import Foundation
import LogStore
import ModelEntries
import SwiftProtobuf
import SyncModel

// The byte form of server log entries: the entry kind says which case it is (ServerEntry.Kind),
// the payload is that case's Protocol Buffers message (Proto/server_log.proto), whose model
// parts are converted by SyncModel's ProtoConversions. See Docs/Protobuf.md.

extension ServerEntry {
    /// The entry to append: the case's kind, and its message's bytes (map entries in a
    /// deterministic order, so equal entries have equal payloads). The time is left to the log.
    package var newEntry: NewEntry {
        switch self {
        case .zoneSaved(let zone):
            return Self.entry(
                Kind.zoneSaved,
                Logsync_Server_ZoneSaved.with {
                    $0.zone = zone.proto
                })
        case .zoneDeleted(let zoneID, let reason):
            return Self.entry(
                Kind.zoneDeleted,
                Logsync_Server_ZoneDeleted.with {
                    $0.zoneID = zoneID.proto
                    $0.reason = reason.proto
                })
        case .recordSaved(let record):
            return Self.recordSavedPayload(record, estimatedSize: record.estimatedSize)
        case .recordDeleted(let recordID, let recordType):
            return Self.entry(
                Kind.recordDeleted,
                Logsync_Server_RecordDeleted.with {
                    $0.recordID = recordID.proto
                    $0.recordType = recordType
                })
        case .subscriptionSaved(let subscription):
            return Self.entry(
                Kind.subscriptionSaved,
                Logsync_Server_SubscriptionSaved.with {
                    $0.subscription = subscription.proto
                })
        case .subscriptionDeleted(let subscriptionID):
            return Self.entry(
                Kind.subscriptionDeleted,
                Logsync_Server_SubscriptionDeleted.with {
                    $0.subscriptionID = subscriptionID.rawValue
                })
        case .requestCompleted(let requestID, let fingerprint, let response, let actor):
            return Self.entry(
                Kind.requestCompleted,
                Logsync_Server_RequestCompleted.with {
                    $0.requestID = requestID.rawValue
                    $0.fingerprint = fingerprint
                    $0.response = response.proto
                    $0.actor = actor
                })
        case .requestOutcome(let requestID, let fingerprint, let outcome, let actor):
            // Written directly: a request of 400 records names 400 of them.
            return Self.requestOutcomeEntry(requestID, fingerprint: fingerprint, outcome: outcome, actor: actor)
        case .assetStored(let digest, let size, let zone):
            return Self.entry(
                Kind.assetStored,
                Logsync_Server_AssetStored.with {
                    $0.sha256 = Data(digest.bytes)
                    $0.size = size
                    if let zone { $0.zoneID = zone.proto }
                })
        case .assetsDeleted(let digests):
            return Self.entry(
                Kind.assetsDeleted,
                Logsync_Server_AssetsDeleted.with {
                    $0.sha256 = digests.map { Data($0.bytes) }
                })
        case .operationGroupStarted(let group, let firstRequest, let device):
            return Self.entry(
                Kind.operationGroupStarted,
                Logsync_Server_OperationGroupStarted.with {
                    $0.group = group.proto
                    $0.firstRequest = firstRequest
                    $0.device = device?.rawValue ?? ""
                })
        case .schemaDeployed(let schema):
            return Self.entry(Kind.schemaDeployed, schema.proto)
        case .deviceKeyRegistered(let key):
            return Self.entry(
                Kind.deviceKeyRegistered,
                Logsync_Server_DeviceKeyRegistered.with {
                    $0.key = key.proto
                })
        case .zoneKeysSaved(let keys):
            return Self.entry(
                Kind.zoneKeysSaved,
                Logsync_Server_ZoneKeysSaved.with {
                    $0.keys = keys.map(\.proto)
                })
        case .tombstonesCompacted(let horizon):
            return Self.entry(
                Kind.tombstonesCompacted,
                Logsync_Server_TombstonesCompacted.with {
                    $0.horizon = horizon.rawValue
                })
        case .clientChangeTokenUpdated(let zoneID, let device, let token):
            return Self.entry(
                Kind.clientChangeTokenUpdated,
                Logsync_Server_ClientChangeTokenUpdated.with {
                    $0.zoneID = zoneID.proto
                    $0.token = Data(token)
                    $0.device = device?.rawValue ?? ""
                })
        case .sharedZoneJoined(let zoneID, let share, let ownerOffset):
            return Self.entry(
                Kind.sharedZoneJoined,
                Logsync_Server_SharedZoneJoined.with {
                    $0.zoneID = zoneID.proto
                    $0.shareID = share.proto
                    $0.ownerOffset = ownerOffset
                })
        case .sharedZoneChanged(let zoneID, let ownerOffset):
            return Self.entry(
                Kind.sharedZoneChanged,
                Logsync_Server_SharedZoneChanged.with {
                    $0.zoneID = zoneID.proto
                    $0.ownerOffset = ownerOffset
                })
        case .sharedZoneLeft(let zoneID, let reason):
            return Self.entry(
                Kind.sharedZoneLeft,
                Logsync_Server_SharedZoneLeft.with {
                    $0.zoneID = zoneID.proto
                    $0.reason = Logsync_Server_ShareEndReason(rawValue: reason.rawValue) ?? .unspecified
                })
        }
    }

    /// Decodes an entry read from a server database's log.
    ///
    /// - Throws: `LogStoreError` `.corruptEntry` naming the entry's offset, its kind and what
    ///   failed: a kind that is not a server kind, a payload that is not the kind's message, or
    ///   a message that does not describe a value (a missing required field, an unknown enum).
    package init(_ entry: LogEntry) throws(LogStoreError) {
        switch entry.kind {
        case Kind.zoneSaved:
            self = try ProtoWire.decode(Logsync_Server_ZoneSaved.self, payloadOf: entry, "zoneSaved") {
                message throws(SyncError) in
                guard message.hasZone else { throw ProtoDecoding.missing("ZoneSaved.zone") }
                return .zoneSaved(try RecordZone(proto: message.zone))
            }
        case Kind.zoneDeleted:
            self = try ProtoWire.decode(Logsync_Server_ZoneDeleted.self, payloadOf: entry, "zoneDeleted") {
                message throws(SyncError) in
                guard message.hasZoneID else { throw ProtoDecoding.missing("ZoneDeleted.zone_id") }
                let reason: ZoneDeletionReason
                do throws(SyncError) {
                    reason = try ZoneDeletionReason(proto: message.reason)
                } catch {
                    throw SyncError(.invalidArguments, "ZoneDeleted.reason: \(error.message)")
                }
                return .zoneDeleted(RecordZone.ID(proto: message.zoneID), reason: reason)
            }
        case Kind.recordSaved:
            // Read directly when the record is in the form the server writes (field 1 of the
            // payload, nothing else), as every page read does for each record it returns.
            if let record = Self.storedRecordBytes(of: entry)?.withUnsafeBytes(Record.readDirectly) {
                self = .recordSaved(record)
                return
            }
            self = try ProtoWire.decode(Logsync_Server_RecordSaved.self, payloadOf: entry, "recordSaved") {
                message throws(SyncError) in
                guard message.hasRecord else { throw ProtoDecoding.missing("RecordSaved.record") }
                return .recordSaved(try Record(proto: message.record))
            }
        case Kind.recordDeleted:
            self = try ProtoWire.decode(Logsync_Server_RecordDeleted.self, payloadOf: entry, "recordDeleted") {
                message throws(SyncError) in
                guard message.hasRecordID else { throw ProtoDecoding.missing("RecordDeleted.record_id") }
                return .recordDeleted(try Record.ID(proto: message.recordID), recordType: message.recordType)
            }
        case Kind.subscriptionSaved:
            self = try ProtoWire.decode(Logsync_Server_SubscriptionSaved.self, payloadOf: entry, "subscriptionSaved") {
                message throws(SyncError) in
                guard message.hasSubscription else { throw ProtoDecoding.missing("SubscriptionSaved.subscription") }
                return .subscriptionSaved(try Subscription(proto: message.subscription))
            }
        case Kind.subscriptionDeleted:
            let message = try ProtoWire.decode(
                Logsync_Server_SubscriptionDeleted.self, payloadOf: entry, "subscriptionDeleted")
            self = .subscriptionDeleted(Subscription.ID(rawValue: message.subscriptionID))
        case Kind.requestCompleted:
            self = try ProtoWire.decode(Logsync_Server_RequestCompleted.self, payloadOf: entry, "requestCompleted") {
                message throws(SyncError) in
                guard message.hasResponse else { throw ProtoDecoding.missing("RequestCompleted.response") }
                return .requestCompleted(
                    RequestID(rawValue: message.requestID), fingerprint: message.fingerprint,
                    response: try ModifyRecordsResponse(proto: message.response), actor: message.actor)
            }
        case Kind.requestOutcome:
            self = try ProtoWire.decode(Logsync_Server_RequestOutcome.self, payloadOf: entry, "requestOutcome") {
                message throws(SyncError) in
                guard message.hasOthers else { throw ProtoDecoding.missing("RequestOutcome.others") }
                let others = try ProtoDecoding.within("RequestOutcome.others") { () throws(SyncError) in
                    try ModifyRecordsResponse(proto: message.others)
                }
                for (recordID, result) in others.saveResults {
                    if case .success = result {
                        throw ProtoDecoding.invalid(
                            "RequestOutcome.others",
                            "holds the successful save of \(recordID); saved records belong in RequestOutcome.saved")
                    }
                }
                var seen = Set(others.saveResults.keys)
                var saved: [RequestOutcome.Saved] = []
                saved.reserveCapacity(message.saved.count)
                for (index, reference) in message.saved.enumerated() {
                    guard reference.hasRecordID else {
                        throw ProtoDecoding.missing("RequestOutcome.saved[\(index)].record_id")
                    }
                    let recordID = try ProtoDecoding.within("RequestOutcome.saved[\(index)].record_id") {
                        () throws(SyncError) in
                        try Record.ID(proto: reference.recordID)
                    }
                    // The record's entry was committed with this one, so it comes before it.
                    guard reference.offset > 0, reference.offset < entry.offset.rawValue else {
                        throw ProtoDecoding.invalid(
                            "RequestOutcome.saved[\(index)].offset",
                            "is \(reference.offset), not an entry before this one (\(entry.offset.rawValue))")
                    }
                    guard seen.insert(recordID).inserted else {
                        throw ProtoDecoding.invalid(
                            "RequestOutcome.saved[\(index)]", "names \(recordID), which has another result")
                    }
                    saved.append(RequestOutcome.Saved(recordID, at: LogOffset(reference.offset)))
                }
                return .requestOutcome(
                    RequestID(rawValue: message.requestID), fingerprint: message.fingerprint,
                    outcome: RequestOutcome(
                        saved: saved, others: others,
                        operationGroupID: message.operationGroupID.isEmpty ? nil : message.operationGroupID),
                    actor: message.actor)
            }
        case Kind.operationGroupStarted:
            self = try ProtoWire.decode(
                Logsync_Server_OperationGroupStarted.self, payloadOf: entry, "operationGroupStarted"
            ) { message throws(SyncError) in
                guard message.hasGroup else { throw ProtoDecoding.missing("OperationGroupStarted.group") }
                let group = try ProtoDecoding.within("OperationGroupStarted.group") { () throws(SyncError) in
                    try OperationGroup(proto: message.group)
                }
                return .operationGroupStarted(
                    group, firstRequest: message.firstRequest,
                    device: message.device.isEmpty ? nil : DeviceID(message.device))
            }
        case Kind.assetStored:
            self = try ProtoWire.decode(Logsync_Server_AssetStored.self, payloadOf: entry, "assetStored") {
                message throws(SyncError) in
                guard message.size >= 0 else { throw ProtoDecoding.invalid("AssetStored.size", "is negative") }
                return .assetStored(
                    try ProtoDecoding.within("AssetStored.sha256") { () throws(SyncError) in
                        try AssetDigest(bytes: Array(message.sha256))
                    },
                    size: message.size, zone: message.hasZoneID ? RecordZone.ID(proto: message.zoneID) : nil)
            }
        case Kind.assetsDeleted:
            self = try ProtoWire.decode(Logsync_Server_AssetsDeleted.self, payloadOf: entry, "assetsDeleted") {
                message throws(SyncError) in
                .assetsDeleted(
                    try message.sha256.map { (bytes) throws(SyncError) in
                        try ProtoDecoding.within("AssetsDeleted.sha256") { () throws(SyncError) in
                            try AssetDigest(bytes: Array(bytes))
                        }
                    })
            }
        case Kind.schemaDeployed:
            self = try ProtoWire.decode(Logsync_Server_SchemaDeployed.self, payloadOf: entry, "schemaDeployed") {
                message throws(SyncError) in
                .schemaDeployed(try RecordSchema(proto: message))
            }
        case Kind.deviceKeyRegistered:
            self = try ProtoWire.decode(
                Logsync_Server_DeviceKeyRegistered.self, payloadOf: entry, "deviceKeyRegistered"
            ) { message throws(SyncError) in
                guard message.hasKey else { throw ProtoDecoding.missing("DeviceKeyRegistered.key") }
                return .deviceKeyRegistered(
                    try ProtoDecoding.within("DeviceKeyRegistered.key") { () throws(SyncError) in
                        try DevicePublicKey(proto: message.key)
                    })
            }
        case Kind.zoneKeysSaved:
            self = try ProtoWire.decode(Logsync_Server_ZoneKeysSaved.self, payloadOf: entry, "zoneKeysSaved") {
                message throws(SyncError) in
                guard !message.keys.isEmpty else { throw ProtoDecoding.invalid("ZoneKeysSaved.keys", "is empty") }
                return .zoneKeysSaved(
                    try message.keys.enumerated().map { (item) throws(SyncError) in
                        try ProtoDecoding.within("ZoneKeysSaved.keys[\(item.offset)]") { () throws(SyncError) in
                            let wrap = try WrappedZoneKey(proto: item.element)
                            try wrap.validate()
                            return wrap
                        }
                    })
            }
        case Kind.tombstonesCompacted:
            let message = try ProtoWire.decode(
                Logsync_Server_TombstonesCompacted.self, payloadOf: entry, "tombstonesCompacted")
            self = .tombstonesCompacted(horizon: LogOffset(message.horizon))
        case Kind.clientChangeTokenUpdated:
            self = try ProtoWire.decode(
                Logsync_Server_ClientChangeTokenUpdated.self, payloadOf: entry, "clientChangeTokenUpdated"
            ) { message throws(SyncError) in
                guard message.hasZoneID else { throw ProtoDecoding.missing("ClientChangeTokenUpdated.zone_id") }
                return .clientChangeTokenUpdated(
                    RecordZone.ID(proto: message.zoneID),
                    device: message.device.isEmpty ? nil : DeviceID(message.device),
                    token: [UInt8](message.token))
            }
        case Kind.sharedZoneJoined:
            self = try ProtoWire.decode(Logsync_Server_SharedZoneJoined.self, payloadOf: entry, "sharedZoneJoined") {
                message throws(SyncError) in
                guard message.hasZoneID else { throw ProtoDecoding.missing("SharedZoneJoined.zone_id") }
                guard message.hasShareID else { throw ProtoDecoding.missing("SharedZoneJoined.share_id") }
                return .sharedZoneJoined(
                    RecordZone.ID(proto: message.zoneID), share: try Record.ID(proto: message.shareID),
                    ownerOffset: message.ownerOffset)
            }
        case Kind.sharedZoneChanged:
            self = try ProtoWire.decode(Logsync_Server_SharedZoneChanged.self, payloadOf: entry, "sharedZoneChanged") {
                message throws(SyncError) in
                guard message.hasZoneID else { throw ProtoDecoding.missing("SharedZoneChanged.zone_id") }
                return .sharedZoneChanged(RecordZone.ID(proto: message.zoneID), ownerOffset: message.ownerOffset)
            }
        case Kind.sharedZoneLeft:
            self = try ProtoWire.decode(Logsync_Server_SharedZoneLeft.self, payloadOf: entry, "sharedZoneLeft") {
                message throws(SyncError) in
                guard message.hasZoneID else { throw ProtoDecoding.missing("SharedZoneLeft.zone_id") }
                guard let reason = ShareEndReason(rawValue: message.reason.rawValue) else {
                    throw SyncError(
                        .invalidArguments, "SharedZoneLeft.reason: \(message.reason.rawValue) is not a reason (1–4)")
                }
                return .sharedZoneLeft(RecordZone.ID(proto: message.zoneID), reason: reason)
            }
        default:
            throw LogStoreError(
                .corruptEntry, "entry kind \(entry.kind) is not a server entry kind (\(Kind.rangesDescription))",
                offset: entry.offset)
        }
    }

    /// `newEntry` carrying this entry as its decoded form, so the server's index applies it
    /// without decoding the bytes just encoded (`NewEntry.decoded`).
    var decodedNewEntry: NewEntry {
        var entry = newEntry
        entry.decoded = self
        return entry
    }

    /// `recordSaved(record).decodedNewEntry`, for a record whose `Record.estimatedSize` the
    /// caller has measured already, and, when it has written them, the bytes of its type, ID
    /// and fields (`Record.writeTypeIDAndFields(to:)`, of a record with the same type, ID and
    /// fields), which the entry then copies instead of writing them again.
    static func recordSavedEntry(
        _ record: Record, estimatedSize: Int, typeIDAndFields: ArraySlice<UInt8>? = nil
    ) -> NewEntry {
        var entry: NewEntry
        if let typeIDAndFields {
            var writer = ProtoWriter(capacity: 80 + typeIDAndFields.count + estimatedSize / 4)
            writer.message(1) {
                $0.raw(typeIDAndFields)
                record.writeMarksAndSystemFields(to: &$0)
            }
            entry = NewEntry(kind: Kind.recordSaved, payload: writer.bytes)
            assert(
                entry.payload == recordSavedPayload(record, estimatedSize: estimatedSize).payload,
                "the copied bytes of \(record.recordID) are not those of the record")
        } else {
            entry = recordSavedPayload(record, estimatedSize: estimatedSize)
        }
        entry.decoded = ServerEntry.recordSaved(record)
        return entry
    }

    /// The bytes of `RecordSaved { record = record.proto }`, written directly: the entry most
    /// written, and SwiftProtobuf's encoder is slow on nested messages.
    private static func recordSavedPayload(_ record: Record, estimatedSize: Int) -> NewEntry {
        var writer = ProtoWriter(capacity: 80 + estimatedSize * 5 / 4)
        writer.message(1) { record.write(to: &$0) }
        return NewEntry(kind: Kind.recordSaved, payload: writer.bytes)
    }

    // MARK: Helpers

    /// The bytes of `RequestOutcome`, written directly: byte for byte what SwiftProtobuf writes
    /// (`ServerEntryCodecTests` compares the two).
    private static func requestOutcomeEntry(
        _ requestID: RequestID, fingerprint: UInt32, outcome: RequestOutcome, actor: UInt64
    ) -> NewEntry {
        var writer = ProtoWriter(capacity: 64 + 48 * outcome.saved.count)
        if !requestID.rawValue.isEmpty { writer.string(1, requestID.rawValue) }
        if fingerprint != 0 {
            writer.key(2, 5)  // fixed32, little-endian
            writer.raw((0..<4).map { UInt8(truncatingIfNeeded: fingerprint >> ($0 * 8)) }[...])
        }
        if actor != 0 {
            writer.key(3, 0)
            writer.varint(actor)
        }
        for saved in outcome.saved {
            writer.message(4) {
                $0.message(1) { saved.recordID.write(to: &$0) }
                if saved.offset.rawValue != 0 {
                    $0.key(2, 0)
                    $0.varint(saved.offset.rawValue)
                }
            }
        }
        writer.lengthDelimited(5, ProtoWire.serialize(outcome.others.proto))
        if let group = outcome.operationGroupID, !group.isEmpty { writer.string(6, group) }
        return NewEntry(kind: Kind.requestOutcome, payload: writer.bytes)
    }

    private static func entry(_ kind: EntryKind, _ message: some SwiftProtobuf.Message) -> NewEntry {
        NewEntry(kind: kind, payload: ProtoWire.serialize(message))
    }
}

extension ServerEntry {
    /// The record bytes of a `recordSaved` entry as stored, without decoding them: the payload
    /// is `RecordSaved { record = 1 }` and nothing else, so field 1's content is the record's
    /// `Record.serializedProto()` bytes (the form `newEntry` writes). `nil` when the payload is
    /// not exactly that one field, for the caller to decode the entry instead.
    static func storedRecordBytes(of entry: LogEntry) -> ArraySlice<UInt8>? {
        let payload = entry.payload
        guard payload.first == 0x0A,  // field 1, length-delimited, first
            let fields = try? ProtoFields.lengthDelimited(
                field: 1, in: payload, error: { StoredRecordBytesError(text: $0) }),
            fields.count == 1, fields[0].upperBound == payload.count  // and nothing after it
        else { return nil }
        return payload[fields[0]]
    }

    /// Why a payload is not a stored record alone; only ever turned into `nil`.
    private struct StoredRecordBytesError: Error { let text: String }
}
