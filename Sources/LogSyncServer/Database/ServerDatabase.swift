import Foundation
import LogStore
import ModelEntries
import SyncModel
import Tracing

/// One (user, scope) database and the rules that run on it: its log, kept open by the server
/// (`OpenDatabase`), and the server's context for what lies beyond it (`ServerContext`).
///
/// Every modification is decided and appended inside one write transaction, so what it read
/// is what it changed: a request commits whole (with its projection updates) or not at all.
///
/// This type holds the database's own operations (reads and writes, push hints, zones,
/// subscriptions) and hands the others to the rules built from it: `RecordModification`,
/// `ChangeFeed`, `SharedDatabase` (a participant's shared database), `ZoneKeyRules`,
/// `SharePropagation` and `OperationGroups`.
struct ServerDatabase: Sendable {
    private let opened: OpenDatabase
    /// What the database's rules need beyond its own log.
    let context: ServerContext

    init(_ opened: OpenDatabase, context: ServerContext) {
        self.opened = opened
        self.context = context
    }

    var user: UserID { opened.user }
    /// The user's number in the registry (their record name is `_user<number>`).
    var userNumber: UInt64 { opened.userNumber }
    var userRecordID: Record.ID { opened.userRecordID }
    var scope: DatabaseScope { opened.scope }
    var log: any ServerLog { opened.log }
    /// The identity written into this database's change tokens: the user's number and the
    /// scope, so a token presented to another database is refused (F142).
    var databaseID: UInt64 { Self.databaseID(userNumber: opened.userNumber, scope: opened.scope) }

    /// The identity of user `userNumber`'s database of `scope` in its change tokens.
    static func databaseID(userNumber: UInt64, scope: DatabaseScope) -> UInt64 {
        userNumber << 2 | UInt64(scope.rawValue)
    }

    var key: PushHub.Key { PushHub.Key(user: user, scope: scope) }

    /// The owner rule of this database's zones (F127, F138).
    var ownership: ZoneOwnership { ZoneOwnership(user: user, userRecordID: userRecordID, scope: scope) }

    // MARK: Reading and writing

    func read<R>(_ body: (DatabaseSnapshot) throws -> R) throws -> R {
        try log.read { index in try body(DatabaseSnapshot(index: index, scope: scope, user: user)) }
    }

    /// `read`, on a snapshot that may be older but reaches `offset` (a change token's): what a
    /// fetch reads, which a storage may answer from a replica (`ServerLog.read(notOlderThan:_:)`).
    /// `body` may run twice.
    func read<R>(notOlderThan offset: UInt64, _ body: (DatabaseSnapshot) throws -> R) throws -> R {
        try log.read(notOlderThan: LogOffset(offset)) { index in
            try body(DatabaseSnapshot(index: index, scope: scope, user: user))
        }
    }

    /// Runs `body` in a write transaction with a snapshot of the index as of its start; the
    /// entries it returns are appended in the same transaction. Returns the body's result and
    /// the offsets appended.
    ///
    /// Runs in a `server.store.append` span tagged with the user, the database and the offsets
    /// written, and tells the commit under way (`CommitTrace`) what it wrote.
    func write<R>(
        _ body: (DatabaseSnapshot, _ nextOffset: UInt64) throws -> (entries: [ServerEntry], result: R)
    ) throws -> (R, Range<LogOffset>) {
        try writeEncoded { snapshot, next -> (entries: [NewEntry], result: R) in
            let (entries, result) = try body(snapshot, next)
            // The index gets the entries as they are, not decoded again from their bytes.
            return (entries.map(\.decodedNewEntry), result)
        }
    }

    /// `write`, for a body that encodes its entries itself, each carrying its `ServerEntry` as
    /// its decoded form (`ServerEntry.decodedNewEntry`).
    func writeEncoded<R>(
        _ body: (DatabaseSnapshot, _ nextOffset: UInt64) throws -> (entries: [NewEntry], result: R)
    ) throws -> (R, Range<LogOffset>) {
        let (user, scope) = (user, scope)
        let written = try context.tracer.withSpan(CommitTrace.appendSpan) { span in
            let (result, offsets) = try log.write { index in
                let snapshot = DatabaseSnapshot(index: index, scope: scope, user: user)
                let next = try snapshot.lastOffset + 1
                return try body(snapshot, next)
            }
            let written = offsets.isEmpty ? nil : (offsets.lowerBound, offsets.upperBound.advanced(by: -1))
            CommitTrace.tag(span, user: user, scope: scope, first: written?.0, last: written?.1)
            CommitTrace.current?.note(offsets, user: user, scope: scope)
            return (result, offsets)
        }
        if !written.1.isEmpty { context.metrics.logEntriesAppended.increment(by: written.1.count) }
        return written
    }

