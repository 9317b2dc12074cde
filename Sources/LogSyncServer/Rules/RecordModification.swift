import Foundation
import LogStore
import SyncModel

/// The saves and deletions of records in one database, with CloudKit's rules: the change-tag
/// truth table (F145), save policies (F146), partial field updates (F132), server-set system
/// fields (F130, F158), atomic zones (F148), limits (F151), quota (F153), idempotent replays
/// (F160) and, in production mode, the deployed schema (F137).
///
/// Every item of a request is decided against the state before it (`Plan`, `Outcome`), and the
/// successful ones are appended in one write transaction. A participant's shared database hands
/// its requests to the owners' databases (`SharedDatabase`), where each item is first checked
/// against the shares (`ShareRules`).
struct RecordModification {
    /// The database written to.
    let database: ServerDatabase
    /// The rules of the database's shares, which a participant's items and an owner's share
    /// records follow.
    let shareRules: ShareRules
    /// The database user's quota.
    let limits: ServerLimits
    /// The production schema, if one is deployed.
    let deployedSchema: DeployedSchema
    /// The server's clock, read once per request.
    let clock: @Sendable () -> Date

    init(_ database: ServerDatabase) {
        self.database = database
        shareRules = database.shareRules
        limits = database.context.limits
        deployedSchema = database.context.schema
        clock = database.context.now
    }

    private var user: UserID { database.user }
    private var scope: DatabaseScope { database.scope }

    /// Saves and deletes the records of `request`.
    ///
    /// `actor` is a share participant writing to this (the owner's) database: each item is then
    /// first checked against the shares of its zone (`ShareRules.participantCheck`), and the
    /// participant is the records' last modifier (F121).
    func modify(
        _ request: ModifyRecordsRequest, from device: DeviceID?, actor: ShareActor? = nil
    ) throws -> ModifyRecordsResponse {
        try request.validate()  // 400 items, 2 MB, no item twice: limitExceeded for the whole request
        if scope == .public {
            throw SyncError(
                .badDatabase, "the public database is not supported by this server yet", requestID: request.requestID)
        }
        if scope == .shared { return try SharedDatabase(database).modifyRecords(request, from: device) }
        // A record in another user's zone fails alone (invalidArguments); the others are decided
        // under the zone IDs the database keeps, and answered in the request's spelling (F127,
        // F138). A request refused whole this way writes nothing, not even its request ID.
        var refused = ModifyRecordsResponse()
        var spelling = RequestSpelling<Record.ID>()
        var owned = request
        owned.recordsToSave = []
        owned.recordIDsToDelete = []
        for record in request.recordsToSave {
            let zoneID = record.recordID.zoneID
            guard let kept = database.ownership.ownZoneID(zoneID) else {
                // An owner name that breaks the rules is named as such, not as another user's.
                refused.saveResults[record.recordID] = .failure(
                    ServerDatabase.violation(record.recordID.validate).map { $0.with(requestID: request.requestID) }
                        ?? database.ownership.foreignZoneWriteError(
                            zoneID, item: .record(record.recordID), requestID: request.requestID))
                continue
            }
            let ownRecord = kept == zoneID ? record : record.renamingZone(zoneID, to: kept)
            spelling.note(kept: ownRecord.recordID, asked: record.recordID)
            owned.recordsToSave.append(ownRecord)
        }
        for recordID in request.recordIDsToDelete {
            guard let kept = database.ownership.ownZoneID(recordID.zoneID) else {
                refused.deleteResults[recordID] = .failure(
                    ServerDatabase.violation(recordID.validate).map { $0.with(requestID: request.requestID) }
                        ?? database.ownership.foreignZoneWriteError(
                            recordID.zoneID, item: .record(recordID), requestID: request.requestID))
                continue
            }
            let ownID = Record.ID(recordName: recordID.recordName, zoneID: kept)
            spelling.note(kept: ownID, asked: recordID)
            owned.recordIDsToDelete.append(ownID)
        }
        guard !owned.recordsToSave.isEmpty || !owned.recordIDsToDelete.isEmpty else { return refused }
        if !spelling.isEmpty { try owned.validate() }  // two spellings of one record name it twice
        var response = try modifyOwnRecords(owned, from: device, actor: actor)
        if !spelling.isEmpty {
            response.saveResults = Dictionary(
                uniqueKeysWithValues: response.saveResults.map { id, result in
                    (
                        spelling.asked(id),
                        result.map { $0.respelt(spelling) }.mapError { $0.respelt(records: spelling, zones: .init()) }
                    )
                })
            response.deleteResults = Dictionary(
                uniqueKeysWithValues: response.deleteResults.map { id, result in
                    (spelling.asked(id), result.mapError { $0.respelt(records: spelling, zones: .init()) })
                })
        }
        response.saveResults.merge(refused.saveResults) { own, _ in own }
        response.deleteResults.merge(refused.deleteResults) { own, _ in own }
        return response
    }

