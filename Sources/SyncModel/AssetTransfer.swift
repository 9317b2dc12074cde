import Foundation
import LogSyncPlatform

/// An upload of an asset's content to the database that keeps the records of `zoneID` (its
/// owner's), before a record referencing it is saved.
public struct AssetUploadRequest: Sendable, Hashable {
    /// The zone whose records will reference the asset; its owner keeps it and is charged.
    public var zoneID: RecordZone.ID
    /// The SHA-256 of the file's content, as computed before the upload.
    public var digest: AssetDigest
    /// The file's size in bytes.
    public var size: Int64
    /// The file to read.
    public var fileURL: URL
    /// The operation group the request belongs to, for the server's telemetry (F69), or `nil`.
    public var operationGroup: OperationGroup?

    public init(
        zoneID: RecordZone.ID, digest: AssetDigest, size: Int64, fileURL: URL, operationGroup: OperationGroup? = nil
    ) {
        self.operationGroup = operationGroup
        self.zoneID = zoneID
        self.digest = digest
        self.size = size
        self.fileURL = fileURL
    }
}

/// What an upload did.
public struct AssetUploadResponse: Sendable, Hashable {
    /// The asset as the server keeps it (no file).
    public var asset: Asset
    /// How many bytes this call sent (0 when the server already had the content; less than the
    /// size when it resumed a cut upload).
    public var bytesSent: Int64

    public init(asset: Asset, bytesSent: Int64) {
        self.asset = asset
        self.bytesSent = bytesSent
    }
}

/// A download of an asset's content into a local file.
public struct AssetDownloadRequest: Sendable, Hashable {
    /// The zone of the record that references the asset.
    public var zoneID: RecordZone.ID
    public var digest: AssetDigest
    public var size: Int64
    /// Where the content goes. The bytes arrive in ``AssetDownloadFile/partialURL(for:)`` first
    /// (an earlier cut download there is resumed) and are renamed to `destination` once their
    /// digest is checked.
    public var destination: URL
    /// The operation group the request belongs to, for the server's telemetry (F69), or `nil`.
    public var operationGroup: OperationGroup?

    public init(
        zoneID: RecordZone.ID, digest: AssetDigest, size: Int64, destination: URL, operationGroup: OperationGroup? = nil
    ) {
        self.operationGroup = operationGroup
        self.zoneID = zoneID
        self.digest = digest
        self.size = size
        self.destination = destination
    }
}

/// What a download did.
public struct AssetDownloadResponse: Sendable, Hashable {
    /// The file holding the content (the request's destination).
    public var fileURL: URL
    /// How many bytes this call received (less than the size when it resumed).
    public var bytesReceived: Int64

    public init(fileURL: URL, bytesReceived: Int64) {
        self.fileURL = fileURL
        self.bytesReceived = bytesReceived
    }
}

/// Constants of asset transfers.
public enum AssetTransfer {
    /// The size of the pieces an asset is read, sent, stored and written in: 1 MiB. A transfer
    /// holds about one piece in memory at a time, whatever the asset's size.
    public static let chunkSize = 1 << 20
}

/// What a file looked like when it was opened: its size, inode and modification time, to tell
/// when it changes while it is read (`assetFileModified`).
struct FileIdentity: Equatable {
    var size: Int64
    var modified: FileStatus.Time
    var inode: UInt64

    init(_ status: FileStatus) {
        size = status.size
        modified = status.modified
        inode = status.inode
    }
}

/// Reads an asset's file piece by piece for an upload, and tells when the file has gone
/// (`assetFileNotFound`) or changed since it was opened or since its digest was taken
/// (`assetFileModified`).
///
/// ```swift
/// let reader = try AssetFileReader(url: file, expectedSize: size, from: resumeOffset)
/// while let piece = try reader.read() { send(piece) }
/// ```
public final class AssetFileReader {
    public let url: URL
    /// The file's size when it was opened.
    public let size: Int64
    /// Where the next read starts.
    public private(set) var offset: Int64
    private let descriptor: Int32
    private let identity: FileIdentity
    private var buffer: [UInt8]

