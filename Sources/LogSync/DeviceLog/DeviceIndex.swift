import LogStore
import SyncModel

/// What the engine knows, as one projection of the device log: updated in the same write
/// transaction as every append, equal at every offset to its rebuild from offset 1 (see
/// Docs/Engine.md, Projection tables).
///
/// Tables (IDs keyed as `DeviceKey` says; a "change" is stored as its Protocol Buffers message):
///
/// | table | key → value | holds |
/// |---|---|---|
/// | `recordPending` | record → case + position | the pending record change of each record (one at most) |
/// | `recordOrder` | position → change | the pending record changes in order (F16) |
/// | `recordInFlight` | record + case → re-added flag + change | the changes of the batch being sent (F32) |
/// | `zonePending` | zone → case + position | the pending database change of each zone (F22) |
/// | `zoneOrder` | position → change | the pending database changes in order |
/// | `serverRecords` | record → `ServerRecordSlot` | the last known server record of each record ID: where it is in the entry that brought it, or the record itself |
/// | `unlisted` | record → 1 | the last known server records of each zone being listed (fetched without a token, F100) that its pages have not returned yet |
/// | `unfetchedZones` | zone → zone ID | zones with server changes not fetched yet (F25) |
/// | `knownZones` | zone → zone ID | zones the server is known to hold |
/// | `zoneTokens` | zone → token | each zone's change token (`ZoneChangeToken.data`) |
/// | `zones` | zone → number | the number of each zone seen, for record keys |
/// | `state` | `untracked` → 1, `zoneCounter` → last zone number, `databaseToken` → token, `delivered` → offset, `fetched` → offset, `account` → user ID (empty: signed out), `subscription` → ID, `unanswered` → offset, `prepared` → offset + record IDs | `hasPendingUntrackedChanges` (F24), counters, the database change token, the delivery offset and the last fetched page (F29), the last known account (F108), the subscription (F111), the `batchPrepared` of the last batch whose outcome is unknown (F103), the last `batchPrepared`'s offset and the IDs of its saves in order |
///
/// The rules, per entry:
/// - **Added changes** (F16–F19, F22). A change already pending is left where it is (F18). A
///   change whose opposite is pending (save after delete, or delete after save, of the same ID)
///   replaces it: the old one is removed, the new one is appended at the end of the list, at the
///   position of the entry that added it. *Spec choice* (F19 leaves the place open): the
///   surviving change is ordered by when it was last requested. A saved zone already pending keeps
///   the zone value first added. Adding a change that is in flight sets its re-added flag (F32).
/// - **Removed changes** (F20): exact matches only (same case and ID); anything else is a no-op.
/// - **`batchPrepared`**: ends any batch still in flight (its changes stay as they are) and marks
///   the batch's saves and deletions in flight, with the re-added flag clear, and keeps its
///   offset and the IDs of its saves in order (`prepared`), for its `batchSaved`. Its outcome is
///   unknown until its result: `unanswered` becomes the entry's offset if the entry records the
///   request ID it is sent under, and is cleared if not (an older log's batch, whose ID is lost).
/// - **`batchResult`** (kind 12, or 15, `batchSaved`, whose saved records are named by their
///   position in the `batchPrepared` kept in `prepared`, which must be its offset; which may also list items that failed before the request, never in
///   flight: an asset upload failed): for each item, clears its in-flight mark and then, unless it was re-added
///   while in flight, removes the exact change from the pending list if the item succeeded or
///   failed with a non-transient error (F21, F91); transient errors (F89) and
///   `operationCancelled` (a send cancelled before the server answered) keep it. *Spec choice*:
///   a change re-added while in flight stays pending after a non-transient failure too: the app
///   asked for it again after the batch was built. Saved records become the last known server
///   records, deleted ones are forgotten; a `serverRecordChanged` failure's `serverRecord` becomes
///   the last known server record (F92), and `unknownItem`, `zoneNotFound` or `userDeletedZone`
///   forget it (the server holds no such record). Then every in-flight mark left is cleared: an
///   item the result does not mention keeps its pending state. `unanswered` is kept if the
///   request failed as a whole in a way that may have reached the server (every item that was
///   in flight failed, each with `networkFailure` or `serverResponseLost`: its answer may have
///   been lost after the server applied it), and when nothing was in flight (every item failed
///   before a request was made), and cleared otherwise: the server's answer is known.
/// - **`databaseChangesSent`**: saved and deleted zones, and non-transient failures, remove the
///   exact pending zone change; transient failures keep it. A saved zone becomes known; a
///   deleted zone is forgotten (not known or unfetched, no token, no last known server records). Zone changes are not tracked in flight: re-adding a zone change while
///   it is being sent cannot lose anything, since a zone save or delete carries nothing but the ID.
/// - **`untrackedChangesFlagged`**: sets or clears `untracked`.
/// - **`databaseChangesFetched`**: stores the database token; a modified zone becomes known and
///   unfetched; a deleted zone is forgotten: not known, not unfetched, no token, no last known
///   server records.
/// - **`zoneChangesFetched`**: stores the zone's token and makes the zone known; fetched records
///   become the last known server records, deleted ones are forgotten. A page of a zone that had
///   no token begins a *listing* (F100): every last known server record of the zone is first
///   marked `unlisted`. Every page clears the mark of the records it returns or deletes, so at
///   the listing's end the records still marked are the ones the server no longer holds, however
///   many launches the listing took (the fetch reports them deleted, which clears them).
/// - **`zoneFetchFinished`**: without an error the zone is no longer unfetched (F25). With
///   `zoneNotFound` or `userDeletedZone` the zone is forgotten as for a deletion; with another
///   error it stays unfetched, for the next fetch.
/// - **`changeTokenReset`**: drops the zone's token (or the database's); a zone's reset ends its
///   listing, if one was under way: no record of the zone stays `unlisted`.
/// - A record whose last known server record is forgotten (by any rule) is no longer `unlisted`.
/// - **`eventsDelivered`**: stores the delivery offset.
/// - **`databaseChangesFetched`, `zoneChangesFetched`** also store their own offset as `fetched`,
///   so a restart knows in O(1) whether fetched changes wait for delivery.
/// - **`accountChanged`**: stores the new account (empty for signed out). If the log knew an
///   account or a sign-out before, everything of the previous account is wiped first (F30,
///   F106): pending and in-flight changes, the untracked flag, tokens, known and unfetched zones,
///   last known server records, the unanswered batch. The very first account the log records wipes nothing: the
///   changes an app queued before the first check belong to that account.
/// - **`subscriptionEnsured`**: stores the subscription ID.
/// - **`pushReceived`**: a hint naming a zone lists the zone as unfetched (F25, F115).
/// - **`syncScheduled`, `syncDeferred`**: change nothing; they explain the timeline.
/// - **`sendStarted`, `sendFinished`, `fetchStarted`, `fetchFinished`**: change nothing; they
///   mark the timeline.
///
/// Dictionaries of an entry are visited in ID order, so zone numbers are assigned the same way
/// whenever the entry is applied.
struct DeviceIndex: Projection {
    static let projectionName = "index"

