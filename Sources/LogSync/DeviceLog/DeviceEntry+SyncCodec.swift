import Foundation
import LogStore
import ModelEntries
import SwiftProtobuf
import SyncModel

// The byte form of the entries a send or a fetch writes (kinds 10, 14, 20–25, 50); the app's
// edits and the batch entries are in DeviceEntry+Codec.swift, which dispatches here.

extension DeviceEntry {
    /// A `zoneChangesFetched` entry whose records field (2) `writeRecords` writes (about
    /// `recordsSize` bytes): the fields in number order, zone_id, the records, then the rest.
    private static func zoneChangesFetchedEntry(
        zoneID: RecordZone.ID, recordsSize: Int, writeRecords: (inout ProtoWriter) -> Void,
        deletions: [RecordZoneChange.Deletion], token: ZoneChangeToken, moreComing: Bool
    ) -> NewEntry {
        var head = Logsync_Device_ZoneChangesFetched()
        head.zoneID = zoneID.proto
        var message = Logsync_Device_ZoneChangesFetched()
        message.deletions = deletions.map { deletion in
            var proto = Logsync_Device_RecordDeletion()
            proto.recordID = deletion.recordID.proto
            proto.recordType = deletion.recordType
            return proto
        }
        message.changeToken = token.data
        message.moreComing = moreComing
        let headBytes = ProtoWire.serialize(head)
        let tailBytes = ProtoWire.serialize(message)
        var writer = ProtoWriter(capacity: headBytes.count + recordsSize + tailBytes.count)
        writer.raw(headBytes[...])
        writeRecords(&writer)
        writer.raw(tailBytes[...])
        return NewEntry(kind: Kind.zoneChangesFetched, payload: writer.bytes)
    }

    /// The entry as `decodedNewEntry` makes it, a `zoneChangesFetched` with its records written
    /// as `recordBytes` (each the `Record` bytes the record was read from, in order: what the
    /// server stored and sent) instead of encoded again. The entry is a kind 22 entry as ever,
    /// read by every build; its records decode to the same values. Any other entry, or bytes
    /// that do not match the records in number, is `decodedNewEntry`.
    func decodedNewEntry(recordBytes: [ArraySlice<UInt8>]) -> NewEntry {
        guard case .zoneChangesFetched(let zoneID, let modifications, let deletions, let token, let moreComing) = self,
            recordBytes.count == modifications.count
        else { return decodedNewEntry }
        var entry = Self.zoneChangesFetchedEntry(
            zoneID: zoneID, recordsSize: recordBytes.reduce(0) { $0 + $1.count + 4 },
            writeRecords: { writer in for bytes in recordBytes { writer.lengthDelimited(2, bytes) } },
            deletions: deletions, token: token, moreComing: moreComing)
        entry.decoded = self
        return entry
    }