    /// Opens `url` and positions at `offset`.
    ///
    /// - Throws: ``SyncError`` `assetFileNotFound` when the file is not there or not readable,
    ///   `assetFileModified` when its size is not `expectedSize`.
    public init(
        url: URL, expectedSize: Int64? = nil, from offset: Int64 = 0, chunkSize: Int = AssetTransfer.chunkSize
    ) throws(SyncError) {
        self.url = url
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            throw SyncError(.assetFileNotFound, "the asset file \(url.path) cannot be opened: \(reason)")
        }
        guard let status = FileStatus(descriptor: descriptor), status.isRegularFile else {
            close(descriptor)
            throw SyncError(.assetFileNotFound, "the asset file \(url.path) is not a regular file")
        }
        // Checked before the descriptor is kept: once every property is set, a throw runs
        // deinit, which closes it (closing it here too would close whatever file or socket
        // another thread opened under the same number meanwhile).
        let identity = FileIdentity(status)
        if let expectedSize, expectedSize != identity.size {
            close(descriptor)
            throw SyncError(
                .assetFileModified,
                "the asset file \(url.path) holds \(identity.size) bytes, not the \(expectedSize) it held when its digest was taken"
            )
        }
        guard offset >= 0, offset <= identity.size else {
            close(descriptor)
            throw SyncError(
                .invalidArguments,
                "cannot read the asset file \(url.path) from byte \(offset): it holds \(identity.size)")
        }
        self.descriptor = descriptor
        self.identity = identity
        size = identity.size
        self.offset = offset
        buffer = [UInt8](repeating: 0, count: chunkSize)
    }

    deinit { close(descriptor) }

    /// The next piece (at most the chunk size), or `nil` at the end; the bytes are valid until
    /// the next call.
    ///
    /// - Throws: ``SyncError`` `assetFileModified` when the file changed since it was opened.
    public func read<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try checkUnchanged()
        guard offset < size else { return nil }
        let wanted = Int(min(Int64(buffer.count), size - offset))
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, wanted, off_t(offset)) }
        guard count > 0 else {
            throw SyncError(
                .assetFileModified, "the asset file \(url.path) ended at byte \(offset), before its \(size) bytes")
        }
        offset += Int64(count)
        return try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }

    /// The next piece as `Data`, or `nil` at the end.
    public func read() throws -> Data? {
        try read { Data($0) }
    }

    /// Throws `assetFileModified` when the file's size, inode or modification time is not what
    /// it was when opened.
    public func checkUnchanged() throws(SyncError) {
        guard let status = FileStatus(path: url.path) else {
            throw SyncError(.assetFileNotFound, "the asset file \(url.path) was removed while it was being uploaded")
        }
        guard FileIdentity(status) == identity else {
            throw SyncError(.assetFileModified, "the asset file \(url.path) was modified while it was being uploaded")
        }
    }
}

extension AssetDigest {
    /// The digest and size of the file at `url`, read piece by piece.
    ///
    /// - Throws: ``SyncError`` `assetFileNotFound` when it cannot be read, `assetFileModified`
    ///   when it changes while it is read.
    public static func ofFile(at url: URL) throws(SyncError) -> (digest: AssetDigest, size: Int64) {
        let reader = try AssetFileReader(url: url)
        var hasher = AssetHasher()
        do {
            while try reader.read({ hasher.update($0) }) != nil {}
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.assetFileNotFound, "the asset file \(url.path) could not be read", cause: "\(error)")
        }
        return (hasher.finalize(), reader.size)
    }
}

/// Receives an asset's content into a local file: appends to a partial file (resuming one an
/// earlier download left), checks the size and digest at the end, syncs it and renames it to its
/// destination, so the destination never holds a part or a wrong content.
public final class AssetDownloadFile {
    public let destination: URL
    public let digest: AssetDigest
    public let size: Int64
    /// How many bytes the partial file holds: where the download continues.
    public private(set) var offset: Int64
    private let partial: URL
    private let descriptor: Int32
    private var hasher = AssetHasher()

    /// The partial file of a download to `destination`.
    public static func partialURL(for destination: URL) -> URL {
        destination.deletingLastPathComponent().appendingPathComponent("." + destination.lastPathComponent + ".partial")
    }

