import Foundation
import LogStore
import Synchronization
import SyncModel

// Assets on the server (F134): contents kept out of line by the zone owner's storage
// (`ServerAssetStore`), named by SHA-256; the owner's private log records each content stored
// (`assetStored`) and deleted (`assetsDeleted`), and its index counts the live records that
// reference each one. Docs/Protocol.md, "Assets".

extension SyncServer {
    /// Begins an upload of an asset's content for the records of `zoneID`, or resumes the cut
    /// upload of the same content: the returned upload's ``AssetUpload/received`` says from which
    /// byte to send. An upload whose content the owner already keeps is stored at once.
    ///
    /// - Parameters:
    ///   - user: The user uploading.
    ///   - scope: The database the request reached: `.private` for the user's own zones, `.shared`
    ///     for a zone shared with them with read-write permission.
    ///   - zoneID: The zone whose records will reference the asset, named as in that database.
    ///   - digest: The SHA-256 the content must have.
    ///   - size: The content's size in bytes.
    ///   - device: The device uploading.
    ///   - operationGroup: The group the upload belongs to (F69), noted in the database's log the
    ///     first time it is seen.
    /// - Throws: ``SyncError``: `limitExceeded` over ``Limits/maxAssetBytes``, `quotaExceeded`,
    ///   `zoneNotFound` for a zone the user cannot write, `zoneBusy` (with a retry-after) while
    ///   another request uploads the same content, `invalidArguments` for bad IDs or a malformed
    ///   operation group.
    public func beginAssetUpload(
        user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, digest: AssetDigest, size: Int64, device: DeviceID? = nil,
        operationGroup: OperationGroup? = nil
    ) async throws -> AssetUpload {
        try user.validate()
        try device?.validate()
        try zoneID.validate()
        guard size >= 0 else {
            throw SyncError(.invalidArguments, "asset \(digest) for \(zoneID) has a negative size, \(size)")
        }
        guard size <= Limits.maxAssetBytes else {
            throw SyncError(.limitExceeded, "asset \(digest) for \(zoneID) holds \(size) bytes, more than \(Limits.maxAssetBytes)")
        }
        try takeInjectedFailure(for: user)
        try await noteOperationGroup(operationGroup, request: "uploadAsset", user: user, scope: scope, device: device)
        let owner = try await storage.perform { try self.assetOwner(user: user, scope: scope, zoneID: zoneID, writing: true) }
        let key = AssetUpload.Key(owner: owner.userNumber, digest: digest)
        guard activeUploads.withLock({ $0.insert(key).inserted }) else {
            throw SyncError(
                .zoneBusy, "asset \(digest) for \(zoneID) is being uploaded by another request", retryAfter: .seconds(1))
        }
        do {
            let quota = quotas.withLock { $0[owner.user] }
            let state = try await storage.perform { () throws -> (stored: Bool, received: Int64, hasher: AssetHasher) in
                if let stored = try owner.read({ try $0.asset(digest) }) {
                    guard stored.size == UInt64(size) else {
                        throw SyncError(
                            .invalidArguments, "asset \(digest) is kept with \(stored.size) bytes, not \(size): a digest names one content")
                    }
                    return (true, size, AssetHasher())
                }
                if quota != nil { try owner.read { try $0.checkQuota(quota, storing: digest, size: size) } }
                // Resume a cut upload: hash what it left (nothing past the announced size).
                let assets = self.storage.assets
                var length = try assets.partialLength(owner: owner.userNumber, digest: digest)
                if length > size {
                    try assets.removePartial(owner: owner.userNumber, digest: digest)
                    length = 0
                }
                var hasher = AssetHasher()
                if length > 0 {
                    try assets.readPartial(owner: owner.userNumber, digest: digest) { hasher.update($0) }
                    if hasher.count != length {
                        try assets.removePartial(owner: owner.userNumber, digest: digest)
                        hasher = AssetHasher()
                    }
                }
                return (false, hasher.count, hasher)
            }
            return AssetUpload(
                server: self, owner: owner, zoneID: zoneID, digest: digest, size: size, device: device,
                stored: state.stored, received: state.received, hasher: state.hasher)
        } catch {
            activeUploads.withLock { _ = $0.remove(key) }
            throw error
        }
    }

