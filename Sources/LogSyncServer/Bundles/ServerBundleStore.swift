import Foundation
import LogSyncPlatform
import SyncModel

/// A support bundle a user uploaded (Docs/Privacy.md, "Uploaded bundles"), as the server keeps
/// it: its ID (the SHA-256 of its `data.mdb`, in hex), who uploaded it, when, its size, and
/// what its manifest says. Only the operator reads it (the admin routes, `logsync-server
/// bundles`, the console); no user does, the uploader included.
public struct StoredBundle: Sendable, Hashable, Codable {
    /// The SHA-256 of the bundle's `data.mdb`, 64 lowercase hex digits.
    public var id: String
    /// The user who uploaded it.
    public var user: String
    /// The user's registry number (where the LMDB store keeps it).
    public var owner: UInt64
    /// The bytes of its `data.mdb`.
    public var size: Int64
    /// When the server stored it (the server's clock); its retention counts from there.
    public var uploaded: Date
    /// The manifest's app version, if the app gave one.
    public var appVersion: String?
    /// The manifest's library version.
    public var libraryVersion: String
    /// The manifest's key ID (the first 8 bytes of SHA-256 of its hash key, in hex).
    public var keyID: String
    /// The device log's offsets exported: the first, the last, and what to add to a bundle
    /// offset to get the device's.
    public var firstOffset: UInt64
    public var lastOffset: UInt64
    public var baseOffset: UInt64
    /// The engine's database scope the manifest names (`private`, `shared`), if it names one.
    public var database: String?

    public init(
        id: String, user: String, owner: UInt64, size: Int64, uploaded: Date, appVersion: String?,
        libraryVersion: String, keyID: String, firstOffset: UInt64, lastOffset: UInt64, baseOffset: UInt64,
        database: String?
    ) {
        self.id = id
        self.user = user
        self.owner = owner
        self.size = size
        self.uploaded = uploaded
        self.appVersion = appVersion
        self.libraryVersion = libraryVersion
        self.keyID = keyID
        self.firstOffset = firstOffset
        self.lastOffset = lastOffset
        self.baseOffset = baseOffset
        self.database = database
    }

    /// The description as a store keeps it: JSON, dates in ISO 8601.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(self)
    }

    /// A description ``json()`` wrote.
    public init(json: Data) throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        self = try decoder.decode(StoredBundle.self, from: json)
    }
}

/// Where a server keeps uploaded support bundles: per user (their registry number), by ID. An
/// upload first grows a *partial* bundle, which survives a cut connection so that the next
/// upload of the same bundle resumes there; ``storePartial(owner:id:as:)`` makes it stored, with
/// its description, in one atomic step. Every method may block: the server calls them through
/// ``ServerStorage/perform(_:)``.
public protocol ServerBundleStore: Sendable {
    /// How many bytes the partial upload of `id` holds (0 if there is none).
    func partialLength(owner: UInt64, id: String) throws -> Int64

