import Hummingbird
import LogSyncServer
import SyncModel

// The body of an upload (an asset's content, a support bundle's file) read into the server's
// partial copy: one piece (`AssetTransfer.chunkSize`) held at a time, the same way for both.

/// Where an upload's pieces go: the server's partial asset or support bundle.
protocol UploadPieceSink: Sendable {
    /// The bytes the server holds.
    var received: Int64 { get }
    /// Appends `bytes` at `offset`, which must be ``received``.
    func write(_ bytes: [UInt8], at offset: Int64) async throws
}

extension AssetUpload: UploadPieceSink {}
extension SupportBundleUpload: UploadPieceSink {}

/// Whether an upload's body has been read to its end (else the answer closes the connection).
final class UploadBodyRead {
    var read: Bool
    init(read: Bool) { self.read = read }
}

/// Reads `body` into `sink` from `offset`, a piece at a time; returns the bytes that arrived.
/// One piece is written while the next arrives: the connection is read while the disk (and an
/// asset's digest) works, instead of one after the other.
///
/// - Parameters:
///   - what: Names the upload in errors (`asset sha256:…`, `support bundle 3f2a…`).
/// - Throws: `HTTPFailure` 400 for more bytes than `size` or a body that breaks off (what
///   arrived is kept, for the next upload to resume from), or the sink's `SyncError`.
func receiveUpload(
    _ body: RequestBody, into sink: some UploadPieceSink, from offset: Int64, size: Int64, naming what: String
) async throws -> Int64 {
    var pending: [UInt8] = []
    pending.reserveCapacity(AssetTransfer.chunkSize)
    var arrived: Int64 = 0
    var writing = PieceInFlight()
    func settle() async throws { try await writing.finish() }
    func flush() async throws {
        guard !pending.isEmpty else { return }
        let piece = pending
        // Started once the piece before is written: the server's count is where it goes.
        try await writing.start { try await sink.write(piece, at: sink.received) }
        pending = []
        pending.reserveCapacity(AssetTransfer.chunkSize)
    }
    defer { writing.cancel() }
    do {
        for try await chunk in body {
            arrived += Int64(chunk.readableBytes)
            guard offset + arrived <= size else {
                throw HTTPFailure(
                    400,
                    SyncError(
                        .invalidArguments, "\(what): \(offset + arrived) bytes sent, more than its announced \(size)"))
            }
            pending.append(contentsOf: chunk.readableBytesView)
            if pending.count >= AssetTransfer.chunkSize { try await flush() }
        }
    } catch let failure as HTTPFailure {
        try? await settle()
        throw failure
    } catch let error as SyncError {
        try? await settle()
        throw HTTPFailure(error)
    } catch {
        // The body broke off (a malformed chunk, the connection lost): keep what arrived.
        try await flush()
        try await settle()
        throw HTTPFailure(
            400,
            SyncError(
                .invalidArguments, "the body of an upload of \(what) could not be read after \(arrived) bytes",
                cause: "\(error)"))
    }
    try await flush()
    try await settle()
    return arrived
}