    /// `modifyRecords` for records of this database's own zones, named by the IDs it keeps them
    /// under.
    private func modifyOwnRecords(
        _ request: ModifyRecordsRequest, from device: DeviceID?, actor: ShareActor?
    ) throws -> ModifyRecordsResponse {
        // Only a request with an ID is ever compared with another (F160); the fingerprint encodes
        // every record, so a request without an ID skips it.
        // Its bytes of each record's type, ID and fields are those of the record's recordSaved
        // entry when the record is saved as sent.
        var written = WrittenRecords()
        let fingerprint = request.requestID == nil ? 0 : Self.fingerprint(of: request, writing: &written)
        let quota = limits.quota(of: user)
        let schema = deployedSchema.schema
        let now = clock()
        var changedZones = Set<RecordZone.ID>()
        // Users named by the shares this request saves, deletes or leaves, before and after.
        var affected = Set<UInt64>()
        var actorLeft = false
        let modifier = actor?.recordID ?? database.userRecordID
        let (response, offsets) = try database.writeEncoded {
            snapshot, next -> (entries: [NewEntry], result: ModifyRecordsResponse) in
            // A replayed request gets its first outcome and changes nothing (F160).
            if let requestID = request.requestID,
                let stored = try snapshot.index.value(
                    forKey: IndexKey.request(requestID, actor: actor?.number ?? 0), in: "requests")
            {
                let offset = stored.withUnsafeBytes { readBigEndian($0) }
                let completion = try snapshot.index.entry(at: LogOffset(offset)).map { entry throws in
                    try ServerEntry(entry)
                }
                func checkFingerprint(_ stored: UInt32) throws {
                    guard stored == fingerprint else {
                        throw SyncError(
                            .invalidArguments,
                            "\(requestID) was already used for a different request (at offset \(offset))",
                            requestID: requestID)
                    }
                }
                switch completion {
                case .requestOutcome(_, let storedFingerprint, let outcome, _)?:
                    try checkFingerprint(storedFingerprint)
                    return ([], try Self.response(replaying: outcome, at: LogOffset(offset), snapshot))
                case .requestCompleted(_, let storedFingerprint, let response, _)?:
                    // logs written before requestOutcome
                    try checkFingerprint(storedFingerprint)
                    return ([], response)
                default:
                    throw LogStoreError(
                        .projectionInconsistent,
                        "the request index points at offset \(offset), which completes no request")
                }
            }

            // Before the usage is read: a store across a network reads it with the zones.
            try snapshot.readAhead(
                records: request.recordsToSave.map(\.recordID) + request.recordIDsToDelete,
                types: request.recordsToSave.map(\.recordType))
            var plan = Plan(
                usage: try snapshot.state(IndexKey.usage), quota: quota, schema: schema,
                savedInRequest: Set(request.recordsToSave.map(\.recordID)),
                deletedInRequest: Set(request.recordIDsToDelete))
            // Each item's outcome, in request order (the request names no record twice).
            var saveOutcomes: [Outcome] = []
            saveOutcomes.reserveCapacity(request.recordsToSave.count)
            var deleteOutcomes: [Outcome] = []
            deleteOutcomes.reserveCapacity(request.recordIDsToDelete.count)
            var access: [RecordZone.ID: ParticipantAccess] = [:]
            // Each record's own checks, once: the hierarchy, the shares and the decision need them,
            // and the decision its size, which they measure.
            var violations: [SyncError?] = []
            violations.reserveCapacity(request.recordsToSave.count)
            var sizes: [Int] = []
            sizes.reserveCapacity(request.recordsToSave.count)
            for record in request.recordsToSave {
                do throws(SyncError) {
                    sizes.append(try record.validatedSize())
                    violations.append(nil)
                } catch {
                    sizes.append(0)
                    violations.append(error)
                }
            }
            var current: [RecordState??] = []
            plan.hierarchy = try RequestHierarchy(
                request.recordsToSave, violations: violations, snapshot, zones: &plan.zones, current: &current)
            // Decide every item against the state before the request; a participant's items
            // first against the shares (F121). A participant none of whose items the shares let
            // through (a stranger, a removed participant, a read-only one writing) writes nothing
            // here, not even the request's outcome: nobody can grow an owner's log by guessing
            // zones (Docs/Protocol.md, "Authentication and isolation").
            var admitted = actor == nil
            for (index, record) in request.recordsToSave.enumerated() {
                if let actor {
                    if let outcome = try shareRules.participantCheck(
                        saving: record, actor, snapshot, &access, plan.hierarchy)
                    {
                        saveOutcomes.append(outcome)
                        continue
                    }
                    admitted = admitted || violations[index] == nil
                }
                saveOutcomes.append(
                    try decideSave(
                        record, violation: violations[index], size: sizes[index], current: current[index],
                        request.savePolicy, snapshot, &plan, now: now, modifier: modifier))
            }
            for recordID in request.recordIDsToDelete {
                if let actor {
                    if let outcome = try shareRules.participantCheck(
                        deleting: recordID, actor, snapshot, &access, now: now)
                    {
                        deleteOutcomes.append(outcome)
                        if case .leave = outcome { admitted = true }  // leaving a share is theirs to do (F124)
                        continue
                    }
                    admitted = admitted || ServerDatabase.violation(recordID.validate) == nil
                }
                deleteOutcomes.append(try decideDelete(recordID, snapshot, &plan))
            }
            // Only shares, and deletions, can change who shares what: the saves of other records are
            // not looked at (nor copied).
            let shareSaves = request.recordsToSave.indices.lazy.filter {
                request.recordsToSave[$0].recordType == Share.recordType
            }
            affected = try shareRules.sharesAffected(
                by: shareSaves.map { (request.recordsToSave[$0].recordID, saveOutcomes[$0]) }, snapshot
            )
            .union(shareRules.sharesAffected(by: zip(request.recordIDsToDelete, deleteOutcomes), snapshot))
            // Atomic zones: one failure fails the zone's other items with batchRequestFailed (F148).
            func isFailure(_ outcome: Outcome) -> Bool { if case .failure = outcome { true } else { false } }
            if request.atomically, saveOutcomes.contains(where: isFailure) || deleteOutcomes.contains(where: isFailure)
            {
                let savedIDs = request.recordsToSave.lazy.map(\.recordID)
                var failedZones = Set<RecordZone.ID>()
                for (recordID, failed) in Array(zip(savedIDs, saveOutcomes.map(isFailure)))
                    + zip(request.recordIDsToDelete, deleteOutcomes.map(isFailure))
                {
                    // A zone ID that breaks the naming rules names no zone (and no LMDB key).
                    if failed, ServerDatabase.violation(recordID.zoneID.validate) == nil,
                        try snapshot.zone(recordID.zoneID)?.capabilities.contains(.atomic) == true
                    {
                        failedZones.insert(recordID.zoneID)
                    }
                }
                func failed(_ recordID: Record.ID, _ outcome: inout Outcome) {
                    guard failedZones.contains(recordID.zoneID) else { return }
                    if case .failure = outcome { return }
                    outcome = .failure(
                        SyncError(
                            .batchRequestFailed, "another change in atomic \(recordID.zoneID) failed",
                            item: .record(recordID),
                            requestID: request.requestID))
                }
                for (index, recordID) in savedIDs.enumerated() { failed(recordID, &saveOutcomes[index]) }
                for (index, recordID) in request.recordIDsToDelete.enumerated() {
                    failed(recordID, &deleteOutcomes[index])
                }
            }
            // Append the successful items in request order; tags are their entries' offsets.
            var entries: [NewEntry] = []
            entries.reserveCapacity(request.recordsToSave.count + request.recordIDsToDelete.count + 1)
            var response = ModifyRecordsResponse()
            response.saveResults.reserveCapacity(request.recordsToSave.count)
            // What the request's requestOutcome keeps: saved records by their entries' offsets.
            var outcome = RequestOutcome(operationGroupID: request.operationGroup?.operationGroupID)
            outcome.saved.reserveCapacity(request.recordsToSave.count)
            var offset = next
            let shares = RecordShareReferences(
                saving: request.recordsToSave, saveOutcomes, deleting: request.recordIDsToDelete, deleteOutcomes)
            for (index, record) in request.recordsToSave.enumerated() {
                switch saveOutcomes[index] {
                case .save(var saved, let size, let asSent):
                    let zone = try plan.zones[record.recordID.zoneID] ?? snapshot.zone(record.recordID.zoneID)
                    saved.applySystemFields(
                        saved.systemFields.with(
                            tag: String(offset), share: try shares.share(of: saved, in: zone, snapshot)))
                    entries.append(
                        ServerEntry.recordSavedEntry(
                            saved, estimatedSize: Int(size),
                            typeIDAndFields: asSent && !written.heads.isEmpty
                                ? written.bytes[written.heads[index]] : nil))
                    outcome.saved.append(RequestOutcome.Saved(record.recordID, at: LogOffset(offset)))
                    offset += 1
                    response.saveResults[record.recordID] = .success(saved)
                    changedZones.insert(record.recordID.zoneID)
                case .failure(var error):
                    error.requestID = request.requestID
                    response.saveResults[record.recordID] = .failure(error)
                    outcome.others.saveResults[record.recordID] = .failure(error)
                case .delete, .alreadyDeleted, .leave:
                    preconditionFailure("a save decided as a deletion")
                }
            }
            for (index, recordID) in request.recordIDsToDelete.enumerated() {
                switch deleteOutcomes[index] {
                case .delete(let recordType):
                    entries.append(ServerEntry.recordDeleted(recordID, recordType: recordType).decodedNewEntry)
                    offset += 1
                    response.deleteResults[recordID] = .success(())
                    changedZones.insert(recordID.zoneID)
                case .alreadyDeleted:
                    response.deleteResults[recordID] = .success(())
                case .leave(var share):
                    // The participant's deletion of the share is their leaving: the owner's share
                    // records it, and the zone leaves the participant's shared database (F124).
                    share.applySystemFields(share.systemFields.with(tag: String(offset)))
                    entries.append(ServerEntry.recordSaved(share).decodedNewEntry)
                    offset += 1
                    response.deleteResults[recordID] = .success(())
                    changedZones.insert(recordID.zoneID)
                    actorLeft = true
                case .failure(var error):
                    error.requestID = request.requestID
                    response.deleteResults[recordID] = .failure(error)
                case .save:
                    preconditionFailure("a deletion decided as a save")
                }
            }
            // Deleting a record deletes the records that reference it with deleteSelf, in the
            // change feeds but not in the sender's results (F135, F136).
            let untouched = plan.savedInRequest.union(request.recordIDsToDelete)
            let deleted = zip(request.recordIDsToDelete, deleteOutcomes).compactMap { recordID, outcome in
                if case .delete = outcome { recordID } else { nil }
            }
            let cascaded = try cascade(from: deleted, sparing: untouched, snapshot)
            for (recordID, recordType) in cascaded {
                entries.append(ServerEntry.recordDeleted(recordID, recordType: recordType).decodedNewEntry)
                offset += 1
            }
            // Deleting the root of a hierarchy share deletes the share (F124), even when the
            // request names the share: a participant who leaves it while deleting its root, or
            // an owner who saves it while a deleteSelf reference takes its root, would leave a
            // share rooted at nothing.
            for (share, numbers) in try shareRules.sharesRooted(
                at: deleted + cascaded.map(\.0), sparing: Set(deleted), snapshot)
            {
                entries.append(ServerEntry.recordDeleted(share, recordType: Share.recordType).decodedNewEntry)
                offset += 1
                affected.formUnion(numbers)
            }
            if let token = request.clientChangeToken {
                for zoneID in changedZones.sorted(by: { $0.zoneName < $1.zoneName }) where zoneID != .default {
                    entries.append(
                        ServerEntry.clientChangeTokenUpdated(
                            zoneID, device: actor?.deviceKey(device) ?? device, token: Array(token)
                        ).decodedNewEntry)
                }
            }
            if let requestID = request.requestID, admitted {
                outcome.others.deleteResults = response.deleteResults
                entries.append(
                    ServerEntry.requestOutcome(
                        requestID, fingerprint: fingerprint, outcome: outcome, actor: actor?.number ?? 0
                    ).decodedNewEntry)
            }
            return (entries, response)
        }
        changedZones.remove(.default)  // the default zone takes no part in pushes (F112)
        if !offsets.isEmpty {
            let left: [UInt64: ShareEndReason] = actor.map { actorLeft ? [$0.number: .left] : [:] } ?? [:]
            database.committed(
                changedZones: changedZones, through: offsets.last!, from: device, actor: actor, affected: affected,
                reasons: left)
        }
        return response
    }

