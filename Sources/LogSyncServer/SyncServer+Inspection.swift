import Foundation
import LogStore
import ModelEntries
import SyncModel

/// What a database's index says of it cheaply (``SyncServer/databaseSummary(of:scope:)``): the
/// figures of the operations console and `logsync-server status`, each read from the log's end
/// or a small index table, never from the records.
public struct DatabaseSummary: Sendable, Hashable, Codable {
    public var scope: DatabaseScope
    /// The offset of the last entry: the log's length in entries, its change token.
    public var lastOffset: UInt64
    /// When the last entry was committed, or `nil` for an empty log.
    public var lastCommit: Date?
    /// The size of the LMDB environment file holding the user's logs (every scope together), or
    /// `nil` for a log kept elsewhere (PostgreSQL).
    public var environmentBytes: UInt64?
    /// Live custom zones (a private database's default zone not counted); for a shared
    /// database, the zones shared with the user.
    public var zones: Int
    /// Live shares the user owns in this database.
    public var shares: Int
    /// Asset contents kept for the database's records, and their bytes; at most
    /// ``SyncServer/maxAssetsCounted`` are counted (``assetsCapped`` then).
    public var assets: Int
    public var assetBytes: UInt64
    public var assetsCapped: Bool
    /// Bytes of record data and assets counted against the user's quota (F153).
    public var usage: UInt64

    public init(
        scope: DatabaseScope, lastOffset: UInt64, lastCommit: Date?, environmentBytes: UInt64?, zones: Int,
        shares: Int, assets: Int, assetBytes: UInt64, assetsCapped: Bool, usage: UInt64
    ) {
        self.scope = scope
        self.lastOffset = lastOffset
        self.lastCommit = lastCommit
        self.environmentBytes = environmentBytes
        self.zones = zones
        self.shares = shares
        self.assets = assets
        self.assetBytes = assetBytes
        self.assetsCapped = assetsCapped
        self.usage = usage
    }
}

/// A record as a database's index keeps it (``SyncServer/records(of:scope:zone:after:limit:)``).
public struct RecordSummary: Sendable, Hashable, Codable {
    public var recordName: String
    public var recordType: String
    /// The offset of the entry that last saved or deleted it.
    public var offset: UInt64
    /// Its stored size in bytes.
    public var size: UInt64
    /// Deleted, and its tombstone not compacted yet.
    public var isTombstone: Bool
}

/// One server-log entry that touched a record (``SyncServer/recordHistory(of:scope:recordID:within:)``).
public struct RecordChange: Sendable, Hashable {
    public var offset: UInt64
    public var time: Date
    /// `saved` or `deleted`.
    public var kind: String
    public var recordType: String
    /// The record's fields as saved, sorted by key: each value's kind and size, never its
    /// contents for an encrypted field (`sealed, N bytes`).
    public var fields: [(key: String, value: String)]

    public static func == (a: RecordChange, b: RecordChange) -> Bool {
        a.offset == b.offset && a.kind == b.kind && a.fields.map(\.key) == b.fields.map(\.key)
            && a.fields.map(\.value) == b.fields.map(\.value)
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(offset) }
}

extension SyncServer {
    /// The most asset contents ``databaseSummary(of:scope:)`` counts.
    public static let maxAssetsCounted = 10_000

