import Foundation
import LogStore
import SyncModel

// Assets on the server (F134): contents kept out of line by the zone owner's storage
// (`ServerAssetStore`), named by SHA-256, once per owner; the owner's private log records each
// upload of a content for a zone (`assetStored`, which grants the content to the zone) and each
// deletion (`assetsDeleted`), and its index counts the live records that reference each one. A
// zone's records reference, and its readers download, only what was uploaded for the zone or is
// referenced there already. Docs/Protocol.md, "Assets".

/// The asset rules of a server (F134): uploads and downloads of contents for the records of a
/// zone, as its owner's database grants them, and their collection.
struct ServerAssets: Sendable {
    /// The owners' databases, the registry, the storage and its asset store, quotas, the uploads
    /// under way, and the request hooks.
    let context: ServerContext

    /// Begins or resumes an upload (``SyncServer/beginAssetUpload(user:scope:zoneID:digest:size:device:operationGroup:)``).
    func beginUpload(
        user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, digest: AssetDigest, size: Int64,
        device: DeviceID? = nil,
        operationGroup: OperationGroup? = nil
    ) async throws -> AssetUpload {
        try user.validate()
        try device?.validate()
        try zoneID.validate()
        guard size >= 0 else {
            throw SyncError(.invalidArguments, "asset \(digest) for \(zoneID) has a negative size, \(size)")
        }
        guard size <= Limits.maxAssetBytes else {
            throw SyncError(
                .limitExceeded, "asset \(digest) for \(zoneID) holds \(size) bytes, more than \(Limits.maxAssetBytes)")
        }
        try context.requestHooks.beforeRequest(of: user)
        try await noteOperationGroup(operationGroup, request: "uploadAsset", user: user, scope: scope, device: device)
        let zone = try await context.storage.perform {
            try self.zone(user: user, scope: scope, zoneID: zoneID, writing: true)
        }
        let owner = zone.database
        let key = AssetUpload.Key(owner: owner.userNumber, digest: digest, zone: zone.incarnation)
        let hold = try await context.uploads.hold(
            key, user: user, device: device, naming: "asset \(digest) for \(zoneID)")
        defer { hold.endStep() }
        do {
            try hold.checkHeld()
            let quota = context.limits.quota(of: owner.user)
            let state = try await context.storage.perform {
                () throws -> (stored: Bool, received: Int64, hasher: AssetHasher) in
                if let kept = try owner.read({ try $0.asset(digest, inZone: zone.incarnation) }) {
                    guard kept.size == UInt64(size) else {
                        throw SyncError(
                            .invalidArguments,
                            "asset \(digest) is kept for \(zoneID) with \(kept.size) bytes, not \(size): a digest names one content"
                        )
                    }
                    return (true, size, AssetHasher())
                }
                // For this zone the content is new, whether or not the owner keeps it for
                // another: it takes every byte, and room under the quota.
                if quota != nil { try owner.read { try $0.checkQuota(quota, storing: digest, size: size) } }
                // Resume a cut upload for this zone: hash what it left (nothing past the size).
                let (assets, partial) = (
                    context.assets, AssetPartial(owner: owner.userNumber, digest: digest, zone: zone.incarnation)
                )
                var length = try assets.partialLength(partial)
                if length > size {
                    try assets.removePartial(partial)
                    length = 0
                }
                var hasher = AssetHasher()
                if length > 0 {
                    try assets.readPartial(partial) { hasher.update($0) }
                    if hasher.count != length {
                        try assets.removePartial(partial)
                        hasher = AssetHasher()
                    }
                }
                return (false, hasher.count, hasher)
            }
            return AssetUpload(
                context: context, zone: zone, hold: hold, key: key, zoneID: zoneID, digest: digest, size: size,
                device: device,
                stored: state.stored, received: state.received, hasher: state.hasher)
        } catch {
            context.uploads.release(key, hold)
            throw error
        }
    }