    /// The response a `requestOutcome` entry at `offset` records: its deletions and failures, and
    /// its saved records read back from their `recordSaved` entries, as the first response
    /// returned them (F160).
    ///
    /// - Throws: `LogStoreError` `.corruptEntry` naming `offset` when a saved record's entry does
    ///   not save that record.
    static func response(
        replaying outcome: RequestOutcome, at offset: LogOffset, _ snapshot: DatabaseSnapshot
    ) throws -> ModifyRecordsResponse {
        var response = outcome.others
        for saved in outcome.saved {
            guard let entry = try snapshot.index.entry(at: saved.offset),
                case .recordSaved(let record) = try ServerEntry(entry),
                record.recordID == saved.recordID
            else {
                throw LogStoreError(
                    .corruptEntry,
                    "requestOutcome names \(saved.recordID) as saved by the entry at offset \(saved.offset.rawValue), which does not save it",
                    offset: offset)
            }
            response.saveResults[saved.recordID] = .success(record)
        }
        return response
    }

    enum Outcome {
        /// The record as saved, and the size of its field data (`Record.estimatedSize`);
        /// `asSent`: its type, ID and fields are those of the request's record.
        case save(Record, size: UInt64, asSent: Bool)
        case delete(recordType: Record.RecordType)
        case alreadyDeleted
        /// A participant deleted the share: the share as it is once they have left.
        case leave(Record)
        case failure(SyncError)
    }

