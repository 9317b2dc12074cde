import Foundation
import LogStore
import SwiftProtobuf
import SyncModel
import Synchronization

/// A consistent view of a device log's index at one offset, inside `DeviceLog.read`.
///
/// Every read here looks at the projection tables only: it costs O(what it returns), never the
/// log's length. Not `Sendable`: it lives in its read transaction.
struct DeviceSnapshot {
    let reader: LogReader

    /// The offset through which the log (and so the index) is seen.
    var offset: LogOffset { get throws { try reader.appliedOffset(of: DeviceIndex.projectionName) } }

    private func table(_ name: String) throws -> Table { try reader.table(name, of: DeviceIndex.projectionName) }

    private func value(_ key: [UInt8], in table: String) throws -> [UInt8]? {
        try reader.transaction.value(forKey: key, in: self.table(table))
    }

    private func zoneNumber(_ zoneID: RecordZone.ID) throws -> UInt64? {
        guard let bytes = try value(DeviceKey.zone(zoneID), in: "zones") else { return nil }
        guard bytes.count == 8 else { throw malformed("a zone number of \(bytes.count) bytes") }
        return readBigEndian(bytes)
    }

    private func recordKey(_ id: Record.ID) throws -> [UInt8]? {
        try zoneNumber(id.zoneID).map { DeviceKey.record(zoneNumber: $0, name: id.recordName) }
    }

    /// Decodes every value of `table` in key order.
    private func values<T>(of table: String, _ decode: ([UInt8]) throws -> T) throws -> [T] {
        var result: [T] = []
        try reader.transaction.forEach(in: self.table(table)) { _, value in
            result.append(try decode(Array(value)))
            return true
        }
        return result
    }

    // MARK: Pending changes

    /// The pending record changes, in order (F16–F19).
    func pendingRecordZoneChanges() throws -> [SyncEngine.PendingRecordZoneChange] {
        try values(of: "recordOrder", Self.recordChange)
    }

    /// The pending record changes, in order, decoding only the changes `cache` does not hold.
    ///
    /// A delegate reads the whole list for every batch it builds (CKSyncEngine's pattern). The
    /// cache holds the list of the last read with its changes' positions, which never change
    /// while a change is pending and are never reused: a read at the same offset returns it as
    /// is, and any other walks the table and the cached list side by side (both in position
    /// order), decoding only the changes the cache lacks. So the list is always the
    /// projection's, and a read costs a walk of the table without a decode or a hash.
    func pendingRecordZoneChanges(
        cache: borrowing Mutex<PendingListCache>
    ) throws -> [SyncEngine.PendingRecordZoneChange] {
        let at = try offset
        let cached = cache.withLock { $0 }
        if cached.offset == at { return cached.changes }
        var positions: [Position] = []
        var changes: [SyncEngine.PendingRecordZoneChange] = []
        positions.reserveCapacity(cached.positions.count)
        changes.reserveCapacity(cached.changes.count)
        var next = 0
        try reader.transaction.forEach(in: table("recordOrder")) { key, value in
            let position = try Position(decoding: key)
            while next < cached.positions.count, cached.positions[next] < position { next += 1 }
            if next < cached.positions.count, cached.positions[next] == position {
                changes.append(cached.changes[next])
            } else {
                changes.append(try Self.recordChange(Array(value)))
            }
            positions.append(position)
            return true
        }
        cache.withLock { cache in
            if cache.offset == nil || cache.offset! < at {
                cache = PendingListCache(offset: at, positions: positions, changes: changes)
            }
        }
        return changes
    }

