import Foundation
import LogStore
import SyncModel

extension ServerDatabase {
    /// Checks a token against this database: issued by it and not from the future (F142), not
    /// older than the tombstone horizon (F144).
    func checkToken(offset: UInt64, database: UInt64, kind: String, _ snapshot: Snapshot) throws {
        guard database == databaseID else {
            throw SyncError(
                .invalidArguments, "the \(kind) token was issued by another database, not \(user)'s \(scope) database")
        }
        let last = try snapshot.lastOffset
        guard offset <= last else {
            throw SyncError(
                .invalidArguments, "the \(kind) token is at offset \(offset), past the end of \(user)'s \(scope) database (\(last)); it is not from this database")
        }
        let horizon = try snapshot.state(IndexKey.horizon)
        guard offset >= horizon else {
            throw SyncError(
                .changeTokenExpired,
                "the \(kind) token is at offset \(offset), older than the oldest change kept (\(horizon)); fetch again without a token")
        }
    }

    /// One page of the database's change feed: zones changed or deleted since the token (F140).
    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) throws -> FetchDatabaseChangesResponse {
        try request.validate()
        return try read { snapshot in
            let since = request.since?.offset ?? 0
            if let token = request.since { try checkToken(offset: since, database: token.database, kind: "database", snapshot) }
            let limit = min(request.resultsLimit ?? Int.max, server.configuration.maxChangesPerPage)
            var response = FetchDatabaseChangesResponse(
                modifications: [], deletions: [], changeToken: DatabaseChangeToken(offset: try snapshot.lastOffset, database: databaseID), moreComing: false)
            var count = 0
            var lastReturned: UInt64 = 0
            try snapshot.reader.transaction.forEach(in: snapshot.table("dbChanges"), from: bigEndian(since + 1)) { key, value in
                if count == limit {
                    response.moreComing = true
                    return false
                }
                let offset = readBigEndian(key)
                let zoneID = IndexKey.zoneID(from: Array(value))
                guard let state = try snapshot.zone(zoneID) else { return true }
                if state.isLive {
                    // Deleted and re-created since the token: the old incarnation's deletion first (F149).
                    if state.deletedAt > since {
                        response.deletions.append(DatabaseChange.Deletion(zoneID: zoneID, reason: state.deletionReason))
                    }
                    response.modifications.append(DatabaseChange.Modification(zoneID: zoneID))
                } else {
                    response.deletions.append(DatabaseChange.Deletion(zoneID: zoneID, reason: state.deletionReason))
                }
                count += 1
                lastReturned = offset
                return true
            }
            if response.moreComing { response.changeToken = DatabaseChangeToken(offset: lastReturned, database: databaseID) }
            return response
        }
    }

    /// One page of a zone's change feed: current records changed since the token, deletions
    /// with their types, coalesced per record (F139, F141, F143). Without a token, only the live
    /// records: a client starting over has nothing to delete (F100).
    func fetchZoneChanges(_ request: FetchZoneChangesRequest, for device: DeviceID?) throws -> FetchZoneChangesResponse {
        try request.validate()
        return try read { snapshot in
            let zoneID = request.zoneID
            guard let zone = try snapshot.zone(zoneID), zone.isLive else {
                throw try zoneError(zoneID, snapshot)
            }
            let since = request.since?.offset ?? 0
            if let token = request.since {
                guard token.incarnation == zone.incarnation else {
                    throw SyncError(
                        .changeTokenExpired,
                        "the zone token is from an earlier incarnation of \(zoneID), which was deleted; fetch the zone again without a token",
                        item: .zone(zoneID))
                }
                try checkToken(offset: since, database: token.database, kind: "zone", snapshot)
            }
            let limit = min(request.resultsLimit ?? Int.max, server.configuration.maxChangesPerPage)
            let byteBudget = server.configuration.maxBytesPerPage
            let end = try snapshot.lastOffset
            var response = FetchZoneChangesResponse(
                zoneID: zoneID, modifications: [], deletions: [],
                changeToken: ZoneChangeToken(zoneID: zoneID, incarnation: zone.incarnation, offset: end, database: databaseID),
                moreComing: false,
                clientChangeToken: try snapshot.reader.transaction.value(
                    forKey: IndexKey.clientToken(incarnation: zone.incarnation, device: device), in: snapshot.table("clientTokens")
                ).map { Data($0) })
            var count = 0
            var bytes = 0
            var lastReturned: UInt64 = 0
            let prefix = bigEndian(zone.incarnation)
            try snapshot.reader.transaction.forEach(
                in: snapshot.table("zoneChanges"), from: IndexKey.zoneChange(incarnation: zone.incarnation, offset: since + 1)
            ) { key, value in
                guard key.starts(with: prefix) else { return false }
                if count == limit || (count > 0 && bytes >= byteBudget) {
                    response.moreComing = true
                    return false
                }
                let offset = readBigEndian(key, at: 8)
                let recordID = Record.ID(recordName: String(decoding: value[1...], as: UTF8.self), zoneID: zoneID)
                // Without a token the client holds nothing of the zone: deletions would be
                // phantoms (F100), so only live records are returned.
                if value.first == 1, request.since == nil { return true }
                if value.first == 1 {
                    guard let state = try snapshot.record(recordID, incarnation: zone.incarnation) else {
                        throw LogStoreError(.projectionInconsistent, "a deletion of \(recordID) at offset \(offset) without its record state")
                    }
                    response.deletions.append(RecordZoneChange.Deletion(recordID: recordID, recordType: state.recordType))
                } else {
                    let record = try snapshot.savedRecord(at: offset)
                    bytes += record.estimatedSize
                    response.modifications.append(RecordZoneChange.Modification(record: Self.only(request.desiredKeys, of: record)))
                }
                count += 1
                lastReturned = offset
                return true
            }
            if response.moreComing {
                response.changeToken = ZoneChangeToken(
                    zoneID: zoneID, incarnation: zone.incarnation, offset: lastReturned, database: databaseID)
            }
            return response
        }
    }

    /// The record with only `desiredKeys` (all keys when `nil`; system fields only when empty).
    static func only(_ desiredKeys: [String]?, of record: Record) -> Record {
        guard let desiredKeys else { return record }
        var filtered = Record(recordType: record.recordType, recordID: record.recordID)
        for key in desiredKeys { if let value = record[key] { filtered[key] = value } }
        filtered.parent = record.parent
        filtered.applySystemFields(record.systemFields)
        return filtered
    }
}