    /// What the request has decided so far: storage against the quota, deleteSelf references
    /// added per target (against the 750 limit), records it saves.
    struct Plan {
        var usage: UInt64
        let quota: Int?
        /// The production schema, or `nil` in development mode (F137).
        let schema: RecordSchema?
        var addedReferences: [String: Int] = [:]
        let savedInRequest: Set<Record.ID>
        /// Records the request deletes: a share cannot be rooted at one (F123, F124).
        let deletedInRequest: Set<Record.ID>
        /// The parents the request gives the records it creates or moves (F123).
        var hierarchy = RequestHierarchy()
        /// Roots of the hierarchy shares the request creates, so two cannot share one root.
        var newShareRoots: [Record.ID: String] = [:]
        /// The zones looked up so far (the state before the request, which deciding does not
        /// change), by valid zone ID: a request's records share a few zones.
        var zones: [RecordZone.ID: ZoneState?] = [:]
    }

    /// The live records that reference `deleted` with deleteSelf, transitively, except `spared`
    /// (records the request itself saves or deletes), in a stable order.
    private func cascade(
        from deleted: [Record.ID], sparing spared: Set<Record.ID>, _ snapshot: DatabaseSnapshot
    ) throws -> [(Record.ID, Record.RecordType)] {
        var queue = deleted
        var seen = Set(deleted)
        var cascaded: [(Record.ID, Record.RecordType)] = []
        while !queue.isEmpty {
            let target = queue.removeFirst()
            guard let zone = try snapshot.zone(target.zoneID), zone.isLive else { continue }
            for name in try snapshot.referrers(of: target.recordName, incarnation: zone.incarnation) {
                let referrer = Record.ID(recordName: name, zoneID: target.zoneID)
                guard !spared.contains(referrer), seen.insert(referrer).inserted,
                    let state = try snapshot.record(referrer, incarnation: zone.incarnation), !state.isTombstone
                else { continue }
                cascaded.append((referrer, state.recordType))
                queue.append(referrer)
            }
        }
        return cascaded
    }