    /// The figures of `user`'s database of `scope`, or `nil` when the user is not registered
    /// (nothing is registered or written). Reads the log's last entry and the index's zone, share
    /// and asset tables; never the records.
    public func databaseSummary(of user: UserID, scope: DatabaseScope) throws -> DatabaseSummary? {
        guard try isRegistered(user) else { return nil }
        let database = try store(user, scope)
        var summary = try database.read { snapshot -> DatabaseSummary in
            let last = try snapshot.lastOffset
            let lastCommit = last > 0 ? try snapshot.index.entry(at: LogOffset(last))?.time.date : nil
            var zones = 0
            if scope == .shared {
                try snapshot.index.forEach(in: "sharedZones") { _, _ in
                    zones += 1
                    return true
                }
            } else {
                try snapshot.index.forEach(in: "zones") { _, value in
                    if try ZoneState(decoding: Array(value)).isLive { zones += 1 }
                    return true
                }
            }
            var shares = 0
            try snapshot.index.forEach(in: "shares") { _, _ in
                shares += 1
                return true
            }
            var assets = 0
            var assetBytes: UInt64 = 0
            var capped = false
            try snapshot.index.forEach(in: "assets") { _, value in
                guard assets < Self.maxAssetsCounted else {
                    capped = true
                    return false
                }
                assets += 1
                assetBytes += try AssetState(decoding: Array(value)).size
                return true
            }
            return DatabaseSummary(
                scope: scope, lastOffset: last, lastCommit: lastCommit, environmentBytes: nil, zones: zones,
                shares: shares, assets: assets, assetBytes: assetBytes, assetsCapped: capped,
                usage: try snapshot.state(IndexKey.usage))
        }
        if let log = database.log.inspectableLog {
            let file = URL(fileURLWithPath: log.environment.path).appendingPathComponent("data.mdb").path
            summary.environmentBytes =
                (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?
                .uint64Value
        }
        return summary
    }

    /// `user`'s quota in bytes (``ServerAdmin/setQuota(_:for:)``), or `nil` for none.
    public func quota(of user: UserID) -> Int? {
        context.limits.quota(of: user)
    }

    /// The live zones of `user`'s database of `scope`, in the index's order (by name), at most
    /// `limit`, after `after`; `[]` for a user not registered.
    public func zones(
        of user: UserID, scope: DatabaseScope, limit: Int = 1_000
    ) throws -> [RecordZone.ID] {
        guard try isRegistered(user) else { return [] }
        return try store(user, scope).read { snapshot in
            var zones: [RecordZone.ID] = scope == .private ? [.default] : []
            let table = scope == .shared ? "sharedZones" : "zones"
            try snapshot.index.forEach(in: table) { key, value in
                if scope != .shared, !(try ZoneState(decoding: Array(value)).isLive) { return true }
                zones.append(IndexKey.zoneID(from: Array(key)))
                return zones.count < limit
            }
            return zones
        }
    }

    /// Up to `limit` records of `zone` in `user`'s database of `scope` whose names come after
    /// `after`, in the order of their names' bytes, tombstones included: a read of the index's
    /// record table from the page's first key, so a page costs the same in a zone of a million
    /// records. `[]` for a user not registered or a zone that is not live.
    public func records(
        of user: UserID, scope: DatabaseScope, zone: RecordZone.ID, after: String? = nil, limit: Int
    ) throws -> [RecordSummary] {
        guard try isRegistered(user) else { return [] }
        return try store(user, scope).read { snapshot in
            guard let state = try snapshot.zone(zone), state.isLive else { return [] }
            let prefix = bigEndian(state.incarnation)
            var start = prefix + Array((after ?? "").utf8)
            if after != nil { start.append(0) }  // the first name after `after`
            var records: [RecordSummary] = []
            try snapshot.index.forEach(in: "records", from: start) { key, value in
                guard key.starts(with: prefix), records.count < limit else { return false }
                let record = try RecordState(decoding: Array(value))
                records.append(
                    RecordSummary(
                        recordName: String(decoding: key[8...], as: UTF8.self), recordType: record.recordType,
                        offset: record.offset, size: record.size, isTombstone: record.isTombstone))
                return true
            }
            return records
        }
    }

    /// The entries among the last `within` of `user`'s database of `scope` that saved or deleted
    /// `recordID`, newest first: a bounded walk back from the log's end, never the whole log.
    public func recordHistory(
        of user: UserID, scope: DatabaseScope, recordID: Record.ID, within: Int = 5_000
    ) throws -> [RecordChange] {
        guard try isRegistered(user) else { return [] }
        return try store(user, scope).read { snapshot in
            let last = try snapshot.lastOffset
            var changes: [RecordChange] = []
            var offset = last
            while offset > 0, last - offset < UInt64(within) {
                defer { offset -= 1 }
                guard let entry = try snapshot.index.entry(at: LogOffset(offset)),
                    entry.kind == ServerEntry.Kind.recordSaved || entry.kind == ServerEntry.Kind.recordDeleted
                else { continue }
                switch try ServerEntry(entry) {
                case .recordSaved(let record) where record.recordID == recordID:
                    changes.append(
                        RecordChange(
                            offset: offset, time: entry.time.date, kind: "saved",
                            recordType: record.recordType,
                            fields: record.allKeys().map { key in (key, Self.describe(record[key])) }))
                case .recordDeleted(let id, let type) where id == recordID:
                    changes.append(
                        RecordChange(
                            offset: offset, time: entry.time.date, kind: "deleted", recordType: type,
                            fields: []))
                default: continue
                }
            }
            return changes
        }
    }

    /// A field value's kind and size, never an encrypted value's bytes.
    static func describe(_ value: RecordValue?) -> String {
        guard let value else { return "nil" }
        switch value {
        case .encrypted(.sealed(let sealed)): return "sealed, \(sealed.box.count) bytes"
        case .encrypted(.opened): return "opened (refused by the server)"
        case .string(let text): return "string, \(text.utf8.count) bytes"
        case .bytes(let data): return "bytes, \(data.count) bytes"
        case .list(let values): return "list of \(values.count)"
        case .int64(let number): return "int64 \(number)"
        case .double(let number): return "double \(number)"
        case .bool(let flag): return "bool \(flag)"
        case .date(let date): return "date \(date)"
        case .reference(let reference): return "reference to \(reference.recordID.recordName)"
        case .asset: return "asset"
        case .location: return "location"
        }
    }
}

extension SyncServer {
    /// The devices with a push channel open to `user`'s databases on this node, by scope: the
    /// device ID, or `nil` for a channel opened without one.
    public func pushListeners(of user: UserID) -> [(scope: DatabaseScope, device: DeviceID?)] {
        pushHub.listeners(of: user)
    }