    /// Up to `limit` pending record changes inside `scope` that come after `position` (from the
    /// start when `nil`), in order, with their positions.
    ///
    /// - Complexity: O(the changes looked at): the taken ones and the ones outside `scope`.
    func pendingRecordZoneChanges(
        after position: Position?, in scope: SyncEngine.SendChangesOptions.Scope, limit: Int
    ) throws -> [(Position, SyncEngine.PendingRecordZoneChange)] {
        var result: [(Position, SyncEngine.PendingRecordZoneChange)] = []
        guard limit > 0 else { return result }
        try reader.transaction.forEach(in: table("recordOrder"), from: position?.bytes) { key, value in
            let current = try Position(decoding: key)
            if let position, current <= position { return true }
            let change = try Self.recordChange(Array(value))
            if scope.contains(change) { result.append((current, change)) }
            return result.count < limit
        }
        return result
    }

    /// The pending database changes, in order (F22).
    func pendingDatabaseChanges() throws -> [SyncEngine.PendingDatabaseChange] {
        try values(of: "zoneOrder", Self.databaseChange)
    }

    /// The pending change of a record, if any.
    func pendingChange(for id: Record.ID) throws -> SyncEngine.PendingRecordZoneChange? {
        guard let key = try recordKey(id), let bytes = try value(key, in: "recordPending") else { return nil }
        let slot = try PendingSlot(decoding: bytes)
        return slot.type == PendingSlot.save ? .saveRecord(id) : .deleteRecord(id)
    }

    /// `hasPendingUntrackedChanges` (F24).
    func hasPendingUntrackedChanges() throws -> Bool {
        try value(DeviceKey.untracked, in: "state") != nil
    }

    /// The zones known to have server changes not fetched yet (F25), in key order.
    func zoneIDsWithUnfetchedServerChanges() throws -> [RecordZone.ID] {
        try values(of: "unfetchedZones") { bytes in
            RecordZone.ID(proto: try Self.decode(Logsync_Model_RecordZoneID.self, bytes, "an unfetched zone"))
        }
    }

    /// The zones the server is known to hold (from fetches and zone saves), in key order.
    func knownZoneIDs() throws -> [RecordZone.ID] {
        try values(of: "knownZones") { bytes in
            RecordZone.ID(proto: try Self.decode(Logsync_Model_RecordZoneID.self, bytes, "a known zone"))
        }
    }

    // MARK: Tokens and delivery

    /// The database change token of the last database changes fetched, or `nil` (fetch all).
    func databaseChangeToken() throws -> DatabaseChangeToken? {
        guard let bytes = try value(DeviceKey.databaseToken, in: "state") else { return nil }
        do {
            return try DatabaseChangeToken(data: Data(bytes))
        } catch {
            throw malformed("a database change token that does not decode: \(error.message)")
        }
    }

    /// The change token of `zoneID`, or `nil` (fetch the zone from the start).
    func zoneChangeToken(for zoneID: RecordZone.ID) throws -> ZoneChangeToken? {
        guard let bytes = try value(DeviceKey.zone(zoneID), in: "zoneTokens") else { return nil }
        do {
            return try ZoneChangeToken(data: Data(bytes))
        } catch {
            throw malformed("a change token of \(zoneID) that does not decode: \(error.message)")
        }
    }

    /// Every zone change token the index holds, in the `zoneTokens` table's key order (zone
    /// name, then owner name; a zone keyed by a digest comes first). Each token names its zone
    /// (`ZoneChangeToken.zoneID`).
    ///
    /// - Complexity: O(zones with a token).
    func zoneChangeTokens() throws -> [ZoneChangeToken] {
        try values(of: "zoneTokens") { bytes in
            do throws(SyncError) {
                return try ZoneChangeToken(data: Data(bytes))
            } catch {
                throw malformed("a zone change token that does not decode: \(error.message)")
            }
        }
    }

    /// The offset of the last fetched page (database or zone changes), or `nil`.
    func fetchedThrough() throws -> LogOffset? {
        guard let bytes = try value(DeviceKey.fetched, in: "state") else { return nil }
        guard bytes.count == 8 else { throw malformed("a fetched offset of \(bytes.count) bytes") }
        return LogOffset(readBigEndian(bytes))
    }