    /// Opens (or resumes) the partial file of `destination`, hashing what it already holds.
    ///
    /// - Throws: ``SyncError`` `internalError` naming the file when it cannot be created.
    public init(destination: URL, digest: AssetDigest, size: Int64) throws(SyncError) {
        self.destination = destination
        self.digest = digest
        self.size = size
        partial = Self.partialURL(for: destination)
        try? FileManager.default.createDirectory(
            at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        let descriptor = open(partial.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw SyncError(
                .internalError, "cannot create \(partial.path) for asset \(digest): \(String(cString: strerror(errno)))"
            )
        }
        self.descriptor = descriptor
        offset = 0
        // Resume: hash what an earlier download left, keeping no more than the asset's size.
        var buffer = [UInt8](repeating: 0, count: AssetTransfer.chunkSize)
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            guard count > 0 else { break }
            let kept = Int(min(Int64(count), size - offset))
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<kept])) }
            offset += Int64(kept)
            if kept < count { break }
        }
        if ftruncate(descriptor, off_t(offset)) != 0 {
            // Every property is set: the throw runs deinit, which closes the descriptor (once).
            throw SyncError(.internalError, "cannot truncate \(partial.path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(descriptor) }

    /// Appends the next bytes.
    ///
    /// - Throws: ``SyncError`` `networkFailure` when they go past the asset's size (the sender
    ///   sent more than it announced), `internalError` when the disk refuses them.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(SyncError) {
        guard offset + Int64(bytes.count) <= size else {
            throw SyncError(.networkFailure, "the server sent more than the \(size) bytes of asset \(digest)")
        }
        var written = 0
        while written < bytes.count {
            let count = pwrite(
                descriptor, bytes.baseAddress! + written, bytes.count - written, off_t(offset) + off_t(written))
            guard count > 0 else {
                throw SyncError(.internalError, "cannot write \(partial.path): \(String(cString: strerror(errno)))")
            }
            written += count
        }
        hasher.update(bytes)
        offset += Int64(bytes.count)
    }

    /// Appends the next bytes.
    public func write(_ bytes: some ContiguousBytes) throws(SyncError) {
        let failure: SyncError? = bytes.withUnsafeBytes { buffer in
            do throws(SyncError) {
                try write(buffer)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Checks that every byte arrived with the right digest, syncs the file and renames it to the
    /// destination.
    ///
    /// - Throws: ``SyncError`` `networkFailure` when bytes are missing, or when their digest is
    ///   not the asset's; the partial file is then removed, so the next download starts afresh.
    public func finish() throws(SyncError) -> URL {
        guard offset == size else {
            throw SyncError(.networkFailure, "asset \(digest) arrived with \(offset) of its \(size) bytes")
        }
        let received = hasher.finalize()
        guard received == digest else {
            try? FileManager.default.removeItem(at: partial)
            throw SyncError(.networkFailure, "the downloaded bytes of asset \(digest) hash to \(received)")
        }
        guard fsync(descriptor) == 0, rename(partial.path, destination.path) == 0 else {
            throw SyncError(
                .internalError,
                "cannot move the download of asset \(digest) to \(destination.path): \(String(cString: strerror(errno)))"
            )
        }
        return destination
    }
}

/// Keeps one piece of a transfer being written while the caller receives the next: ``start(_:)``
/// waits for the piece in flight, then starts the next and returns at once. Both ends of a
/// transfer use it (the server writing and hashing an upload's pieces, a device a download's),
/// so the network is read while the disk and the digest work, never more than one piece ahead.
public struct PieceInFlight {
    private var running: Task<Void, any Error>?

    public init() {}

    /// Waits for the piece in flight (throwing its error), then starts `work` in the background.
    public mutating func start(_ work: @escaping @Sendable () async throws -> Void) async throws {
        try await finish()
        running = Task { try await work() }
    }

    /// Waits for the piece in flight, if any, and throws its error.
    public mutating func finish() async throws {
        let previous = running
        running = nil
        try await previous?.value
    }

    /// Cancels the piece in flight, if any, without waiting for it.
    public mutating func cancel() {
        running?.cancel()
        running = nil
    }
}
