import Foundation
import LogSyncPlatform
import SyncModel
import Synchronization

/// The engine's store of fetched asset contents: one file per content, named by the 64 hex
/// digits of its SHA-256 (`<directory>/<hex>`), shared by every record that references it
/// (content addressing, as on the server).
///
/// A file appears there only once every byte arrived and matched the digest
/// (``AssetDownloadFile`` renames it into place), and is made read-only, so that an app that
/// writes to a fetched asset's file does not change what other records see. A file of the wrong
/// size (damaged, or replaced by someone) is downloaded again. Two downloads of one content never
/// run at once: the second waits for the first and then finds the file. A content this device
/// uploaded is copied from the app's file instead (``copy(from:digest:size:)``).
///
/// The engine never deletes files here; the app may delete any of them to free space (they are
/// downloaded again when wanted).
final class AssetCache: Sendable {
    /// The directory holding the files.
    let directory: URL
    /// The contents being downloaded, each with the calls waiting for it.
    private let downloading = Mutex<[AssetDigest: [CheckedContinuation<Bool, Never>]]>([:])

    init(directory: URL) {
        self.directory = directory
    }

    /// Where the content `digest` is kept.
    func fileURL(for digest: AssetDigest) -> URL {
        // Made from the path, as the device log gives back the records that hold it.
        URL(fileURLWithPath: directory.appendingPathComponent(digest.hex, isDirectory: false).path, isDirectory: false)
    }

    /// The cached file of the content `digest`, if it is there with `size` bytes.
    func cachedFile(_ digest: AssetDigest, size: Int64) -> URL? {
        let url = fileURL(for: digest)
        var status = stat()
        guard stat(url.path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, Int64(status.st_size) == size else {
            return nil
        }
        return url
    }

    /// The cached file of the content `digest` of `size` bytes, downloaded from `database` (for
    /// a record of `zoneID`) first when it is not there.
    ///
    /// - Throws: ``SyncError``: the database's (`assetNotAvailable`, `zoneNotFound`, transport
    ///   errors, after which a later call resumes the download), `operationCancelled`,
    ///   `internalError` naming the directory when it cannot be created.
    func file(
        for digest: AssetDigest, size: Int64, zoneID: RecordZone.ID, database: any CloudDatabase,
        operationGroup: OperationGroup? = nil
    ) async throws(SyncError) -> URL {
        if let url = cachedFile(digest, size: size) { return url }
        await acquire(digest)
        defer { release(digest) }
        if let url = cachedFile(digest, size: size) { return url }  // downloaded while this call waited
        let destination = fileURL(for: digest)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw SyncError(.internalError, "cannot create the asset cache \(directory.path)", cause: "\(error)")
        }
        // A file of another size is not this content: it goes, and the download replaces it.
        try? FileManager.default.removeItem(at: destination)
        do {
            _ = try await database.downloadAsset(
                AssetDownloadRequest(
                    zoneID: zoneID, digest: digest, size: size, destination: destination, operationGroup: operationGroup
                ))
        } catch {
            throw SyncError.from(error, during: "downloadAsset")
        }
        chmod(destination.path, 0o444)
        return destination
    }

    /// The cached file of the content `digest` of `size` bytes, copied from the local file
    /// `source` when it is not there yet: a record this device saved comes back in its next
    /// fetch, and its asset's content is then the app's own file, not something to download.
    /// The copy is checked against the digest as it is written (the app may have changed its
    /// file since the upload); `nil` when `source` is gone, changed or holds another content,
    /// and the caller downloads instead.
    func copy(from source: URL, digest: AssetDigest, size: Int64) async -> URL? {
        if let url = cachedFile(digest, size: size) { return url }
        await acquire(digest)
        defer { release(digest) }
        if let url = cachedFile(digest, size: size) { return url }
        let destination = fileURL(for: digest)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(at: destination)
            let file = try AssetDownloadFile(destination: destination, digest: digest, size: size)
            let reader = try AssetFileReader(url: source, expectedSize: size, from: file.offset)
            while try reader.read({ (bytes: UnsafeRawBufferPointer) throws -> Void in try file.write(bytes) }) != nil {}
            _ = try file.finish()
        } catch {
            try? FileManager.default.removeItem(at: AssetDownloadFile.partialURL(for: destination))
            return nil
        }
        chmod(destination.path, 0o444)
        return destination
    }

    /// Waits until no other call downloads `digest`, then marks it as downloaded by this one.
    private func acquire(_ digest: AssetDigest) async {
        while true {
            let acquired = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let free = downloading.withLock { downloading -> Bool in
                    guard downloading[digest] != nil else {
                        downloading[digest] = []
                        return true
                    }
                    downloading[digest]!.append(continuation)
                    return false
                }
                if free { continuation.resume(returning: true) }
            }
            if acquired { return }
        }
    }

    /// Ends this call's download of `digest`: the calls waiting for it look again.
    private func release(_ digest: AssetDigest) {
        let waiting = downloading.withLock { $0.removeValue(forKey: digest) ?? [] }
        for waiter in waiting { waiter.resume(returning: false) }
    }
}
