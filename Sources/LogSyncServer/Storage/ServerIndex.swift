import LogStore
import SyncModel

/// The state of a zone in a database, as the index keeps it.
struct ZoneState: Hashable, IndexValue {
    /// The offset of the entry that created the current (or last) incarnation; 0 for the default zone.
    var incarnation: UInt64
    var isLive: Bool
    var capabilities: RecordZone.Capabilities
    /// The offset of the zone's latest change reported by the database feed (its key there), or 0.
    /// While the zone is deleted, its deletion (`deletedAt`), unless compacted.
    var lastChange: UInt64
    /// The offset of the zone's latest deletion, or 0 if it was never deleted. Until compacted,
    /// it is also a key of the database feed, when the zone has been re-created since: the
    /// deletion marker that tells a token older than it that the old incarnation is gone (F149).
    var deletedAt: UInt64
    var deletionReason: ZoneDeletionReason

    static let defaultZone = ZoneState(
        incarnation: 0, isLive: true, capabilities: [], lastChange: 0, deletedAt: 0, deletionReason: .deleted)

    func write(to writer: inout ByteWriter) {
        writer.u64(incarnation)
        writer.u8(isLive ? 1 : 0)
        writer.u64(capabilities.rawValue)
        writer.u64(lastChange)
        writer.u64(deletedAt)
        writer.u8(UInt8(deletionReason.rawValue))
    }
}

// The decoding initializers stand in extensions so that the structs keep their memberwise ones.
extension ZoneState {
    static let what = "zone state"

    init(reading reader: inout ByteReader) throws(LogStoreError) {
        incarnation = try reader.u64()
        isLive = try reader.u8() == 1
        capabilities = RecordZone.Capabilities(rawValue: try reader.u64())
        lastChange = try reader.u64()
        deletedAt = try reader.u64()
        deletionReason = ZoneDeletionReason(rawValue: Int(try reader.u8())) ?? .deleted
    }
}

/// The state of a record: where its current version (or tombstone) is in the log.
struct RecordState: Hashable, IndexValue {
    /// The offset of the entry that saved or deleted it last: its change tag when saved.
    var offset: UInt64
    var isTombstone: Bool
    /// The size of its field data (counted against the quota), 0 for a tombstone.
    var size: UInt64
    var recordType: String
    /// The names of the records (in the same zone) this one references with `deleteSelf`.
    var deleteSelfTargets: [String] = []
    /// The name of the record's parent (F135), "" for none. A tombstone keeps the parent the
    /// record had when deleted, so a hierarchy share can tell whose deletion it shares.
    var parent: String = ""
    /// The digests (32 bytes each) of the assets its fields reference, sorted, each once.
    var assets: [[UInt8]] = []
    /// The root of the shared hierarchy the record belongs to (F123), "" for none: itself when a
    /// hierarchy share is rooted at it, else its parent's, when its parent is a live record. A
    /// tombstone keeps the one it had when deleted, so a hierarchy share can tell whose deletion
    /// it shares.
    var hierarchyRoot: String = ""
    /// How many ancestors its parent references reach (F123): 0 without a parent, its parent's
    /// depth plus one under a live parent, 1 under one that is not live.
    var depth: UInt64 = 0
    /// How many live records have it as their parent (each is in the `children` table).
    var children: UInt64 = 0
    /// The shared hierarchies it left (moved out of, or its ancestor did) and has not joined
    /// again, with the offset of the change that took it out: their participants are told it
    /// was deleted (F123).
    var exits: [HierarchyExit] = []
    /// The offset where its `zoneChanges` row is when a change of its place in the hierarchies
    /// (not a save of its own) moved it there; 0 when the row is at `offset`.
    var movedAt: UInt64 = 0

    var hasHierarchy: Bool { !hierarchyRoot.isEmpty || depth != 0 || children != 0 || !exits.isEmpty || movedAt != 0 }

    /// The key of its `zoneChanges` row in a zone incarnation.
    func changeKey(incarnation: UInt64, name: String) -> [UInt8] {
        movedAt == 0
            ? IndexKey.zoneChange(incarnation: incarnation, offset: offset)
            : IndexKey.zoneChange(incarnation: incarnation, offset: movedAt) + Array(name.utf8)
    }

    func write(to writer: inout ByteWriter) {
        writer.u64(offset)
        writer.u8(isTombstone ? 1 : 0)
        writer.u64(size)
        writer.string(recordType)
        writer.list(deleteSelfTargets) { $0.string($1) }
        writer.string(parent)
        let hierarchy = hasHierarchy
        if !assets.isEmpty || hierarchy {
            writer.list(assets) { $0.data($1) }
        }
        if hierarchy {
            writer.string(hierarchyRoot)
            writer.u64(depth)
            writer.u64(children)
            writer.u64(movedAt)
            writer.list(exits) { writer, exit in
                writer.string(exit.root)
                writer.u64(exit.offset)
            }
        }
    }
}

/// A shared hierarchy a record left (`RecordState.exits`): its root, and the offset of the change.
struct HierarchyExit: Hashable {
    var root: String
    var offset: UInt64
}

extension RecordState {
    static let what = "record state"

    init(reading reader: inout ByteReader) throws(LogStoreError) {
        offset = try reader.u64()
        isTombstone = try reader.u8() == 1
        size = try reader.u64()
        recordType = try reader.string()
        deleteSelfTargets = try reader.list { (reader) throws(LogStoreError) in try reader.string() }
        parent = try reader.string()
        if reader.hasMore {
            assets = try reader.list { (reader) throws(LogStoreError) in try reader.data() }
        }
        if reader.hasMore {
            hierarchyRoot = try reader.string()
            depth = try reader.u64()
            children = try reader.u64()
            movedAt = try reader.u64()
            exits = try reader.list { (reader) throws(LogStoreError) in
                HierarchyExit(root: try reader.string(), offset: try reader.u64())
            }
        }
    }
}