    /// The entry of a sync step; called by `newEntry` for the cases it does not encode itself.
    var syncStepEntry: NewEntry {
        switch self {
        case .sendStarted(let context):
            var message = Logsync_Device_SendStarted()
            message.reason = context.reason.proto
            message.scope = context.options.scope.proto
            return Self.entry(Kind.sendStarted, message)
        case .sendFinished(let error):
            var message = Logsync_Device_SendFinished()
            if let error { message.error = error.proto }
            return Self.entry(Kind.sendFinished, message)
        case .fetchStarted(let context):
            var message = Logsync_Device_FetchStarted()
            message.reason = context.reason.proto
            message.scope = context.options.scope.proto
            message.prioritizedZoneIds = context.options.prioritizedZoneIDs.map(\.proto)
            if context.options.defaultZoneConfiguration != SyncEngine.FetchChangesOptions.ZoneConfiguration() {
                message.defaultZoneConfiguration = context.options.defaultZoneConfiguration.proto
            }
            message.zoneConfigurations = context.options.zoneConfigurations
                .sorted { IDOrder.precedes($0.key, $1.key) }
                .map { zoneID, configuration in
                    var entry = Logsync_Device_ZoneFetchConfiguration()
                    entry.zoneID = zoneID.proto
                    entry.configuration = configuration.proto
                    return entry
                }
            return Self.entry(Kind.fetchStarted, message)
        case .databaseChangesFetched(let modifications, let deletions, let token, let moreComing):
            var message = Logsync_Device_DatabaseChangesFetched()
            message.modifications = modifications.map(\.proto)
            message.deletions = deletions.map { deletion in
                var proto = Logsync_Device_ZoneDeletion()
                proto.zoneID = deletion.zoneID.proto
                proto.reason = deletion.reason.proto
                return proto
            }
            message.changeToken = token.data
            message.moreComing = moreComing
            return Self.entry(Kind.databaseChangesFetched, message)
        case .zoneChangesFetched(let zoneID, let modifications, let deletions, let token, let moreComing):
            return Self.zoneChangesFetchedEntry(
                zoneID: zoneID, recordsSize: modifications.reduce(0) { $0 + 80 + $1.estimatedSize * 5 / 4 },
                writeRecords: { writer in
                    for record in modifications { writer.message(2) { record.write(to: &$0) } }
                }, deletions: deletions, token: token, moreComing: moreComing)
        case .zoneFetchFinished(let zoneID, let error):
            var message = Logsync_Device_ZoneFetchFinished()
            message.zoneID = zoneID.proto
            if let error { message.error = error.proto }
            return Self.entry(Kind.zoneFetchFinished, message)
        case .fetchFinished(let error):
            var message = Logsync_Device_FetchFinished()
            if let error { message.error = error.proto }
            return Self.entry(Kind.fetchFinished, message)
        case .changeTokenReset(let zoneID):
            var message = Logsync_Device_ChangeTokenReset()
            if let zoneID { message.zoneID = zoneID.proto }
            return Self.entry(Kind.changeTokenReset, message)
        case .eventsDelivered(let offset):
            var message = Logsync_Device_EventsDelivered()
            message.through = offset.rawValue
            return Self.entry(Kind.eventsDelivered, message)
        case .accountChanged(let previous, let current):
            var message = Logsync_Device_AccountChanged()
            if let previous { message.previousUser = previous.proto }
            if let current { message.currentUser = current.proto }
            return Self.entry(Kind.accountChanged, message)
        case .subscriptionEnsured(let id):
            var message = Logsync_Device_SubscriptionEnsured()
            message.subscriptionID = id.rawValue
            return Self.entry(Kind.subscriptionEnsured, message)
        case .pushReceived(let zoneID):
            var message = Logsync_Device_PushReceived()
            if let zoneID { message.zoneID = zoneID.proto }
            return Self.entry(Kind.pushReceived, message)
        case .syncScheduled(let work, let cause, let after):
            var message = Logsync_Device_SyncScheduled()
            message.work = work == .send ? .send : .fetch
            switch cause {
            case .localChanges: message.cause = .localChanges
            case .pushHint: message.cause = .pushHint
            case .catchUp: message.cause = .catchUp
            case .retry(let failures, _, let fromServer):
                message.cause = .retry
                message.failures = UInt32(clamping: failures)
                message.serverRetryAfter = fromServer
            }
            message.afterMicroseconds = after.wholeMicroseconds
            return Self.entry(Kind.syncScheduled, message)
        case .syncDeferred(let reason):
            var message = Logsync_Device_SyncDeferred()
            message.reason = reason
            return Self.entry(Kind.syncDeferred, message)
        case .pendingRecordZoneChangesAdded, .pendingRecordZoneChangesRemoved, .pendingDatabaseChangesAdded,
            .pendingDatabaseChangesRemoved, .untrackedChangesFlagged, .batchPrepared, .batchResult,
            .databaseChangesSent:
            preconditionFailure("\(name) is encoded by DeviceEntry.newEntry")
        }
    }