    /// Opens a stored content (``SyncServer/openAssetDownload(user:scope:zoneID:digest:device:operationGroup:)``).
    func openDownload(
        user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, digest: AssetDigest, device: DeviceID? = nil,
        operationGroup: OperationGroup? = nil
    ) async throws -> AssetDownload {
        try user.validate()
        try device?.validate()
        try zoneID.validate()
        try context.requestHooks.beforeRequest(of: user)
        try await noteOperationGroup(operationGroup, request: "downloadAsset", user: user, scope: scope, device: device)
        return try await context.storage.perform {
            let zone = try self.zone(user: user, scope: scope, zoneID: zoneID, writing: false)
            let owner = zone.database
            let state = try owner.read { try $0.asset(digest, inZone: zone.incarnation) }
            guard let state, try context.assets.storedSize(owner: owner.userNumber, digest: digest) == Int64(state.size)
            else {
                throw SyncError(.assetNotAvailable, "asset \(digest) is not stored for the records of \(zoneID)")
            }
            return AssetDownload(
                storage: context.storage, owner: owner.userNumber, digest: digest, size: Int64(state.size))
        }
    }

    /// Collects one user's contents (``SyncServer/collectAssets(of:unreferencedBefore:)``).
    func collect(of user: UserID, unreferencedBefore cutoff: Date) async throws -> AssetCollection {
        try user.validate()
        let database = try await context.storage.perform { try context.database(user, .private) }
        let owner = database.userNumber
        let cutoffTime = UInt64(max(0, EntryTime(cutoff).microsecondsSince1970))
        return try await context.storage.perform {
            try context.storage.withExclusiveLock(AssetUpload.lockName(owner: owner)) {
                var collection = AssetCollection()
                // One pass over the index: what goes, and what stays logged.
                let ((deleted, kept), _) = try database.write {
                    snapshot, _ -> (entries: [ServerEntry], result: ([AssetDigest], Set<AssetDigest>)) in
                    var digests: [AssetDigest] = []
                    var kept = Set<AssetDigest>()
                    try snapshot.index.forEach(in: "assets") { key, value in
                        let state = try AssetState(decoding: Array(value))
                        let digest = try AssetDigest(bytes: Array(key))
                        if state.references == 0, state.unreferencedSince < cutoffTime {
                            digests.append(digest)
                        } else {
                            kept.insert(digest)
                        }
                        return true
                    }
                    return (digests.isEmpty ? [] : [.assetsDeleted(digests)], (digests, kept))
                }
                let assets = context.assets
                for digest in deleted { try assets.remove(owner: owner, digest: digest) }
                collection.deleted = deleted
                // Contents no entry names: an upload cut between storing and logging.
                for digest in try assets.storedDigests(owner: owner) where !kept.contains(digest) {
                    try assets.remove(owner: owner, digest: digest)
                    collection.orphansRemoved.append(digest)
                }
                let active = context.uploads.keys(owner: owner)
                for (partial, written) in try assets.partials(owner: owner)
                where written < cutoff
                    && !active.contains(AssetUpload.Key(owner: owner, digest: partial.digest, zone: partial.zone))
                {
                    try assets.removePartial(partial)
                    collection.partialsRemoved.append(partial.digest)
                }
                return collection
            }
        }
    }

    /// Collects every user's contents (``SyncServer/collectAssets(unreferencedBefore:)``).
    func collectAll(unreferencedBefore cutoff: Date) async throws -> [UserID: AssetCollection] {
        var collected: [UserID: AssetCollection] = [:]
        for user in try await context.storage.perform({ try context.users.allUsers() }) {
            let collection = try await collect(of: user, unreferencedBefore: cutoff)
            if collection != AssetCollection() { collected[user] = collection }
        }
        return collected
    }