    /// The live zone of an item after its own checks, or the item's error: the check's, or the
    /// zone's when it is missing or deleted.
    private func liveZone(
        of recordID: Record.ID, _ snapshot: DatabaseSnapshot, _ plan: inout Plan,
        validating check: () throws(SyncError) -> Void
    ) throws -> Result<ZoneState, SyncError> {
        do throws(SyncError) {
            try check()
        } catch {
            return .failure(error)
        }
        let zone: ZoneState?
        if let known = plan.zones[recordID.zoneID] {
            zone = known
        } else {
            zone = try snapshot.zone(recordID.zoneID)
            plan.zones[recordID.zoneID] = zone
        }
        guard let zone, zone.isLive else {
            return .failure(try snapshot.zoneError(recordID.zoneID, item: .record(recordID)))
        }
        return .success(zone)
    }

    /// Decides the save of `client`, whose own checks gave `violation` and measured its `size`
    /// (`Record.validatedSize()`); `current` is its record state when the hierarchy looked it up
    /// already (`.none`: not looked up).
    private func decideSave(
        _ client: Record, violation: SyncError?, size: Int, current known: RecordState??, _ policy: SavePolicy,
        _ snapshot: DatabaseSnapshot, _ plan: inout Plan, now: Date, modifier: Record.ID
    ) throws -> Outcome {
        let recordID = client.recordID
        let zone: ZoneState
        switch try liveZone(
            of: recordID, snapshot, &plan,
            validating: { () throws(SyncError) in
                if let violation { throw violation }
                try Self.checkSealed(client)
            })
        {
        case .success(let live): zone = live
        case .failure(let error): return .failure(error)
        }
        // Production mode: the record's type and every field it carries are in the deployed
        // schema, with values of their kinds (F137).
        if let schema = plan.schema, let violation = schema.violation(saving: client) { return .failure(violation) }
        if size > Limits.maxRecordBytes {
            return .failure(
                SyncError(
                    .limitExceeded, "\(recordID) holds \(size) bytes of field data, more than \(Limits.maxRecordBytes)",
                    item: .record(recordID)))
        }
        // Assets: each one's content was uploaded before (F134); a device's local files stay on
        // the device.
        var client = client
        if client.hasAssets {
            if let failure = try snapshot.checkAssets(of: client, zone: zone) { return .failure(failure) }
            client = client.withoutAssetFiles
        }
        let current = try known ?? snapshot.record(recordID, incarnation: zone.incarnation)
        let server = try current.flatMap { state in state.isTombstone ? nil : try snapshot.savedRecord(at: state.offset)
        }

        // The change-tag truth table (F145); changedKeys and allKeys skip it (F146).
        if policy == .ifServerRecordUnchanged {
            if let server {
                guard let tag = client.recordChangeTag else {
                    return .failure(
                        .serverRecordChanged(
                            serverRecord: server, clientRecord: client,
                            "\(recordID) already exists on the server; save it with its change tag"))
                }
                if tag != server.recordChangeTag {
                    return .failure(
                        .serverRecordChanged(
                            serverRecord: server, clientRecord: client,
                            "\(recordID) changed on the server (tag \(server.recordChangeTag ?? "?"), the request has \(tag))"
                        ))
                }
            } else if let tag = client.recordChangeTag {
                return .failure(
                    SyncError(
                        .unknownItem, "\(recordID) does not exist on the server, but the request has its tag \(tag)",
                        item: .record(recordID)))
            }
        }
        if let server, server.recordType != client.recordType {
            return .failure(
                SyncError(
                    .invalidArguments,
                    "\(recordID) is a \(server.recordType) on the server, not a \(client.recordType)",
                    item: .record(recordID)))
        }

        // Partial field updates: keys absent from the request keep the server's values, a key
        // explicitly set to nil is removed (F132). allKeys sends every key the client holds.
        var saved: Record
        var savedIsClient = false
        if let server {
            saved = server
            var keys = Set(client.changedKeys())
            if policy == .allKeys { keys.formUnion(client.allKeys()) }
            for key in keys.sorted() { saved[key] = client[key] }
            if client.isParentChanged || (policy == .allKeys && client.parent != nil) { saved.parent = client.parent }
        } else if client.recordType != Share.recordType && recordID.recordName != Share.zoneWideShareRecordName {
            // A new record is the client's fields and parent; its change marks and system fields
            // are replaced below (applySystemFields), so the copy is the record built key by key.
            saved = client
            savedIsClient = true
        } else {
            saved = Record(recordType: client.recordType, recordID: recordID)
            for key in client.allKeys() { saved[key] = client[key] }
            saved.parent = client.parent
        }
        // A share, or a record with the reserved name of one, follows the rules of shares (F123).
        if saved.recordType == Share.recordType || recordID.recordName == Share.zoneWideShareRecordName {
            switch try shareRules.normalizedShare(saved, previous: server, zone: zone, snapshot, &plan) {
            case .success(let share): saved = share
            case .failure(let error): return .failure(error)
            }
        }
        let newSize = UInt64(savedIsClient ? size : saved.estimatedSize)
        if newSize > UInt64(Limits.maxRecordBytes) {
            return .failure(
                SyncError(
                    .limitExceeded,
                    "\(recordID) would hold \(newSize) bytes of field data, more than \(Limits.maxRecordBytes)",
                    item: .record(recordID)))
        }
        // A parent must exist or be saved in the same request (F135).
        if let parent = saved.parent, parent.recordID != server?.parent?.recordID,
            !plan.savedInRequest.contains(parent.recordID),
            try snapshot.record(parent.recordID, incarnation: zone.incarnation).map({ !$0.isTombstone }) != true
        {
            return .failure(
                SyncError(
                    .referenceViolation, "the parent of \(recordID), \(parent.recordID), does not exist",
                    item: .record(recordID)))
        }
        // A record has at most `Limits.maxHierarchyDepth` ancestors, nor its descendants, and
        // none is itself (F123, F135), as the request leaves the hierarchies.
        if let parent = saved.parent?.recordID.recordName, parent != server?.parent?.recordID.recordName {
            let cycle = SyncError(
                .invalidArguments,
                "\(recordID) cannot have \(Record.ID(recordName: parent, zoneID: recordID.zoneID)) as its parent: that record is \(recordID) or descends from it",
                item: .record(recordID))
            guard
                let place = try plan.hierarchy.place(
                    of: recordID.recordName, under: parent, in: recordID.zoneID, incarnation: zone.incarnation,
                    snapshot, isShareRoot: { _ in false })
            else { return .failure(cycle) }
            var depth = place.depth
            if let current, !current.isTombstone, current.children > 0 {
                let subtree = try RequestHierarchy.subtree(
                    of: recordID.recordName, incarnation: zone.incarnation, containing: parent, snapshot)
                if subtree.contains { return .failure(cycle) }
                depth += subtree.height
            }
            if depth > Limits.maxHierarchyDepth {
                return .failure(
                    SyncError(
                        .limitExceeded,
                        "saving \(recordID) under \(Record.ID(recordName: parent, zoneID: recordID.zoneID)) would make a parent chain of \(depth) ancestors, more than the limit of \(Limits.maxHierarchyDepth)",
                        item: .record(recordID)))
            }
        }
        // At most 750 deleteSelf references may point at one record (F135).
        let newTargets = Set(saved.deleteSelfTargets).subtracting(current?.deleteSelfTargets ?? [])
        for target in newTargets.sorted() {
            let existing = try snapshot.referrers(of: target, incarnation: zone.incarnation).count
            if existing + plan.addedReferences[target, default: 0] >= Limits.maxDeleteSelfReferencesPerTarget {
                return .failure(
                    SyncError(
                        .limitExceeded,
                        "\(Record.ID(recordName: target, zoneID: recordID.zoneID)) already has \(Limits.maxDeleteSelfReferencesPerTarget) deleteSelf references; \(recordID) cannot add another",
                        item: .record(recordID)))
            }
        }
        for target in newTargets { plan.addedReferences[target, default: 0] += 1 }
        let oldSize = current.map { $0.isTombstone ? 0 : $0.size } ?? 0
        let usage = plan.usage - min(plan.usage, oldSize) + newSize
        if let quota = plan.quota, newSize > oldSize, usage > UInt64(max(quota, 0)) {
            return .failure(
                SyncError(
                    .quotaExceeded, "saving \(recordID) would use \(usage) bytes, over \(user)'s quota of \(quota)",
                    item: .record(recordID)))
        }
        plan.usage = usage

        saved.applySystemFields(Self.systemFields(previous: server, modifier: modifier, now: now))
        return .save(saved, size: newSize, asSent: savedIsClient && !client.hasAssets)
    }