/// An asset content kept for a database's records (`assets` table): its size, how many live
/// records reference it, and since when none does.
struct AssetState: Hashable, IndexValue {
    var size: UInt64
    /// How many live records' fields reference it (a record counts once however many fields).
    var references: UInt64
    /// The offset of its `assetStored` entry.
    var storedAt: UInt64
    /// When the last reference went (or it was stored, if none came), in microseconds since
    /// 1970; 0 while referenced.
    var unreferencedSince: UInt64

    func write(to writer: inout ByteWriter) {
        writer.u64(size)
        writer.u64(references)
        writer.u64(storedAt)
        writer.u64(unreferencedSince)
    }

    init(size: UInt64, references: UInt64, storedAt: UInt64, unreferencedSince: UInt64) {
        self.size = size
        self.references = references
        self.storedAt = storedAt
        self.unreferencedSince = unreferencedSince
    }

    static let what = "asset state"

    init(reading reader: inout ByteReader) throws(LogStoreError) {
        size = try reader.u64()
        references = try reader.u64()
        storedAt = try reader.u64()
        unreferencedSince = try reader.u64()
    }
}

extension Record {
    /// The names of the records this one references with `deleteSelf` (F135), sorted.
    var deleteSelfTargets: [String] {
        // In the fields' own order (the result is sorted), with no set made for the many
        // records that reference nothing.
        var names: Set<String> = []
        func visit(_ value: RecordValue) {
            switch value {
            case .reference(let reference) where reference.action == .deleteSelf:
                names.insert(reference.recordID.recordName)
            case .list(let values):
                values.forEach(visit)
            default:
                break
            }
        }
        for value in fields.values { visit(value) }
        return names.isEmpty ? [] : names.sorted()
    }

    /// The digests of the assets this record references, sorted, each once.
    var assetDigests: [[UInt8]] {
        guard hasAssets else { return [] }
        return Set(assets.compactMap { $0.asset.digest?.bytes }).sorted { $0.lexicographicallyPrecedes($1) }
    }
}

/// A wrap of a zone's key as the `zoneKeys` table keeps it: its check and wrapped bytes (the
/// zone, version and recipient are in the key).
struct ZoneKeyWrap: Hashable, IndexValue {
    var check: [UInt8]
    var wrapped: [UInt8]

    func write(to writer: inout ByteWriter) {
        writer.data(check)
        writer.data(wrapped)
    }
}

extension ZoneKeyWrap {
    static let what = "zone key wrap"

    init(reading reader: inout ByteReader) throws(LogStoreError) {
        check = try reader.data()
        wrapped = try reader.data()
    }
}

/// Reads and writes the referrer lists of the `referrers` table: target → names of the records
/// that reference it with `deleteSelf`.
enum Referrers {
    static func decode(_ bytes: [UInt8]?) throws(LogStoreError) -> [String] {
        guard let bytes else { return [] }
        var reader = ByteReader(bytes, what: "referrer list")
        return try reader.list { (reader) throws(LogStoreError) in try reader.string() }
    }

    static func encode(_ names: [String]) -> [UInt8] {
        var writer = ByteWriter()
        writer.list(names) { $0.string($1) }
        return writer.bytes
    }
}

/// Keys of the index tables.
enum IndexKey {
    /// A zone: its name, a NUL, its owner's name (at most 511 bytes, LMDB's key limit).
    static func zone(_ zoneID: RecordZone.ID) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(zoneID.zoneName.utf8.count + 1 + zoneID.ownerName.utf8.count)
        key.append(contentsOf: zoneID.zoneName.utf8)
        key.append(0)
        key.append(contentsOf: zoneID.ownerName.utf8)
        return key
    }

    static func zoneID(from key: [UInt8]) -> RecordZone.ID {
        let separator = key.firstIndex(of: 0) ?? key.endIndex
        let owner = separator < key.endIndex ? key[(separator + 1)...] : []
        return RecordZone.ID(
            zoneName: String(decoding: key[..<separator], as: UTF8.self),
            ownerName: String(decoding: owner, as: UTF8.self))
    }

    /// A record: its zone's incarnation, then its name.
    static func record(incarnation: UInt64, name: String) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(8 + name.utf8.count)
        appendBigEndian(incarnation, to: &key)
        key.append(contentsOf: name.utf8)
        return key
    }

    /// A live record's link to its parent (`children` table): the zone's incarnation, the
    /// parent's name after its length (4 bytes), then the child's name. The prefix
    /// `children(incarnation:parent:)` lists a record's children.
    static func child(incarnation: UInt64, parent: String, child: String) -> [UInt8] {
        children(incarnation: incarnation, parent: parent) + Array(child.utf8)
    }

    static func children(incarnation: UInt64, parent: String) -> [UInt8] {
        let name = Array(parent.utf8)
        return bigEndian(incarnation) + Array(bigEndian(UInt64(name.count)).suffix(4)) + name
    }

    /// An asset referenced in a zone incarnation: the digest's 32 bytes, then the incarnation.
    static func assetZone(_ digest: [UInt8], incarnation: UInt64) -> [UInt8] {
        digest + bigEndian(incarnation)
    }

    /// An asset content granted to a zone incarnation: the incarnation, then the digest's 32
    /// bytes (so a zone's grants go with its incarnation's prefix).
    static func assetGrant(incarnation: UInt64, _ digest: [UInt8]) -> [UInt8] {
        bigEndian(incarnation) + digest
    }

    /// A zone change: the zone's incarnation, then the offset of the change.
    static func zoneChange(incarnation: UInt64, offset: UInt64) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(16)
        appendBigEndian(incarnation, to: &key)
        appendBigEndian(offset, to: &key)
        return key
    }

    /// A device's client change token for a zone incarnation: the incarnation, then the device.
    static func clientToken(incarnation: UInt64, device: DeviceID?) -> [UInt8] {
        bigEndian(incarnation) + Array((device?.rawValue ?? "").utf8)
    }

    /// A completed request: its ID, after a NUL and the number of the user who sent it when that
    /// is not the database's user (a share participant), so request IDs never meet across users.
    static func request(_ requestID: RequestID, actor: UInt64) -> [UInt8] {
        (actor == 0 ? [] : [0] + bigEndian(actor)) + Array(requestID.rawValue.utf8)
    }

    /// A registered device key: its key ID.
    static func deviceKey(_ keyID: String) -> [UInt8] { Array(keyID.utf8) }

    /// A wrap of a zone's key: the zone's incarnation, the key's version, then the recipient's
    /// key ID. The prefix of the incarnation (and version) lists a zone's wraps (of a version).
    static func zoneKey(incarnation: UInt64, version: UInt32, recipient: String) -> [UInt8] {
        zoneKeyVersion(incarnation: incarnation, version: version) + Array(recipient.utf8)
    }

    static func zoneKeyVersion(incarnation: UInt64, version: UInt32) -> [UInt8] {
        bigEndian(incarnation) + bigEndian(UInt64(version))
    }

    /// A share secret (the last component of a share URL).
    static func shareSecret(_ secret: String) -> [UInt8] { Array(secret.utf8) }

    /// An operation group seen by the database (F69), in the `state` table: `group`, a NUL, the
    /// group's ID. Its value is the offset of the group's `operationGroupStarted` entry.
    static func operationGroup(_ id: String) -> [UInt8] { Array("group".utf8) + [0] + Array(id.utf8) }

    static let horizon = Array("horizon".utf8)
    static let usage = Array("usage".utf8)
}