    let name = DeviceIndex.projectionName
    // 4: serverRecords point into entries (ServerRecordSlot); 5: unlisted (a listing's progress);
    // 6: `prepared` (the IDs of the last batch's saves, for batchSaved entries); 7: numbers in keys
    // and slots as `OrderedNumber`s.
    let version: UInt32 = 7
    let tableNames = [
        "recordPending", "recordOrder", "recordInFlight", "zonePending", "zoneOrder", "serverRecords",
        "unfetchedZones", "knownZones", "zoneTokens", "zones", "state", "unlisted",
    ]

    func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
        let index = DeviceIndexWriter(tables: tables)
        let offset = entry.offset.rawValue
        // The appender's own value when there is one (the same entry, not decoded again). A
        // batchSaved entry decodes only with the prepared entry it refers to, which a projection
        // does not read: its outline and the IDs the batchPrepared rule kept are enough.
        let decoded: DeviceEntry
        if let value = entry.decoded as? DeviceEntry {
            decoded = value
        } else if entry.kind == DeviceEntry.Kind.batchSaved {
            let outline = try DeviceEntry.BatchSavedOutline(entry)
            let ids = try index.preparedSaves(of: outline.preparedOffset, for: entry)
            let saved = try outline.saved.map { saved -> Record.ID in
                switch saved {
                case .whole(let id): return id
                case .prepared(let position):
                    guard position < ids.count else {
                        throw DeviceEntry.corruptReference(
                            entry,
                            "refers to record \(position) of the batchPrepared at offset "
                                + "\(outline.preparedOffset.rawValue), which holds \(ids.count)")
                    }
                    return ids[position]
                }
            }
            try index.applyResult(
                saved: saved, deleted: outline.deleted, failedSaves: outline.failedSaves,
                failedDeletes: outline.failedDeletes, at: offset)
            return
        } else {
            decoded = try DeviceEntry(entry)
        }
        switch decoded {
        case .pendingRecordZoneChangesAdded(let changes):
            for (i, change) in changes.enumerated() {
                try index.add(change, at: Position(offset: offset, index: UInt32(truncatingIfNeeded: i)))
            }
        case .pendingRecordZoneChangesRemoved(let changes):
            for change in changes { try index.remove(change) }
        case .pendingDatabaseChangesAdded(let changes):
            for (i, change) in changes.enumerated() {
                try index.add(change, at: Position(offset: offset, index: UInt32(truncatingIfNeeded: i)))
            }
        case .pendingDatabaseChangesRemoved(let changes):
            for change in changes { try index.remove(change) }
        case .untrackedChangesFlagged(let flag):
            if flag {
                try tables.put([1], forKey: DeviceKey.untracked, in: "state")
            } else {
                try tables.removeValue(forKey: DeviceKey.untracked, in: "state")
            }
        case .batchPrepared(let records, let deletions, _, let requestID):
            try index.clearInFlight()
            for record in records { try index.markInFlight(.saveRecord(record.recordID)) }
            for id in deletions { try index.markInFlight(.deleteRecord(id)) }
            try index.setPreparedSaves(records.map(\.recordID), at: offset)
            if requestID != nil {
                try tables.put(bigEndian(offset), forKey: DeviceKey.unanswered, in: "state")
            } else {
                try tables.removeValue(forKey: DeviceKey.unanswered, in: "state")
            }
        case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
            try index.applyResult(
                saved: saved.map(\.recordID), deleted: deleted, failedSaves: failedSaves, failedDeletes: failedDeletes,
                at: offset)
        case .databaseChangesSent(let savedZones, let deletedZoneIDs, let failedZoneSaves, let failedZoneDeletes):
            for zone in savedZones {
                try index.settle(.saveZone(zone), succeeded: true)
                try index.setZone(zone.zoneID, in: "knownZones", true)
            }
            for id in deletedZoneIDs {
                try index.settle(.deleteZone(id), succeeded: true)
                try index.forgetZone(id)
            }
            for (id, error) in failedZoneSaves.sorted(by: { IDOrder.precedes($0.key, $1.key) }) {
                try index.settle(.saveZone(RecordZone(zoneID: id)), succeeded: false, error: error)
            }
            for (id, error) in failedZoneDeletes.sorted(by: { IDOrder.precedes($0.key, $1.key) }) {
                try index.settle(.deleteZone(id), succeeded: false, error: error)
            }
        case .databaseChangesFetched(let modifications, let deletions, let token, _):
            try tables.put(bigEndian(offset), forKey: DeviceKey.fetched, in: "state")
            try tables.put(Array(token.data), forKey: DeviceKey.databaseToken, in: "state")
            for deletion in deletions { try index.forgetZone(deletion.zoneID) }
            for zoneID in modifications {
                try index.setZone(zoneID, in: "knownZones", true)
                try index.setZone(zoneID, in: "unfetchedZones", true)
            }
        case .zoneChangesFetched(let zoneID, let modifications, let deletions, let token, _):
            try tables.put(bigEndian(offset), forKey: DeviceKey.fetched, in: "state")
            if try tables.value(forKey: DeviceKey.zone(zoneID), in: "zoneTokens") == nil {
                try index.beginListing(of: zoneID)
            }
            try tables.put(Array(token.data), forKey: DeviceKey.zone(zoneID), in: "zoneTokens")
            try index.setZone(zoneID, in: "knownZones", true)
            try index.setFetchedServerRecords(modifications, at: offset)
            for deletion in deletions { try index.setServerRecord(nil, for: deletion.recordID) }
        case .zoneFetchFinished(let zoneID, let error):
            switch error?.code {
            case nil: try index.setZone(zoneID, in: "unfetchedZones", false)
            case .zoneNotFound?, .userDeletedZone?: try index.forgetZone(zoneID)
            default: break
            }
        case .changeTokenReset(let zoneID):
            if let zoneID {
                try tables.removeValue(forKey: DeviceKey.zone(zoneID), in: "zoneTokens")
                try index.clearUnlisted(in: zoneID)
            } else {
                try tables.removeValue(forKey: DeviceKey.databaseToken, in: "state")
            }
        case .eventsDelivered(let offset):
            try tables.put(bigEndian(offset.rawValue), forKey: DeviceKey.delivered, in: "state")
        case .accountChanged(_, let current):
            if try tables.value(forKey: DeviceKey.account, in: "state") != nil { try index.wipeAccountState() }
            try tables.put(current.map { ProtoWire.serialize($0.proto) } ?? [], forKey: DeviceKey.account, in: "state")
        case .subscriptionEnsured(let id):
            try tables.put(Array(id.rawValue.utf8), forKey: DeviceKey.subscription, in: "state")
        case .pushReceived(let zoneID):
            if let zoneID { try index.setZone(zoneID, in: "unfetchedZones", true) }
        case .sendStarted, .sendFinished, .fetchStarted, .fetchFinished, .syncScheduled, .syncDeferred:
            break
        }
    }
}

