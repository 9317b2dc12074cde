import Foundation
import LogStore
import Synchronization
import SyncModel

/// One (user, scope) database: its log, and the operations of `CloudDatabase` on it.
///
/// Every modification is decided and appended inside one write transaction, so what it read
/// is what it changed: a request commits whole (with its projection updates) or not at all.
final class ServerDatabase: Sendable {
    unowned let server: SyncServer
    let user: UserID
    /// The user's number in the registry (their record name is `_user<number>`).
    let userNumber: UInt64
    let userRecordID: Record.ID
    let scope: DatabaseScope
    let log: any ServerLog
    /// The identity written into this database's change tokens: the user's number and the
    /// scope, so a token presented to another database is refused (F142).
    let databaseID: UInt64
    /// The IDs of operation groups this database's log is known to have an
    /// `operationGroupStarted` for (F69), so that the later requests of a group skip the lookup.
    let knownOperationGroups = Mutex<Set<String>>([])

    init(server: SyncServer, user: UserID, userNumber: UInt64, userRecordID: Record.ID, scope: DatabaseScope, log: any ServerLog) {
        self.server = server
        self.user = user
        self.userNumber = userNumber
        self.databaseID = userNumber << 2 | UInt64(scope.rawValue)
        self.userRecordID = userRecordID
        self.scope = scope
        self.log = log
    }

    var key: PushHub.Key { PushHub.Key(user: user, scope: scope) }

    // MARK: Reading the index

    struct Snapshot {
        /// The index and entries, in LMDB or another storage.
        let index: any IndexReader
        let database: ServerDatabase

        func zone(_ zoneID: RecordZone.ID) throws -> ZoneState? {
            if zoneID == .default { return database.scope == .private ? .defaultZone : nil }
            return try index.value(forKey: IndexKey.zone(zoneID), in: "zones").map {
                (bytes) throws(LogStoreError) in try ZoneState(decoding: bytes)
            }
        }

        func record(_ recordID: Record.ID, incarnation: UInt64) throws -> RecordState? {
            try index.value(forKey: IndexKey.record(incarnation: incarnation, name: recordID.recordName), in: "records"
            ).map { (bytes) throws(LogStoreError) in try RecordState(decoding: bytes) }
        }

        /// The records of the zone incarnation that reference `name` with deleteSelf (F135).
        func referrers(of name: String, incarnation: UInt64) throws -> [String] {
            try Referrers.decode(try index.value(forKey: IndexKey.record(incarnation: incarnation, name: name), in: "referrers"))
        }

        /// The record saved by the entry at `offset`.
        func savedRecord(at offset: UInt64) throws -> Record {
            try savedRecord(in: savedEntry(at: offset))
        }

        /// The `recordSaved` entry at `offset`, not decoded.
        func savedEntry(at offset: UInt64) throws -> LogEntry {
            guard let entry = try index.entry(at: LogOffset(offset)), entry.kind == ServerEntry.Kind.recordSaved else {
                throw LogStoreError(.projectionInconsistent, "the index points at offset \(offset), which saves no record")
            }
            return entry
        }

        /// The record a `recordSaved` entry saves.
        func savedRecord(in entry: LogEntry) throws -> Record {
            guard case .recordSaved(let record) = try ServerEntry(entry) else {
                throw LogStoreError(.projectionInconsistent, "the index points at offset \(entry.offset), which saves no record")
            }
            return record
        }

        func state(_ key: [UInt8]) throws -> UInt64 {
            try index.value(forKey: key, in: "state").map { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
        }

        var lastOffset: UInt64 { get throws { try index.lastOffset.rawValue } }

        /// The IDs of the subscriptions of this database, in ID order.
        func subscriptionOffsets() throws -> [UInt64] {
            var offsets: [UInt64] = []
            try index.forEach(in: "subscriptions") { _, value in
                offsets.append(readBigEndian(value))
                return true
            }
            return offsets
        }
    }

    func read<R>(_ body: (Snapshot) throws -> R) throws -> R {
        try log.read { index in try body(Snapshot(index: index, database: self)) }
    }

    /// Runs `body` in a write transaction with a snapshot of the index as of its start; the
    /// entries it returns are appended in the same transaction. Returns the body's result and
    /// the offsets appended.
    func write<R>(_ body: (Snapshot, _ nextOffset: UInt64) throws -> (entries: [ServerEntry], result: R)) throws -> (R, Range<LogOffset>) {
        try log.write { index in
            let snapshot = Snapshot(index: index, database: self)
            let next = try snapshot.lastOffset + 1
            let (entries, result) = try body(snapshot, next)
            // The index gets the entries as they are, not decoded again from their bytes.
            return (entries.map(\.decodedNewEntry), result)
        }
    }

