import Foundation
import LogStore
import SwiftProtobuf
import SyncModel

// The byte form of server log entries: the entry kind says which case it is (ServerEntry.Kind),
// the payload is that case's Protocol Buffers message (Proto/server_log.proto), whose model
// parts are converted by SyncModel's ProtoConversions. See Docs/Protobuf.md.

extension ServerEntry {
    /// The entry to append: the case's kind, and its message's bytes (map entries in a
    /// deterministic order, so equal entries have equal payloads). The time is left to the log.
    var newEntry: NewEntry {
        switch self {
        case .zoneSaved(let zone):
            var message = Logsync_Server_ZoneSaved()
            message.zone = zone.proto
            return Self.entry(Kind.zoneSaved, message)
        case .zoneDeleted(let zoneID, let reason):
            var message = Logsync_Server_ZoneDeleted()
            message.zoneID = zoneID.proto
            message.reason = reason.proto
            return Self.entry(Kind.zoneDeleted, message)
        case .recordSaved(let record):
            var message = Logsync_Server_RecordSaved()
            message.record = record.proto
            return Self.entry(Kind.recordSaved, message)
        case .recordDeleted(let recordID, let recordType):
            var message = Logsync_Server_RecordDeleted()
            message.recordID = recordID.proto
            message.recordType = recordType
            return Self.entry(Kind.recordDeleted, message)
        case .subscriptionSaved(let subscription):
            var message = Logsync_Server_SubscriptionSaved()
            message.subscription = subscription.proto
            return Self.entry(Kind.subscriptionSaved, message)
        case .subscriptionDeleted(let subscriptionID):
            var message = Logsync_Server_SubscriptionDeleted()
            message.subscriptionID = subscriptionID.rawValue
            return Self.entry(Kind.subscriptionDeleted, message)
        case .requestCompleted(let requestID, let fingerprint, let response):
            var message = Logsync_Server_RequestCompleted()
            message.requestID = requestID.rawValue
            message.fingerprint = fingerprint
            message.response = response.proto
            return Self.entry(Kind.requestCompleted, message)
        case .tombstonesCompacted(let horizon):
            var message = Logsync_Server_TombstonesCompacted()
            message.horizon = horizon.rawValue
            return Self.entry(Kind.tombstonesCompacted, message)
        case .clientChangeTokenUpdated(let zoneID, let device, let token):
            var message = Logsync_Server_ClientChangeTokenUpdated()
            message.zoneID = zoneID.proto
            message.token = Data(token)
            message.device = device?.rawValue ?? ""
            return Self.entry(Kind.clientChangeTokenUpdated, message)
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
            let message = try ProtoWire.decode(Logsync_Server_ZoneSaved.self, payloadOf: entry, "zoneSaved")
            self = try ProtoWire.converting(entry, "zoneSaved") { () throws(SyncError) in
                guard message.hasZone else { throw Self.missing("ZoneSaved.zone") }
                return .zoneSaved(try RecordZone(proto: message.zone))
            }
        case Kind.zoneDeleted:
            let message = try ProtoWire.decode(Logsync_Server_ZoneDeleted.self, payloadOf: entry, "zoneDeleted")
            self = try ProtoWire.converting(entry, "zoneDeleted") { () throws(SyncError) in
                guard message.hasZoneID else { throw Self.missing("ZoneDeleted.zone_id") }
                let reason: ZoneDeletionReason
                do throws(SyncError) {
                    reason = try ZoneDeletionReason(proto: message.reason)
                } catch {
                    throw SyncError(.invalidArguments, "ZoneDeleted.reason: \(error.message)")
                }
                return .zoneDeleted(RecordZone.ID(proto: message.zoneID), reason: reason)
            }
        case Kind.recordSaved:
            let message = try ProtoWire.decode(Logsync_Server_RecordSaved.self, payloadOf: entry, "recordSaved")
            self = try ProtoWire.converting(entry, "recordSaved") { () throws(SyncError) in
                guard message.hasRecord else { throw Self.missing("RecordSaved.record") }
                return .recordSaved(try Record(proto: message.record))
            }
        case Kind.recordDeleted:
            let message = try ProtoWire.decode(Logsync_Server_RecordDeleted.self, payloadOf: entry, "recordDeleted")
            self = try ProtoWire.converting(entry, "recordDeleted") { () throws(SyncError) in
                guard message.hasRecordID else { throw Self.missing("RecordDeleted.record_id") }
                return .recordDeleted(try Record.ID(proto: message.recordID), recordType: message.recordType)
            }
        case Kind.subscriptionSaved:
            let message = try ProtoWire.decode(Logsync_Server_SubscriptionSaved.self, payloadOf: entry, "subscriptionSaved")
            self = try ProtoWire.converting(entry, "subscriptionSaved") { () throws(SyncError) in
                guard message.hasSubscription else { throw Self.missing("SubscriptionSaved.subscription") }
                return .subscriptionSaved(try Subscription(proto: message.subscription))
            }
        case Kind.subscriptionDeleted:
            let message = try ProtoWire.decode(Logsync_Server_SubscriptionDeleted.self, payloadOf: entry, "subscriptionDeleted")
            self = .subscriptionDeleted(Subscription.ID(rawValue: message.subscriptionID))
        case Kind.requestCompleted:
            let message = try ProtoWire.decode(Logsync_Server_RequestCompleted.self, payloadOf: entry, "requestCompleted")
            self = try ProtoWire.converting(entry, "requestCompleted") { () throws(SyncError) in
                guard message.hasResponse else { throw Self.missing("RequestCompleted.response") }
                return .requestCompleted(
                    RequestID(rawValue: message.requestID), fingerprint: message.fingerprint,
                    response: try ModifyRecordsResponse(proto: message.response))
            }
        case Kind.tombstonesCompacted:
            let message = try ProtoWire.decode(Logsync_Server_TombstonesCompacted.self, payloadOf: entry, "tombstonesCompacted")
            self = .tombstonesCompacted(horizon: LogOffset(message.horizon))
        case Kind.clientChangeTokenUpdated:
            let message = try ProtoWire.decode(
                Logsync_Server_ClientChangeTokenUpdated.self, payloadOf: entry, "clientChangeTokenUpdated")
            self = try ProtoWire.converting(entry, "clientChangeTokenUpdated") { () throws(SyncError) in
                guard message.hasZoneID else { throw Self.missing("ClientChangeTokenUpdated.zone_id") }
                return .clientChangeTokenUpdated(
                    RecordZone.ID(proto: message.zoneID), device: message.device.isEmpty ? nil : DeviceID(message.device),
                    token: [UInt8](message.token))
            }
        default:
            throw LogStoreError(
                .corruptEntry, "entry kind \(entry.kind) is not a server entry kind (101–109)",
                offset: entry.offset)
        }
    }

    // MARK: Helpers

    private static func entry(_ kind: EntryKind, _ message: some SwiftProtobuf.Message) -> NewEntry {
        NewEntry(kind: kind, payload: ProtoWire.serialize(message))
    }


    private static func missing(_ field: String) -> SyncError {
        SyncError(.invalidArguments, "\(field) is missing")
    }
}
