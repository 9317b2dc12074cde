import Foundation
import LogStore
import SyncModel

// The key directory of end-to-end encrypted fields (F129; `ZoneKeyDirectory`): devices' public
// keys, kept per user in the user's private database (`deviceKeyRegistered`), and zone keys
// wrapped for them, kept in the zone owner's private database (`zoneKeysSaved`). The server never
// sees a zone key: it checks who may read and write a zone's wraps, that each wrap is for one of
// the zone's recipients, and that every wrap of one version carries the same check.
//
// A zone is reached as the other operations reach it: the caller's own zones through the private
// database (owner `__defaultOwner__` or the caller's record name), zones shared with the caller
// through the shared database (owner the owner's record name). Wraps are answered in the
// caller's spelling of the zone, and stored in the owner's.

/// A zone whose keys a request reaches: the owner's private database, the zone as the owner
/// keeps it, and who asks (`nil`: the owner).
struct ZoneKeyTarget {
    let owner: ServerDatabase
    let kept: RecordZone.ID
    let participant: ShareActor?
}

/// What the owner's index holds of a zone's keys, as one caller may see it.
struct ZoneKeyView {
    /// Every wrap, zone named as the owner keeps it, ordered by version and recipient.
    var wraps: [WrappedZoneKey]
    /// The record names of the users who should hold the key: the owner's first, then each
    /// accepted participant's, sorted.
    var recipientUsers: [String]
    /// Whether the caller may save wraps: the owner, or a read-write participant.
    var canWrite: Bool
}

/// The key directory's rules in one database (F129): the device keys of its user, and the
/// wraps of the keys of the zones it reaches (its own zones in a private database, zones shared
/// with its user in the shared database), which live in each zone's owner's database.
struct ZoneKeyRules {
    /// The database the request reached.
    let database: ServerDatabase
    /// The registry and the other users' databases: a zone's owner's, whose index keeps the zone's
    /// wraps, and its recipients', whose indexes keep their device keys.
    let context: ServerContext

    init(_ database: ServerDatabase) {
        self.database = database
        context = database.context
    }

    private var user: UserID { database.user }
    private var scope: DatabaseScope { database.scope }
    private var userRecordID: Record.ID { database.userRecordID }

    // MARK: Device keys