    /// How many push channels are open on this node, over every user.
    public var pushListenerCount: Int { pushHub.listenerCount }
}

/// A share a user owns, as the console lists it (``SyncServer/shares(of:limit:)``): never its
/// URL, whose last component is the share's secret.
public struct ShareSummary: Sendable, Hashable {
    public var zone: RecordZone.ID
    public var shareName: String
    /// The root record of a hierarchy share; `nil` for a zone-wide share.
    public var rootRecordName: String?
    public var publicPermission: Share.Participant.Permission
    /// The participants other than the owner, with their acceptance.
    public var accepted: Int
    public var pending: Int
    public var removed: Int
}

extension SyncServer {
    /// Up to `limit` live shares `user` owns in their private database, zone by zone (the zone
    /// table, then each zone's share table): never the records. `[]` for a user not registered.
    public func shares(of user: UserID, limit: Int = 200) throws -> [ShareSummary] {
        guard try isRegistered(user) else { return [] }
        return try store(user, .private).read { snapshot in
            var zones: [(RecordZone.ID, UInt64)] = []
            try snapshot.index.forEach(in: "zones") { key, value in
                let state = try ZoneState(decoding: Array(value))
                if state.isLive { zones.append((IndexKey.zoneID(from: Array(key)), state.incarnation)) }
                return true
            }
            var summaries: [ShareSummary] = []
            for (zone, incarnation) in zones where summaries.count < limit {
                for (name, share) in try snapshot.shares(incarnation: incarnation) where summaries.count < limit {
                    let others = share.participants.filter { $0.role != .owner }
                    summaries.append(
                        ShareSummary(
                            zone: zone, shareName: name, rootRecordName: share.rootRecordID?.recordName,
                            publicPermission: share.publicPermission,
                            accepted: others.filter { $0.acceptanceStatus == .accepted }.count,
                            pending: others.filter { $0.acceptanceStatus == .pending }.count,
                            removed: others.filter { $0.acceptanceStatus == .removed }.count))
                }
            }
            return summaries
        }
    }
}