/// The rules of `DeviceIndex`, on its tables inside an append's write transaction.
struct DeviceIndexWriter {
    let tables: ProjectionTables

    // MARK: Keys

    /// The number of a zone, assigned (1, 2, …) the first time the log names the zone.
    func zoneNumber(_ zoneID: RecordZone.ID) throws -> UInt64 {
        let key = DeviceKey.zone(zoneID)
        if let bytes = try tables.value(forKey: key, in: "zones") {
            guard bytes.count == 8 else { throw malformed("a zone number of \(bytes.count) bytes") }
            return readBigEndian(bytes)
        }
        let last = try tables.value(forKey: DeviceKey.zoneCounter, in: "state").map { readBigEndian($0) } ?? 0
        let number = last + 1
        try tables.put(bigEndian(number), forKey: DeviceKey.zoneCounter, in: "state")
        try tables.put(bigEndian(number), forKey: key, in: "zones")
        return number
    }

    /// The number of a zone, or `nil` if the log never named it (nothing can be stored for it).
    func existingZoneNumber(_ zoneID: RecordZone.ID) throws -> UInt64? {
        guard let bytes = try tables.value(forKey: DeviceKey.zone(zoneID), in: "zones") else { return nil }
        guard bytes.count == 8 else { throw malformed("a zone number of \(bytes.count) bytes") }
        return readBigEndian(bytes)
    }

