import Foundation
import LogStore
import SyncModel
import Synchronization

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

    let context: ServerContext
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
        /// The bytes this upload wrote that `logsync_asset_bytes_in_flight` counts, until it
        /// ends.
        var inFlight: Int64 = 0
    }
    private let progress: Mutex<Progress>

    init(
        context: ServerContext, zone: AssetZone, hold: UploadHold, key: Key, zoneID: RecordZone.ID, digest: AssetDigest,
        size: Int64,
        device: DeviceID?, stored: Bool, received: Int64, hasher: AssetHasher
    ) {
        self.context = context
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
    /// - Throws: `SyncError` `invalidArguments` naming the asset for a piece out of order
    ///   (`offset` is not ``received``) or past the announced size, or after ``close()``;
    ///   `zoneBusy` once a newer upload from the same device has taken this one over; storage
    ///   errors.
    public func write(_ bytes: [UInt8], at offset: Int64) async throws {
        try await hold.step {
            let received = self.received
            guard offset == received else {
                throw SyncError(
                    .invalidArguments,
                    "asset \(digest): a piece starts at byte \(offset), but the server holds \(received) bytes; pieces come in order from there"
                )
            }
            guard offset + Int64(bytes.count) <= size else {
                throw SyncError(
                    .invalidArguments,
                    "asset \(digest): \(offset + Int64(bytes.count)) bytes sent, more than its announced \(size)")
            }
            if isStored || bytes.isEmpty { return }
            let (storage, partial) = (context.storage, partial)
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
                $0.inFlight += Int64(bytes.count)
            }
            context.metrics.assetBytesInFlight.increment(by: Double(bytes.count))
        }
    }

    /// Checks that every byte arrived and hashes to the digest, stores the content durably
    /// (unless the owner keeps it already, for another zone) and logs it for the zone
    /// (`assetStored`); returns the asset as the server keeps it.
    ///
    /// - Throws: `SyncError` `invalidArguments` when bytes are missing (the upload may
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
            throw SyncError(
                .invalidArguments,
                "asset \(digest): \(received) of its \(size) bytes arrived; the upload continues from byte \(received)")
        }
        let (storage, owner, zone, partial, digest, size, zoneID) = (
            context.storage, zone.database, zone, partial, digest, size, zoneID
        )
        let quota = context.limits.quota(of: owner.user)
        guard hash == digest else {
            try await storage.perform { try storage.assets.removePartial(partial) }
            progress.withLock {
                $0.received = 0
                $0.hasher = AssetHasher()
            }
            throw SyncError(
                .assetFileModified,
                "the \(size) bytes uploaded as asset \(digest) hash to \(hash): the content changed or was damaged, and nothing is stored"
            )
        }
        let newlyKept = try await storage.perform {
            try storage.withExclusiveLock(AssetUpload.lockName(owner: owner.userNumber)) {
                // Kept already, for another zone: the bytes just checked are not kept twice.
                let kept = try owner.read { try $0.asset(digest) } != nil
                if !kept { try storage.assets.storePartial(partial) }
                _ = try owner.write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
                    guard let current = try snapshot.zone(zone.zoneID), current.isLive,
                        current.incarnation == zone.incarnation
                    else {
                        throw SyncError(
                            .zoneNotFound, "\(zoneID) was deleted while asset \(digest) was uploaded for it")
                    }
                    if try snapshot.asset(digest, inZone: zone.incarnation) != nil { return ([], ()) }
                    try snapshot.checkQuota(quota, storing: digest, size: size)
                    return ([.assetStored(digest, size: size, zone: zone.zoneID)], ())
                }
                if kept { try storage.assets.removePartial(partial) }
                return !kept
            }
        }
        progress.withLock { $0.stored = true }
        if newlyKept { context.metrics.assetBytesStored.increment(by: size) }
        return asset
    }

    /// Ends the upload; a partial content stays for the next upload of it to resume.
    public func close() {
        context.uploads.release(key, hold)
        let inFlight = progress.withLock { progress in
            defer { progress.inFlight = 0 }
            return progress.inFlight
        }
        if inFlight > 0 { context.metrics.assetBytesInFlight.decrement(by: Double(inFlight)) }
    }
}

/// An upload's hold on its content and zone (``ActiveUploads`` keeps the current one of each
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
    func mayBeTakenOver(by user: UserID, device: DeviceID?) -> Bool {
        device != nil && self.user == user && self.device == device
    }

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
            return SyncError(
                .zoneBusy, "\(what): a newer upload from the same device took this one over", retryAfter: .seconds(1))
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

/// The asset uploads under way in this process: the hold of the upload writing each content for
/// a zone, so two requests never write one.
final class ActiveUploads: Sendable {
    private let holds = Mutex<[AssetUpload.Key: UploadHold]>([:])

    /// Holds the upload of `key` for `user`'s `device`, taking over the hold of an earlier
    /// upload from the same user and device once its step in flight is over. The hold returned
    /// is in its first step (the caller ends it).
    ///
    /// - Throws: `zoneBusy` (retry after 1 s) while another user or device holds it.
    func hold(_ key: AssetUpload.Key, user: UserID, device: DeviceID?, naming what: String) async throws -> UploadHold {
        let hold = UploadHold(user: user, device: device, naming: what)
        let previous = try holds.withLock { uploads throws(SyncError) -> UploadHold? in
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
    func release(_ key: AssetUpload.Key, _ hold: UploadHold) {
        hold.end()
        holds.withLock { uploads in
            if uploads[key] === hold { uploads[key] = nil }
        }
    }

    /// The uploads under way of contents of `owner`.
    func keys(owner: UInt64) -> Set<AssetUpload.Key> {
        holds.withLock { uploads in Set(uploads.keys.filter { $0.owner == owner }) }
    }
}