    /// Opens an asset's stored content for reading, for a record of `zoneID`; its
    /// `operationGroup` (F69) is noted in the database's log the first time it is seen.
    ///
    /// - Throws: ``SyncError``: `assetNotAvailable` when the owner keeps no such content,
    ///   `zoneNotFound` for a zone the user cannot read, `invalidArguments` for bad IDs or a
    ///   malformed operation group.
    public func openAssetDownload(
        user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, digest: AssetDigest, device: DeviceID? = nil,
        operationGroup: OperationGroup? = nil
    ) async throws -> AssetDownload {
        try user.validate()
        try device?.validate()
        try zoneID.validate()
        try takeInjectedFailure(for: user)
        try await noteOperationGroup(operationGroup, request: "downloadAsset", user: user, scope: scope, device: device)
        return try await storage.perform {
            let owner = try self.assetOwner(user: user, scope: scope, zoneID: zoneID, writing: false)
            let state = try owner.read { snapshot -> AssetState? in
                // A participant reads only what the records of the zones shared with them
                // reference; the owner, every content they keep.
                if scope == .shared {
                    guard let zone = try snapshot.zone(RecordZone.ID(zoneName: zoneID.zoneName)), zone.isLive,
                        try snapshot.index.value(
                            forKey: IndexKey.assetZone(digest.bytes, incarnation: zone.incarnation), in: "assetZones") != nil
                    else { return nil }
                }
                return try snapshot.asset(digest)
            }
            guard let state, try self.storage.assets.storedSize(owner: owner.userNumber, digest: digest) == Int64(state.size) else {
                throw SyncError(.assetNotAvailable, "asset \(digest) is not stored for the records of \(zoneID)")
            }
            return AssetDownload(storage: self.storage, owner: owner.userNumber, digest: digest, size: Int64(state.size))
        }
    }

    /// Deletes the asset contents of `user`'s records that no live record has referenced since
    /// before `cutoff` (the horizon: a device that fetched a record just before its asset went
    /// still finds it until then), then what no log entry accounts for: contents stored by an
    /// upload cut before its `assetStored` entry, and partial uploads last written before
    /// `cutoff`.
    @discardableResult
    public func collectAssets(of user: UserID, unreferencedBefore cutoff: Date) async throws -> AssetCollection {
        try user.validate()
        let database = try await storage.perform { try self.store(user, .private) }
        let owner = database.userNumber
        let cutoffTime = UInt64(max(0, EntryTime(cutoff).microsecondsSince1970))
        return try await storage.perform {
            try self.storage.withExclusiveLock(AssetUpload.lockName(owner: owner)) {
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
                let assets = self.storage.assets
                for digest in deleted { try assets.remove(owner: owner, digest: digest) }
                collection.deleted = deleted
                // Contents no entry names: an upload cut between storing and logging.
                for digest in try assets.storedDigests(owner: owner) where !kept.contains(digest) {
                    try assets.remove(owner: owner, digest: digest)
                    collection.orphansRemoved.append(digest)
                }
                let active = self.activeUploads.withLock { uploads in Set(uploads.filter { $0.owner == owner }.map(\.digest)) }
                for (digest, written) in try assets.partials(owner: owner) where written < cutoff && !active.contains(digest) {
                    try assets.removePartial(owner: owner, digest: digest)
                    collection.partialsRemoved.append(digest)
                }
                return collection
            }
        }
    }

    /// ``collectAssets(of:unreferencedBefore:)`` for every registered user: what `logsync-server
    /// serve` runs periodically and `logsync-server collect-assets` once. Returns what was removed,
    /// for the users where anything was.
    @discardableResult
    public func collectAssets(unreferencedBefore cutoff: Date) async throws -> [UserID: AssetCollection] {
        var collected: [UserID: AssetCollection] = [:]
        for user in try await storage.perform({ try self.users.allUsers() }) {
            let collection = try await collectAssets(of: user, unreferencedBefore: cutoff)
            if collection != AssetCollection() { collected[user] = collection }
        }
        return collected
    }

