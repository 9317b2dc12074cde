import Foundation
import LogSyncPlatform
import SyncModel

/// Where a server keeps asset contents: per owner (a user's registry number; the user whose
/// zones hold the records referencing them) and by digest, so one content is kept once per
/// owner however many zones, records and saves reference it.
///
/// An upload first grows a *partial* copy (``AssetPartial``: of a content, for a zone), which
/// survives a cut connection so the next upload of the same content for the same zone resumes
/// there; ``storePartial(_:)`` then makes it the stored content in one durable, atomic step.
/// The server's rules decide everything else (which zones have which contents, which digests
/// are referenced, quotas, when an asset is deleted) from its log; the store only keeps bytes.
/// Every method may block (disk, database round trip): the server calls them through
/// ``ServerStorage/perform(_:)``.
public protocol ServerAssetStore: Sendable {
    /// The size of the stored content of `digest`, or `nil` if it is not stored.
    func storedSize(owner: UInt64, digest: AssetDigest) throws -> Int64?

    /// How many bytes the partial upload holds (0 if there is none).
    func partialLength(_ partial: AssetPartial) throws -> Int64

    /// Appends `bytes` to the partial upload, creating it when `offset` is 0. `offset` is the
    /// partial's current length (the server checked it); the bytes need not be durable before
    /// ``storePartial(_:)``.
    func appendPartial(_ partial: AssetPartial, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws

    /// Shows the partial upload's bytes from its start, in order, piece by piece (to hash what a
    /// cut upload left before resuming it).
    func readPartial(_ partial: AssetPartial, _ body: (UnsafeRawBufferPointer) throws -> Void) throws

    /// Makes the partial upload the stored content of its digest, durably and atomically: after
    /// a crash at any point, either the whole content is stored or the partial is still there.
    func storePartial(_ partial: AssetPartial) throws

    /// Removes the partial upload, if any.
    func removePartial(_ partial: AssetPartial) throws

    /// Shows up to `maxLength` bytes of the stored content from `offset`, in order, piece by
    /// piece; returns how many bytes it showed (0 at or past the end).
    ///
    /// - Throws: `SyncError(.assetNotAvailable)` when the content is not stored.
    @discardableResult
    func read(
        owner: UInt64, digest: AssetDigest, from offset: Int64, maxLength: Int,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int

    /// Removes the stored content of `digest`, if any.
    func remove(owner: UInt64, digest: AssetDigest) throws

    /// The digests of every stored content of `owner` (to find contents no log entry names).
    func storedDigests(owner: UInt64) throws -> [AssetDigest]

    /// Every partial upload of `owner` and when it was last written.
    func partials(owner: UInt64) throws -> [(partial: AssetPartial, lastWritten: Date)]
}

/// A partial upload: of the content `digest`, for the zone incarnation `zone` of `owner`'s
/// private database (0: the default zone). Uploads of one content for different zones grow
/// partials of their own, so that no zone's upload learns how much of the content another
/// zone's upload left.
public struct AssetPartial: Sendable, Hashable {
    /// The registry number of the zone's owner.
    public var owner: UInt64
    public var digest: AssetDigest
    /// The zone's incarnation in its owner's database (the offset of the entry that created it).
    public var zone: UInt64

    public init(owner: UInt64, digest: AssetDigest, zone: UInt64) {
        self.owner = owner
        self.digest = digest
        self.zone = zone
    }
}

/// Asset contents as files beside each user's LMDB environment:
/// `users/u<number>/assets/<64 hex digits>` for stored contents and
/// `users/u<number>/assets/partial/<64 hex digits>.<zone incarnation>` for partial uploads
/// (`partial/<64 hex digits>` for the default zone's, incarnation 0, which is also where servers
/// before partials per zone left theirs: only the owner uploads for the default zone). A partial
/// becomes stored by fsync, rename and a sync of the directory, so a crash leaves one or the
/// other.
public final class LMDBAssetStore: ServerAssetStore {
    public let directory: URL
    /// Whether contents are synced to disk before they count as stored (`.durable` storage).
    let syncs: Bool

    /// The store of the LMDB storage under `directory`.
    public init(directory: URL, syncs: Bool = true) {
        self.directory = directory
        self.syncs = syncs
    }

    /// The directory of `owner`'s stored contents.
    package func assetsDirectory(owner: UInt64) -> URL {
        LMDBStorage.userDirectory(in: directory, number: owner).appendingPathComponent("assets", isDirectory: true)
    }

    func storedPath(_ owner: UInt64, _ digest: AssetDigest) -> String {
        assetsDirectory(owner: owner).appendingPathComponent(digest.hex).path
    }

    func partialDirectory(_ owner: UInt64) -> URL {
        assetsDirectory(owner: owner).appendingPathComponent("partial", isDirectory: true)
    }

    func partialPath(_ partial: AssetPartial) -> String {
        partialDirectory(partial.owner).appendingPathComponent(Self.partialName(partial.digest, zone: partial.zone))
            .path
    }

    /// The file name of a partial upload: the digest's hex, and after a dot the zone's
    /// incarnation unless it is the default zone's (0).
    static func partialName(_ digest: AssetDigest, zone: UInt64) -> String {
        zone == 0 ? digest.hex : "\(digest.hex).\(zone)"
    }

    /// The content and zone of a partial upload's file name; `nil` for another name.
    static func partial(named name: String) -> (digest: AssetDigest, zone: UInt64)? {
        let parts = name.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts[0].count == 64, let digest = try? AssetDigest(parsing: String(parts[0])) else { return nil }
        guard parts.count == 2 else { return (digest, 0) }
        guard let zone = UInt64(parts[1]), zone > 0, "\(zone)" == parts[1] else { return nil }
        return (digest, zone)
    }

    public func storedSize(owner: UInt64, digest: AssetDigest) throws -> Int64? {
        try Self.size(of: storedPath(owner, digest))
    }

    public func partialLength(_ partial: AssetPartial) throws -> Int64 {
        try Self.size(of: partialPath(partial)) ?? 0
    }

    public func appendPartial(_ partial: AssetPartial, at offset: Int64, _ bytes: UnsafeRawBufferPointer) throws {
        let path = partialPath(partial)
        if offset == 0 {
            try FileManager.default.createDirectory(
                at: partialDirectory(partial.owner), withIntermediateDirectories: true)
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.failure("open", path) }
        defer { close(descriptor) }
        // A shorter upload before this one (or a cut write) may have left more bytes than the
        // server counted: the partial is exactly `offset` bytes before these. (Truncated only
        // then: a truncation to the same size still costs the file system an inode update.)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Self.failure("stat", path) }
        if Int64(status.st_size) != offset {
            guard ftruncate(descriptor, off_t(offset)) == 0 else { throw Self.failure("truncate", path) }
        }
        var written = 0
        while written < bytes.count {
            let count = pwrite(
                descriptor, bytes.baseAddress! + written, bytes.count - written, off_t(offset) + off_t(written))
            guard count > 0 else { throw Self.failure("write", path) }
            written += count
        }
    }

    public func readPartial(_ partial: AssetPartial, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        _ = try Self.readFile(partialPath(partial), from: 0, maxLength: .max, missing: nil, body)
    }

    public func storePartial(_ partial: AssetPartial) throws {
        let path = partialPath(partial)
        let stored = storedPath(partial.owner, partial.digest)
        // An empty content has no piece, so no partial file yet: it is created empty here.
        try FileManager.default.createDirectory(at: partialDirectory(partial.owner), withIntermediateDirectories: true)
        let descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.failure("open", path) }
        defer { close(descriptor) }
        if syncs {
            guard fsync(descriptor) == 0 else { throw Self.failure("sync", path) }
        }
        guard rename(path, stored) == 0 else { throw Self.failure("rename", path) }
        if syncs { try Self.syncDirectory(assetsDirectory(owner: partial.owner).path) }
    }

    public func removePartial(_ partial: AssetPartial) throws {
        try Self.unlinkIfPresent(partialPath(partial))
    }

    @discardableResult
    public func read(
        owner: UInt64, digest: AssetDigest, from offset: Int64, maxLength: Int,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        try Self.readFile(storedPath(owner, digest), from: offset, maxLength: maxLength, missing: digest, body)
    }

    public func remove(owner: UInt64, digest: AssetDigest) throws {
        try Self.unlinkIfPresent(storedPath(owner, digest))
    }

    public func storedDigests(owner: UInt64) throws -> [AssetDigest] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: assetsDirectory(owner: owner).path)) ?? []
        return names.compactMap { name in name.count == 64 ? try? AssetDigest(parsing: name) : nil }.sorted()
    }

    public func partials(owner: UInt64) throws -> [(partial: AssetPartial, lastWritten: Date)] {
        let directory = partialDirectory(owner)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.compactMap { name -> (AssetPartial, Date)? in
            guard let (digest, zone) = Self.partial(named: name) else { return nil }
            guard let status = FileStatus(path: directory.appendingPathComponent(name).path) else { return nil }
            return (
                AssetPartial(owner: owner, digest: digest, zone: zone),
                Date(timeIntervalSince1970: TimeInterval(status.modified.seconds))
            )
        }.sorted { ($0.0.digest, $0.0.zone) < ($1.0.digest, $1.0.zone) }
    }

    // MARK: Files

    static func size(of path: String) throws -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw failure("stat", path)
        }
        return Int64(status.st_size)
    }

    static func readFile(
        _ path: String, from offset: Int64, maxLength: Int, missing digest: AssetDigest?,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT {
                if let digest { throw SyncError(.assetNotAvailable, "asset \(digest) is not stored") }
                return 0
            }
            throw failure("open", path)
        }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: min(maxLength, AssetTransfer.chunkSize))
        var total = 0
        var position = offset
        while total < maxLength {
            let wanted = min(buffer.count, maxLength - total)
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, wanted, off_t(position)) }
            if count < 0 { throw failure("read", path) }
            if count == 0 { break }
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            total += count
            position += Int64(count)
        }
        return total
    }

    static func unlinkIfPresent(_ path: String) throws {
        if unlink(path) != 0, errno != ENOENT { throw failure("remove", path) }
    }

    static func syncDirectory(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("open", path) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("sync", path) }
    }

    static func failure(_ action: String, _ path: String) -> SyncError {
        SyncError(.internalError, "cannot \(action) the asset file \(path): \(String(cString: strerror(errno)))")
    }
}