    func recordKey(_ id: Record.ID) throws -> [UInt8] {
        DeviceKey.record(zoneNumber: try zoneNumber(id.zoneID), name: id.recordName)
    }

    func existingRecordKey(_ id: Record.ID) throws -> [UInt8]? {
        try existingZoneNumber(id.zoneID).map { DeviceKey.record(zoneNumber: $0, name: id.recordName) }
    }

    // MARK: Pending record changes

    func add(_ change: SyncEngine.PendingRecordZoneChange, at position: Position) throws {
        let key = try recordKey(change.recordID)
        if let bytes = try tables.value(forKey: key, in: "recordPending") {
            let slot = try PendingSlot(decoding: bytes)
            if slot.type != change.typeByte {
                // The opposite change: the last one wins, at the end of the list (F19).
                try tables.removeValue(forKey: slot.position.bytes, in: "recordOrder")
                try insert(change, key: key, at: position)
            }  // else: already pending, it keeps its first position (F18)
        } else {
            try insert(change, key: key, at: position)
        }
        // An edit made while the same change is being sent must survive its success (F32).
        let flightKey = key + [change.typeByte]
        if let flight = try tables.value(forKey: flightKey, in: "recordInFlight"), flight.first != 1 {
            try tables.put([1] + flight.dropFirst(), forKey: flightKey, in: "recordInFlight")
        }
    }

    private func insert(_ change: SyncEngine.PendingRecordZoneChange, key: [UInt8], at position: Position) throws {
        try tables.put(PendingSlot(type: change.typeByte, position: position).bytes, forKey: key, in: "recordPending")
        try tables.put(ProtoWire.serialize(change.proto), forKey: position.bytes, in: "recordOrder")
    }