    /// The zone of an asset request, `zoneID` as `user` names it in `scope`, as its owner's
    /// database keeps it: the user's own private database, or the owner's for a zone shared with
    /// them (read-write to upload). The zone must be live.
    func zone(user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, writing: Bool) throws -> AssetZone {
        switch scope {
        case .private:
            let database = try context.database(user, .private)
            guard let kept = database.ownership.ownZoneID(zoneID) else {
                throw database.ownership.foreignZoneReadError(zoneID)
            }
            return try database.read { snapshot in
                guard let zone = try snapshot.zone(kept), zone.isLive else { throw try snapshot.zoneError(kept) }
                return AssetZone(database: database, zoneID: kept, incarnation: zone.incarnation)
            }
        case .shared:
            guard let owner = try context.users.owner(named: zoneID.ownerName), owner.user != user else {
                throw ShareRules.notShared(zoneID, with: user)
            }
            let database = try context.database(owner.user, .private)
            let kept = RecordZone.ID(zoneName: zoneID.zoneName)
            let participant = "_user\(try context.users.number(of: user))"
            return try database.read { snapshot in
                let access = try snapshot.access(of: participant, to: kept)
                // A zone shared with the user is live: access() finds no share in any other.
                guard !access.isEmpty, let zone = try snapshot.zone(kept), zone.isLive else {
                    throw ShareRules.notShared(zoneID, with: user)
                }
                if writing, access.zoneWide != .readWrite, !access.roots.values.contains(.readWrite) {
                    throw SyncError(.permissionFailure, "\(user) may only read \(zoneID), not upload assets to it")
                }
                return AssetZone(database: database, zoneID: kept, incarnation: zone.incarnation)
            }
        case .public:
            throw SyncError(.badDatabase, "the public database is not supported by this server yet")
        }
    }

    /// Notes the operation group of an asset transfer in the database of `user` and `scope`
    /// (``OperationGroups``): asset transfers do not run through `InProcessDatabase`'s requests.
    private func noteOperationGroup(
        _ group: OperationGroup?, request: String, user: UserID, scope: DatabaseScope, device: DeviceID?
    ) async throws {
        guard let group else { return }
        let context = context
        try await context.storage.perform {
            try context.database(user, scope).noteOperationGroup(group, request: request, device: device)
        }
    }
}

/// The zone of an asset request as its owner's private database keeps it.
struct AssetZone: Sendable {
    /// The owner's private database, which keeps the contents of the zone's records.
    let database: ServerDatabase
    /// The zone as the owner names it.
    let zoneID: RecordZone.ID
    /// The zone's current incarnation (0 for the default zone): what its contents are granted to.
    let incarnation: UInt64
}

/// What ``SyncServer/collectAssets(of:unreferencedBefore:)`` removed.
public struct AssetCollection: Sendable, Hashable {
    /// The contents no live record referenced since before the horizon (logged as deleted).
    public var deleted: [AssetDigest] = []
    /// Stored contents no log entry named (an upload cut between storing and logging).
    public var orphansRemoved: [AssetDigest] = []
    /// Partial uploads last written before the horizon.
    public var partialsRemoved: [AssetDigest] = []
}

/// A stored asset content, read piece by piece from any byte (a resumed download).
public struct AssetDownload: Sendable {
    let storage: any ServerStorage
    let owner: UInt64
    public let digest: AssetDigest
    /// The content's size in bytes.
    public let size: Int64

    /// Up to `maxLength` bytes from `offset` (fewer at the end, none past it).
    ///
    /// - Throws: `SyncError` `invalidArguments` for an offset outside the content,
    ///   `assetNotAvailable` when it was deleted meanwhile.
    public func read(from offset: Int64, maxLength: Int = AssetTransfer.chunkSize) async throws -> [UInt8] {
        guard offset >= 0, offset <= size else {
            throw SyncError(
                .invalidArguments, "asset \(digest) has \(size) bytes; it cannot be read from byte \(offset)")
        }
        let (storage, owner, digest) = (storage, owner, digest)
        let wanted = Int(min(Int64(maxLength), size - offset))
        if wanted == 0 { return [] }
        return try await storage.perform {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(wanted)
            try storage.assets.read(owner: owner, digest: digest, from: offset, maxLength: wanted) {
                bytes.append(contentsOf: $0)
            }
            return bytes
        }
    }
}
