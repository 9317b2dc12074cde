import Foundation
import LogStore
import SyncModel

/// A database's change feeds (F139–F144): the database feed (zones changed or deleted since a
/// token) and each zone's feed (records changed or deleted since a token, coalesced), in pages,
/// with tokens that name the database and the incarnation they were issued by.
///
/// A participant's shared database answers from the owners' zone feeds (`SharedDatabase`), after
/// bringing itself up to date with the owners' logs (`SharePropagation`).
struct ChangeFeed {
    /// The database whose feeds these are.
    let database: ServerDatabase
    /// How much one page returns.
    let limits: ServerLimits
    /// For a participant's shared database: the owners' logs taken in before a feed is read.
    let propagation: SharePropagation

    init(_ database: ServerDatabase) {
        self.database = database
        limits = database.context.limits
        propagation = SharePropagation(context: database.context)
    }

    private var user: UserID { database.user }
    private var scope: DatabaseScope { database.scope }
    private var databaseID: UInt64 { database.databaseID }

    /// Checks a token against this database: issued by it and not from the future (F142), not
    /// older than the tombstone horizon (F144). A page token of a zone listing (`listingStart`
    /// non-zero) needs only the tombstones after the listing's start, so it expires only when
    /// both its offset and its listing start are older than the horizon.
    func checkToken(
        offset: UInt64, listingStart: UInt64 = 0, database: UInt64, kind: String, _ snapshot: DatabaseSnapshot
    ) throws {
        guard database == databaseID else {
            throw SyncError(
                .invalidArguments, "the \(kind) token was issued by another database, not \(user)'s \(scope) database")
        }
        let last = try snapshot.lastOffset
        guard offset <= last else {
            throw SyncError(
                .invalidArguments,
                "the \(kind) token is at offset \(offset), past the end of \(user)'s \(scope) database (\(last)); it is not from this database"
            )
        }
        guard listingStart <= last else {
            throw SyncError(
                .invalidArguments,
                "the \(kind) token continues a listing begun at offset \(listingStart), past the end of \(user)'s \(scope) database (\(last)); it is not from this database"
            )
        }
        let horizon = try snapshot.state(IndexKey.horizon)
        if listingStart > offset {
            guard listingStart >= horizon else {
                throw SyncError(
                    .changeTokenExpired,
                    "the \(kind) token continues a listing begun at offset \(listingStart), older than the oldest change kept (\(horizon)); fetch again without a token"
                )
            }
            return
        }
        guard offset >= horizon else {
            throw SyncError(
                .changeTokenExpired,
                "the \(kind) token is at offset \(offset), older than the oldest change kept (\(horizon)); fetch again without a token"
            )
        }
    }

    /// One page of the database's change feed: zones changed or deleted since the token (F140).
    func databaseChanges(_ request: FetchDatabaseChangesRequest) throws -> FetchDatabaseChangesResponse {
        try request.validate()
        // A participant's feed first takes in what the owners' logs hold (Docs/Protocol.md, "Sharing").
        if scope == .shared { try propagation.propagateShares(to: user) }
        // Any snapshot from the token on answers, so a storage may read a replica (F142).
        let since = request.since?.offset.rawValue ?? 0
        return try database.read(notOlderThan: since) { snapshot in
            if let token = request.since {
                try checkToken(offset: since, database: token.database, kind: "database", snapshot)
            }
            let limit = min(request.resultsLimit ?? Int.max, limits.maxChangesPerPage)
            var response = FetchDatabaseChangesResponse(
                modifications: [], deletions: [],
                changeToken: DatabaseChangeToken(offset: ChangeOffset(try snapshot.lastOffset), database: databaseID),
                moreComing: false)
            var count = 0
            var lastReturned: UInt64 = 0
            try snapshot.index.forEach(in: "dbChanges", from: bigEndian(since + 1)) { key, value in
                if count == limit {
                    response.moreComing = true
                    return false
                }
                let offset = readBigEndian(key)
                let zoneID = IndexKey.zoneID(from: Array(value))
                guard let state = try snapshot.zone(zoneID) else { return true }
                // The zone's deletion (its latest, or the marker kept when it was re-created), or
                // its latest change. A zone deleted and re-created since the token has both, the
                // deletion first (F149), each found by offset, so paging cannot skip either.
                if offset == state.deletedAt || !state.isLive {
                    response.deletions.append(DatabaseChange.Deletion(zoneID: zoneID, reason: state.deletionReason))
                } else {
                    response.modifications.append(DatabaseChange.Modification(zoneID: zoneID))
                }
                count += 1
                lastReturned = offset
                return true
            }
            if response.moreComing {
                response.changeToken = DatabaseChangeToken(offset: ChangeOffset(lastReturned), database: databaseID)
            }
            return response
        }
    }