    /// Sends a push hint for a commit that changed custom zones of this database, if a
    /// subscription covers one of them: a database subscription, or a zone subscription of a
    /// changed zone (F112, F154). Hints are hints: a failure to read subscriptions skips it.
    func notify(changedZones: Set<RecordZone.ID>, through offset: LogOffset, from device: DeviceID?) {
        guard !changedZones.isEmpty, let subscriptions = try? read({ try allSubscriptions($0) }) else { return }
        let sorted = subscriptions.values.sorted { $0.subscriptionID.rawValue < $1.subscriptionID.rawValue }
        let matching: (Subscription, RecordZone.ID?)?
        if let database = sorted.first(where: { $0.kind == .database }) {
            matching = (database, changedZones.count == 1 ? changedZones.first : nil)
        } else {
            matching = sorted.lazy.compactMap { subscription -> (Subscription, RecordZone.ID?)? in
                guard case .recordZone(let zoneID) = subscription.kind, changedZones.contains(zoneID) else { return nil }
                return (subscription, zoneID)
            }.first
        }
        guard let (subscription, zoneID) = matching else { return }
        let hint = PushHint(
            databaseScope: scope, subscriptionID: subscription.subscriptionID, zoneID: zoneID,
            changeToken: DatabaseChangeToken(offset: offset, database: databaseID))
        server.storage.publish(PushNotice(hint: hint, user: user, origin: device))
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
                SyncError(.badDatabase, "zones can only be saved or deleted in the private database, not the \(scope) database", item: .zone(zoneID))
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
            guard let kept = ownZoneID(zone.zoneID) else {
                refused.saveResults[zone.zoneID] = .failure(foreignZoneWriteError(zone.zoneID, item: .zone(zone.zoneID)))
                continue
            }
            spelling.note(kept: kept, asked: zone.zoneID)
            var ownZone = zone
            ownZone.zoneID = kept
            owned.zonesToSave.append(ownZone)
        }
        for zoneID in request.zoneIDsToDelete {
            guard let kept = ownZoneID(zoneID) else {
                refused.deleteResults[zoneID] = .failure(foreignZoneWriteError(zoneID, item: .zone(zoneID)))
                continue
            }
            spelling.note(kept: kept, asked: zoneID)
            owned.zoneIDsToDelete.append(kept)
        }
        try owned.validate()  // two spellings of one zone name it twice
        guard !owned.zonesToSave.isEmpty || !owned.zoneIDsToDelete.isEmpty else { return refused }
        var response = try modifyOwnZones(owned, from: device)
        if !spelling.isEmpty {
            response.saveResults = Dictionary(uniqueKeysWithValues: response.saveResults.map { id, result in
                (spelling.asked(id), result.map { zone in
                    var zone = zone
                    zone.zoneID = spelling.asked(id)
                    return zone
                }.mapError { $0.respelt(records: .init(), zones: spelling) })
            })
            response.deleteResults = Dictionary(uniqueKeysWithValues: response.deleteResults.map { id, result in
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
                    response.saveResults[zoneID] = .success(RecordZone(zoneID: zoneID, capabilities: state.capabilities))
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
                    affected.formUnion(try participantNumbers(ofZone: zoneID, snapshot))
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
        if !offsets.isEmpty { committed(changedZones: changed, through: offsets.last!, from: device, affected: affected) }
        return response
    }

    func fetchZones(_ request: FetchZonesRequest) throws -> FetchZonesResponse {
        if scope == .shared { try server.propagateShares(to: user) }
        return try read { snapshot in
            var response = FetchZonesResponse()
            if let zoneIDs = request.zoneIDs {
                for zoneID in zoneIDs {
                    if let error = Self.violation(zoneID.validate) {
                        response.results[zoneID] = .failure(error)
                        continue
                    }
                    // Another user's zone is never in a private database (F138).
                    guard let kept = ownZoneID(zoneID) else {
                        response.results[zoneID] = .failure(foreignZoneReadError(zoneID))
                        continue
                    }
                    if let state = try snapshot.zone(kept), state.isLive {
                        response.results[zoneID] = .success(RecordZone(
                            zoneID: zoneID, capabilities: state.capabilities,
                            share: try zoneShareReference(zoneID, kept: kept, snapshot)))
                    } else {
                        response.results[zoneID] = .failure(try zoneError(kept, snapshot, item: .zone(zoneID)))
                    }
                }
            } else {
                if scope == .private { response.results[.default] = .success(RecordZone(zoneID: .default, capabilities: [])) }
                try snapshot.index.forEach(in: "zones") { key, value in
                    let state = try ZoneState(decoding: Array(value))
                    if state.isLive {
                        let zoneID = IndexKey.zoneID(from: Array(key))
                        response.results[zoneID] = .success(RecordZone(
                            zoneID: zoneID, capabilities: state.capabilities,
                            share: try zoneShareReference(zoneID, kept: zoneID, snapshot)))
                    }
                    return true
                }
            }
            return response
        }
    }

    /// The error for an operation on a zone that is not live: why it is gone (F147, F150).
    func zoneError(_ zoneID: RecordZone.ID, _ snapshot: Snapshot, item: SyncError.ItemID? = nil) throws -> SyncError {
        let item = item ?? .zone(zoneID)
        guard scope == .private else { return Self.notShared(zoneID, with: user, item: item) }
        if let state = try snapshot.zone(zoneID), !state.isLive, state.deletedAt != 0 {
            switch state.deletionReason {
            case .purged:
                return SyncError(
                    .userDeletedZone, "\(zoneID) was purged by its user; save the zone again to use it", item: item,
                    zoneDeletionReason: .purged)
            case .encryptedDataReset:
                return SyncError(
                    .zoneNotFound, "\(zoneID) was removed when the user reset their encrypted data", item: item,
                    zoneDeletionReason: .encryptedDataReset)
            case .deleted:
                return SyncError(.zoneNotFound, "\(zoneID) was deleted", item: item, zoneDeletionReason: .deleted)
            }
        }
        return SyncError(.zoneNotFound, "\(zoneID) does not exist", item: item)
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
                    affected.formUnion(try participantNumbers(ofZone: zoneID, snapshot))
                    entries.append(.zoneDeleted(zoneID, reason: reason))
                } else {
                    throw SyncError(.zoneNotFound, "\(zoneID) does not exist", item: .zone(zoneID))
                }
            }
            return (entries, ())
        }
        if !offsets.isEmpty { committed(changedZones: Set(zoneIDs), through: offsets.last!, from: nil, affected: affected) }
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
            let existing = try allSubscriptions(snapshot)
            for subscription in request.subscriptionsToSave {
                let id = subscription.subscriptionID
                if let error = Self.violation(subscription.validate) {
                    response.saveResults[id] = .failure(error)
                    continue
                }
                guard subscription.isAllowed(in: scope) else {
                    response.saveResults[id] = .failure(SyncError(
                        .invalidArguments, "\(subscription) is not allowed in the \(scope) database (F116)",
                        item: .subscription(id)))
                    continue
                }
                // A zone subscription is kept under the zone's own ID; one of another user's zone
                // fails (F127, F138).
                var kept = subscription
                if case .recordZone(let zoneID) = subscription.kind {
                    guard let ownZone = ownZoneID(zoneID) else {
                        response.saveResults[id] = .failure(foreignZoneWriteError(zoneID, item: .subscription(id)))
                        continue
                    }
                    guard try snapshot.zone(ownZone)?.isLive == true else {
                        response.saveResults[id] = .failure(try zoneError(ownZone, snapshot, item: .subscription(id)))
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
                    response.deleteResults[id] = .failure(SyncError(.unknownItem, "there is no subscription \"\(id)\"", item: .subscription(id)))
                }
            }
            return (entries, response)
        }
        return response
    }

    func allSubscriptions(_ snapshot: Snapshot) throws -> [Subscription.ID: Subscription] {
        var subscriptions: [Subscription.ID: Subscription] = [:]
        for offset in try snapshot.subscriptionOffsets() {
            guard let entry = try snapshot.index.entry(at: LogOffset(offset)), case .subscriptionSaved(let subscription) = try ServerEntry(entry) else {
                throw LogStoreError(.projectionInconsistent, "the subscription index points at offset \(offset), which saves none")
            }
            subscriptions[subscription.subscriptionID] = subscription
        }
        return subscriptions
    }

    func allSubscriptions() throws -> [Subscription] {
        try read { snapshot in try allSubscriptions(snapshot).values.sorted { $0.subscriptionID.rawValue < $1.subscriptionID.rawValue } }
    }
}
