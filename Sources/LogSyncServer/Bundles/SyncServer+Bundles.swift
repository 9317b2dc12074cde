import Foundation
import LogSyncPlatform
import SyncModel
import Synchronization

// Support bundles uploaded by users (Docs/Protocol.md, "Support bundles"; Docs/Privacy.md,
// "Uploaded bundles"): a user uploads, only the operator reads.

/// One upload of a support bundle's `data.mdb` for the user signed in, begun by
/// ``SyncServer/beginSupportBundleUpload(user:id:size:)``: pieces are written in order from
/// ``received``; ``finish()`` checks the bytes against the ID (their SHA-256), verifies the bundle
/// and stores it. ``close()`` ends it; a partial upload stays, for the next one to resume.
public final class SupportBundleUpload: Sendable {
    let server: SyncServer
    let store: any ServerBundleStore
    public let user: UserID
    let owner: UInt64
    /// The SHA-256 of the bundle's `data.mdb`: the upload's and the stored bundle's ID.
    public let id: AssetDigest
    public let size: Int64
    private struct Progress {
        var received: Int64
        var stored: StoredBundle?
        var closed = false
    }
    private let progress: Mutex<Progress>

    init(
        server: SyncServer, store: any ServerBundleStore, user: UserID, owner: UInt64, id: AssetDigest, size: Int64,
        received: Int64, stored: StoredBundle?
    ) {
        self.server = server
        self.store = store
        self.user = user
        self.owner = owner
        self.id = id
        self.size = size
        progress = Mutex(Progress(received: received, stored: stored))
    }

    deinit { close() }

    /// How many bytes the server holds: where the next piece starts.
    public var received: Int64 { progress.withLock { $0.received } }

    /// The stored bundle, once stored (by this upload or an earlier one).
    public var stored: StoredBundle? { progress.withLock { $0.stored } }

    public var status: SupportBundleUploadStatus {
        progress.withLock { SupportBundleUploadStatus(received: $0.received, size: size, bundle: $0.stored?.id) }
    }

    /// Appends `bytes`, which start at byte `offset` of the bundle.
    ///
    /// - Throws: `SyncError` `invalidArguments` for a piece out of order or past the announced
    ///   size, or after ``close()``; storage errors.
    public func write(_ bytes: [UInt8], at offset: Int64) async throws {
        let (received, closed, stored) = progress.withLock { ($0.received, $0.closed, $0.stored != nil) }
        guard !closed else { throw SyncError(.invalidArguments, "the upload of support bundle \(id.short) has ended") }
        guard offset == received else {
            throw SyncError(
                .invalidArguments,
                "support bundle \(id.short): a piece starts at byte \(offset), but the server holds \(received) bytes; pieces come in order from there"
            )
        }
        guard offset + Int64(bytes.count) <= size else {
            throw SyncError(
                .invalidArguments,
                "support bundle \(id.short): \(offset + Int64(bytes.count)) bytes sent, more than its announced \(size)"
            )
        }
        if stored || bytes.isEmpty { return }
        let (store, owner, id) = (store, owner, id.hex)
        try await server.storage.perform {
            try bytes.withUnsafeBytes { try store.appendPartial(owner: owner, id: id, at: offset, $0) }
        }
        progress.withLock { $0.received += Int64(bytes.count) }
    }

    /// Checks that every byte arrived and hashes to the ID, verifies the bundle
    /// (`BundleVerification`) and stores it with the manifest's description.
    ///
    /// - Throws: `SyncError` `invalidArguments` when bytes are missing (the upload continues from
    ///   ``received``) or the bundle is damaged (naming the part: the page, the log, the offset, the
    ///   manifest); `assetFileModified` when the bytes hash to another ID. Nothing is stored then,
    ///   and the partial upload is removed (except for missing bytes).
    public func finish() async throws -> StoredBundle {
        let (received, stored) = progress.withLock { ($0.received, $0.stored) }
        if let stored { return stored }
        guard received == size else {
            throw SyncError(
                .invalidArguments,
                "support bundle \(id.short): \(received) of its \(size) bytes arrived; the upload continues from byte \(received)"
            )
        }
        let (store, owner, id, user, size, now) = (store, owner, id, user, size, server.context.now)
        let bundle = try await server.storage.perform { () throws -> StoredBundle in
            do {
                let manifest = try store.withPartialDirectory(owner: owner, id: id.hex) {
                    directory throws -> BundleVerification.Manifest in
                    let hash = try supportBundleDigest(of: directory.appendingPathComponent("data.mdb"))
                    guard hash == id else {
                        throw SyncError(
                            .assetFileModified,
                            "the \(size) bytes uploaded as support bundle \(id.short) hash to \(hash.short): the bundle changed or was damaged on its way, and nothing is stored"
                        )
                    }
                    return try BundleVerification.verify(directory, id: id.hex)
                }
                let bundle = StoredBundle(
                    id: id.hex, user: user.rawValue, owner: owner, size: size, uploaded: now(),
                    appVersion: manifest.appVersion, libraryVersion: manifest.libraryVersion, keyID: manifest.keyID,
                    firstOffset: manifest.firstOffset, lastOffset: manifest.lastOffset,
                    baseOffset: manifest.baseOffset, database: manifest.configuration["database"])
                try store.storePartial(owner: owner, id: id.hex, as: bundle)
                return bundle
            } catch let error as SyncError {
                try? store.removePartial(owner: owner, id: id.hex)
                throw error
            }
        }
        progress.withLock { $0.stored = bundle }
        return bundle
    }