    /// The account the log last recorded (F108).
    func lastKnownAccount() throws -> DeviceState.Account {
        guard let bytes = try value(DeviceKey.account, in: "state") else { return .never }
        if bytes.isEmpty { return .signedOut }
        do {
            return .user(try Record.ID(proto: try Self.decode(Logsync_Model_RecordID.self, bytes, "an account")))
        } catch let error as SyncError {
            throw malformed("an account that does not decode: \(error.message)")
        }
    }

    /// The subscription the engine ensured last (F111), or `nil`.
    func subscriptionID() throws -> Subscription.ID? {
        try value(DeviceKey.subscription, in: "state").map { Subscription.ID(String(decoding: $0, as: UTF8.self)) }
    }

    /// Whether any record or database change is pending (O(1)).
    func hasPendingChanges() throws -> Bool {
        var any = false
        for table in ["recordOrder", "zoneOrder"] where !any {
            try reader.transaction.forEach(in: self.table(table)) { _, _ in
                any = true
                return false
            }
        }
        return any
    }

    /// The offset through which the delegate has handled every event (F29), or `nil`.
    func deliveredOffset() throws -> LogOffset? {
        guard let bytes = try value(DeviceKey.delivered, in: "state") else { return nil }
        guard bytes.count == 8 else { throw malformed("a delivery offset of \(bytes.count) bytes") }
        return LogOffset(readBigEndian(bytes))
    }

    // MARK: In flight

    /// The changes of the batch being sent, with whether each was re-added since (F32).
    func inFlightRecordChanges() throws -> [(change: SyncEngine.PendingRecordZoneChange, readded: Bool)] {
        try values(of: "recordInFlight") { bytes in
            guard let flag = bytes.first, flag <= 1 else { throw malformed("an empty in-flight mark") }
            return (try Self.recordChange(Array(bytes.dropFirst())), flag == 1)
        }
    }

    /// Whether `change` is in flight, and if so whether it was re-added since.
    func inFlightState(of change: SyncEngine.PendingRecordZoneChange) throws -> (inFlight: Bool, readded: Bool) {
        guard let key = try recordKey(change.recordID),
            let bytes = try value(key + [change.typeByte], in: "recordInFlight")
        else { return (false, false) }
        return (true, bytes.first == 1)
    }

    // MARK: Unanswered batch

    /// The last record batch whose outcome is unknown (F103): its `batchPrepared` as the index
    /// names it, decoded from the log, or `nil`.
    ///
    /// - Complexity: O(1) in the log's length: one entry is read and decoded.
    func unansweredBatch() throws -> UnansweredBatch? {
        guard let bytes = try value(DeviceKey.unanswered, in: "state") else { return nil }
        guard bytes.count == 8 else { throw malformed("an unanswered batch offset of \(bytes.count) bytes") }
        let offset = LogOffset(readBigEndian(bytes))
        guard let entry = try reader.entry(at: offset) else {
            throw malformed("an unanswered batch at offset \(offset.rawValue), which the log does not hold")
        }
        guard case .batchPrepared(let records, let deletions, let atomic, let requestID?) = try DeviceEntry(entry)
        else {
            throw malformed(
                "an unanswered batch at offset \(offset.rawValue), which is not a batchPrepared with a request ID")
        }
        return UnansweredBatch(
            offset: offset, requestID: requestID, recordsToSave: records, recordIDsToDelete: deletions,
            atomicByZone: atomic)
    }

    // MARK: Server records

    /// The last record the server is known to hold under `id`: from a save's result, or from a
    /// conflict's `serverRecord`; `nil` if none is known or the server has none.
    func lastKnownServerRecord(for id: Record.ID) throws -> Record? {
        var kept = ServerRecordReader.Kept()
        return try lastKnownServerRecord(for: id, kept: &kept)
    }