    /// Appends `bytes` to the partial upload of `id` at `offset`, its current length (the
    /// server checked it), creating it when `offset` is 0.
    func appendPartial(owner: UInt64, id: String, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws

    /// Runs `body` with a directory whose `data.mdb` holds the partial upload's bytes (to
    /// verify it before it is stored). Whatever `body` leaves in the directory besides
    /// `data.mdb` (LMDB's lock file) is removed.
    func withPartialDirectory<R>(owner: UInt64, id: String, _ body: (URL) throws -> R) throws -> R

    /// Removes the partial upload of `id`, if any.
    func removePartial(owner: UInt64, id: String) throws

    /// Makes the partial upload of `bundle.id` the stored bundle `bundle`, atomically: after a
    /// crash either it is stored, described, or the partial is still there.
    func storePartial(owner: UInt64, id: String, as bundle: StoredBundle) throws

    /// Every stored bundle, oldest first.
    func storedBundles() throws -> [StoredBundle]

    /// Shows up to `maxLength` bytes of the stored bundle's `data.mdb` from `offset`, piece by
    /// piece; returns how many bytes it showed (0 at or past the end).
    @discardableResult
    func read(
        _ bundle: StoredBundle, from offset: Int64, maxLength: Int, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int

    /// Removes the stored bundle and its description.
    func remove(_ bundle: StoredBundle) throws

    /// Every partial upload and when it was last written (for the retention sweep).
    func partials() throws -> [(owner: UInt64, id: String, lastWritten: Date)]
}

/// Support bundles as files beside each user's LMDB environment:
/// `users/u<number>/bundles/<id>/data.mdb` with its description `bundle.json` beside it, and
/// `users/u<number>/bundles/partial/<id>/data.mdb` for a partial upload. A partial becomes stored
/// by writing its description, syncing, and renaming its directory (then syncing the parent),
/// so a crash leaves one or the other. Deleting a user deletes their bundles with their data.
public final class LMDBBundleStore: ServerBundleStore {
    public let directory: URL
    let syncs: Bool

    /// The store of the LMDB storage under `directory`.
    public init(directory: URL, syncs: Bool = true) {
        self.directory = directory
        self.syncs = syncs
    }

    static let descriptionName = "bundle.json"

    func bundlesDirectory(owner: UInt64) -> URL {
        LMDBStorage.userDirectory(in: directory, number: owner).appendingPathComponent("bundles", isDirectory: true)
    }

    func partialDirectory(owner: UInt64, id: String) -> URL {
        bundlesDirectory(owner: owner).appendingPathComponent("partial", isDirectory: true)
            .appendingPathComponent(id, isDirectory: true)
    }

    func storedDirectory(_ bundle: StoredBundle) -> URL {
        bundlesDirectory(owner: bundle.owner).appendingPathComponent(bundle.id, isDirectory: true)
    }

    public func partialLength(owner: UInt64, id: String) throws -> Int64 {
        try LMDBAssetStore.size(of: partialDirectory(owner: owner, id: id).appendingPathComponent("data.mdb").path) ?? 0
    }

    public func appendPartial(owner: UInt64, id: String, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws {
        let partial = partialDirectory(owner: owner, id: id)
        if offset == 0 { try FileManager.default.createDirectory(at: partial, withIntermediateDirectories: true) }
        let path = partial.appendingPathComponent("data.mdb").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw LMDBAssetStore.failure("open", path) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw LMDBAssetStore.failure("stat", path) }
        if Int64(status.st_size) != offset {
            guard ftruncate(descriptor, off_t(offset)) == 0 else { throw LMDBAssetStore.failure("truncate", path) }
        }
        var written = 0
        while written < bytes.count {
            let count = pwrite(
                descriptor, bytes.baseAddress! + written, bytes.count - written, off_t(offset) + off_t(written))
            guard count > 0 else { throw LMDBAssetStore.failure("write", path) }
            written += count
        }
    }

    public func withPartialDirectory<R>(owner: UInt64, id: String, _ body: (URL) throws -> R) throws -> R {
        let partial = partialDirectory(owner: owner, id: id)
        try FileManager.default.createDirectory(at: partial, withIntermediateDirectories: true)
        defer { Self.removeAllBut("data.mdb", in: partial) }
        return try body(partial)
    }

    public func removePartial(owner: UInt64, id: String) throws {
        let partial = partialDirectory(owner: owner, id: id)
        if FileManager.default.fileExists(atPath: partial.path) { try FileManager.default.removeItem(at: partial) }
    }

    public func storePartial(owner: UInt64, id: String, as bundle: StoredBundle) throws {
        let partial = partialDirectory(owner: owner, id: id)
        Self.removeAllBut("data.mdb", in: partial)
        let description = partial.appendingPathComponent(Self.descriptionName)
        try bundle.json().write(to: description, options: .atomic)
        if syncs {
            for file in ["data.mdb", Self.descriptionName] {
                let path = partial.appendingPathComponent(file).path
                let descriptor = open(path, O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { throw LMDBAssetStore.failure("open", path) }
                defer { close(descriptor) }
                guard fsync(descriptor) == 0 else { throw LMDBAssetStore.failure("sync", path) }
            }
        }
        let stored = storedDirectory(bundle)
        guard rename(partial.path, stored.path) == 0 else { throw LMDBAssetStore.failure("rename", partial.path) }
        if syncs { try LMDBAssetStore.syncDirectory(bundlesDirectory(owner: owner).path) }
    }

    public func storedBundles() throws -> [StoredBundle] {
        let users = LMDBStorage.usersDirectory(in: directory)
        let fileManager = FileManager.default
        var bundles: [StoredBundle] = []
        for user in (try? fileManager.contentsOfDirectory(atPath: users.path)) ?? [] {
            let directory = users.appendingPathComponent(user).appendingPathComponent("bundles")
            for name in (try? fileManager.contentsOfDirectory(atPath: directory.path)) ?? [] where name != "partial" {
                let description = directory.appendingPathComponent(name).appendingPathComponent(Self.descriptionName)
                guard let data = fileManager.contents(atPath: description.path) else { continue }
                bundles.append(try StoredBundle(json: data))
            }
        }
        return bundles.sorted { ($0.uploaded, $0.id) < ($1.uploaded, $1.id) }
    }

    @discardableResult
    public func read(
        _ bundle: StoredBundle, from offset: Int64, maxLength: Int, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        try LMDBAssetStore.readFile(
            storedDirectory(bundle).appendingPathComponent("data.mdb").path, from: offset, maxLength: maxLength,
            missing: nil, body)
    }

    public func remove(_ bundle: StoredBundle) throws {
        let stored = storedDirectory(bundle)
        // The description first: a bundle half removed is no longer listed.
        try LMDBAssetStore.unlinkIfPresent(stored.appendingPathComponent(Self.descriptionName).path)
        if FileManager.default.fileExists(atPath: stored.path) { try FileManager.default.removeItem(at: stored) }
    }

    public func partials() throws -> [(owner: UInt64, id: String, lastWritten: Date)] {
        let users = LMDBStorage.usersDirectory(in: directory)
        let fileManager = FileManager.default
        var partials: [(owner: UInt64, id: String, lastWritten: Date)] = []
        for user in (try? fileManager.contentsOfDirectory(atPath: users.path)) ?? [] {
            guard user.hasPrefix("u"), let owner = UInt64(user.dropFirst()) else { continue }
            let directory = bundlesDirectory(owner: owner).appendingPathComponent("partial")
            for id in (try? fileManager.contentsOfDirectory(atPath: directory.path)) ?? [] {
                let file = directory.appendingPathComponent(id).appendingPathComponent("data.mdb")
                let written = FileStatus(path: file.path).map {
                    Date(timeIntervalSince1970: TimeInterval($0.modified.seconds))
                }
                partials.append((owner, id, written ?? .distantPast))
            }
        }
        return partials
    }

    static func removeAllBut(_ keep: String, in directory: URL) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] where name != keep {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }
}
