import SyncModel

extension ServerEntry {
    /// The entry as a server extract holds it (Docs/Privacy.md, "The server's extract"): the same
    /// case, with every record, zone and owner name, field value, error message, asset digest and
    /// client change token passed through `redactor`, as `DeviceEntry.redacted(with:)` passes
    /// the device's (the same model types through the same `Redactor` calls), so that with the
    /// device bundle's key a name or value hashes alike in both. Request IDs, change tags,
    /// offsets, kinds, device IDs, record types and field names are kept: what `logtool` links
    /// the device's lanes to the server's by.
    package func redacted(with redactor: Redactor) -> ServerEntry {
        let r = redactor
        switch self {
        case .zoneSaved(let zone): return .zoneSaved(r.zone(zone))
        case .zoneDeleted(let id, let reason): return .zoneDeleted(r.zoneID(id), reason: reason)
        case .recordSaved(let record): return .recordSaved(r.record(record))
        case .recordDeleted(let id, let recordType): return .recordDeleted(r.recordID(id), recordType: recordType)
        case .subscriptionSaved(let subscription): return .subscriptionSaved(r.subscription(subscription))
        case .subscriptionDeleted: return self
        case .requestCompleted(let requestID, let fingerprint, let response, let actor):
            return .requestCompleted(
                requestID, fingerprint: fingerprint, response: r.modifyRecordsResponse(response), actor: actor)
        case .requestOutcome(let requestID, let fingerprint, let outcome, let actor):
            return .requestOutcome(
                requestID, fingerprint: fingerprint,
                outcome: RequestOutcome(
                    saved: outcome.saved.map { RequestOutcome.Saved(r.recordID($0.recordID), at: $0.offset) },
                    others: r.modifyRecordsResponse(outcome.others), operationGroupID: outcome.operationGroupID),
                actor: actor)
        case .tombstonesCompacted: return self
        case .clientChangeTokenUpdated(let id, let device, let token):
            return .clientChangeTokenUpdated(r.zoneID(id), device: device, token: r.opaque(token))
        case .sharedZoneJoined(let id, let share, let ownerOffset):
            return .sharedZoneJoined(r.zoneID(id), share: r.recordID(share), ownerOffset: ownerOffset)
        case .sharedZoneChanged(let id, let ownerOffset):
            return .sharedZoneChanged(r.zoneID(id), ownerOffset: ownerOffset)
        case .sharedZoneLeft(let id, let reason): return .sharedZoneLeft(r.zoneID(id), reason: reason)
        case .assetStored(let digest, let size, let zone):
            return .assetStored(r.assetDigest(digest), size: size, zone: zone.map(r.zoneID))
        case .assetsDeleted(let digests): return .assetsDeleted(digests.map(r.assetDigest))
        case .operationGroupStarted(let group, let firstRequest, let device):
            return .operationGroupStarted(r.operationGroup(group), firstRequest: firstRequest, device: device)
        case .schemaDeployed: return self
        case .deviceKeyRegistered(let key): return .deviceKeyRegistered(r.devicePublicKey(key))
        case .zoneKeysSaved(let keys): return .zoneKeysSaved(keys.map(r.wrappedZoneKey))
        }
    }
}
