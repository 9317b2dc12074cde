import Foundation

/// Writes `contents` to `file` whole or not at all, readable by its owner only: to a `.partial`
/// file beside it, flushed to disk, then renamed over it. What a device keeps of its secrets
/// (its key, its session's tokens) is written so.
///
/// - Throws: ``SyncError`` `internalError` naming the file as `what` (such as "the device key")
///   and why.
package func writePrivateFile(_ contents: Data, to file: URL, what: String = "the file") throws(SyncError) {
    let partial = file.appendingPathExtension("partial")
    do {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        guard
            FileManager.default.createFile(
                atPath: partial.path, contents: contents, attributes: [.posixPermissions: 0o600])
        else {
            throw SyncError(.internalError, "cannot create \(quoted(partial.path))")
        }
        let handle = try FileHandle(forWritingTo: partial)
        defer { try? handle.close() }
        try handle.synchronize()
        guard rename(partial.path, file.path) == 0 else {
            throw SyncError(.internalError, "rename failed with errno \(errno)")
        }
    } catch {
        throw SyncError(.internalError, "cannot write \(what) \(quoted(file.path)): \(error)")
    }
}