    /// Sends a push hint for a commit that changed custom zones of this database, if a
    /// subscription covers one of them: a database subscription, or a zone subscription of a
    /// changed zone (F112, F154). Hints are hints: a failure to read subscriptions sends the
    /// devices none. Every such commit, covered or not, is told to the admin change stream
    /// (``SyncServer/databaseChanges()``) on every node, with the database's token after it: a
    /// notice marked for no device when no subscription covers it.
    func notify(changedZones: Set<RecordZone.ID>, through offset: LogOffset, from device: DeviceID?) {
        guard !changedZones.isEmpty else { return }
        let token = DatabaseChangeToken(offset: ChangeOffset(offset), database: databaseID)
        let subscriptions = (try? read({ try $0.allSubscriptions() })) ?? [:]
        let sorted = subscriptions.values.sorted { $0.subscriptionID.rawValue < $1.subscriptionID.rawValue }
        let matching: (Subscription, RecordZone.ID?)?
        if let database = sorted.first(where: { $0.kind == .database }) {
            matching = (database, changedZones.count == 1 ? changedZones.first : nil)
        } else {
            matching =
                sorted.lazy.compactMap { subscription -> (Subscription, RecordZone.ID?)? in
                    guard case .recordZone(let zoneID) = subscription.kind, changedZones.contains(zoneID) else {
                        return nil
                    }
                    return (subscription, zoneID)
                }.first
        }
        guard let (subscription, zoneID) = matching else {
            context.storage.publish(
                PushNotice(
                    hint: PushHint(databaseScope: scope, changeToken: token), user: user, origin: device,
                    devices: false))
            return
        }
        let hint = PushHint(
            databaseScope: scope, subscriptionID: subscription.subscriptionID, zoneID: zoneID, changeToken: token)
        context.storage.publish(PushNotice(hint: hint, user: user, origin: device))
    }

    /// After a commit: hints this database's listeners (but `device` when the user made the
    /// commit, not a share participant `actor`), and for a private database brings the shared
    /// database of every participant of the changed zones, and of `affected`, up to date (F121,
    /// F124).
    func committed(
        changedZones: Set<RecordZone.ID>, through offset: LogOffset, from device: DeviceID?, actor: ShareActor? = nil,
        affected: Set<UInt64> = [], reasons: [UInt64: ShareEndReason] = [:]
    ) {
        notify(changedZones: changedZones, through: offset, from: actor == nil ? device : nil)
        guard scope == .private else { return }
        SharePropagation(context: context).propagate(
            after: self, changedZones: changedZones, from: device, actor: actor, affected: affected, reasons: reasons)
    }

    // MARK: Zones

    func modifyZones(_ request: ModifyZonesRequest, from device: DeviceID?) throws -> ModifyZonesResponse {
        try request.validate()
        // A zone ID that breaks the naming rules (F127) fails alone, before anything else.
        var invalid = ModifyZonesResponse()
        var request = request
        request.zonesToSave.removeAll { zone in
            guard let error = Self.violation(zone.zoneID.validate) else { return false }
            invalid.saveResults[zone.zoneID] = .failure(error)
            return true
        }
        request.zoneIDsToDelete.removeAll { zoneID in
            guard let error = Self.violation(zoneID.validate) else { return false }
            invalid.deleteResults[zoneID] = .failure(error)
            return true
        }
        var response = try modifyValidZones(request, from: device)
        response.saveResults.merge(invalid.saveResults) { valid, _ in valid }
        response.deleteResults.merge(invalid.deleteResults) { valid, _ in valid }
        return response
    }

    /// The error `check` throws, or `nil`.
    static func violation(_ check: () throws(SyncError) -> Void) -> SyncError? {
        do throws(SyncError) {
            try check()
            return nil
        } catch {
            return error
        }
    }