    /// The database that keeps the assets of `zoneID` as `user` names it in `scope`: the user's
    /// own private database, or the owner's for a zone shared with them (read-write to upload).
    func assetOwner(user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, writing: Bool) throws -> ServerDatabase {
        switch scope {
        case .private:
            let database = try store(user, .private)
            guard database.ownZoneID(zoneID) != nil else { throw database.foreignZoneReadError(zoneID) }
            return database
        case .shared:
            guard let owner = try owner(named: zoneID.ownerName), owner.user != user else {
                throw ServerDatabase.notShared(zoneID, with: user)
            }
            let database = try store(owner.user, .private)
            let kept = RecordZone.ID(zoneName: zoneID.zoneName)
            let participant = "_user\(try users.number(of: user))"
            let access = try database.read { try database.access(of: participant, to: kept, $0) }
            if access.isEmpty { throw ServerDatabase.notShared(zoneID, with: user) }
            if writing, access.zoneWide != .readWrite, !access.roots.values.contains(.readWrite) {
                throw SyncError(.permissionFailure, "\(user) may only read \(zoneID), not upload assets to it")
            }
            return database
        case .public:
            throw SyncError(.badDatabase, "the public database is not supported by this server yet")
        }
    }
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

/// One upload of an asset's content on the server, begun by
/// ``SyncServer/beginAssetUpload(user:scope:zoneID:digest:size:device:)``: pieces are
/// written in order from ``received``; ``finish()`` checks the digest and stores the content.
/// ``close()`` ends it (a partial content stays, for the next upload to resume).
public final class AssetUpload: Sendable {
    struct Key: Hashable {
        var owner: UInt64
        var digest: AssetDigest
    }

    static func lockName(owner: UInt64) -> String { "assets-u\(owner)" }

    let server: SyncServer
    let owner: ServerDatabase
    public let zoneID: RecordZone.ID
    public let digest: AssetDigest
    public let size: Int64
    let device: DeviceID?
    private struct Progress {
        var stored: Bool
        var received: Int64
        var hasher: AssetHasher
        var closed = false
    }
    private let progress: Mutex<Progress>

    init(
        server: SyncServer, owner: ServerDatabase, zoneID: RecordZone.ID, digest: AssetDigest, size: Int64, device: DeviceID?,
        stored: Bool, received: Int64, hasher: AssetHasher
    ) {
        self.server = server
        self.owner = owner
        self.zoneID = zoneID
        self.digest = digest
        self.size = size
        self.device = device
        progress = Mutex(Progress(stored: stored, received: received, hasher: hasher))
    }

    deinit { close() }

    /// Whether the content is stored (it was already, or ``finish()`` stored it).
    public var isStored: Bool { progress.withLock { $0.stored } }

    /// How many bytes the server holds: where the next piece starts.
    public var received: Int64 { progress.withLock { $0.received } }

    /// Appends the piece `bytes`, which starts at byte `offset` of the content.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the asset for a piece out of order
    ///   (`offset` is not ``received``) or past the announced size; storage errors.
    public func write(_ bytes: [UInt8], at offset: Int64) async throws {
        let received = try progress.withLock { progress throws(SyncError) -> Int64 in
            guard !progress.closed else { throw SyncError(.invalidArguments, "the upload of asset \(self.digest) has ended") }
            return progress.received
        }
        guard offset == received else {
            throw SyncError(
                .invalidArguments,
                "asset \(digest): a piece starts at byte \(offset), but the server holds \(received) bytes; pieces come in order from there")
        }
        guard offset + Int64(bytes.count) <= size else {
            throw SyncError(
                .invalidArguments, "asset \(digest): \(offset + Int64(bytes.count)) bytes sent, more than its announced \(size)")
        }
        if isStored || bytes.isEmpty { return }
        let (storage, ownerNumber, name) = (server.storage, owner.userNumber, digest)
        // The piece is written while it is hashed: the disk and the digest in parallel.
        async let written: Void = storage.perform {
            try bytes.withUnsafeBytes { try storage.assets.appendPartial(owner: ownerNumber, digest: name, at: offset, $0) }
        }
        var hasher = progress.withLock { $0.hasher }
        hasher.update(bytes)
        try await written
        progress.withLock {
            $0.hasher = hasher
            $0.received += Int64(bytes.count)
        }
    }