    /// Decodes the entry of a sync step (kinds 10, 14, 20–25, 50).
    static func syncStep(_ entry: LogEntry) throws(LogStoreError) -> DeviceEntry {
        switch entry.kind {
        case Kind.sendStarted:
            let message = try ProtoWire.decode(Logsync_Device_SendStarted.self, payloadOf: entry, "sendStarted")
            return try ProtoWire.converting(entry, "sendStarted") { () throws(SyncError) in
                guard message.hasScope else { throw missing("SendStarted.scope") }
                let reason = try SyncEngine.SyncReason(proto: message.reason, "SendStarted.reason")
                let scope = try SyncEngine.SendChangesOptions.Scope(proto: message.scope)
                return .sendStarted(SyncEngine.SendChangesContext(reason: reason, options: .init(scope: scope)))
            }
        case Kind.sendFinished:
            let message = try ProtoWire.decode(Logsync_Device_SendFinished.self, payloadOf: entry, "sendFinished")
            return try ProtoWire.converting(entry, "sendFinished") { () throws(SyncError) in
                .sendFinished(
                    error: message.hasError
                        ? try within("SendFinished.error") { () throws(SyncError) in try SyncError(proto: message.error)
                        } : nil)
            }
        case Kind.fetchStarted:
            let message = try ProtoWire.decode(Logsync_Device_FetchStarted.self, payloadOf: entry, "fetchStarted")
            return try ProtoWire.converting(entry, "fetchStarted") { () throws(SyncError) in
                guard message.hasScope else { throw missing("FetchStarted.scope") }
                let reason = try SyncEngine.SyncReason(proto: message.reason, "FetchStarted.reason")
                let scope = try SyncEngine.FetchChangesOptions.Scope(proto: message.scope)
                var options = SyncEngine.FetchChangesOptions(
                    scope: scope, prioritizedZoneIDs: message.prioritizedZoneIds.map { RecordZone.ID(proto: $0) })
                if message.hasDefaultZoneConfiguration {
                    options.defaultZoneConfiguration = .init(proto: message.defaultZoneConfiguration)
                }
                for (index, entry) in message.zoneConfigurations.enumerated() {
                    guard entry.hasZoneID else { throw missing("FetchStarted.zone_configurations[\(index)].zone_id") }
                    guard entry.hasConfiguration else {
                        throw missing("FetchStarted.zone_configurations[\(index)].configuration")
                    }
                    options.zoneConfigurations[RecordZone.ID(proto: entry.zoneID)] = .init(proto: entry.configuration)
                }
                return .fetchStarted(SyncEngine.FetchChangesContext(reason: reason, options: options))
            }
        case Kind.databaseChangesFetched:
            let message = try ProtoWire.decode(
                Logsync_Device_DatabaseChangesFetched.self, payloadOf: entry, "databaseChangesFetched")
            return try ProtoWire.converting(entry, "databaseChangesFetched") { () throws(SyncError) in
                let deletions = try message.deletions.enumerated().map { (index, deletion) throws(SyncError) in
                    guard deletion.hasZoneID else {
                        throw missing("DatabaseChangesFetched.deletions[\(index)].zone_id")
                    }
                    let reason = try within("DatabaseChangesFetched.deletions[\(index)].reason") {
                        () throws(SyncError) in
                        try ZoneDeletionReason(proto: deletion.reason)
                    }
                    return DatabaseChange.Deletion(zoneID: RecordZone.ID(proto: deletion.zoneID), reason: reason)
                }
                let token = try within("DatabaseChangesFetched.change_token") { () throws(SyncError) in
                    try DatabaseChangeToken(data: message.changeToken)
                }
                return .databaseChangesFetched(
                    modifications: message.modifications.map { RecordZone.ID(proto: $0) }, deletions: deletions,
                    changeToken: token, moreComing: message.moreComing)
            }
        case Kind.zoneChangesFetched:
            let message = try ProtoWire.decode(
                Logsync_Device_ZoneChangesFetched.self, payloadOf: entry, "zoneChangesFetched")
            return try ProtoWire.converting(entry, "zoneChangesFetched") { () throws(SyncError) in
                guard message.hasZoneID else { throw missing("ZoneChangesFetched.zone_id") }
                let deletions = try message.deletions.enumerated().map { (index, deletion) throws(SyncError) in
                    guard deletion.hasRecordID else {
                        throw missing("ZoneChangesFetched.deletions[\(index)].record_id")
                    }
                    let id = try within("ZoneChangesFetched.deletions[\(index)].record_id") { () throws(SyncError) in
                        try Record.ID(proto: deletion.recordID)
                    }
                    return RecordZoneChange.Deletion(recordID: id, recordType: deletion.recordType)
                }
                let token = try within("ZoneChangesFetched.change_token") { () throws(SyncError) in
                    try ZoneChangeToken(data: message.changeToken)
                }
                return .zoneChangesFetched(
                    zoneID: RecordZone.ID(proto: message.zoneID),
                    modifications: try records(message.modifications, "ZoneChangesFetched.modifications"),
                    deletions: deletions, changeToken: token, moreComing: message.moreComing)
            }
        case Kind.zoneFetchFinished:
            let message = try ProtoWire.decode(
                Logsync_Device_ZoneFetchFinished.self, payloadOf: entry, "zoneFetchFinished")
            return try ProtoWire.converting(entry, "zoneFetchFinished") { () throws(SyncError) in
                guard message.hasZoneID else { throw missing("ZoneFetchFinished.zone_id") }
                let error =
                    message.hasError
                    ? try within("ZoneFetchFinished.error") { () throws(SyncError) in
                        try SyncError(proto: message.error)
                    } : nil
                return .zoneFetchFinished(zoneID: RecordZone.ID(proto: message.zoneID), error: error)
            }
        case Kind.fetchFinished:
            let message = try ProtoWire.decode(Logsync_Device_FetchFinished.self, payloadOf: entry, "fetchFinished")
            return try ProtoWire.converting(entry, "fetchFinished") { () throws(SyncError) in
                .fetchFinished(
                    error: message.hasError
                        ? try within("FetchFinished.error") { () throws(SyncError) in
                            try SyncError(proto: message.error)
                        } : nil)
            }
        case Kind.changeTokenReset:
            let message = try ProtoWire.decode(
                Logsync_Device_ChangeTokenReset.self, payloadOf: entry, "changeTokenReset")
            return .changeTokenReset(zoneID: message.hasZoneID ? RecordZone.ID(proto: message.zoneID) : nil)
        case Kind.eventsDelivered:
            let message = try ProtoWire.decode(Logsync_Device_EventsDelivered.self, payloadOf: entry, "eventsDelivered")
            guard message.through >= 1 else {
                throw LogStoreError(
                    .corruptEntry, "eventsDelivered (kind \(entry.kind)) payload: EventsDelivered.through is 0",
                    offset: entry.offset)
            }
            return .eventsDelivered(through: LogOffset(message.through))
        case Kind.accountChanged:
            let message = try ProtoWire.decode(Logsync_Device_AccountChanged.self, payloadOf: entry, "accountChanged")
            return try ProtoWire.converting(entry, "accountChanged") { () throws(SyncError) in
                .accountChanged(
                    previous: message.hasPreviousUser
                        ? try within("AccountChanged.previous_user") { () throws(SyncError) in
                            try Record.ID(proto: message.previousUser)
                        } : nil,
                    current: message.hasCurrentUser
                        ? try within("AccountChanged.current_user") { () throws(SyncError) in
                            try Record.ID(proto: message.currentUser)
                        } : nil)
            }
        case Kind.subscriptionEnsured:
            let message = try ProtoWire.decode(
                Logsync_Device_SubscriptionEnsured.self, payloadOf: entry, "subscriptionEnsured")
            guard !message.subscriptionID.isEmpty else {
                throw LogStoreError(
                    .corruptEntry,
                    "subscriptionEnsured (kind \(entry.kind)) payload: SubscriptionEnsured.subscription_id is missing",
                    offset: entry.offset)
            }
            return .subscriptionEnsured(Subscription.ID(message.subscriptionID))
        case Kind.pushReceived:
            let message = try ProtoWire.decode(Logsync_Device_PushReceived.self, payloadOf: entry, "pushReceived")
            return .pushReceived(zoneID: message.hasZoneID ? RecordZone.ID(proto: message.zoneID) : nil)
        case Kind.syncScheduled:
            let message = try ProtoWire.decode(Logsync_Device_SyncScheduled.self, payloadOf: entry, "syncScheduled")
            return try ProtoWire.converting(entry, "syncScheduled") { () throws(SyncError) in
                let work: SyncSchedule.Work
                switch message.work {
                case .send: work = .send
                case .fetch: work = .fetch
                case .unspecified: throw missing("SyncScheduled.work")
                case .UNRECOGNIZED(let value):
                    throw SyncError(.invalidArguments, "SyncScheduled.work has unknown value \(value)")
                }
                guard message.afterMicroseconds >= 0 else {
                    throw SyncError(.invalidArguments, "SyncScheduled.after_microseconds is negative")
                }
                let after = Duration.microseconds(message.afterMicroseconds)
                let cause: SyncSchedule.Cause
                switch message.cause {
                case .localChanges: cause = .localChanges
                case .pushHint: cause = .pushHint
                case .catchUp: cause = .catchUp
                case .retry:
                    cause = .retry(
                        failures: Int(message.failures), after: after, serverRetryAfter: message.serverRetryAfter)
                case .unspecified: throw missing("SyncScheduled.cause")
                case .UNRECOGNIZED(let value):
                    throw SyncError(.invalidArguments, "SyncScheduled.cause has unknown value \(value)")
                }
                return .syncScheduled(work: work, reason: cause, after: after)
            }
        case Kind.syncDeferred:
            let message = try ProtoWire.decode(Logsync_Device_SyncDeferred.self, payloadOf: entry, "syncDeferred")
            return .syncDeferred(reason: message.reason)
        default:
            preconditionFailure("kind \(entry.kind) is decoded by DeviceEntry.init")
        }
    }
}