    /// `modifyZones` for zone IDs that follow the naming rules.
    private func modifyValidZones(_ request: ModifyZonesRequest, from device: DeviceID?) throws -> ModifyZonesResponse {
        if scope != .private {
            // Zones live in the private database only: every item fails with badDatabase (F147).
            var response = ModifyZonesResponse()
            func error(_ zoneID: RecordZone.ID) -> SyncError {
                SyncError(
                    .badDatabase,
                    "zones can only be saved or deleted in the private database, not the \(scope) database",
                    item: .zone(zoneID))
            }
            for zone in request.zonesToSave { response.saveResults[zone.zoneID] = .failure(error(zone.zoneID)) }
            for zoneID in request.zoneIDsToDelete { response.deleteResults[zoneID] = .failure(error(zoneID)) }
            return response
        }
        // Another user's zone fails alone (invalidArguments); the user's own zones are decided
        // under the ID the database keeps, and answered in the request's spelling (F127, F138).
        var refused = ModifyZonesResponse()
        var spelling = RequestSpelling<RecordZone.ID>()
        var owned = ModifyZonesRequest()
        for zone in request.zonesToSave {
            guard let kept = ownership.ownZoneID(zone.zoneID) else {
                refused.saveResults[zone.zoneID] = .failure(
                    ownership.foreignZoneWriteError(zone.zoneID, item: .zone(zone.zoneID)))
                continue
            }
            spelling.note(kept: kept, asked: zone.zoneID)
            var ownZone = zone
            ownZone.zoneID = kept
            owned.zonesToSave.append(ownZone)
        }
        for zoneID in request.zoneIDsToDelete {
            guard let kept = ownership.ownZoneID(zoneID) else {
                refused.deleteResults[zoneID] = .failure(ownership.foreignZoneWriteError(zoneID, item: .zone(zoneID)))
                continue
            }
            spelling.note(kept: kept, asked: zoneID)
            owned.zoneIDsToDelete.append(kept)
        }
        try owned.validate()  // two spellings of one zone name it twice
        guard !owned.zonesToSave.isEmpty || !owned.zoneIDsToDelete.isEmpty else { return refused }
        var response = try modifyOwnZones(owned, from: device)
        if !spelling.isEmpty {
            response.saveResults = Dictionary(
                uniqueKeysWithValues: response.saveResults.map { id, result in
                    (
                        spelling.asked(id),
                        result.map { zone in
                            var zone = zone
                            zone.zoneID = spelling.asked(id)
                            return zone
                        }.mapError { $0.respelt(records: .init(), zones: spelling) }
                    )
                })
            response.deleteResults = Dictionary(
                uniqueKeysWithValues: response.deleteResults.map { id, result in
                    (spelling.asked(id), result.mapError { $0.respelt(records: .init(), zones: spelling) })
                })
        }
        response.saveResults.merge(refused.saveResults) { own, _ in own }
        response.deleteResults.merge(refused.deleteResults) { own, _ in own }
        return response
    }

    /// Saves and deletes zones of this private database, named by the IDs it keeps them under.
    private func modifyOwnZones(_ request: ModifyZonesRequest, from device: DeviceID?) throws -> ModifyZonesResponse {
        var affected = Set<UInt64>()
        let (response, offsets) = try write { snapshot, next -> (entries: [ServerEntry], result: ModifyZonesResponse) in
            var entries: [ServerEntry] = []
            var response = ModifyZonesResponse()
            for zone in request.zonesToSave {
                let zoneID = zone.zoneID
                if zoneID == .default {
                    response.saveResults[zoneID] = .success(RecordZone(zoneID: zoneID, capabilities: []))
                    continue
                }
                if let state = try snapshot.zone(zoneID), state.isLive {
                    // Saving an existing zone again is idempotent (F147).
                    response.saveResults[zoneID] = .success(
                        RecordZone(zoneID: zoneID, capabilities: state.capabilities.reported))
                    continue
                }
                let saved = RecordZone(zoneID: zoneID, capabilities: .customZoneDefault)
                entries.append(.zoneSaved(saved))
                response.saveResults[zoneID] = .success(saved)
            }
            for zoneID in request.zoneIDsToDelete {
                if zoneID == .default {
                    response.deleteResults[zoneID] = .failure(
                        SyncError(.invalidArguments, "the default zone cannot be deleted", item: .zone(zoneID)))
                } else if let state = try snapshot.zone(zoneID), state.isLive {
                    // Its participants lose it (F124).
                    affected.formUnion(try shareRules.participantNumbers(ofZone: zoneID, snapshot))
                    entries.append(.zoneDeleted(zoneID, reason: .deleted))
                    response.deleteResults[zoneID] = .success(())
                } else {
                    // Deleting a zone that is not there is a per-zone zoneNotFound (F156).
                    response.deleteResults[zoneID] = .failure(
                        SyncError(.zoneNotFound, "\(zoneID) does not exist", item: .zone(zoneID)))
                }
            }
            _ = next
            return (entries, response)
        }
        let changed = Set(request.zonesToSave.map(\.zoneID)).union(request.zoneIDsToDelete)
            .filter { (try? response.saveResults[$0]?.get()) != nil || (try? response.deleteResults[$0]?.get()) != nil }
        if !offsets.isEmpty {
            committed(changedZones: changed, through: offsets.last!, from: device, affected: affected)
        }
        return response
    }