    /// Checks that every byte arrived and hashes to the digest, stores the content durably and
    /// logs it (`assetStored`); returns the asset as the server keeps it.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` when bytes are missing (the upload may
    ///   continue from ``received``); `assetFileModified` naming the asset when the bytes hash to
    ///   another digest (the partial content is dropped); `quotaExceeded`.
    public func finish() async throws -> Asset {
        let (stored, received, hash) = progress.withLock { ($0.stored, $0.received, $0.hasher.finalize()) }
        let asset = Asset(digest: digest, size: size)
        if stored { return asset }
        guard received == size else {
            throw SyncError(.invalidArguments, "asset \(digest): \(received) of its \(size) bytes arrived; the upload continues from byte \(received)")
        }
        let (storage, owner, digest, size) = (server.storage, owner, digest, size)
        let quota = server.quotas.withLock { $0[owner.user] }
        guard hash == digest else {
            try await storage.perform { try storage.assets.removePartial(owner: owner.userNumber, digest: digest) }
            progress.withLock {
                $0.received = 0
                $0.hasher = AssetHasher()
            }
            throw SyncError(
                .assetFileModified, "the \(size) bytes uploaded as asset \(digest) hash to \(hash): the content changed or was damaged, and nothing is stored")
        }
        try await storage.perform {
            try storage.withExclusiveLock(AssetUpload.lockName(owner: owner.userNumber)) {
                try storage.assets.storePartial(owner: owner.userNumber, digest: digest)
                _ = try owner.write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
                    if try snapshot.asset(digest) != nil { return ([], ()) }
                    try snapshot.checkQuota(quota, storing: digest, size: size)
                    return ([.assetStored(digest, size: size)], ())
                }
            }
        }
        progress.withLock { $0.stored = true }
        return asset
    }

    /// Ends the upload; a partial content stays for the next upload of it to resume.
    public func close() {
        let wasOpen = progress.withLock { progress -> Bool in
            defer { progress.closed = true }
            return !progress.closed
        }
        if wasOpen {
            let key = Key(owner: owner.userNumber, digest: digest)
            server.activeUploads.withLock { _ = $0.remove(key) }
        }
    }
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
    /// - Throws: ``SyncError`` `invalidArguments` for an offset outside the content,
    ///   `assetNotAvailable` when it was deleted meanwhile.
    public func read(from offset: Int64, maxLength: Int = AssetTransfer.chunkSize) async throws -> [UInt8] {
        guard offset >= 0, offset <= size else {
            throw SyncError(.invalidArguments, "asset \(digest) has \(size) bytes; it cannot be read from byte \(offset)")
        }
        let (storage, owner, digest) = (storage, owner, digest)
        let wanted = Int(min(Int64(maxLength), size - offset))
        if wanted == 0 { return [] }
        return try await storage.perform {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(wanted)
            try storage.assets.read(owner: owner, digest: digest, from: offset, maxLength: wanted) { bytes.append(contentsOf: $0) }
            return bytes
        }
    }
}

extension ServerDatabase.Snapshot {
    /// Throws `quotaExceeded` when storing the content `digest` of `size` bytes would take the
    /// database's usage over `quota` (`nil`: unlimited).
    func checkQuota(_ quota: Int?, storing digest: AssetDigest, size: Int64) throws {
        guard let quota else { return }
        let usage = try state(IndexKey.usage)
        if usage + UInt64(size) > UInt64(max(0, quota)) {
            throw SyncError(
                .quotaExceeded,
                "storing asset \(digest) (\(size) bytes) would use \(usage + UInt64(size)) bytes, over \(database.user)'s quota of \(quota)")
        }
    }

    /// The state of the asset content `digest`, if this database keeps it.
    func asset(_ digest: AssetDigest) throws -> AssetState? {
        try index.value(forKey: digest.bytes, in: "assets").map { (bytes) throws(LogStoreError) in try AssetState(decoding: bytes) }
    }
}

extension ServerDatabase {
    /// The failure of a record whose assets the database does not keep (never uploaded, or
    /// deleted since), or keeps with another size; `nil` when every one is there.
    func checkAssets(of record: Record, _ snapshot: Snapshot) throws -> SyncError? {
        for (key, asset) in record.assets {
            guard let digest = asset.digest, let size = asset.size else { continue }  // validate() refused these
            guard let state = try snapshot.asset(digest) else {
                return SyncError(
                    .assetNotAvailable,
                    "\(record.recordID) field \(quoted(key)): asset \(digest) was never uploaded (or was deleted); upload its content before saving the record",
                    item: .record(record.recordID))
            }
            guard state.size == UInt64(size) else {
                return SyncError(
                    .invalidArguments,
                    "\(record.recordID) field \(quoted(key)): asset \(digest) has \(state.size) bytes on the server, not \(size)",
                    item: .record(record.recordID))
            }
        }
        return nil
    }
}