/// Every index of a server database, kept as one projection of its log (Docs/Protocol.md,
/// Server data layout).
///
/// Tables:
/// - `zones`: zone key → `ZoneState`;
/// - `records`: incarnation + record name → `RecordState` (current version or tombstone), with
///   its place in the record hierarchies: the root of the shared hierarchy it belongs to, its
///   depth, the hierarchies it left (F123);
/// - `zoneChanges`: incarnation + offset → flag (1 tombstone) + record name; only the latest
///   change of each record, so a zone fetch costs O(changes since the token) and coalesces (F143).
///   A change of a live record's place in the shared hierarchies that is not its own save (a
///   share created or deleted above it, an ancestor moved or deleted) moves its row to that
///   change's offset, keyed incarnation + offset + record name, flag 2: several rows share it;
/// - `children`: incarnation + parent name (after its length) + child name → nothing, for every
///   live record with a parent, so that a change of a record's place reaches its descendants;
/// - `dbChanges`: offset → zone key; only the latest change of each custom zone (F140, F112),
///   and, for a zone re-created after a deletion, its latest deletion as well (at `deletedAt`):
///   a token older than it is told the deletion, whatever the paging (F149);
/// - `subscriptions`: subscription ID → offset of its entry (F155);
/// - `requests`: request ID → offset of its `requestOutcome` entry (`requestCompleted` in older
///   logs) (F160);
/// - `clientTokens`: incarnation + device → the device's last client change token (F159);
/// - `referrers`: incarnation + record name → the records referencing it with `deleteSelf` (F135);
/// - `state`: `horizon` (tombstones up to it are gone, F144), `usage` (bytes of record data), and
///   for each operation group seen, `group` NUL ID → the offset of its `operationGroupStarted`
///   (F69; kept in `state` so that logs written before groups existed need no rebuilt index);
/// - `shares`: incarnation + share record name → `ShareKeys` (its URL secret and root record), for
///   every live share record of the owner's zones (F123);
/// - `shareRoots`: incarnation + root record name → the name of the share rooted there (F123);
/// - `shareURLs`: URL secret → `ShareLocation` (zone key and share record name);
/// - `sharedZones`: in a participant's shared database, zone key → `SharedZoneState` (the share
///   and the owner's offset seen), for every zone shared with the participant;
/// - `assets`: digest → `AssetState` (size, live references, since when unreferenced), for every
///   asset content stored for this database's records (F134);
/// - `assetZones`: digest + zone incarnation → how many live records of that zone reference the
///   asset;
/// - `assetGrants`: zone incarnation + digest → the offset of the `assetStored` entry that
///   granted the content to the zone (an upload for it). A zone's records may reference, and its
///   readers download, only the contents granted to it or referenced by its live records;
/// - `schema`: record type → its fields and the kind of each (`RecordSchema.encode(fields:)`), as
///   the saved records grew them: the database's development schema (F137). Share records take no
///   part; nothing is removed when records or zones go.
/// - `deviceKeys`: in a user's private database, key ID → the 32 bytes of each device public key
///   the user registered (F129);
/// - `zoneKeys`: zone incarnation + key version + recipient key ID → `ZoneKeyWrap` (the check and
///   the wrapped bytes) for every wrap of a zone's keys; a zone's deletion drops its wraps with
///   its incarnation (F129).
package struct ServerIndex: Projection {
    package init() {}

    package let name = "index"
    /// 2: `dbChanges` keeps a re-created zone's latest deletion. 3: shares and shared zones,
    /// request IDs per user, the parent of each record. 4: assets and the records' references
    /// to them; the usage counts asset contents. 6: the development schema (F137), device keys and
    /// wrapped zone keys (F129). 7: asset contents granted per zone (`assetGrants`, F134). 8: each
    /// record's place in the shared hierarchies, the `children` table (F123). 9: a record deleted
    /// in a shared hierarchy and saved again outside it has left it.
    package let version: UInt32 = 9
    package let tableNames = [
        "zones", "records", "zoneChanges", "dbChanges", "subscriptions", "requests", "clientTokens", "referrers",
        "state",
        "shares", "shareRoots", "shareURLs", "sharedZones", "assets", "assetZones", "schema", "deviceKeys", "zoneKeys",
        "assetGrants", "children",
    ]

    package func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
        // The appender's own value when there is one (the same entry, not decoded again).
        try apply(
            try (entry.decoded as? ServerEntry) ?? ServerEntry(entry), at: entry.offset.rawValue,
            time: Self.time(entry), to: tables)
    }

    /// An entry's time in microseconds since 1970 (0 for times before it).
    static func time(_ entry: LogEntry) -> UInt64 { UInt64(max(0, entry.time.microsecondsSince1970)) }

    /// Applies consecutive entries. A run of record saves and deletions (not of shares) keeps
    /// what its records share in memory until the run ends: their zones' states and database-feed
    /// keys, and the usage. The tables end as entry by entry (a zone's feed key moves to its last
    /// change, its state and the usage are those after the last record), with a few LMDB reads
    /// and writes per zone and run instead of six per record. Any other entry ends the run first.
    package func apply(_ entries: [LogEntry], to tables: ProjectionTables) throws {
        var run = try RecordRun(tables)
        for entry in entries {
            let offset = entry.offset.rawValue
            let decoded = try (entry.decoded as? ServerEntry) ?? ServerEntry(entry)
            let time = Self.time(entry)
            run.time = time
            switch decoded {
            case .recordSaved(let record) where record.recordType != Share.recordType:
                try recordChanged(record.recordID, to: Self.savedState(record, offset), tables, &run)
                try run.grow(schemaWith: record, tables)
            case .recordDeleted(let recordID, let recordType) where recordType != Share.recordType:
                try recordChanged(
                    recordID, to: RecordState(offset: offset, isTombstone: true, size: 0, recordType: recordType),
                    tables, &run)
            default:
                try run.end(tables)  // which empties the run, its time too
                try apply(decoded, at: offset, time: time, to: tables)
            }
        }
        try run.end(tables)
    }

    static func savedState(_ record: Record, _ offset: UInt64) -> RecordState {
        RecordState(
            offset: offset, isTombstone: false, size: UInt64(record.estimatedSize), recordType: record.recordType,
            deleteSelfTargets: record.deleteSelfTargets, parent: record.parent?.recordID.recordName ?? "",
            assets: record.assetDigests)
    }

    func apply(_ decoded: ServerEntry, at offset: UInt64, time: UInt64, to tables: ProjectionTables) throws {
        switch decoded {
        case .zoneSaved(let zone):
            try zoneSaved(IndexKey.zone(zone.zoneID), capabilities: zone.capabilities, offset, tables)

        case .zoneDeleted(let zoneID, let reason):
            try zoneDeleted(IndexKey.zone(zoneID), reason: reason, offset, time: time, tables)

        case .recordSaved(let record):
            try recordChanged(record.recordID, to: Self.savedState(record, offset), time: time, tables)
            if record.recordType == Share.recordType {
                try shareSaved(record, offset, tables)
            } else {
                var run = try RecordRun(tables)
                try run.grow(schemaWith: record, tables)
                try run.end(tables)
            }

        case .recordDeleted(let recordID, let recordType):
            try recordChanged(
                recordID, to: RecordState(offset: offset, isTombstone: true, size: 0, recordType: recordType),
                time: time, tables)
            if recordType == Share.recordType { try shareDeleted(recordID, offset, tables) }

        case .subscriptionSaved(let subscription):
            try tables.put(
                bigEndian(offset), forKey: Array(subscription.subscriptionID.rawValue.utf8), in: "subscriptions")

        case .subscriptionDeleted(let id):
            try tables.removeValue(forKey: Array(id.rawValue.utf8), in: "subscriptions")

        case .requestCompleted(let requestID, _, _, let actor), .requestOutcome(let requestID, _, _, let actor):
            try tables.put(bigEndian(offset), forKey: IndexKey.request(requestID, actor: actor), in: "requests")

        case .tombstonesCompacted(let horizon):
            try compact(through: horizon.rawValue, tables)

        case .clientChangeTokenUpdated(let zoneID, let device, let token):
            guard let state = try zoneState(IndexKey.zone(zoneID), tables), state.isLive else { return }
            try tables.put(
                token, forKey: IndexKey.clientToken(incarnation: state.incarnation, device: device), in: "clientTokens")

        case .sharedZoneJoined(let zoneID, let share, let ownerOffset):
            let key = IndexKey.zone(zoneID)
            try zoneSaved(key, capabilities: SharedZoneState.capabilities, offset, tables)
            try tables.put(
                SharedZoneState(share: share.recordName, ownerOffset: ownerOffset).encoded, forKey: key,
                in: "sharedZones")

        case .sharedZoneChanged(let zoneID, let ownerOffset):
            let key = IndexKey.zone(zoneID)
            guard var state = try zoneState(key, tables), state.isLive,
                var shared = try tables.value(forKey: key, in: "sharedZones").map({ (bytes) throws(LogStoreError) in
                    try SharedZoneState(decoding: bytes)
                })
            else { return }
            shared.ownerOffset = max(shared.ownerOffset, ownerOffset)
            try tables.put(shared.encoded, forKey: key, in: "sharedZones")
            try touch(key, &state, offset, tables)

        case .sharedZoneLeft(let zoneID, _):
            let key = IndexKey.zone(zoneID)
            _ = try tables.removeValue(forKey: key, in: "sharedZones")
            try zoneDeleted(key, reason: .deleted, offset, time: time, tables)

        case .assetStored(let digest, let size, let zoneID):
            try assetStored(digest, size: size, for: zoneID, offset, time: time, tables)

        case .operationGroupStarted(let group, _, _):
            let key = IndexKey.operationGroup(group.operationGroupID)
            if try tables.value(forKey: key, in: "state") == nil {
                try tables.put(bigEndian(offset), forKey: key, in: "state")
            }

        case .assetsDeleted(let digests):
            var freed: UInt64 = 0
            for digest in digests {
                guard let bytes = try tables.value(forKey: digest.bytes, in: "assets") else { continue }
                freed += try AssetState(decoding: bytes).size
                try tables.removeValue(forKey: digest.bytes, in: "assets")
            }
            let usage = try self.usage(tables)
            try tables.put(bigEndian(usage - min(usage, freed)), forKey: IndexKey.usage, in: "state")
            // A content deleted is granted to no zone: uploaded again, it is granted anew.
            let deleted = Set(digests.map(\.bytes))
            var grants: [[UInt8]] = []
            try tables.forEach(in: "assetGrants") { key, _ in
                if deleted.contains(Array(key.dropFirst(8))) { grants.append(Array(key)) }
                return true
            }
            for key in grants { try tables.removeValue(forKey: key, in: "assetGrants") }

        case .schemaDeployed:
            break  // the registry's (UserRegistry.Index); a database's log never holds one

        case .deviceKeyRegistered(let key):
            try tables.put(Array(key.rawRepresentation), forKey: IndexKey.deviceKey(key.keyID), in: "deviceKeys")

        case .zoneKeysSaved(let keys):
            for wrap in keys {
                let zone =
                    wrap.zoneID == .default ? ZoneState.defaultZone : try zoneState(IndexKey.zone(wrap.zoneID), tables)
                guard let zone, zone.isLive else { continue }  // the server never keeps wraps of a missing zone
                let key = IndexKey.zoneKey(
                    incarnation: zone.incarnation, version: wrap.version, recipient: wrap.recipientKeyID)
                // The first wrap kept for a recipient stays: the server refuses a different one.
                guard try tables.value(forKey: key, in: "zoneKeys") == nil else { continue }
                try tables.put(
                    ZoneKeyWrap(check: Array(wrap.check), wrapped: Array(wrap.wrapped)).encoded, forKey: key,
                    in: "zoneKeys")
            }
        }
    }

    /// A content uploaded for `zoneID` (`nil` in older logs): stored, and counted in the usage,
    /// if it was not kept yet; granted to the zone's live incarnation. A content no record
    /// references is unreferenced from its latest grant on, so that the zone's records have
    /// until the horizon to reference it.
    func assetStored(
        _ digest: AssetDigest, size: Int64, for zoneID: RecordZone.ID?, _ offset: UInt64, time: UInt64,
        _ tables: ProjectionTables
    ) throws {
        var state: AssetState
        if let bytes = try tables.value(forKey: digest.bytes, in: "assets") {
            state = try AssetState(decoding: bytes)
        } else {
            state = AssetState(size: UInt64(size), references: 0, storedAt: offset, unreferencedSince: max(time, 1))
            try tables.put(bigEndian(try usage(tables) + UInt64(size)), forKey: IndexKey.usage, in: "state")
        }
        if let zoneID {
            let zone = zoneID == .default ? ZoneState.defaultZone : try zoneState(IndexKey.zone(zoneID), tables)
            if let zone, zone.isLive {
                try tables.put(
                    bigEndian(offset), forKey: IndexKey.assetGrant(incarnation: zone.incarnation, digest.bytes),
                    in: "assetGrants")
                if state.references == 0 { state.unreferencedSince = max(time, 1) }
            }
        }
        try tables.put(state.encoded, forKey: digest.bytes, in: "assets")
    }

    /// Moves the references of a record from the assets of its old version to those of its new
    /// one; an asset left with none is unreferenced from `time` on.
    func updateAssetReferences(
        from old: [[UInt8]], to new: [[UInt8]], incarnation: UInt64, time: UInt64, _ tables: ProjectionTables
    ) throws {
        if old.isEmpty && new.isEmpty { return }  // most records reference no asset
        if old == new { return }
        let removed = Set(old).subtracting(new)
        let added = Set(new).subtracting(old)
        for digest in removed.union(added) {
            let zoneKey = IndexKey.assetZone(digest, incarnation: incarnation)
            var inZone =
                try tables.value(forKey: zoneKey, in: "assetZones").map { $0.withUnsafeBytes { readBigEndian($0) } }
                ?? 0
            if added.contains(digest) { inZone += 1 } else { inZone -= min(inZone, 1) }
            if inZone == 0 {
                try tables.removeValue(forKey: zoneKey, in: "assetZones")
            } else {
                try tables.put(bigEndian(inZone), forKey: zoneKey, in: "assetZones")
            }
            guard let bytes = try tables.value(forKey: digest, in: "assets") else { continue }
            var state = try AssetState(decoding: bytes)
            if added.contains(digest) {
                state.references += 1
                state.unreferencedSince = 0
            } else {
                state.references -= min(state.references, 1)
                if state.references == 0 { state.unreferencedSince = max(time, 1) }
            }
            try tables.put(state.encoded, forKey: digest, in: "assets")
        }
    }

    /// A zone saved at `offset`: a new incarnation if it was missing or deleted (F149), and a
    /// change in the database feed.
    func zoneSaved(
        _ key: [UInt8], capabilities: RecordZone.Capabilities, _ offset: UInt64, _ tables: ProjectionTables
    ) throws {
        var state = try zoneState(key, tables)
        if state == nil || state?.isLive == false {
            // A new incarnation: empty, numbered by this entry's offset (F149).
            state = ZoneState(
                incarnation: offset, isLive: true, capabilities: capabilities, lastChange: state?.lastChange ?? 0,
                deletedAt: state?.deletedAt ?? 0, deletionReason: state?.deletionReason ?? .deleted)
        }
        state!.capabilities = capabilities
        try touch(key, &state!, offset, tables)
    }

    /// A zone deleted at `offset`, with its records.
    func zoneDeleted(
        _ key: [UInt8], reason: ZoneDeletionReason, _ offset: UInt64, time: UInt64, _ tables: ProjectionTables
    ) throws {
        guard var state = try zoneState(key, tables), state.isLive else { return }
        try removeRecords(ofIncarnation: state.incarnation, time: time, tables)
        // This deletion supersedes the marker of the previous one: a token older than either
        // is told this one, which is enough to drop every older incarnation.
        if state.deletedAt != 0 { try tables.removeValue(forKey: bigEndian(state.deletedAt), in: "dbChanges") }
        state.isLive = false
        state.deletedAt = offset
        state.deletionReason = reason
        try touch(key, &state, offset, tables)
    }

    /// A share record saved in a live zone: its secret and root, found by either (F123); the root
    /// and its descendants belong to its hierarchy from `offset` on.
    func shareSaved(_ record: Record, _ offset: UInt64, _ tables: ProjectionTables) throws {
        guard let zone = try zoneState(IndexKey.zone(record.recordID.zoneID), tables), zone.isLive else { return }
        let share = Share(validated: record)
        let keys = ShareKeys(
            secret: share.url.flatMap(ShareURL.init)?.secret ?? "", root: share.rootRecordID?.recordName ?? "")
        let name = record.recordID.recordName
        try tables.put(keys.encoded, forKey: IndexKey.record(incarnation: zone.incarnation, name: name), in: "shares")
        if !keys.root.isEmpty {
            try tables.put(
                Array(name.utf8), forKey: IndexKey.record(incarnation: zone.incarnation, name: keys.root),
                in: "shareRoots")
            try rootShared(keys.root, incarnation: zone.incarnation, offset, tables)
        }
        if !keys.secret.isEmpty {
            try tables.put(
                ShareLocation(zone: IndexKey.zone(record.recordID.zoneID), share: name).encoded,
                forKey: IndexKey.shareSecret(keys.secret), in: "shareURLs")
        }
    }

    /// A share record deleted: its secret and root are forgotten; its hierarchy joins the one
    /// above it, if any, from `offset` on.
    func shareDeleted(_ recordID: Record.ID, _ offset: UInt64, _ tables: ProjectionTables) throws {
        guard let zone = try zoneState(IndexKey.zone(recordID.zoneID), tables), zone.isLive else { return }
        let key = IndexKey.record(incarnation: zone.incarnation, name: recordID.recordName)
        guard let bytes = try tables.value(forKey: key, in: "shares") else { return }
        let keys = try ShareKeys(decoding: bytes)
        _ = try tables.removeValue(forKey: key, in: "shares")
        if !keys.root.isEmpty {
            _ = try tables.removeValue(
                forKey: IndexKey.record(incarnation: zone.incarnation, name: keys.root), in: "shareRoots")
            let root = keys.root
            let key = IndexKey.record(incarnation: zone.incarnation, name: root)
            if let bytes = try tables.value(forKey: key, in: "records") {
                var state = try RecordState(decoding: bytes)
                if state.isTombstone {
                    // A root deleted with its share, or never saved: nothing is rooted there now.
                    if state.hierarchyRoot == root {
                        state.hierarchyRoot = ""
                        try tables.put(state.encoded, forKey: key, in: "records")
                    }
                } else if state.hierarchyRoot == root {
                    let above = try place(under: state.parent, incarnation: zone.incarnation, tables).root
                    try replace(root: root, by: above, incarnation: zone.incarnation, offset, tables)
                }
            }
        }
        if !keys.secret.isEmpty {
            _ = try tables.removeValue(forKey: IndexKey.shareSecret(keys.secret), in: "shareURLs")
        }
    }

    func zoneState(_ key: [UInt8], _ tables: ProjectionTables) throws -> ZoneState? {
        try tables.value(forKey: key, in: "zones").map { (bytes) throws(LogStoreError) in try ZoneState(decoding: bytes)
        }
    }

    /// Records a change of a custom zone at `offset`: moves its database-feed key there. The key
    /// of a deletion stays when the zone is re-created: it is the deletion's marker (F149).
    func touch(_ key: [UInt8], _ state: inout ZoneState, _ offset: UInt64, _ tables: ProjectionTables) throws {
        if state.lastChange != 0, state.lastChange != state.deletedAt {
            try tables.removeValue(forKey: bigEndian(state.lastChange), in: "dbChanges")
        }
        state.lastChange = offset
        try tables.put(key, forKey: bigEndian(offset), in: "dbChanges")
        try tables.put(state.encoded, forKey: key, in: "zones")
    }

    func recordChanged(_ recordID: Record.ID, to new: RecordState, time: UInt64, _ tables: ProjectionTables) throws {
        var run = try RecordRun(tables)
        run.time = time
        try recordChanged(recordID, to: new, tables, &run)
        try run.end(tables)
    }

    /// What a run of record changes keeps in memory until it ends (`RecordRun.end`): the states
    /// of the zones it read, the zones it touched, and the usage.
    struct RecordRun {
        /// The tables each record change reads and writes, found by name once per run.
        let records: ProjectionTable
        let zoneChanges: ProjectionTable

        init(_ tables: ProjectionTables) throws(LogStoreError) {
            self.init(records: try tables.handle("records"), zoneChanges: try tables.handle("zoneChanges"))
        }

        /// An empty run on the tables `records` and `zoneChanges` already found.
        private init(records: ProjectionTable, zoneChanges: ProjectionTable) {
            self.records = records
            self.zoneChanges = zoneChanges
        }

        /// Each zone the run read (`zones[slots[zoneID]]`), looked up by its ID once per record.
        var slots: [RecordZone.ID: Int] = [:]
        var zones: [Zone] = []

        /// A zone the run read: its key in the `zones` table, its state as the run left it
        /// (`nil`: no such zone), and whether the run changed its state and feed key.
        struct Zone {
            let key: [UInt8]
            var state: ZoneState?
            var touched = false
        }
        var usage: UInt64?
        var usageChanged = false
        /// The time of the entry being applied, in microseconds since 1970 (for assets).
        var time: UInt64 = 0
        /// The fields of each record type the run read from the `schema` table, as the run left them.
        var schema: [String: [String: RecordSchema.FieldKind]] = [:]
        /// The record types whose fields the run changed.
        var schemaChanged: Set<String> = []

        /// Grows the development schema with `record`'s type and fields (F137); the types read
        /// stay in memory until the run ends, so a run of records of one type reads its fields once.
        mutating func grow(schemaWith record: Record, _ tables: ProjectionTables) throws {
            let recordType = record.recordType
            var fields: [String: RecordSchema.FieldKind]
            var isNew = false
            if let kept = schema[recordType] {
                fields = kept
            } else if let bytes = try tables.value(forKey: Array(recordType.utf8), in: "schema") {
                fields = try RecordSchema.decode(fields: bytes)
            } else {
                fields = [:]
                isNew = true
            }
            if RecordSchema.grow(&fields, with: record) || isNew { schemaChanged.insert(recordType) }
            schema[recordType] = fields
        }

        /// Writes what the run kept: each touched zone's state and its feed key (at its last
        /// change), and the usage. The run is empty afterwards.
        mutating func end(_ tables: ProjectionTables) throws {
            for zone in zones where zone.touched {
                guard let state = zone.state else { continue }
                try tables.put(zone.key, forKey: bigEndian(state.lastChange), in: "dbChanges")
                try tables.put(state.encoded, forKey: zone.key, in: "zones")
            }
            if usageChanged, let usage { try tables.put(bigEndian(usage), forKey: IndexKey.usage, in: "state") }
            for recordType in schemaChanged {
                try tables.put(
                    RecordSchema.encode(fields: schema[recordType]!), forKey: Array(recordType.utf8), in: "schema")
            }
            self = RecordRun(records: records, zoneChanges: zoneChanges)
        }
    }

    /// `recordChanged` within a run: the zone's state, its feed key and the usage are written
    /// when the run ends.
    func recordChanged(
        _ recordID: Record.ID, to new: RecordState, _ tables: ProjectionTables, _ run: inout RecordRun
    ) throws {
        let isDefaultZone = recordID.zoneID == .default
        var slot = -1
        var zone: ZoneState?
        if isDefaultZone {
            zone = .defaultZone
        } else if let kept = run.slots[recordID.zoneID] {
            slot = kept
            zone = run.zones[slot].state
        } else {
            let key = IndexKey.zone(recordID.zoneID)
            zone = try zoneState(key, tables)
            slot = run.zones.count
            run.slots[recordID.zoneID] = slot
            run.zones.append(RecordRun.Zone(key: key, state: zone))
        }
        guard zone?.isLive == true else { return }  // the server never writes into a missing zone
        let key = IndexKey.record(incarnation: zone!.incarnation, name: recordID.recordName)
        var usage = try run.usage ?? self.usage(tables)
        let old = try tables.value(forKey: key, in: run.records).map { (bytes) throws(LogStoreError) in
            try RecordState(decoding: bytes)
        }
        var new = new
        if new.isTombstone { new.parent = old?.parent ?? "" }
        if let old {
            try tables.removeValue(
                forKey: old.changeKey(incarnation: zone!.incarnation, name: recordID.recordName), in: run.zoneChanges)
            usage -= min(usage, old.size)
        }
        let spread = try place(recordID.recordName, &new, old: old, incarnation: zone!.incarnation, tables)
        try updateReferrers(
            of: recordID.recordName, incarnation: zone!.incarnation, from: old?.deleteSelfTargets ?? [],
            to: new.deleteSelfTargets, tables)
        try updateAssetReferences(
            from: old?.assets ?? [], to: new.assets, incarnation: zone!.incarnation, time: run.time, tables)
        try tables.put(new.encoded, forKey: key, in: run.records)
        var change: [UInt8] = []
        change.reserveCapacity(1 + recordID.recordName.utf8.count)
        change.append(new.isTombstone ? 1 : 0)
        change.append(contentsOf: recordID.recordName.utf8)
        try tables.put(
            change, forKey: IndexKey.zoneChange(incarnation: zone!.incarnation, offset: new.offset), in: run.zoneChanges
        )
        if spread {
            try self.spread(
                from: recordID.recordName, new, incarnation: zone!.incarnation, new.offset, tables)
        }
        usage += new.size
        run.usage = usage
        run.usageChanged = true
        // The default zone takes no part in the database feed (F112). As `touch`: the first
        // change of the zone in the run drops its feed key; the run's end writes the new one.
        if !isDefaultZone {
            if !run.zones[slot].touched, zone!.lastChange != 0, zone!.lastChange != zone!.deletedAt {
                try tables.removeValue(forKey: bigEndian(zone!.lastChange), in: "dbChanges")
            }
            zone!.lastChange = new.offset
            run.zones[slot].state = zone
            run.zones[slot].touched = true
        }
    }

    /// Moves `referrer` from the referrer lists of its old targets to those of its new ones.
    func updateReferrers(
        of referrer: String, incarnation: UInt64, from old: [String], to new: [String], _ tables: ProjectionTables
    ) throws {
        if old.isEmpty && new.isEmpty { return }  // most records reference nothing with deleteSelf
        let removed = Set(old).subtracting(new)
        let added = Set(new).subtracting(old)
        for target in removed.union(added).sorted() {
            let key = IndexKey.record(incarnation: incarnation, name: target)
            var names = Set(try Referrers.decode(try tables.value(forKey: key, in: "referrers")))
            if removed.contains(target) { names.remove(referrer) } else { names.insert(referrer) }
            if names.isEmpty {
                try tables.removeValue(forKey: key, in: "referrers")
            } else {
                try tables.put(Referrers.encode(names.sorted()), forKey: key, in: "referrers")
            }
        }
    }

    func usage(_ tables: ProjectionTables) throws -> UInt64 {
        try tables.value(forKey: IndexKey.usage, in: "state").map { $0.withUnsafeBytes { readBigEndian($0) } } ?? 0
    }

    /// Drops every record and change of a zone incarnation.
    func removeRecords(ofIncarnation incarnation: UInt64, time: UInt64, _ tables: ProjectionTables) throws {
        let prefix = bigEndian(incarnation)
        var freed: UInt64 = 0
        var assets: [[UInt8]] = []
        try removeAll(withPrefix: prefix, in: "records", tables) { value in
            let state = try RecordState(decoding: value)
            freed += state.size
            assets += state.assets
        }
        for digest in assets {
            try updateAssetReferences(from: [digest], to: [], incarnation: incarnation, time: time, tables)
        }
        var secrets: [String] = []
        try removeAll(withPrefix: prefix, in: "shares", tables) { value in
            secrets.append(try ShareKeys(decoding: value).secret)
        }
        for secret in secrets where !secret.isEmpty {
            _ = try tables.removeValue(forKey: IndexKey.shareSecret(secret), in: "shareURLs")
        }
        for table in ["zoneChanges", "clientTokens", "referrers", "shareRoots", "zoneKeys", "assetGrants", "children"] {
            try removeAll(withPrefix: prefix, in: table, tables)
        }
        let usage = try self.usage(tables)
        try tables.put(bigEndian(usage - min(usage, freed)), forKey: IndexKey.usage, in: "state")
    }

    /// Removes every key of `table` that starts with `prefix`, showing each value to `visit` first.
    func removeAll(
        withPrefix prefix: [UInt8], in table: String, _ tables: ProjectionTables,
        visiting visit: ([UInt8]) throws -> Void = { _ in }
    ) throws {
        var keys: [[UInt8]] = []
        try tables.forEach(in: table, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            keys.append(Array(key))
            try visit(Array(value))
            return true
        }
        for key in keys { try tables.removeValue(forKey: key, in: table) }
    }

    /// Drops tombstones (record deletions, deleted zones and deletion markers) of changes at or
    /// before `horizon` (F144).
    func compact(through horizon: UInt64, _ tables: ProjectionTables) throws {
        var recordKeys: [[UInt8]] = []
        var changeKeys: [[UInt8]] = []
        try tables.forEach(in: "zoneChanges") { key, value in
            let offset = readBigEndian(key, at: 8)
            if offset <= horizon, value.first == 1 {
                changeKeys.append(Array(key))
                recordKeys.append(Array(key[0..<8]) + Array(value[1...]))
            }
            return true
        }
        for key in changeKeys { try tables.removeValue(forKey: key, in: "zoneChanges") }
        for key in recordKeys {
            // A tombstone that live records still name as their parent stays (out of the feed),
            // so that the record, saved again, finds its children (F123).
            if let bytes = try tables.value(forKey: key, in: "records"), try RecordState(decoding: bytes).children > 0 {
                continue
            }
            try tables.removeValue(forKey: key, in: "records")
        }
        var deletedZones: [(change: [UInt8], zone: [UInt8])] = []
        try tables.forEach(in: "dbChanges") { key, value in
            guard readBigEndian(key) <= horizon else { return false }
            deletedZones.append((Array(key), Array(value)))
            return true
        }
        for (change, zone) in deletedZones {
            guard var state = try zoneState(zone, tables) else { continue }
            if state.isLive {
                // A re-created zone's deletion marker goes; its latest change stays.
                if change.withUnsafeBytes({ readBigEndian($0) }) == state.deletedAt {
                    try tables.removeValue(forKey: change, in: "dbChanges")
                }
            } else {
                try tables.removeValue(forKey: change, in: "dbChanges")
                state.lastChange = 0
                try tables.put(state.encoded, forKey: zone, in: "zones")
            }
        }
        let current =
            try tables.value(forKey: IndexKey.horizon, in: "state").map { $0.withUnsafeBytes { readBigEndian($0) } }
            ?? 0
        try tables.put(bigEndian(max(current, horizon)), forKey: IndexKey.horizon, in: "state")
    }
}
