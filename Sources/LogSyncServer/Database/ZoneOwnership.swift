import SyncModel

/// The owner rule of a private database (F127, F138): every zone in it belongs to its user.
///
/// A request names the user's own zones with the owner `__defaultOwner__`
/// (`RecordZone.ID.defaultOwnerName`) or with the user's record name (`_user<N>`, what
/// `currentUserRecordID()` returns): both spellings name the same zone, which the server keeps
/// under `__defaultOwner__`, and its answers to the request use the request's spelling. Any
/// other owner name is another user's, and a private database never holds another user's zone:
///
/// - a write naming one (a zone save or deletion, a record save or deletion, a zone
///   subscription) fails for that item with `invalidArguments` naming the zone and its owner;
///   other items of the request are decided as usual, and a request whose items all fail this
///   way writes nothing;
/// - a read naming one (`fetchZones` by ID, `fetchZoneChanges`) gets `zoneNotFound`, the answer
///   for any zone the database does not hold.
///
/// Neither answer depends on the other user's data, so neither tells whether that user has such
/// a zone. CloudKit refuses these requests too, with the server message "PrivateDB can't be
/// used to access another user's zone"; its documentation gives no code for it, so the server
/// uses the code of a malformed request for writes and the code of a missing zone for reads
/// (Docs/Protocol.md, "Zone owners").
///
/// The shared database needs no such rule: it holds only zones shared with its user, none yet,
/// so every zone a request names there is missing (`zoneNotFound`), and zones cannot be created
/// or deleted there (`badDatabase`, F120, F147).
struct ZoneOwnership {
    /// The database's user.
    let user: UserID
    /// The record ID that stands for the user (`_user<N>`).
    let userRecordID: Record.ID
    /// The database's scope: the rule is the private database's.
    let scope: DatabaseScope

    /// The zone as this database keeps it: in a private database, the user's record name as
    /// owner becomes `__defaultOwner__`; `nil` for another user's zone. Other databases keep
    /// every ID as it is.
    func ownZoneID(_ zoneID: RecordZone.ID) -> RecordZone.ID? {
        guard scope == .private, zoneID.ownerName != RecordZone.ID.defaultOwnerName else { return zoneID }
        guard zoneID.ownerName == userRecordID.recordName else { return nil }
        return RecordZone.ID(zoneName: zoneID.zoneName)
    }

    /// The per-item error of a write naming another user's zone in this private database.
    func foreignZoneWriteError(
        _ zoneID: RecordZone.ID, item: SyncError.ItemID, requestID: RequestID? = nil
    ) -> SyncError {
        SyncError(
            .invalidArguments,
            "\(zoneID) belongs to another user: \(user)'s private database holds only \(user)'s zones, whose owner is \(quoted(RecordZone.ID.defaultOwnerName)) or \(quoted(userRecordID.recordName)); another user's zones are reached through the shared database",
            item: item, requestID: requestID)
    }

    /// The error of a read naming another user's zone in this private database: the zone is not
    /// there, as for any missing zone.
    func foreignZoneReadError(_ zoneID: RecordZone.ID, item: SyncError.ItemID? = nil) -> SyncError {
        SyncError(
            .zoneNotFound, "\(zoneID) is not in \(user)'s private database, which holds only zones owned by \(user)",
            item: item ?? .zone(zoneID))
    }

    /// The owner's spelling of one of this database's zones, as participants name it (F120).
    func ownerSpelling(_ kept: RecordZone.ID) -> RecordZone.ID {
        RecordZone.ID(zoneName: kept.zoneName, ownerName: userRecordID.recordName)
    }
}

/// The spellings a request used for the zones of a private database, so that its answer uses
/// them again: the kept ID of each item, mapped to the request's ID when they differ.
struct RequestSpelling<ID: Hashable> {
    private var requested: [ID: ID] = [:]

    /// Records that the request spelt the item kept as `kept` as `asked`.
    mutating func note(kept: ID, asked: ID) {
        if kept != asked { requested[kept] = asked }
    }

    /// The request's spelling of the item kept as `kept`.
    func asked(_ kept: ID) -> ID { requested[kept] ?? kept }

    var isEmpty: Bool { requested.isEmpty }
}

extension SyncError {
    /// The error with its item and records respelt for the request (`RequestSpelling`).
    func respelt(records: RequestSpelling<Record.ID>, zones: RequestSpelling<RecordZone.ID>) -> SyncError {
        var error = self
        switch item {
        case .record(let id)?: error.item = .record(records.asked(id))
        case .zone(let id)?: error.item = .zone(zones.asked(id))
        default: break
        }
        error.serverRecord = serverRecord.map { $0.respelt(records) }
        error.clientRecord = clientRecord.map { $0.respelt(records) }
        error.ancestorRecord = ancestorRecord.map { $0.respelt(records) }
        return error
    }
}

extension Record {
    /// The record in the request's spelling of its zone.
    func respelt(_ spelling: RequestSpelling<Record.ID>) -> Record {
        let asked = spelling.asked(recordID)
        return asked.zoneID == recordID.zoneID ? self : renamingZone(recordID.zoneID, to: asked.zoneID)
    }
}