    /// `lastKnownServerRecord(for:)`, starting from what earlier reads kept of the entries they
    /// read (`kept`), and keeping what this one reads there.
    func lastKnownServerRecord(for id: Record.ID, kept: inout ServerRecordReader.Kept) throws -> Record? {
        guard let key = try recordKey(id), let bytes = try value(key, in: "serverRecords") else { return nil }
        var records = ServerRecordReader(reader: reader, kept: kept)
        defer { kept = records.kept }
        return try records.record(try ServerRecordSlot(decoding: bytes, for: "\(id)"), for: "\(id)")
    }

    /// Every last known server record, in the `serverRecords` table's key order (zone number,
    /// assigned in order of first appearance in the log, then record name).
    ///
    /// - Complexity: O(records known), each decoded; each entry holding some is read once in a row.
    func lastKnownServerRecords() throws -> [Record] {
        var records = ServerRecordReader(reader: reader)
        var result: [Record] = []
        try reader.transaction.forEach(in: table("serverRecords")) { key, value in
            let slot = try ServerRecordSlot(decoding: Array(value), for: "key \(Array(key))")
            result.append(try records.record(slot, for: "key \(Array(key))"))
            return true
        }
        return result
    }

    /// Whether the last known server record of `id` is one its zone's listing has not returned yet.
    func isUnlisted(_ id: Record.ID) throws -> Bool {
        guard let key = try recordKey(id) else { return false }
        return try value(key, in: "unlisted") != nil
    }

    /// The last known server records of `zoneID` that the zone's listing has not returned (F100):
    /// all of them while its pages run, and at its end the ones the server no longer holds. Empty
    /// when no listing of the zone is under way. In key order.
    ///
    /// - Complexity: O(the records returned), each decoded.
    func unlistedServerRecords(in zoneID: RecordZone.ID) throws -> [Record] {
        guard let number = try zoneNumber(zoneID) else { return [] }
        let prefix = DeviceKey.recordPrefix(zoneNumber: number)
        var keys: [[UInt8]] = []
        try reader.transaction.forEach(in: table("unlisted"), from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            keys.append(Array(key))
            return true
        }
        var records = ServerRecordReader(reader: reader)
        return try keys.map { key in
            guard let bytes = try value(key, in: "serverRecords") else {
                throw malformed("an unlisted record of \(zoneID) without a last known server record")
            }
            let slot = try ServerRecordSlot(decoding: bytes, for: "a record of \(zoneID)")
            return try records.record(slot, for: "a record of \(zoneID)")
        }
    }

    // MARK: Decoding

    private static func decode<M: SwiftProtobuf.Message>(_ type: M.Type, _ bytes: [UInt8], _ what: String) throws -> M {
        do {
            return try ProtoWire.decode(type, from: bytes)
        } catch {
            throw malformed("\(what) that does not decode: \(error.message)")
        }
    }

    static func recordChange(_ bytes: [UInt8]) throws -> SyncEngine.PendingRecordZoneChange {
        let message = try decode(Logsync_Device_PendingRecordZoneChange.self, bytes, "a pending record change")
        do {
            switch message.change {
            case .saveRecord(let id)?: return .saveRecord(try Record.ID(proto: id))
            case .deleteRecord(let id)?: return .deleteRecord(try Record.ID(proto: id))
            case nil: throw malformed("a pending record change without a case")
            }
        } catch let error as SyncError {
            throw malformed("a pending record change that does not decode: \(error.message)")
        }
    }

    static func databaseChange(_ bytes: [UInt8]) throws -> SyncEngine.PendingDatabaseChange {
        let message = try decode(Logsync_Device_PendingDatabaseChange.self, bytes, "a pending database change")
        do {
            switch message.change {
            case .saveZone(let zone)?: return .saveZone(try RecordZone(proto: zone))
            case .deleteZone(let id)?: return .deleteZone(RecordZone.ID(proto: id))
            case nil: throw malformed("a pending database change without a case")
            }
        } catch let error as SyncError {
            throw malformed("a pending database change that does not decode: \(error.message)")
        }
    }
}