    func fetchZones(_ request: FetchZonesRequest) throws -> FetchZonesResponse {
        if scope == .shared { try SharePropagation(context: context).propagateShares(to: user) }
        return try read { snapshot in
            var response = FetchZonesResponse()
            if let zoneIDs = request.zoneIDs {
                for zoneID in zoneIDs {
                    if let error = Self.violation(zoneID.validate) {
                        response.results[zoneID] = .failure(error)
                        continue
                    }
                    // Another user's zone is never in a private database (F138).
                    guard let kept = ownership.ownZoneID(zoneID) else {
                        response.results[zoneID] = .failure(ownership.foreignZoneReadError(zoneID))
                        continue
                    }
                    if let state = try snapshot.zone(kept), state.isLive {
                        response.results[zoneID] = .success(
                            RecordZone(
                                zoneID: zoneID, capabilities: state.capabilities.reported,
                                share: try snapshot.zoneShareReference(zoneID, kept: kept)))
                    } else {
                        response.results[zoneID] = .failure(try snapshot.zoneError(kept, item: .zone(zoneID)))
                    }
                }
            } else {
                if scope == .private {
                    response.results[.default] = .success(RecordZone(zoneID: .default, capabilities: []))
                }
                try snapshot.index.forEach(in: "zones") { key, value in
                    let state = try ZoneState(decoding: Array(value))
                    if state.isLive {
                        let zoneID = IndexKey.zoneID(from: Array(key))
                        response.results[zoneID] = .success(
                            RecordZone(
                                zoneID: zoneID, capabilities: state.capabilities.reported,
                                share: try snapshot.zoneShareReference(zoneID, kept: zoneID)))
                    }
                    return true
                }
            }
            return response
        }
    }

    func liveCustomZones() throws -> [RecordZone.ID] {
        try read { snapshot in
            var zones: [RecordZone.ID] = []
            try snapshot.index.forEach(in: "zones") { key, value in
                if try ZoneState(decoding: Array(value)).isLive { zones.append(IndexKey.zoneID(from: Array(key))) }
                return true
            }
            return zones
        }
    }