    /// Removes `change` if it is pending exactly (same case and ID); returns whether it was.
    @discardableResult
    func remove(_ change: SyncEngine.PendingRecordZoneChange) throws -> Bool {
        guard let key = try existingRecordKey(change.recordID),
            let bytes = try tables.value(forKey: key, in: "recordPending")
        else { return false }
        let slot = try PendingSlot(decoding: bytes)
        guard slot.type == change.typeByte else { return false }
        try tables.removeValue(forKey: key, in: "recordPending")
        try tables.removeValue(forKey: slot.position.bytes, in: "recordOrder")
        return true
    }

    // MARK: In flight

    func markInFlight(_ change: SyncEngine.PendingRecordZoneChange) throws {
        let key = try recordKey(change.recordID) + [change.typeByte]
        try tables.put([0] + ProtoWire.serialize(change.proto), forKey: key, in: "recordInFlight")
    }

    /// Whether `change` is in flight (in the batch last prepared, not settled yet).
    func isInFlight(_ change: SyncEngine.PendingRecordZoneChange) throws -> Bool {
        guard let key = try existingRecordKey(change.recordID) else { return false }
        return try tables.value(forKey: key + [change.typeByte], in: "recordInFlight") != nil
    }

    /// Whether any change is in flight.
    func hasInFlight() throws -> Bool {
        var found = false
        try tables.forEach(in: "recordInFlight") { _, _ in
            found = true
            return false
        }
        return found
    }

    func clearInFlight() throws {
        var keys: [[UInt8]] = []
        try tables.forEach(in: "recordInFlight") { key, _ in
            keys.append(Array(key))
            return true
        }
        for key in keys { try tables.removeValue(forKey: key, in: "recordInFlight") }
    }

    /// Ends the flight of one item of a batch result and applies F21/F32 to the pending list.
    func settle(_ change: SyncEngine.PendingRecordZoneChange, succeeded: Bool, error: SyncError? = nil) throws {
        let key = try recordKey(change.recordID)
        let flightKey = key + [change.typeByte]
        let readded = try tables.value(forKey: flightKey, in: "recordInFlight")?.first == 1
        try tables.removeValue(forKey: flightKey, in: "recordInFlight")
        let done = succeeded || !(error?.keepsChangePending ?? false)
        if done && !readded { try remove(change) }
        if let error {
            switch error.code {
            case .serverRecordChanged:
                if let serverRecord = error.serverRecord {
                    try setServerRecord(.inline(serverRecord.protoBytes()), for: change.recordID)
                }
            case .unknownItem, .zoneNotFound, .userDeletedZone:
                try setServerRecord(nil, for: change.recordID)
            default:
                break
            }
        }
    }

    // MARK: Batch results

    /// The `batchResult` rule (kind 12, or 15 read back), for the IDs of the saved records in
    /// the entry's order: a saved record's last known server record is its place in the entry at
    /// `offset` (`ServerRecordSlot.entry`).
    func applyResult(
        saved: [Record.ID], deleted: [Record.ID], failedSaves: [Record.ID: SyncError],
        failedDeletes: [Record.ID: SyncError], at offset: UInt64
    ) throws {
        let index = self
        // Only the items sent say what became of the request: an item that failed before it
        // (an asset upload) was never in flight.
        var sentFailures: [SyncError] = []
        for (id, error) in failedSaves {
            if try index.isInFlight(.saveRecord(id)) { sentFailures.append(error) }
        }
        for (id, error) in failedDeletes {
            if try index.isInFlight(.deleteRecord(id)) { sentFailures.append(error) }
        }
        let sent = try index.hasInFlight()
        for (ordinal, id) in saved.enumerated() {
            try index.settle(.saveRecord(id), succeeded: true)
            try index.setServerRecord(.entry(offset: offset, ordinal: UInt32(ordinal)), for: id)
        }
        for id in deleted {
            try index.settle(.deleteRecord(id), succeeded: true)
            try index.setServerRecord(nil, for: id)
        }
        for (id, error) in failedSaves.sorted(by: { IDOrder.precedes($0.key, $1.key) }) {
            try index.settle(.saveRecord(id), succeeded: false, error: error)
        }
        for (id, error) in failedDeletes.sorted(by: { IDOrder.precedes($0.key, $1.key) }) {
            try index.settle(.deleteRecord(id), succeeded: false, error: error)
        }
        try index.clearInFlight()
        if sent, !UnansweredBatch.outcomeUnknown(saved: saved.count, deleted: deleted.count, failures: sentFailures) {
            try tables.removeValue(forKey: DeviceKey.unanswered, in: "state")
        }
    }