    /// Refuses a record holding an opened encrypted value (F129): a server, its log and its
    /// backups only ever hold sealed ones; the engine seals every value before it sends it.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming the record and the first such field.
    static func checkSealed(_ record: Record) throws(SyncError) {
        guard record.hasEncryptedValues, let field = record.openedEncryptedKeys.first else { return }
        throw SyncError(
            .invalidArguments,
            "an encrypted field arrived unsealed: field \(quoted(field)) of \(record.recordID) holds an opened encrypted value; a device seals encrypted values with the zone's key before it saves them",
            item: .record(record.recordID))
    }

    /// The system fields the server gives a record it saves (F130, F158): creation once,
    /// modification monotonic, the tag left for the append. Dates are whole microseconds, as the
    /// log stores them, so a saved record equals its replay.
    static func systemFields(previous: Record?, modifier: Record.ID, now: Date) -> Record.SystemFields {
        var modified = ProtoTime.microseconds(now)
        if let last = previous?.modificationDate { modified = max(modified, ProtoTime.microseconds(last) + 1) }
        return Record.SystemFields(
            recordChangeTag: nil,
            creationDate: previous?.creationDate ?? ProtoTime.date(microseconds: ProtoTime.microseconds(now)),
            modificationDate: ProtoTime.date(microseconds: modified),
            creatorUserRecordID: previous?.creatorUserRecordID ?? modifier,
            lastModifiedUserRecordID: modifier)
    }