    /// Deletes zones on the server's own initiative (purge, encrypted-data reset).
    func deleteZonesByServer(_ zoneIDs: [RecordZone.ID], reason: ZoneDeletionReason) throws {
        var affected = Set<UInt64>()
        let (_, offsets) = try write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
            var entries: [ServerEntry] = []
            for zoneID in zoneIDs where zoneID != .default {
                if let state = try snapshot.zone(zoneID), state.isLive {
                    affected.formUnion(try shareRules.participantNumbers(ofZone: zoneID, snapshot))
                    entries.append(.zoneDeleted(zoneID, reason: reason))
                } else {
                    throw SyncError(.zoneNotFound, "\(zoneID) does not exist", item: .zone(zoneID))
                }
            }
            return (entries, ())
        }
        if !offsets.isEmpty {
            committed(changedZones: Set(zoneIDs), through: offsets.last!, from: nil, affected: affected)
        }
    }

    func compactTombstones(through offset: UInt64) throws {
        _ = try write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
            let last = try snapshot.lastOffset
            guard offset <= last else {
                throw SyncError(.invalidArguments, "cannot compact through offset \(offset): the log ends at \(last)")
            }
            return ([.tombstonesCompacted(horizon: LogOffset(offset))], ())
        }
    }

    // MARK: Subscriptions

    func modifySubscriptions(_ request: ModifySubscriptionsRequest) throws -> ModifySubscriptionsResponse {
        try request.validate()
        let (response, _) = try write { snapshot, _ -> (entries: [ServerEntry], result: ModifySubscriptionsResponse) in
            var entries: [ServerEntry] = []
            var response = ModifySubscriptionsResponse()
            let existing = try snapshot.allSubscriptions()
            for subscription in request.subscriptionsToSave {
                let id = subscription.subscriptionID
                if let error = Self.violation(subscription.validate) {
                    response.saveResults[id] = .failure(error)
                    continue
                }
                guard subscription.isAllowed(in: scope) else {
                    response.saveResults[id] = .failure(
                        SyncError(
                            .invalidArguments, "\(subscription) is not allowed in the \(scope) database (F116)",
                            item: .subscription(id)))
                    continue
                }
                // A zone subscription is kept under the zone's own ID; one of another user's zone
                // fails (F127, F138).
                var kept = subscription
                if case .recordZone(let zoneID) = subscription.kind {
                    guard let ownZone = ownership.ownZoneID(zoneID) else {
                        response.saveResults[id] = .failure(
                            ownership.foreignZoneWriteError(zoneID, item: .subscription(id)))
                        continue
                    }
                    guard try snapshot.zone(ownZone)?.isLive == true else {
                        response.saveResults[id] = .failure(try snapshot.zoneError(ownZone, item: .subscription(id)))
                        continue
                    }
                    kept.kind = .recordZone(ownZone)
                }
                // Saving the same subscription again changes nothing (F155).
                if existing[id] != kept { entries.append(.subscriptionSaved(kept)) }
                response.saveResults[id] = .success(subscription)
            }
            for id in request.subscriptionIDsToDelete {
                if let error = Self.violation(id.validate) {
                    response.deleteResults[id] = .failure(error)
                } else if existing[id] != nil {
                    entries.append(.subscriptionDeleted(id))
                    response.deleteResults[id] = .success(())
                } else {
                    response.deleteResults[id] = .failure(
                        SyncError(.unknownItem, "there is no subscription \"\(id)\"", item: .subscription(id)))
                }
            }
            return (entries, response)
        }
        return response
    }

    func allSubscriptions() throws -> [Subscription] {
        try read { snapshot in
            try snapshot.allSubscriptions().values.sorted { $0.subscriptionID.rawValue < $1.subscriptionID.rawValue }
        }
    }

    // MARK: The rules built from the database

    /// The rules of this (owner's) database's shares.
    var shareRules: ShareRules { ShareRules(self) }

    /// Saves and deletes records (see `RecordModification`); `actor` is a share participant
    /// writing to this (the owner's) database.
    func modifyRecords(
        _ request: ModifyRecordsRequest, from device: DeviceID?, actor: ShareActor? = nil
    ) throws -> ModifyRecordsResponse {
        try RecordModification(self).modify(request, from: device, actor: actor)
    }

    /// One page of the database's change feed (see `ChangeFeed`).
    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) throws -> FetchDatabaseChangesResponse {
        try ChangeFeed(self).databaseChanges(request)
    }

    /// One page of a zone's change feed (see `ChangeFeed`); `viewer` is a share participant
    /// reading this (the owner's) zone.
    func fetchZoneChanges(
        _ request: FetchZoneChangesRequest, for device: DeviceID?, viewer: ShareActor? = nil
    ) throws -> FetchZoneChangesResponse {
        try ChangeFeed(self).zoneChanges(request, for: device, viewer: viewer)
    }

    /// `fetchZoneChanges`, its records left as stored where they can be (see `ChangeFeed`).
    func fetchZoneChangesPage(
        _ request: FetchZoneChangesRequest, for device: DeviceID?, decodingToo: Bool = false
    ) throws -> ZoneChangesPage {
        try ChangeFeed(self).zoneChangesPage(request, for: device, decodingToo: decodingToo)
    }

    /// Registers a device key of this database's user (see `ZoneKeyRules`).
    func registerDeviceKey(_ key: DevicePublicKey) throws {
        try ZoneKeyRules(self).registerDeviceKey(key)
    }

    /// `fetchZoneKeys` (see `ZoneKeyRules`).
    func fetchZoneKeys(_ request: FetchZoneKeysRequest) throws -> FetchZoneKeysResponse {
        try ZoneKeyRules(self).fetchZoneKeys(request)
    }

    /// `saveZoneKeys` (see `ZoneKeyRules`).
    func saveZoneKeys(_ request: SaveZoneKeysRequest) throws -> SaveZoneKeysResponse {
        try ZoneKeyRules(self).saveZoneKeys(request)
    }

    /// Notes the operation group a request sent to this database came with (see
    /// `OperationGroups`).
    func noteOperationGroup(
        _ group: OperationGroup?, request: String, device: DeviceID?, requestID: RequestID? = nil
    ) throws {
        try opened.operationGroups.note(group, request: request, device: device, requestID: requestID, in: self)
    }
}