extension SyncEngine.SyncReason {
    var proto: Logsync_Device_SyncReason {
        switch self {
        case .scheduled: .scheduled
        case .manual: .manual
        }
    }

    init(proto: Logsync_Device_SyncReason, _ field: String) throws(SyncError) {
        switch proto {
        case .scheduled: self = .scheduled
        case .manual: self = .manual
        case .unspecified: throw DeviceEntry.missing(field)
        case .UNRECOGNIZED(let value): throw SyncError(.invalidArguments, "\(field) has unknown value \(value)")
        }
    }
}

extension SyncEngine.SendChangesOptions.Scope {
    var proto: Logsync_Device_SendScope {
        var message = Logsync_Device_SendScope()
        switch self {
        case .all: message.scope = .all(true)
        case .allExcluding(let ids): message.scope = .allExcluding(.with { $0.zoneIds = ids.map(\.proto) })
        case .zoneIDs(let ids): message.scope = .zoneIds(.with { $0.zoneIds = ids.map(\.proto) })
        case .recordIDs(let ids): message.scope = .recordIds(.with { $0.recordIds = ids.map(\.proto) })
        }
        return message
    }

    init(proto: Logsync_Device_SendScope) throws(SyncError) {
        switch proto.scope {
        case .all?: self = .all
        case .allExcluding(let ids)?: self = .allExcluding(ids.zoneIds.map { RecordZone.ID(proto: $0) })
        case .zoneIds(let ids)?: self = .zoneIDs(ids.zoneIds.map { RecordZone.ID(proto: $0) })
        case .recordIds(let ids)?:
            self = .recordIDs(try DeviceEntry.recordIDs(ids.recordIds, "SendScope.record_ids"))
        case nil: throw SyncError(.invalidArguments, "SendScope has no scope set")
        }
    }
}