    /// Keeps the IDs of the records a `batchPrepared` at `offset` saves, in its order, for the
    /// `batchSaved` entry of its result, which names them by position.
    func setPreparedSaves(_ ids: [Record.ID], at offset: UInt64) throws {
        var message = Logsync_Device_RecordIDs()
        message.recordIds = ids.map(\.proto)
        try tables.put(bigEndian(offset) + ProtoWire.serialize(message), forKey: DeviceKey.prepared, in: "state")
    }

    /// The IDs `setPreparedSaves` kept, which must be those of the `batchPrepared` at `offset`
    /// (the batch `entry`, a `batchSaved`, is the result of).
    func preparedSaves(of offset: LogOffset, for entry: LogEntry) throws -> [Record.ID] {
        guard let bytes = try tables.value(forKey: DeviceKey.prepared, in: "state"), bytes.count >= 8 else {
            throw DeviceEntry.corruptReference(
                entry, "refers to the batchPrepared at offset \(offset.rawValue), but no batch was prepared before it")
        }
        let kept: UInt64 = readBigEndian(bytes[0..<8])
        guard kept == offset.rawValue else {
            throw DeviceEntry.corruptReference(
                entry,
                "refers to the batchPrepared at offset \(offset.rawValue), but the batch last prepared is at offset \(kept)"
            )
        }
        do {
            let message = try ProtoWire.decode(Logsync_Device_RecordIDs.self, from: Array(bytes[8...]))
            return try message.recordIds.map { (id) throws(SyncError) in try Record.ID(proto: id) }
        } catch {
            throw malformed("the IDs of the batch prepared at offset \(offset.rawValue) that do not decode: \(error)")
        }
    }

    // MARK: Pending database changes

    func add(_ change: SyncEngine.PendingDatabaseChange, at position: Position) throws {
        let key = DeviceKey.zone(change.zoneID)
        if let bytes = try tables.value(forKey: key, in: "zonePending") {
            let slot = try PendingSlot(decoding: bytes)
            guard slot.type != change.typeByte else { return }  // already pending (F18, F22)
            try tables.removeValue(forKey: slot.position.bytes, in: "zoneOrder")  // last wins (F19)
        }
        try tables.put(PendingSlot(type: change.typeByte, position: position).bytes, forKey: key, in: "zonePending")
        try tables.put(ProtoWire.serialize(change.proto), forKey: position.bytes, in: "zoneOrder")
    }

    @discardableResult
    func remove(_ change: SyncEngine.PendingDatabaseChange) throws -> Bool {
        let key = DeviceKey.zone(change.zoneID)
        guard let bytes = try tables.value(forKey: key, in: "zonePending") else { return false }
        let slot = try PendingSlot(decoding: bytes)
        guard slot.type == change.typeByte else { return false }
        try tables.removeValue(forKey: key, in: "zonePending")
        try tables.removeValue(forKey: slot.position.bytes, in: "zoneOrder")
        return true
    }

    func settle(_ change: SyncEngine.PendingDatabaseChange, succeeded: Bool, error: SyncError? = nil) throws {
        if succeeded || !(error?.keepsChangePending ?? false) { try remove(change) }
    }

    // MARK: Zones

    /// Adds `zoneID` to (or removes it from) one of the zone sets, `knownZones` or
    /// `unfetchedZones`.
    func setZone(_ zoneID: RecordZone.ID, in table: String, _ present: Bool) throws {
        if present {
            try tables.put(ProtoWire.serialize(zoneID.proto), forKey: DeviceKey.zone(zoneID), in: table)
        } else {
            try tables.removeValue(forKey: DeviceKey.zone(zoneID), in: table)
        }
    }

    /// Forgets a zone the server no longer holds: not known, not unfetched, no token, no last
    /// known server records.
    func forgetZone(_ zoneID: RecordZone.ID) throws {
        try setZone(zoneID, in: "knownZones", false)
        try setZone(zoneID, in: "unfetchedZones", false)
        try tables.removeValue(forKey: DeviceKey.zone(zoneID), in: "zoneTokens")
        try forgetServerRecords(in: zoneID)
    }

    /// Forgets everything of the previous account (F30, F106).
    func wipeAccountState() throws {
        for table in [
            "recordPending", "recordOrder", "recordInFlight", "zonePending", "zoneOrder", "serverRecords",
            "unfetchedZones", "knownZones", "zoneTokens", "unlisted",
        ] {
            try clear(table)
        }
        try tables.removeValue(forKey: DeviceKey.untracked, in: "state")
        try tables.removeValue(forKey: DeviceKey.databaseToken, in: "state")
        try tables.removeValue(forKey: DeviceKey.unanswered, in: "state")
    }