    private func decideDelete(_ recordID: Record.ID, _ snapshot: DatabaseSnapshot, _ plan: inout Plan) throws -> Outcome
    {
        let zone: ZoneState
        switch try liveZone(of: recordID, snapshot, &plan, validating: recordID.validate) {
        case .success(let live): zone = live
        case .failure(let error): return .failure(error)
        }
        guard let current = try snapshot.record(recordID, incarnation: zone.incarnation), !current.isTombstone else {
            // Deleting what is not there succeeds: a retried deletion must not fail.
            return .alreadyDeleted
        }
        plan.usage -= min(plan.usage, current.size)
        return .delete(recordType: current.recordType)
    }

    /// The records of a request as `fingerprint(of:writing:)` wrote them: the bytes of record
    /// `i`'s type, ID and fields (`Record.writeTypeIDAndFields(to:)`) are `bytes[heads[i]]`.
    struct WrittenRecords {
        var bytes: [UInt8] = []
        var heads: [Range<Int>] = []
    }

    /// A checksum of everything a modify request asks for (records with their values, their
    /// deterministic protobuf bytes; deletions; policy), to tell a replay from a reused request ID.
    /// The records' bytes are left in `written`.
    static func fingerprint(of request: ModifyRecordsRequest, writing written: inout WrittenRecords) -> UInt32 {
        var crc = CRC32C.checksum([UInt8(request.savePolicy.rawValue), request.atomically ? 1 : 0])
        func add(_ bytes: [UInt8]) {
            crc = bigEndian(UInt64(bytes.count)).withUnsafeBytes { CRC32C.update(crc, $0) }
            crc = bytes.withUnsafeBytes { CRC32C.update(crc, $0) }
        }
        // the bytes of protoBytes(), written directly, one record after the other into one buffer
        var writer = ProtoWriter(capacity: 512 * request.recordsToSave.count)
        var ends: [Int] = []
        ends.reserveCapacity(request.recordsToSave.count)
        written.heads.reserveCapacity(request.recordsToSave.count)
        for record in request.recordsToSave {
            let start = writer.bytes.count
            record.writeTypeIDAndFields(to: &writer)
            written.heads.append(start..<writer.bytes.count)
            record.writeMarksAndSystemFields(to: &writer)
            ends.append(writer.bytes.count)
        }
        writer.bytes.withUnsafeBytes { all in
            var start = 0
            for end in ends {
                crc = bigEndian(UInt64(end - start)).withUnsafeBytes { CRC32C.update(crc, $0) }
                crc = CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: all[start..<end]))
                start = end
            }
        }
        written.bytes = writer.bytes
        for recordID in request.recordIDsToDelete { add(recordID.protoBytes()) }
        add(request.clientChangeToken.map { Array($0) } ?? [])
        return crc
    }
}

extension SyncError {
    /// The error, naming the request it answers.
    func with(requestID: RequestID?) -> SyncError {
        var error = self
        error.requestID = requestID
        return error
    }
}

extension Record.SystemFields {
    func with(tag: String) -> Record.SystemFields { with(tag: tag, share: share) }
}