    /// One page of a zone's change feed: current records changed since the token, deletions
    /// with their types, coalesced per record (F139, F141, F143).
    ///
    /// Without a token, a *listing*: the live records only, since a client starting over has
    /// nothing to delete (F100). Its page tokens carry where the listing began (the end of the
    /// log at its first page, `listingStart`), so its later pages also leave out the deletions up
    /// to there, and a compaction up to there does not expire them (F144). Deletions after it are
    /// reported: they may be of records an earlier page returned.
    ///
    /// `viewer` is a share participant reading this (the owner's) zone: the zone must be shared
    /// with them, and they see only the records the shares cover (F119, F123).
    func zoneChanges(
        _ request: FetchZoneChangesRequest, for device: DeviceID?, viewer: ShareActor? = nil
    ) throws -> FetchZoneChangesResponse {
        if scope == .shared { return try SharedDatabase(database).fetchZoneChanges(request, for: device) }
        try request.validate()
        // Another user's zone is never in a private database; the user's own zone, named with
        // the user's record name as owner, is answered in that spelling (F127, F138).
        guard let kept = database.ownership.ownZoneID(request.zoneID) else {
            throw database.ownership.foreignZoneReadError(request.zoneID)
        }
        guard kept != request.zoneID else { return try ownZoneChanges(request, for: device, viewer: viewer) }
        var owned = request
        owned.zoneID = kept
        owned.since = request.since.map {
            ZoneChangeToken(
                zoneID: kept, incarnation: $0.incarnation, offset: $0.offset, database: $0.database,
                listingStart: $0.listingStart)
        }
        let asked = request.zoneID
        var spelling = RequestSpelling<RecordZone.ID>()
        spelling.note(kept: kept, asked: asked)
        let response: FetchZoneChangesResponse
        do {
            response = try ownZoneChanges(owned, for: device, viewer: viewer)
        } catch let error as SyncError {
            throw error.respelt(records: .init(), zones: spelling)
        }
        var respelt = response
        respelt.zoneID = asked
        respelt.changeToken = ZoneChangeToken(
            zoneID: asked, incarnation: response.changeToken.incarnation, offset: response.changeToken.offset,
            database: response.changeToken.database, listingStart: response.changeToken.listingStart)
        respelt.modifications = response.modifications.map {
            RecordZoneChange.Modification(record: $0.record.renamingZone(kept, to: asked))
        }
        respelt.deletions = response.deletions.map {
            RecordZoneChange.Deletion(
                recordID: Record.ID(recordName: $0.recordID.recordName, zoneID: asked), recordType: $0.recordType)
        }
        return respelt
    }

    /// `fetchZoneChanges`, with the page's records left as the log stores them where they are
    /// returned exactly as stored: the owner's own zone, named as it is kept, all keys. Then
    /// `storedRecords` holds each record's `Record.serializedProto()` bytes, in order, in place of
    /// `response.modifications` (empty), for a wire encoder to copy instead of decoding the
    /// record and encoding it again. Otherwise (a participant's fetch, a zone named in another
    /// spelling, `desiredKeys`) the records are decoded as `fetchZoneChanges` returns them.
    /// With `decodingToo`, a page whose records are left as stored also holds them decoded in
    /// `response.modifications`, each decoded from its bytes in `storedRecords` (a device that
    /// logs the page writes those bytes instead of encoding the records again).
    func zoneChangesPage(
        _ request: FetchZoneChangesRequest, for device: DeviceID?, decodingToo: Bool = false
    ) throws -> ZoneChangesPage {
        guard scope != .shared, request.desiredKeys == nil,
            database.ownership.ownZoneID(request.zoneID) == request.zoneID
        else {
            return ZoneChangesPage(response: try zoneChanges(request, for: device), storedRecords: nil)
        }
        try request.validate()
        var stored: [ArraySlice<UInt8>]? = []
        let response = try ownZoneChanges(
            request, for: device, viewer: nil, storedRecords: &stored, decodingToo: decodingToo)
        return ZoneChangesPage(response: response, storedRecords: stored)
    }

