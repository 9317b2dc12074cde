import Foundation
import LogStore
import Synchronization
import SyncModel

// Assets on the server (F134): contents kept out of line by the zone owner's storage
// (`ServerAssetStore`), named by SHA-256, once per owner; the owner's private log records each
// upload of a content for a zone (`assetStored`, which grants the content to the zone) and each
// deletion (`assetsDeleted`), and its index counts the live records that reference each one. A
// zone's records reference, and its readers download, only what was uploaded for the zone or is
// referenced there already. Docs/Protocol.md, "Assets".

extension SyncServer {
    /// Begins an upload of an asset's content for the records of `zoneID`, or resumes the cut
    /// upload of the same content for that zone: the returned upload's ``AssetUpload/received``
    /// says from which byte to send. An upload of a content the zone has already (uploaded for
    /// it, or referenced by its live records) is stored at once; a content the owner keeps for
    /// other zones only is uploaded whole, as one the owner does not keep, and the zone gains it
    /// without a second copy of its bytes (Docs/Protocol.md, "Assets").
    ///
    /// A new upload from the same user and named device as one still held (a client retrying
    /// after its connection dropped, before the server noticed) takes that one over: it waits for
    /// the piece the old one is writing, if any, and the old one's later steps fail with
    /// `zoneBusy`.
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
    ///   another user or device (or a request naming no device) uploads the same content for the
    ///   zone, `invalidArguments` for bad IDs, a malformed operation group, or a size other than
    ///   that of the content the zone has.
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
        let zone = try await storage.perform { try self.assetZone(user: user, scope: scope, zoneID: zoneID, writing: true) }
        let owner = zone.database
        let key = AssetUpload.Key(owner: owner.userNumber, digest: digest, zone: zone.incarnation)
        let hold = try await holdUpload(key, user: user, device: device, naming: "asset \(digest) for \(zoneID)")
        defer { hold.endStep() }
        do {
            try hold.checkHeld()
            let quota = quotas.withLock { $0[owner.user] }
            let state = try await storage.perform { () throws -> (stored: Bool, received: Int64, hasher: AssetHasher) in
                if let kept = try owner.read({ try $0.asset(digest, inZone: zone.incarnation) }) {
                    guard kept.size == UInt64(size) else {
                        throw SyncError(
                            .invalidArguments,
                            "asset \(digest) is kept for \(zoneID) with \(kept.size) bytes, not \(size): a digest names one content")
                    }
                    return (true, size, AssetHasher())
                }
                // For this zone the content is new, whether or not the owner keeps it for
                // another: it takes every byte, and room under the quota.
                if quota != nil { try owner.read { try $0.checkQuota(quota, storing: digest, size: size) } }
                // Resume a cut upload for this zone: hash what it left (nothing past the size).
                let (assets, partial) = (self.storage.assets, AssetPartial(owner: owner.userNumber, digest: digest, zone: zone.incarnation))
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
                server: self, zone: zone, hold: hold, key: key, zoneID: zoneID, digest: digest, size: size, device: device,
                stored: state.stored, received: state.received, hasher: state.hasher)
        } catch {
            releaseUpload(key, hold)
            throw error
        }
    }

    /// Holds the upload of `key` for `user`'s `device`, taking over the hold of an earlier
    /// upload from the same user and device once its step in flight is over. The hold returned
    /// is in its first step (the caller ends it).
    ///
    /// - Throws: `zoneBusy` (retry after 1 s) while another user or device holds it.
    func holdUpload(_ key: AssetUpload.Key, user: UserID, device: DeviceID?, naming what: String) async throws -> UploadHold {
        let hold = UploadHold(user: user, device: device, naming: what)
        let previous = try activeUploads.withLock { uploads throws(SyncError) -> UploadHold? in
            let previous = uploads[key]
            if let previous, !previous.mayBeTakenOver(by: user, device: device) {
                throw SyncError(.zoneBusy, "\(what) is being uploaded by another request", retryAfter: .seconds(1))
            }
            uploads[key] = hold
            return previous
        }
        await previous?.takeOver()
        return hold
    }

    /// Ends `hold`, and forgets it as the holder of `key` unless another upload has taken over.
    func releaseUpload(_ key: AssetUpload.Key, _ hold: UploadHold) {
        hold.end()
        activeUploads.withLock { uploads in
            if uploads[key] === hold { uploads[key] = nil }
        }
    }

    /// Opens an asset's stored content for reading, for a record of `zoneID`; its
    /// `operationGroup` (F69) is noted in the database's log the first time it is seen.
    ///
    /// - Throws: ``SyncError``: `assetNotAvailable` when the zone has no such content (it was
    ///   never uploaded for the zone nor referenced by its live records, or was collected),
    ///   whether or not the owner keeps it for another zone; `zoneNotFound` for a zone the user
    ///   cannot read, `invalidArguments` for bad IDs or a malformed operation group.
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
            let zone = try self.assetZone(user: user, scope: scope, zoneID: zoneID, writing: false)
            let owner = zone.database
            let state = try owner.read { try $0.asset(digest, inZone: zone.incarnation) }
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
                let active = self.activeUploads.withLock { uploads in Set(uploads.keys.filter { $0.owner == owner }) }
                for (partial, written) in try assets.partials(owner: owner)
                where written < cutoff && !active.contains(AssetUpload.Key(owner: owner, digest: partial.digest, zone: partial.zone)) {
                    try assets.removePartial(partial)
                    collection.partialsRemoved.append(partial.digest)
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

    /// The zone of an asset request, `zoneID` as `user` names it in `scope`, as its owner's
    /// database keeps it: the user's own private database, or the owner's for a zone shared with
    /// them (read-write to upload). The zone must be live.
    func assetZone(user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, writing: Bool) throws -> AssetZone {
        switch scope {
        case .private:
            let database = try store(user, .private)
            guard let kept = database.ownZoneID(zoneID) else { throw database.foreignZoneReadError(zoneID) }
            return try database.read { snapshot in
                guard let zone = try snapshot.zone(kept), zone.isLive else { throw try database.zoneError(kept, snapshot) }
                return AssetZone(database: database, zoneID: kept, incarnation: zone.incarnation)
            }
        case .shared:
            guard let owner = try owner(named: zoneID.ownerName), owner.user != user else {
                throw ServerDatabase.notShared(zoneID, with: user)
            }
            let database = try store(owner.user, .private)
            let kept = RecordZone.ID(zoneName: zoneID.zoneName)
            let participant = "_user\(try users.number(of: user))"
            return try database.read { snapshot in
                let access = try database.access(of: participant, to: kept, snapshot)
                // A zone shared with the user is live: access() finds no share in any other.
                guard !access.isEmpty, let zone = try snapshot.zone(kept), zone.isLive else {
                    throw ServerDatabase.notShared(zoneID, with: user)
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

/// One upload of an asset's content on the server, begun by
/// ``SyncServer/beginAssetUpload(user:scope:zoneID:digest:size:device:operationGroup:)``: pieces
/// are written in order from ``received``; ``finish()`` checks the digest and stores the content
/// for the zone. ``close()`` ends it (a partial content stays, for the next upload to resume).
public final class AssetUpload: Sendable {
    /// What one upload at a time holds: a content for a zone incarnation of its owner.
    struct Key: Hashable {
        var owner: UInt64
        var digest: AssetDigest
        var zone: UInt64
    }

    static func lockName(owner: UInt64) -> String { "assets-u\(owner)" }

    let server: SyncServer
    let zone: AssetZone
    let hold: UploadHold
    let key: Key
    public let zoneID: RecordZone.ID
    public let digest: AssetDigest
    public let size: Int64
    let device: DeviceID?
    private struct Progress {
        var stored: Bool
        var received: Int64
        var hasher: AssetHasher
    }
    private let progress: Mutex<Progress>

    init(
        server: SyncServer, zone: AssetZone, hold: UploadHold, key: Key, zoneID: RecordZone.ID, digest: AssetDigest, size: Int64,
        device: DeviceID?, stored: Bool, received: Int64, hasher: AssetHasher
    ) {
        self.server = server
        self.zone = zone
        self.hold = hold
        self.key = key
        self.zoneID = zoneID
        self.digest = digest
        self.size = size
        self.device = device
        progress = Mutex(Progress(stored: stored, received: received, hasher: hasher))
    }

    deinit { close() }

    /// Whether the content is stored for the zone (it was already, or ``finish()`` stored it).
    public var isStored: Bool { progress.withLock { $0.stored } }

    /// How many bytes the server holds: where the next piece starts.
    public var received: Int64 { progress.withLock { $0.received } }

    /// The partial upload this one writes: its content's, for its zone.
    var partial: AssetPartial { AssetPartial(owner: key.owner, digest: digest, zone: key.zone) }

    /// Appends the piece `bytes`, which starts at byte `offset` of the content.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the asset for a piece out of order
    ///   (`offset` is not ``received``) or past the announced size, or after ``close()``;
    ///   `zoneBusy` once a newer upload from the same device has taken this one over; storage
    ///   errors.
    public func write(_ bytes: [UInt8], at offset: Int64) async throws {
        try await hold.step {
            let received = self.received
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
            let (storage, partial) = (server.storage, partial)
            // The piece is written while it is hashed: the disk and the digest in parallel.
            async let written: Void = storage.perform {
                try bytes.withUnsafeBytes { try storage.assets.appendPartial(partial, at: offset, $0) }
            }
            var hasher = progress.withLock { $0.hasher }
            hasher.update(bytes)
            try await written
            progress.withLock {
                $0.hasher = hasher
                $0.received += Int64(bytes.count)
            }
        }
    }

    /// Checks that every byte arrived and hashes to the digest, stores the content durably
    /// (unless the owner keeps it already, for another zone) and logs it for the zone
    /// (`assetStored`); returns the asset as the server keeps it.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` when bytes are missing (the upload may
    ///   continue from ``received``); `assetFileModified` naming the asset when the bytes hash to
    ///   another digest (the partial content is dropped); `quotaExceeded`; `zoneNotFound` when
    ///   the zone was deleted meanwhile; `zoneBusy` once a newer upload from the same device
    ///   has taken this one over.
    public func finish() async throws -> Asset {
        try await hold.step { try await store() }
    }

    private func store() async throws -> Asset {
        let (stored, received, hash) = progress.withLock { ($0.stored, $0.received, $0.hasher.finalize()) }
        let asset = Asset(digest: digest, size: size)
        if stored { return asset }
        guard received == size else {
            throw SyncError(.invalidArguments, "asset \(digest): \(received) of its \(size) bytes arrived; the upload continues from byte \(received)")
        }
        let (storage, owner, zone, partial, digest, size, zoneID) = (server.storage, zone.database, zone, partial, digest, size, zoneID)
        let quota = server.quotas.withLock { $0[owner.user] }
        guard hash == digest else {
            try await storage.perform { try storage.assets.removePartial(partial) }
            progress.withLock {
                $0.received = 0
                $0.hasher = AssetHasher()
            }
            throw SyncError(
                .assetFileModified, "the \(size) bytes uploaded as asset \(digest) hash to \(hash): the content changed or was damaged, and nothing is stored")
        }
        try await storage.perform {
            try storage.withExclusiveLock(AssetUpload.lockName(owner: owner.userNumber)) {
                // Kept already, for another zone: the bytes just checked are not kept twice.
                let kept = try owner.read { try $0.asset(digest) } != nil
                if !kept { try storage.assets.storePartial(partial) }
                _ = try owner.write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
                    guard let current = try snapshot.zone(zone.zoneID), current.isLive, current.incarnation == zone.incarnation else {
                        throw SyncError(.zoneNotFound, "\(zoneID) was deleted while asset \(digest) was uploaded for it")
                    }
                    if try snapshot.asset(digest, inZone: zone.incarnation) != nil { return ([], ()) }
                    try snapshot.checkQuota(quota, storing: digest, size: size)
                    return ([.assetStored(digest, size: size, zone: zone.zoneID)], ())
                }
                if kept { try storage.assets.removePartial(partial) }
            }
        }
        progress.withLock { $0.stored = true }
        return asset
    }

    /// Ends the upload; a partial content stays for the next upload of it to resume.
    public func close() {
        server.releaseUpload(key, hold)
    }
}

/// An upload's hold on its content and zone (``SyncServer`` keeps the current one of each
/// ``AssetUpload/Key``), which lets a newer upload from the same user and device take over:
/// every step of an upload (beginning it, writing a piece, storing it) runs while the hold is
/// kept, and a takeover waits for the step in flight, so the partial is never written by two.
final class UploadHold: Sendable {
    let user: UserID
    let device: DeviceID?
    /// The asset and zone, for messages.
    let what: String

    private struct State {
        var ended = false
        var takenOver = false
        /// Steps running: the first, beginning the upload, from the start.
        var steps = 1
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    init(user: UserID, device: DeviceID?, naming what: String) {
        self.user = user
        self.device = device
        self.what = what
    }

    /// Whether a new upload from `user`'s `device` may take this one over: it comes from the same
    /// user and the same named device. Requests that name no device cannot be told apart, and
    /// never take over.
    func mayBeTakenOver(by user: UserID, device: DeviceID?) -> Bool { device != nil && self.user == user && self.device == device }

    /// Throws the error of a step after the hold ended: `zoneBusy` after a takeover, else
    /// `invalidArguments`.
    func checkHeld() throws(SyncError) {
        if let refusal = state.withLock({ refusal($0) }) { throw refusal }
    }

    /// Runs `body` as a step of the upload, unless the hold ended (``checkHeld()``'s error).
    func step<R>(_ body: () async throws -> R) async throws -> R {
        let refused = state.withLock { state -> SyncError? in
            if let refusal = refusal(state) { return refusal }
            state.steps += 1
            return nil
        }
        if let refused { throw refused }
        defer { endStep() }
        return try await body()
    }

    private func refusal(_ state: State) -> SyncError? {
        guard state.ended else { return nil }
        if state.takenOver {
            return SyncError(.zoneBusy, "\(what): a newer upload from the same device took this one over", retryAfter: .seconds(1))
        }
        return SyncError(.invalidArguments, "the upload of \(what) has ended")
    }

    /// Ends a step; a takeover waiting for it goes on.
    func endStep() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.steps -= 1
            guard state.steps == 0 else { return [] }
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Ends the hold: later steps fail.
    func end() { state.withLock { $0.ended = true } }

    /// How many takeovers wait for the step in flight.
    var takeoversWaiting: Int { state.withLock { $0.waiting.count } }

    /// Ends the hold for a newer upload from the same device (later steps fail with
    /// `zoneBusy`), and returns once the step in flight, if any, is over.
    func takeOver() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                state.ended = true
                state.takenOver = true
                guard state.steps > 0 else { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
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

    /// The state of the asset content `digest`, if this database keeps it (for any zone).
    func asset(_ digest: AssetDigest) throws -> AssetState? {
        try index.value(forKey: digest.bytes, in: "assets").map { (bytes) throws(LogStoreError) in try AssetState(decoding: bytes) }
    }

    /// The state of the asset content `digest` if the zone incarnation `incarnation` has it:
    /// uploaded for the zone, or referenced by one of its live records. `nil` otherwise, whether
    /// or not the database keeps it for other zones: nothing tells those apart.
    func asset(_ digest: AssetDigest, inZone incarnation: UInt64) throws -> AssetState? {
        guard let state = try asset(digest) else { return nil }
        if try index.value(forKey: IndexKey.assetGrant(incarnation: incarnation, digest.bytes), in: "assetGrants") != nil
            || index.value(forKey: IndexKey.assetZone(digest.bytes, incarnation: incarnation), in: "assetZones") != nil
        {
            return state
        }
        return nil
    }
}

extension ServerDatabase {
    /// The failure of a record whose assets its zone (the live incarnation `zone`) does not have
    /// (never uploaded for the zone nor referenced by its live records, or deleted since, whether
    /// or not the database keeps them for other zones), or has with another size; `nil` when
    /// every one is there.
    func checkAssets(of record: Record, zone: ZoneState, _ snapshot: Snapshot) throws -> SyncError? {
        for (key, asset) in record.assets {
            guard let digest = asset.digest, let size = asset.size else { continue }  // validate() refused these
            guard let state = try snapshot.asset(digest, inZone: zone.incarnation) else {
                return SyncError(
                    .assetNotAvailable,
                    "\(record.recordID) field \(quoted(key)): asset \(digest) was never uploaded for its zone (or was deleted); upload its content for the zone before saving the record",
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