    /// Registers a device key of this database's user in the user's private database, whichever
    /// database the request came through; a key registered already changes nothing.
    ///
    /// - Throws: `SyncError` `limitExceeded` past `Limits.maxDeviceKeysPerUser` keys.
    func registerDeviceKey(_ key: DevicePublicKey) throws {
        let store = scope == .private ? database : try context.database(user, .private)
        _ = try store.write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
            if try snapshot.index.value(forKey: IndexKey.deviceKey(key.keyID), in: "deviceKeys") != nil {
                return ([], ())
            }
            var count = 0
            try snapshot.index.forEach(in: "deviceKeys") { _, _ in
                count += 1
                return true
            }
            guard count < Limits.maxDeviceKeysPerUser else {
                throw SyncError(
                    .limitExceeded,
                    "\(user) has registered \(count) device keys, the most a user may have (\(Limits.maxDeviceKeysPerUser)); \(key.description) is not registered"
                )
            }
            let kept = try DevicePublicKey(
                rawRepresentation: key.rawRepresentation, userRecordName: store.userRecordID.recordName)
            return ([.deviceKeyRegistered(kept)], ())
        }
    }

    // MARK: Reaching a zone

    /// The zone a request of this database names, as its owner keeps it, or `nil` when the caller
    /// cannot reach it from here (another user's zone in a private database, a zone of no known
    /// owner or the caller's own in the shared database). Whether the zone exists and is shared
    /// with the caller is the owner's index's to say (`zoneKeyView`).
    func zoneKeyTarget(_ zoneID: RecordZone.ID) throws -> ZoneKeyTarget? {
        switch scope {
        case .private:
            guard let kept = database.ownership.ownZoneID(zoneID) else { return nil }
            return ZoneKeyTarget(owner: database, kept: kept, participant: nil)
        case .shared:
            guard let owner = try context.users.owner(named: zoneID.ownerName), owner.user != user else { return nil }
            return ZoneKeyTarget(
                owner: try context.database(owner.user, .private), kept: RecordZone.ID(zoneName: zoneID.zoneName),
                participant: try context.users.actor(user))
        default:
            return nil
        }
    }

    /// The answer for a zone whose keys the caller cannot reach: the same whether or not it exists.
    func zoneKeysNotFound(_ zoneID: RecordZone.ID) -> SyncError {
        scope == .shared
            ? ShareRules.notShared(zoneID, with: user)
            : SyncError(.zoneNotFound, "\(zoneID) is not a zone of \(user)'s \(scope) database", item: .zone(zoneID))
    }

    /// In this (owner's private) database: the keys of the zone kept as `zoneID` as `participant`
    /// (or the owner, for `nil`) sees them, or `nil` when the zone is not live or not shared with
    /// them.
    func zoneKeyView(
        _ zoneID: RecordZone.ID, for participant: ShareActor?, _ snapshot: DatabaseSnapshot
    ) throws -> ZoneKeyView? {
        guard let zone = try snapshot.zone(zoneID), zone.isLive else { return nil }
        var canWrite = true
        if let participant {
            let access = try snapshot.access(of: participant.recordName, to: zoneID)
            if access.isEmpty { return nil }
            canWrite = access.zoneWide == .readWrite || access.roots.values.contains(.readWrite)
        }
        var wraps: [WrappedZoneKey] = []
        let prefix = bigEndian(zone.incarnation)
        try snapshot.index.forEach(in: "zoneKeys", from: prefix) { key, value in
            guard key.starts(with: prefix), key.count >= 16 else { return false }
            let stored = try ZoneKeyWrap(decoding: Array(value))
            wraps.append(
                WrappedZoneKey(
                    zoneID: zoneID, version: UInt32(truncatingIfNeeded: readBigEndian(key, at: 8)),
                    recipientKeyID: String(decoding: key[16...], as: UTF8.self), check: Data(stored.check),
                    wrapped: Data(stored.wrapped)))
            return true
        }
        return ZoneKeyView(wraps: wraps, recipientUsers: try recipientUsers(of: zone, snapshot), canWrite: canWrite)
    }

    /// The record names of the users who should hold a zone's key: this database's user, then
    /// every accepted participant of any share of the zone, sorted.
    func recipientUsers(of zone: ZoneState, _ snapshot: DatabaseSnapshot) throws -> [String] {
        var participants = Set<String>()
        if zone.incarnation != 0 {
            for (_, share) in try snapshot.shares(incarnation: zone.incarnation) {
                for member in share.participants
                where member.role != .owner && member.acceptanceStatus == .accepted && member.permission != .none {
                    if let name = member.userIdentity.userRecordName, name != userRecordID.recordName {
                        participants.insert(name)
                    }
                }
            }
        }
        return [userRecordID.recordName] + participants.sorted()
    }

    /// The registered device keys of the users with these record names, each key with its user.
    func deviceKeys(ofUsers names: [String]) throws -> [String: [DevicePublicKey]] {
        var keys: [String: [DevicePublicKey]] = [:]
        for name in Set(names) {
            let store: ServerDatabase
            if name == userRecordID.recordName, scope == .private {
                store = database
            } else if let owner = try context.users.owner(named: name) {
                store = try context.database(owner.user, .private)
            } else {
                continue
            }
            keys[name] = try store.read { snapshot in
                var found: [DevicePublicKey] = []
                try snapshot.index.forEach(in: "deviceKeys") { _, value in
                    found.append(try DevicePublicKey(rawRepresentation: Data(value), userRecordName: name))
                    return true
                }
                return found
            }
        }
        return keys
    }

    /// Zone keys are reached through the private and shared databases only.
    ///
    /// - Throws: `SyncError` `badDatabase` in the public database.
    private func requireZoneKeyScope() throws {
        guard scope != .public else {
            throw SyncError(
                .badDatabase, "zone keys are kept in the private and shared databases, not the public database")
        }
    }

    // MARK: Fetching

    /// `fetchZoneKeys`: each zone's wraps and recipients, or `zoneNotFound` for a zone the caller
    /// cannot read; without zone IDs, every zone of this database with at least one wrap.
    func fetchZoneKeys(_ request: FetchZoneKeysRequest) throws -> FetchZoneKeysResponse {
        try request.validate()
        try requireZoneKeyScope()
        var response = FetchZoneKeysResponse()
        // The zones, each as the caller names it.
        var asked: [(RecordZone.ID, ZoneKeyTarget)] = []
        let listing = request.zoneIDs == nil
        if let zoneIDs = request.zoneIDs {
            for zoneID in zoneIDs {
                if let error = ServerDatabase.violation(zoneID.validate) {
                    response.results[zoneID] = .failure(error)
                } else if let target = try zoneKeyTarget(zoneID) {
                    asked.append((zoneID, target))
                } else {
                    response.results[zoneID] = .failure(zoneKeysNotFound(zoneID))
                }
            }
        } else if scope == .private {
            let zones = try database.read { snapshot in
                var zones: [RecordZone.ID] = [.default]
                try snapshot.index.forEach(in: "zones") { key, value in
                    if try ZoneState(decoding: Array(value)).isLive { zones.append(IndexKey.zoneID(from: Array(key))) }
                    return true
                }
                return zones
            }
            asked = zones.map { ($0, ZoneKeyTarget(owner: database, kept: $0, participant: nil)) }
        } else {
            try SharePropagation(context: context).propagateShares(to: user)
            for (zoneID, _) in try database.read({ snapshot in try snapshot.sharedZones() }) {
                if let target = try zoneKeyTarget(zoneID) { asked.append((zoneID, target)) }
            }
        }
        // Each user's device keys are read once, however many of the zones they are a recipient of.
        var keys: [String: [DevicePublicKey]] = [:]
        for (zoneID, target) in asked {
            let owner = ZoneKeyRules(target.owner)
            let view = try target.owner.read { snapshot in
                try owner.zoneKeyView(target.kept, for: target.participant, snapshot)
            }
            guard let view else {
                if !listing { response.results[zoneID] = .failure(zoneKeysNotFound(zoneID)) }
                continue
            }
            if listing && view.wraps.isEmpty { continue }
            let unread = view.recipientUsers.filter { keys[$0] == nil }
            if !unread.isEmpty {
                let read = try owner.deviceKeys(ofUsers: unread)
                for name in unread { keys[name] = read[name] ?? [] }
            }
            response.results[zoneID] = .success(
                ZoneKeys(
                    wrappedKeys: view.wraps.map { wrap in
                        var wrap = wrap
                        wrap.zoneID = zoneID
                        return wrap
                    },
                    recipients: view.recipientUsers.flatMap { name in (keys[name] ?? []).sorted { $0.keyID < $1.keyID }
                    }))
        }
        return response
    }

    // MARK: Saving

    /// `saveZoneKeys`: each wrap saved in its zone's owner's database, with a result of its own.
    func saveZoneKeys(_ request: SaveZoneKeysRequest) throws -> SaveZoneKeysResponse {
        try request.validate()
        try requireZoneKeyScope()
        var response = SaveZoneKeysResponse()
        var owners: [UserID] = []
        var byOwner:
            [UserID: (
                owner: ServerDatabase, participant: ShareActor?, items: [(asked: WrappedZoneKey, kept: WrappedZoneKey)]
            )] = [:]
        for wrap in request.keys {
            if let error = ServerDatabase.violation(wrap.validate) {
                response.results[wrap.id] = .failure(error)
                continue
            }
            guard let target = try zoneKeyTarget(wrap.zoneID) else {
                response.results[wrap.id] = .failure(zoneKeysNotFound(wrap.zoneID))
                continue
            }
            var kept = wrap
            kept.zoneID = target.kept
            if byOwner[target.owner.user] == nil {
                owners.append(target.owner.user)
                byOwner[target.owner.user] = (target.owner, target.participant, [])
            }
            byOwner[target.owner.user]!.items.append((wrap, kept))
        }
        for user in owners {
            let group = byOwner[user]!
            let results = try ZoneKeyRules(group.owner).saveOwnZoneKeys(
                group.items, by: group.participant, notFound: zoneKeysNotFound)
            response.results.merge(results) { _, new in new }
        }
        return response
    }

    /// In this (owner's private) database: decides and appends wraps of its zones' keys, each
    /// given as the caller asked it and as this database keeps it, for `participant` (`nil`: the
    /// owner). The accepted ones are one `zoneKeysSaved` entry.
    ///
    /// The recipients' device keys live in other users' databases, read before the write; the
    /// write checks that the zones' recipient users did not change meanwhile, and decides again
    /// if they did.
    private func saveOwnZoneKeys(
        _ items: [(asked: WrappedZoneKey, kept: WrappedZoneKey)], by participant: ShareActor?,
        notFound: (RecordZone.ID) -> SyncError
    ) throws -> [WrappedZoneKey.ID: Result<WrappedZoneKey, SyncError>] {
        let zones = Set(items.map(\.kept.zoneID))
        for _ in 0..<3 {
            let users = try database.read { snapshot in
                try zones.reduce(into: [RecordZone.ID: [String]]()) { users, zoneID in
                    if let zone = try snapshot.zone(zoneID), zone.isLive {
                        users[zoneID] = try recipientUsers(of: zone, snapshot)
                    }
                }
            }
            let keys = try deviceKeys(ofUsers: users.values.flatMap { $0 })
            let recipients = users.mapValues { names in Set(names.flatMap { (keys[$0] ?? []).map(\.keyID) }) }
            let (decided, _) = try database.write {
                snapshot, _ -> (entries: [ServerEntry], result: [WrappedZoneKey.ID: Result<WrappedZoneKey, SyncError>]?)
                in
                var views: [RecordZone.ID: ZoneKeyView?] = [:]
                for zoneID in zones {
                    let live = try snapshot.zone(zoneID).flatMap { $0.isLive ? $0 : nil }
                    let current = try live.map { try recipientUsers(of: $0, snapshot) }
                    guard current == users[zoneID] else { return ([], nil) }  // shares changed: decide again
                    views[zoneID] = try zoneKeyView(zoneID, for: participant, snapshot)
                }
                var results: [WrappedZoneKey.ID: Result<WrappedZoneKey, SyncError>] = [:]
                var accepted: [WrappedZoneKey] = []
                // The check of each version of each zone: kept already, or accepted in this request.
                var checks: [RecordZone.ID: [UInt32: Data]] = [:]
                for zoneID in zones {
                    for wrap in (views[zoneID] ?? nil)?.wraps ?? [] where checks[zoneID]?[wrap.version] == nil {
                        checks[zoneID, default: [:]][wrap.version] = wrap.check
                    }
                }
                for (asked, kept) in items {
                    func fail(_ code: SyncError.Code, _ message: String) {
                        results[asked.id] = .failure(SyncError(code, message, item: .zone(asked.zoneID)))
                    }
                    guard let view = views[kept.zoneID] ?? nil else {
                        results[asked.id] = .failure(notFound(asked.zoneID))
                        continue
                    }
                    guard view.canWrite else {
                        fail(
                            .permissionFailure,
                            "\(asked.zoneID) is shared with \(participant.map { "\($0.user)" } ?? "the caller") read-only; only its owner and read-write participants save its keys"
                        )
                        continue
                    }
                    guard recipients[kept.zoneID]?.contains(kept.recipientKeyID) == true else {
                        fail(
                            .invalidArguments,
                            "\(asked): device key \(kept.recipientKeyID) is not a recipient of \(asked.zoneID); its recipients are the registered devices of its owner and of its accepted share participants"
                        )
                        continue
                    }
                    if let existing = view.wraps.first(where: {
                        $0.version == kept.version && $0.recipientKeyID == kept.recipientKeyID
                    }) {
                        if existing.check == kept.check {
                            var kept = existing
                            kept.zoneID = asked.zoneID
                            results[asked.id] = .success(kept)
                        } else {
                            fail(
                                .serverRecordChanged,
                                "\(asked) is kept already with another key: another device made version \(kept.version) of \(asked.zoneID)'s key first; fetch the zone's keys"
                            )
                        }
                        continue
                    }
                    if let check = checks[kept.zoneID]?[kept.version], check != kept.check {
                        fail(
                            .serverRecordChanged,
                            "version \(kept.version) of \(asked.zoneID)'s key is another key: another device made it first; fetch the zone's keys"
                        )
                        continue
                    }
                    // A new version follows the zone's latest: versions count rotations, and one
                    // that skipped ahead (to 4294967295, say) would leave devices no next version.
                    if checks[kept.zoneID]?[kept.version] == nil {
                        let latest = checks[kept.zoneID]?.keys.max() ?? 0
                        guard latest < WrappedZoneKey.maxVersion, kept.version == latest + 1 else {
                            fail(
                                .invalidArguments,
                                "\(asked): version \(kept.version) is not the next version of \(asked.zoneID)'s key; its latest is \(latest), so a new key is version \(UInt64(latest) + 1) (at most \(WrappedZoneKey.maxVersion))"
                            )
                            continue
                        }
                    }
                    checks[kept.zoneID, default: [:]][kept.version] = kept.check
                    accepted.append(kept)
                    results[asked.id] = .success(asked)
                }
                return (accepted.isEmpty ? [] : [.zoneKeysSaved(accepted)], results)
            }
            if let decided { return decided }
        }
        throw SyncError(
            .zoneBusy,
            "the shares of \(zones.sorted { $0.zoneName < $1.zoneName }.map { "\($0)" }.joined(separator: ", ")) kept changing while their keys were saved; try again",
            retryAfter: .seconds(1))
    }
}
