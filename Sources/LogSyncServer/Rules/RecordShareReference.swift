import SyncModel

/// `Record.share` as the server sets it when it saves a record (F123; `CKRecord.share`): the
/// share of the hierarchy the record is the root of, once the request is applied. The root of a
/// hierarchy share saved in the same request names that share; a root saved alone names the
/// share rooted at it, unless the request deletes that share; every other record (a descendant,
/// a record of a zone shared whole, a share) names none.
struct RecordShareReferences {
    /// Roots of the hierarchy shares the request saves, to their shares.
    private var newRoots: [Record.ID: Record.ID] = [:]
    /// The shares the request deletes.
    private var deletedShares = Set<Record.ID>()

    /// What the request saves and deletes, from the decided outcomes of its items (in request
    /// order: `saveOutcomes[i]` is that of `records[i]`).
    init(
        saving records: [Record], _ saveOutcomes: [RecordModification.Outcome], deleting recordIDs: [Record.ID],
        _ deleteOutcomes: [RecordModification.Outcome]
    ) {
        for index in records.indices where records[index].recordType == Share.recordType {
            if case .save(let saved, _, _) = saveOutcomes[index], let root = Share(validated: saved).rootRecordID {
                newRoots[root] = saved.recordID
            }
        }
        for (recordID, outcome) in zip(recordIDs, deleteOutcomes) {
            if case .delete(let recordType) = outcome, recordType == Share.recordType {
                deletedShares.insert(recordID)
            }
        }
    }

    /// The share `record` names once the request is applied; `zone` is the state of its zone.
    func share(of record: Record, in zone: ZoneState?, _ snapshot: DatabaseSnapshot) throws -> Record.Reference? {
        guard record.recordType != Share.recordType else { return nil }
        if !newRoots.isEmpty, let share = newRoots[record.recordID] {
            return Record.Reference(recordID: share, action: .none)
        }
        guard let zone, zone.isLive,
            let name = try snapshot.shareRooted(at: record.recordID.recordName, incarnation: zone.incarnation)
        else { return nil }
        let share = Record.ID(recordName: name, zoneID: record.recordID.zoneID)
        return deletedShares.contains(share) ? nil : Record.Reference(recordID: share, action: .none)
    }
}
