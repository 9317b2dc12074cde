import SyncModel

extension DeviceEntry {
    /// The entry as a support bundle holds it: the same case, with every field value, record,
    /// zone and owner name and error message passed through `redactor` (Docs/Privacy.md).
    /// Offsets, kinds, times, change tags, tokens' positions and flags are kept, so `logtool`
    /// reads the bundle as it reads the device's log.
    package func redacted(with redactor: Redactor) -> DeviceEntry {
        let r = redactor
        switch self {
        case .pendingRecordZoneChangesAdded(let changes):
            return .pendingRecordZoneChangesAdded(changes.map { $0.redacted(r) })
        case .pendingRecordZoneChangesRemoved(let changes):
            return .pendingRecordZoneChangesRemoved(changes.map { $0.redacted(r) })
        case .pendingDatabaseChangesAdded(let changes):
            return .pendingDatabaseChangesAdded(changes.map { $0.redacted(r) })
        case .pendingDatabaseChangesRemoved(let changes):
            return .pendingDatabaseChangesRemoved(changes.map { $0.redacted(r) })
        case .untrackedChangesFlagged: return self
        case .batchPrepared(let saves, let deletes, let atomic, let requestID):
            return .batchPrepared(
                recordsToSave: saves.map(r.record), recordIDsToDelete: deletes.map(r.recordID), atomicByZone: atomic,
                requestID: requestID)
        case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
            return .batchResult(
                saved: saved.map(r.record), deleted: deleted.map(r.recordID),
                failedSaves: Self.redacted(failedSaves, key: r.recordID, r),
                failedDeletes: Self.redacted(failedDeletes, key: r.recordID, r))
        case .databaseChangesSent(let savedZones, let deletedZoneIDs, let failedSaves, let failedDeletes):
            return .databaseChangesSent(
                savedZones: savedZones.map(r.zone), deletedZoneIDs: deletedZoneIDs.map(r.zoneID),
                failedZoneSaves: Self.redacted(failedSaves, key: r.zoneID, r),
                failedZoneDeletes: Self.redacted(failedDeletes, key: r.zoneID, r))
        case .sendStarted(let context):
            return .sendStarted(
                SyncEngine.SendChangesContext(reason: context.reason, options: context.options.redacted(r)))
        case .sendFinished(let error): return .sendFinished(error: error.map(r.error))
        case .fetchStarted(let context):
            return .fetchStarted(
                SyncEngine.FetchChangesContext(reason: context.reason, options: context.options.redacted(r)))
        case .databaseChangesFetched(let modifications, let deletions, let token, let moreComing):
            return .databaseChangesFetched(
                modifications: modifications.map(r.zoneID),
                deletions: deletions.map { DatabaseChange.Deletion(zoneID: r.zoneID($0.zoneID), reason: $0.reason) },
                changeToken: token, moreComing: moreComing)
        case .zoneChangesFetched(let zoneID, let modifications, let deletions, let token, let moreComing):
            return .zoneChangesFetched(
                zoneID: r.zoneID(zoneID), modifications: modifications.map(r.record),
                deletions: deletions.map {
                    RecordZoneChange.Deletion(recordID: r.recordID($0.recordID), recordType: $0.recordType)
                }, changeToken: r.zoneToken(token), moreComing: moreComing)
        case .zoneFetchFinished(let zoneID, let error):
            return .zoneFetchFinished(zoneID: r.zoneID(zoneID), error: error.map(r.error))
        case .fetchFinished(let error): return .fetchFinished(error: error.map(r.error))
        case .changeTokenReset(let zoneID): return .changeTokenReset(zoneID: zoneID.map(r.zoneID))
        case .eventsDelivered: return self
        case .accountChanged(let previous, let current):
            return .accountChanged(previous: previous.map(r.recordID), current: current.map(r.recordID))
        case .subscriptionEnsured: return self
        case .pushReceived(let zoneID): return .pushReceived(zoneID: zoneID.map(r.zoneID))
        case .syncScheduled: return self
        case .syncDeferred: return self
        }
    }

    private static func redacted<Key: Hashable>(
        _ failures: [Key: SyncError], key: (Key) -> Key, _ redactor: Redactor
    ) -> [Key: SyncError] {
        Dictionary(failures.map { (key($0.key), redactor.error($0.value)) }, uniquingKeysWith: { first, _ in first })
    }
}

extension SyncEngine.PendingRecordZoneChange {
    fileprivate func redacted(_ redactor: Redactor) -> Self {
        switch self {
        case .saveRecord(let id): .saveRecord(redactor.recordID(id))
        case .deleteRecord(let id): .deleteRecord(redactor.recordID(id))
        }
    }
}

extension SyncEngine.PendingDatabaseChange {
    fileprivate func redacted(_ redactor: Redactor) -> Self {
        switch self {
        case .saveZone(let zone): .saveZone(redactor.zone(zone))
        case .deleteZone(let id): .deleteZone(redactor.zoneID(id))
        }
    }
}

extension SyncEngine.SendChangesOptions {
    fileprivate func redacted(_ redactor: Redactor) -> Self {
        var options = self
        options.operationGroup = operationGroup.map(redactor.operationGroup)
        switch scope {
        case .all: break
        case .zoneIDs(let ids): options.scope = .zoneIDs(ids.map(redactor.zoneID))
        case .allExcluding(let ids): options.scope = .allExcluding(ids.map(redactor.zoneID))
        case .recordIDs(let ids): options.scope = .recordIDs(ids.map(redactor.recordID))
        }
        return options
    }
}

extension SyncEngine.FetchChangesOptions {
    fileprivate func redacted(_ redactor: Redactor) -> Self {
        var options = self
        options.operationGroup = operationGroup.map(redactor.operationGroup)
        options.prioritizedZoneIDs = prioritizedZoneIDs.map(redactor.zoneID)
        options.zoneConfigurations = Dictionary(
            zoneConfigurations.map { (redactor.zoneID($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
        switch scope {
        case .all: break
        case .zoneIDs(let ids): options.scope = .zoneIDs(ids.map(redactor.zoneID))
        case .allExcluding(let ids): options.scope = .allExcluding(ids.map(redactor.zoneID))
        }
        return options
    }
}
