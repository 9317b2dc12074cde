import Foundation
import LogStore
import SyncModel

/// One consistent read of a database's index and entries (`ServerDatabase.read`, or the state
/// before a write in `ServerDatabase.write`), with the look-ups every rule shares.
struct DatabaseSnapshot {
    /// The index and entries, in LMDB or another storage.
    let index: any IndexReader
    /// The database's scope: only a private database has the default zone.
    let scope: DatabaseScope
    /// The database's user, whom errors name.
    let user: UserID

    func zone(_ zoneID: RecordZone.ID) throws -> ZoneState? {
        if zoneID == .default { return scope == .private ? .defaultZone : nil }
        return try index.value(forKey: IndexKey.zone(zoneID), in: "zones").map {
            (bytes) throws(LogStoreError) in try ZoneState(decoding: bytes)
        }
    }

    func record(_ recordID: Record.ID, incarnation: UInt64) throws -> RecordState? {
        try index.value(
            forKey: IndexKey.record(incarnation: incarnation, name: recordID.recordName), in: "records"
        ).map { (bytes) throws(LogStoreError) in try RecordState(decoding: bytes) }
    }

    /// The records of the zone incarnation that reference `name` with deleteSelf (F135).
    func referrers(of name: String, incarnation: UInt64) throws -> [String] {
        try Referrers.decode(
            try index.value(forKey: IndexKey.record(incarnation: incarnation, name: name), in: "referrers"))
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
            throw LogStoreError(
                .projectionInconsistent, "the index points at offset \(entry.offset), which saves no record")
        }
        return record
    }

    func state(_ key: [UInt8]) throws -> UInt64 {
        try index.value(forKey: key, in: "state").map { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
    }

    var lastOffset: UInt64 { get throws { try index.lastOffset.rawValue } }

    /// The error for an operation on a zone that is not live: why it is gone (F147, F150).
    func zoneError(_ zoneID: RecordZone.ID, item: SyncError.ItemID? = nil) throws -> SyncError {
        let item = item ?? .zone(zoneID)
        guard scope == .private else { return ShareRules.notShared(zoneID, with: user, item: item) }
        if let state = try zone(zoneID), !state.isLive, state.deletedAt != 0 {
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

    /// The IDs of the subscriptions of this database, in ID order.
    func subscriptionOffsets() throws -> [UInt64] {
        var offsets: [UInt64] = []
        try index.forEach(in: "subscriptions") { _, value in
            offsets.append(readBigEndian(value))
            return true
        }
        return offsets
    }

    /// The subscriptions of this database, by ID.
    func allSubscriptions() throws -> [Subscription.ID: Subscription] {
        var subscriptions: [Subscription.ID: Subscription] = [:]
        for offset in try subscriptionOffsets() {
            guard let entry = try index.entry(at: LogOffset(offset)),
                case .subscriptionSaved(let subscription) = try ServerEntry(entry)
            else {
                throw LogStoreError(
                    .projectionInconsistent, "the subscription index points at offset \(offset), which saves none")
            }
            subscriptions[subscription.subscriptionID] = subscription
        }
        return subscriptions
    }

    /// The database's development schema, from its index's `schema` table.
    func developmentSchema() throws -> RecordSchema {
        var schema = RecordSchema()
        try index.forEach(in: "schema") { key, value in
            schema.recordTypes[String(decoding: key, as: UTF8.self)] = try RecordSchema.decode(fields: Array(value))
            return true
        }
        return schema
    }

    /// Announces to a store that reads ahead (``IndexReader/readsAhead``) what deciding saves
    /// and deletions of `recordIDs` reads: the usage, the development schema of the saved record
    /// `types` that appending them reads (F137) and their zones; their record states and the
    /// shares rooted at them (`Record.share`, F123); the entries of the live ones. Three round
    /// trips instead of two or three per record. A hint only: an ID spelt otherwise than the
    /// index keeps it is simply read later.
    func readAhead(records recordIDs: [Record.ID], types: [Record.RecordType] = []) throws {
        guard index.readsAhead, !recordIDs.isEmpty else { return }
        var names: [RecordZone.ID: [String]] = [:]
        for recordID in recordIDs { names[recordID.zoneID, default: []].append(recordID.recordName) }
        var first: [(table: String, key: [UInt8])] = [("state", IndexKey.usage)]
        first += Set(types).map { (table: "schema", key: Array($0.utf8)) }
        first += names.keys.filter { $0 != .default }.map { (table: "zones", key: IndexKey.zone($0)) }
        try index.prefetch(rows: first)
        var keys: [[UInt8]] = []
        for (zoneID, zoneNames) in names {
            guard let zone = try? zone(zoneID), zone.isLive else { continue }
            keys += zoneNames.map { IndexKey.record(incarnation: zone.incarnation, name: $0) }
        }
        try index.prefetch(rows: keys.flatMap { [(table: "records", key: $0), (table: "shareRoots", key: $0)] })
        var offsets: [LogOffset] = []
        for key in keys {
            if let bytes = try index.value(forKey: key, in: "records"), let state = try? RecordState(decoding: bytes),
                !state.isTombstone
            {
                offsets.append(LogOffset(state.offset))
            }
        }
        try index.prefetch(entries: offsets)
    }
}