extension SyncEngine.FetchChangesOptions.Scope {
    var proto: Logsync_Device_FetchScope {
        var message = Logsync_Device_FetchScope()
        switch self {
        case .all: message.scope = .all(true)
        case .allExcluding(let ids): message.scope = .allExcluding(.with { $0.zoneIds = ids.map(\.proto) })
        case .zoneIDs(let ids): message.scope = .zoneIds(.with { $0.zoneIds = ids.map(\.proto) })
        }
        return message
    }

    init(proto: Logsync_Device_FetchScope) throws(SyncError) {
        switch proto.scope {
        case .all?: self = .all
        case .allExcluding(let ids)?: self = .allExcluding(ids.zoneIds.map { RecordZone.ID(proto: $0) })
        case .zoneIds(let ids)?: self = .zoneIDs(ids.zoneIds.map { RecordZone.ID(proto: $0) })
        case nil: throw SyncError(.invalidArguments, "FetchScope has no scope set")
        }
    }
}

extension Duration {
    /// The duration in whole microseconds (rounded toward zero), as device log entries store it.
    var wholeMicroseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}

extension SyncEngine.FetchChangesOptions.ZoneConfiguration {
    /// The configuration as `fetchStarted` records it.
    var proto: Logsync_Device_FetchZoneConfiguration {
        var message = Logsync_Device_FetchZoneConfiguration()
        message.skipAssetContents = !shouldFetchAssetContents
        if let resultsLimit { message.resultsLimit = Int64(resultsLimit) }
        return message
    }

    /// The configuration `fetchStarted` recorded.
    init(proto: Logsync_Device_FetchZoneConfiguration) {
        self.init(
            shouldFetchAssetContents: !proto.skipAssetContents,
            resultsLimit: proto.hasResultsLimit ? Int(clamping: proto.resultsLimit) : nil)
    }
}