    /// Ends the upload; a partial upload stays for the next upload of the bundle to resume.
    public func close() {
        let wasOpen = progress.withLock { progress in
            defer { progress.closed = true }
            return !progress.closed
        }
        if wasOpen { server.bundleUploads.withLock { _ = $0.remove(Key(owner: owner, id: id)) } }
    }

    struct Key: Hashable {
        var owner: UInt64
        var id: AssetDigest
    }
}

extension SyncServer {
    /// Begins (or resumes) the upload of a support bundle by `user`: `id` is the SHA-256 of its
    /// `data.mdb`, `size` its bytes. The returned upload's ``SupportBundleUpload/received`` says
    /// from which byte to send; a bundle `user` uploaded already is stored at once.
    ///
    /// - Throws: `SyncError`: `limitExceeded` over `Configuration.maxSupportBundleBytes`,
    ///   `invalidArguments` for a size below 1, `zoneBusy` (retry after 1 s) while another request
    ///   uploads the same bundle, `serverRejectedRequest` when the storage keeps no bundles.
    public func beginSupportBundleUpload(
        user: UserID, id: AssetDigest, size: Int64
    ) async throws
        -> SupportBundleUpload
    {
        let limit = configuration.maxSupportBundleBytes
        guard size <= limit else {
            throw SyncError(
                .limitExceeded,
                "support bundle \(id.short) holds \(size) bytes, more than this server's limit of \(limit) (--max-bundle-bytes)"
            )
        }
        guard size > 0 else {
            throw SyncError(.invalidArguments, "support bundle \(id.short): a size of \(size) bytes holds no bundle")
        }
        guard let store = storage.bundles else {
            throw SyncError(.serverRejectedRequest, "this server's storage keeps no support bundles")
        }
        let users = context.users
        let owner = try await storage.perform { try users.number(of: user) }
        let key = SupportBundleUpload.Key(owner: owner, id: id)
        let held = bundleUploads.withLock { uploads in uploads.insert(key).inserted }
        guard held else {
            throw SyncError(
                .zoneBusy, "support bundle \(id.short) is being uploaded by another request", retryAfter: .seconds(1))
        }
        do {
            let (stored, received) = try await storage.perform { () throws -> (StoredBundle?, Int64) in
                if let stored = try store.storedBundles().first(where: { $0.owner == owner && $0.id == id.hex }) {
                    return (stored, 0)
                }
                var received = try store.partialLength(owner: owner, id: id.hex)
                if received > size {
                    try store.removePartial(owner: owner, id: id.hex)
                    received = 0
                }
                return (nil, received)
            }
            return SupportBundleUpload(
                server: self, store: store, user: user, owner: owner, id: id, size: size,
                received: stored == nil ? received : size, stored: stored)
        } catch {
            _ = bundleUploads.withLock { $0.remove(key) }
            throw error
        }
    }

    /// The support bundles stored, oldest first: every user's, or `user`'s only. For the operator
    /// (the admin routes, `logsync-server bundles list`, the console), never a user.
    public func supportBundles(of user: UserID? = nil) async throws -> [StoredBundle] {
        guard let store = storage.bundles else { return [] }
        let all = try await storage.perform { try store.storedBundles() }
        guard let user else { return all }
        return all.filter { $0.user == user.rawValue }
    }

    /// The stored bundle `id`, or `nil`.
    public func supportBundle(id: String) async throws -> StoredBundle? {
        try await supportBundles().first { $0.id == id.lowercased() }
    }

    /// Up to `maxLength` bytes of `bundle`'s `data.mdb` from `offset` (none at its end).
    public func readSupportBundle(_ bundle: StoredBundle, from offset: Int64, maxLength: Int) async throws -> [UInt8] {
        guard let store = storage.bundles else { return [] }
        return try await storage.perform {
            var bytes: [UInt8] = []
            try store.read(bundle, from: offset, maxLength: maxLength) { bytes.append(contentsOf: $0) }
            return bytes
        }
    }

    /// Removes the support bundles uploaded before `now` minus
    /// `Configuration.supportBundleRetention` (the server's clock by default) and returns them,
    /// and the partial uploads last written before then (an upload abandoned, on the disk's or
    /// the database's clock) unless one is under way: what `logsync-server serve` runs at its
    /// start and then hourly (Docs/Deployment.md, "Support bundles").
    @discardableResult
    public func removeExpiredSupportBundles(now: Date? = nil) async throws -> [StoredBundle] {
        guard let store = storage.bundles else { return [] }
        let cutoff = (now ?? context.now()).addingTimeInterval(-configuration.supportBundleRetention)
        let underWay = Set(bundleUploads.withLock { $0 }.map { "\($0.owner) \($0.id.hex)" })
        return try await storage.perform {
            let expired = try store.storedBundles().filter { $0.uploaded < cutoff }
            for bundle in expired { try store.remove(bundle) }
            for partial in try store.partials()
            where partial.lastWritten < cutoff && !underWay.contains("\(partial.owner) \(partial.id)") {
                try store.removePartial(owner: partial.owner, id: partial.id)
            }
            return expired
        }
    }
}

/// The SHA-256 of the file at `url`, read a piece at a time.
func supportBundleDigest(of url: URL) throws -> AssetDigest {
    var hasher = AssetHasher()
    let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw LMDBAssetStore.failure("open", url.path) }
    defer { close(descriptor) }
    var buffer = [UInt8](repeating: 0, count: AssetTransfer.chunkSize)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 { throw LMDBAssetStore.failure("read", url.path) }
        if count == 0 { break }
        buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }
    return hasher.finalize()
}
