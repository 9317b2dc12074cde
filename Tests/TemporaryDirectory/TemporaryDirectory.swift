import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A new directory of its own under the system temporary directory (`mkdtemp`, mode 0700), handed
/// to `body` and removed with everything in it when `body` returns or throws.
///
/// ```swift
/// try await withTemporaryDirectory { directory in
///     let phone = try TestDevice("phone", server: server, directory: directory)
/// }
/// ```
///
/// - Throws: ``TemporaryDirectoryError`` when the directory cannot be made; what `body` throws.
@discardableResult
public func withTemporaryDirectory<R>(_ body: (URL) throws -> R) throws -> R {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// ``withTemporaryDirectory(_:)`` for an `async` body.
@discardableResult
public func withTemporaryDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// The directory could not be made.
public struct TemporaryDirectoryError: Error, CustomStringConvertible {
    public let description: String
}

/// A fresh directory `logsync-test-XXXXXX` under the system temporary directory (`TMPDIR`).
private func makeTemporaryDirectory() throws -> URL {
    let template = FileManager.default.temporaryDirectory.appendingPathComponent("logsync-test-XXXXXX").path
    var bytes = Array(template.utf8CString)
    guard let created = mkdtemp(&bytes) else {
        throw TemporaryDirectoryError(
            description: "cannot make a directory \(template): \(String(cString: strerror(errno)))")
    }
    return URL(fileURLWithPath: String(cString: created), isDirectory: true)
}