    /// `fetchZoneChanges` of a zone named by the ID this database keeps it under.
    private func ownZoneChanges(
        _ request: FetchZoneChangesRequest, for device: DeviceID?, viewer: ShareActor?
    ) throws -> FetchZoneChangesResponse {
        var unused: [ArraySlice<UInt8>]? = nil
        return try ownZoneChanges(request, for: device, viewer: viewer, storedRecords: &unused)
    }

    /// `fetchZoneChanges` of a zone named by the ID this database keeps it under; with
    /// `storedRecords` non-nil, the records' stored bytes are appended to it instead of the
    /// decoded records to the response's modifications (`fetchZoneChangesPage`), or, with
    /// `decodingToo`, besides them.
    private func ownZoneChanges(
        _ request: FetchZoneChangesRequest, for device: DeviceID?, viewer: ShareActor?,
        storedRecords: inout [ArraySlice<UInt8>]?, decodingToo: Bool = false
    ) throws -> FetchZoneChangesResponse {
        // Any snapshot that reaches the token (and the listing it continues) answers, so a
        // storage may read a replica (F142); the body may then run twice, so it starts afresh.
        let reaches = max(request.since?.offset.rawValue ?? 0, request.since?.listingStart.rawValue ?? 0)
        return try database.read(notOlderThan: reaches) { snapshot in
            if storedRecords != nil { storedRecords = [] }
            let zoneID = request.zoneID
            // A participant learns nothing of a zone not shared with them, not even that it exists.
            let access = try viewer.map { viewer in
                let access = try snapshot.access(of: viewer.recordName, to: zoneID)
                if access.isEmpty {
                    throw ShareRules.notShared(database.ownership.ownerSpelling(zoneID), with: viewer.user)
                }
                return access
            }
            guard let zone = try snapshot.zone(zoneID), zone.isLive else {
                throw try snapshot.zoneError(zoneID)
            }
            let since = request.since?.offset.rawValue ?? 0
            if let token = request.since {
                guard token.incarnation == zone.incarnation else {
                    throw SyncError(
                        .changeTokenExpired,
                        "the zone token is from an earlier incarnation of \(zoneID), which was deleted; fetch the zone again without a token",
                        item: .zone(zoneID))
                }
                try checkToken(
                    offset: since, listingStart: token.listingStart.rawValue, database: token.database, kind: "zone",
                    snapshot)
            }
            let limit = min(request.resultsLimit ?? Int.max, limits.maxChangesPerPage)
            let byteBudget = limits.maxBytesPerPage
            let end = try snapshot.lastOffset
            // Deletions up to here are left out: those before the start of a listing.
            let listingStart = request.since.map(\.listingStart.rawValue) ?? end
            var response = FetchZoneChangesResponse(
                zoneID: zoneID, modifications: [], deletions: [],
                changeToken: ZoneChangeToken(
                    zoneID: zoneID, incarnation: zone.incarnation, offset: ChangeOffset(end), database: databaseID),
                moreComing: false,
                clientChangeToken: try snapshot.index.value(
                    forKey: IndexKey.clientToken(
                        incarnation: zone.incarnation, device: viewer?.deviceKey(device) ?? device),
                    in: "clientTokens"
                ).map { Data($0) })
            var count = 0
            var bytes = 0
            var lastReturned: UInt64 = 0
            let prefix = bigEndian(zone.incarnation)
            // Rows are taken in runs, so that a store across a network reads each run's records
            // in one round trip; each row is then judged in order as it comes.
            // A row of `zoneChanges`: its offset, its flag (0 saved, 1 deleted, 2 moved in the
            // shared hierarchies, the record saved at its state's offset), and the record's name.
            typealias Row = (offset: UInt64, flag: UInt8, name: String)
            // Where a participant of hierarchy shares sees only their hierarchies (F123).
            let hierarchyAccess = access.flatMap { $0.zoneWide == nil ? $0 : nil }
            func judge(_ row: Row) throws -> Bool {
                let offset = row.offset
                // The rows of one change (a move of a subtree in the shared hierarchies) are
                // never split between pages: the next page starts after the token's offset.
                if count == limit || (count > 0 && bytes >= byteBudget), offset != lastReturned {
                    response.moreComing = true
                    return false
                }
                let recordID = Record.ID(recordName: row.name, zoneID: zoneID)
                var isDeletion = row.flag == 1
                var savedAt = offset
                var state: RecordState?
                if row.flag == 2 || isDeletion || hierarchyAccess != nil {
                    state = try snapshot.record(recordID, incarnation: zone.incarnation)
                }
                if row.flag == 2 {
                    guard let state, !state.isTombstone else {
                        throw LogStoreError(
                            .projectionInconsistent, "a move of \(recordID) at offset \(offset) without its record")
                    }
                    savedAt = state.offset
                }
                if let hierarchyAccess {
                    // A hierarchy share shows its records only (a deleted one by the place it
                    // had), and a record that left it as a deletion.
                    switch hierarchyAccess.visibility(ofRecord: row.name, state) {
                    case .hidden: return true
                    case .left: isDeletion = true
                    case .shown: break
                    }
                }
                // Whoever sees the whole zone gets a record moved in the hierarchies again, though
                // unchanged: its row left the offset of its save, so a page that ended between the
                // two never held it, and a token past the save does not say the client has it.
                // When a listing began the client held nothing of the zone: deletions up to then
                // would be phantoms (F100), so only live records are returned.
                if isDeletion, offset <= listingStart { return true }
                if isDeletion {
                    guard let state else {
                        throw LogStoreError(
                            .projectionInconsistent,
                            "a deletion of \(recordID) at offset \(offset) without its record state")
                    }
                    response.deletions.append(
                        RecordZoneChange.Deletion(recordID: recordID, recordType: state.recordType))
                } else {
                    // The budget counts the record's stored (encoded) size, the same either way.
                    let entry = try snapshot.savedEntry(at: savedAt)
                    bytes += entry.payload.count
                    if storedRecords != nil, decodingToo {
                        // The record decoded as below, and the bytes it was decoded from.
                        let record = try snapshot.savedRecord(in: entry)
                        response.modifications.append(RecordZoneChange.Modification(record: record))
                        storedRecords!.append(ServerEntry.storedRecordBytes(of: entry) ?? record.serializedProto()[...])
                    } else if storedRecords != nil {
                        // An entry not in the form RecordSaved writes is decoded and the record
                        // encoded again: the same bytes, the slow way.
                        storedRecords!.append(
                            try ServerEntry.storedRecordBytes(of: entry)
                                ?? snapshot.savedRecord(in: entry).serializedProto()[...])
                    } else {
                        let record = try snapshot.savedRecord(in: entry)
                        response.modifications.append(
                            RecordZoneChange.Modification(record: Self.only(request.desiredKeys, of: record)))
                    }
                }
                count += 1
                lastReturned = offset
                return true
            }
            var run: [Row] = []
            var stopped = false
            func judgeRun() throws {
                defer { run.removeAll(keepingCapacity: true) }
                if snapshot.index.readsAhead {
                    try snapshot.index.prefetch(entries: run.filter { $0.flag == 0 }.map { LogOffset($0.offset) })
                    try snapshot.index.prefetch(
                        keys: run.filter { $0.flag != 0 || hierarchyAccess != nil }.map {
                            IndexKey.record(incarnation: zone.incarnation, name: $0.name)
                        },
                        in: "records")
                }
                for row in run where !stopped {
                    if try !judge(row) { stopped = true }
                }
            }
            try snapshot.index.forEach(
                in: "zoneChanges", from: IndexKey.zoneChange(incarnation: zone.incarnation, offset: since + 1)
            ) { key, value in
                guard key.starts(with: prefix) else { return false }
                run.append(
                    (readBigEndian(key, at: 8), value.first ?? 0, String(decoding: value.dropFirst(), as: UTF8.self)))
                if run.count == 64 { try judgeRun() }
                return !stopped
            }
            if !stopped { try judgeRun() }
            if response.moreComing {
                // Past the listing's start, the page token is an ordinary one.
                response.changeToken = ZoneChangeToken(
                    zoneID: zoneID, incarnation: zone.incarnation, offset: ChangeOffset(lastReturned),
                    database: databaseID,
                    listingStart: listingStart > lastReturned ? ChangeOffset(listingStart) : .zero)
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

/// A page of a zone's changes whose records may be left as stored (`fetchZoneChangesPage`).
package struct ZoneChangesPage: Sendable {
    /// The page; its modifications are empty when `storedRecords` holds the records, unless
    /// they were asked for too (`decodingToo`).
    package var response: FetchZoneChangesResponse
    /// The page's records, each its `Record.serializedProto()` bytes as the log holds them,
    /// in the order `response.modifications` would have them; `nil` when they are decoded
    /// in `response.modifications`.
    package var storedRecords: [ArraySlice<UInt8>]?
}