    private func clear(_ table: String) throws {
        var keys: [[UInt8]] = []
        try tables.forEach(in: table) { key, _ in
            keys.append(Array(key))
            return true
        }
        for key in keys { try tables.removeValue(forKey: key, in: table) }
    }

    // MARK: Last known server records

    /// Stores where the last known server record of `id` is, or (`nil`) forgets it (and then it
    /// is no longer `unlisted`).
    func setServerRecord(_ slot: ServerRecordSlot?, for id: Record.ID) throws {
        if let slot {
            try tables.put(slot.bytes, forKey: try recordKey(id), in: "serverRecords")
        } else if let key = try existingRecordKey(id) {
            try tables.removeValue(forKey: key, in: "serverRecords")
            try tables.removeValue(forKey: key, in: "unlisted")
        }
    }

    func forgetServerRecords(in zoneID: RecordZone.ID) throws {
        try removeKeys(of: zoneID, in: "serverRecords")
        try removeKeys(of: zoneID, in: "unlisted")
    }

    // MARK: Listings (F100)

    /// A listing of `zoneID` begins (its first page, fetched without a token): every last known
    /// server record of the zone is `unlisted` until a page returns it.
    ///
    /// - Complexity: O(the zone's last known server records), in the first page's transaction.
    func beginListing(of zoneID: RecordZone.ID) throws {
        try clearUnlisted(in: zoneID)
        guard let number = try existingZoneNumber(zoneID) else { return }
        let prefix = DeviceKey.recordPrefix(zoneNumber: number)
        var keys: [[UInt8]] = []
        try tables.forEach(in: "serverRecords", from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            keys.append(Array(key))
            return true
        }
        for key in keys { try tables.put([1], forKey: key, in: "unlisted") }
    }

    /// A fetched page's records, at `offset`: the last known server record of each is its place
    /// in the page's entry (`setServerRecord`), and the page returned it, so it is not among the
    /// records a listing left out (`unlisted`), record by record in that order. The zone's number
    /// is looked up once for a run of records of one zone (a page's records are all of its
    /// zone), and nothing is removed from `unlisted` when it is empty (as it is during an
    /// initial sync): the same rows as looking each record's key up twice.
    func setFetchedServerRecords(_ records: [Record], at offset: UInt64) throws {
        let mayBeUnlisted = try tables.count(of: "unlisted") > 0
        var zone: (id: RecordZone.ID, number: UInt64)?
        for (ordinal, record) in records.enumerated() {
            let id = record.recordID
            let number: UInt64
            if let zone, zone.id == id.zoneID {
                number = zone.number
            } else {
                number = try zoneNumber(id.zoneID)
                zone = (id.zoneID, number)
            }
            let key = DeviceKey.record(zoneNumber: number, name: id.recordName)
            try tables.put(
                ServerRecordSlot.entry(offset: offset, ordinal: UInt32(ordinal)).bytes, forKey: key, in: "serverRecords"
            )
            if mayBeUnlisted { try tables.removeValue(forKey: key, in: "unlisted") }
        }
    }

    /// Ends the listing of `zoneID`, if one was under way.
    func clearUnlisted(in zoneID: RecordZone.ID) throws {
        try removeKeys(of: zoneID, in: "unlisted")
    }

    /// Removes every row of `table` keyed by a record of `zoneID`.
    private func removeKeys(of zoneID: RecordZone.ID, in table: String) throws {
        guard let number = try existingZoneNumber(zoneID) else { return }
        let prefix = DeviceKey.recordPrefix(zoneNumber: number)
        var keys: [[UInt8]] = []
        try tables.forEach(in: table, from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            keys.append(Array(key))
            return true
        }
        for key in keys { try tables.removeValue(forKey: key, in: table) }
    }
}

extension SyncError {
    /// Whether a change that failed with this error stays pending, to be sent again: the seven
    /// transient codes (F89) and `operationCancelled`, which Apple's sample also leaves to the
    /// engine. Every other failure removes the change; the app re-adds it once resolved (F21).
    var keepsChangePending: Bool { isTransient || code == .operationCancelled }
}
