import AsyncHTTPClient
import Foundation
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel
import Synchronization

// Asset contents over HTTP (Docs/Protocol.md, "Assets"): uploads streamed from the file as the
// body of `PUT …/assets/{digest}` from where the server's bytes end, downloads streamed from
// `GET …/assets/{digest}` into the partial file with `Range: bytes=N-`, both resumed within one
// call after a dropped or stalled connection, and never more than about a piece
// (`AssetTransfer.chunkSize`) in memory.

extension HTTPCloudDatabase {
    /// Uploads the file of `request` (see `CloudDatabase.uploadAsset`): asks the server how much
    /// of the content it holds, sends the rest as one streamed body, and after a dropped
    /// connection asks again and sends from there.
    func transferUpload(_ request: AssetUploadRequest) async throws(SyncError) -> AssetUploadResponse {
        let transfer = AssetTransferCall(
            client: client, scope: databaseScope, operation: "uploadAsset", digest: request.digest,
            operationGroup: request.operationGroup)
        try transfer.checkCancellation()
        let asset = Asset(digest: request.digest, size: request.size)
        // Refusals come first, as in process: the size limit, the quota, the zone, another upload.
        var status = try await transfer.uploadStatus(request)
        let start = status.received
        if status.stored { return AssetUploadResponse(asset: asset, bytesSent: 0) }
        let file = try FileCheck(AssetFileReader(url: request.fileURL, expectedSize: request.size, from: start))
        var attempt = AttemptCounter(limit: client.configuration.assetResumeAttempts)
        var needsStatus = false
        while true {
            do {
                if needsStatus {
                    status = try await transfer.uploadStatus(request)
                    needsStatus = false
                    if status.stored { break }
                }
                attempt.progressed(to: status.received)
                let answer = try await transfer.uploadPiece(request, from: status.received, file: file)
                if answer.stored { break }
                // Answered without storing: fewer bytes reached the server than were sent.
                throw SyncError(
                    .networkFailure,
                    "the server holds \(answer.received) of the \(request.size) bytes of asset \(request.digest) sent to it; the upload resumes from there"
                )
            } catch {
                try await transfer.waitBeforeResuming(after: error, attempt: &attempt)
                needsStatus = true
            }
        }
        return AssetUploadResponse(asset: asset, bytesSent: request.size - start)
    }

    /// Downloads the content of `request` (see `CloudDatabase.downloadAsset`) into its partial
    /// file, from where that file ends, and after a dropped connection from where it ends then.
    func transferDownload(_ request: AssetDownloadRequest) async throws(SyncError) -> AssetDownloadResponse {
        let transfer = AssetTransferCall(
            client: client, scope: databaseScope, operation: "downloadAsset", digest: request.digest,
            operationGroup: request.operationGroup)
        try transfer.checkCancellation()
        let file = DownloadFile(
            try AssetDownloadFile(destination: request.destination, digest: request.digest, size: request.size))
        let start = file.offset
        var attempt = AttemptCounter(limit: client.configuration.assetResumeAttempts)
        while true {
            attempt.progressed(to: file.offset)
            do {
                try await transfer.downloadPiece(request, into: file)
                break
            } catch {
                try await transfer.waitBeforeResuming(after: error, attempt: &attempt)
            }
        }
        return AssetDownloadResponse(fileURL: try file.finish(), bytesReceived: request.size - start)
    }
}

/// How many attempts of one transfer have failed in a row without moving it forward.
struct AttemptCounter {
    let limit: Int
    private(set) var failures = 0
    private var reached: Int64 = -1

    init(limit: Int) { self.limit = max(0, limit) }

    /// The transfer stands at `offset`: past where it stood, the count of failures starts again.
    mutating func progressed(to offset: Int64) {
        if offset > reached {
            if reached >= 0 { failures = 0 }
            reached = offset
        }
    }

    /// Counts a failure; `false` once there have been more than `limit` in a row.
    mutating func failed() -> Bool {
        failures += 1
        return failures <= limit
    }
}

/// One `uploadAsset` or `downloadAsset` call: its requests, each mapping what goes wrong to a
/// ``SyncError`` as ``HTTPSyncClient`` does for operations.
struct AssetTransferCall: Sendable {
    let client: HTTPSyncClient
    let scope: DatabaseScope
    /// `uploadAsset` or `downloadAsset`, for messages.
    let operation: String
    let digest: AssetDigest
    /// The group the transfer belongs to (F69), sent in a header with each of its requests.
    let operationGroup: OperationGroup?

    private var configuration: HTTPSyncClient.Configuration { client.configuration }

    func checkCancellation() throws(SyncError) {
        if Task.isCancelled { throw SyncError(.operationCancelled, "\(operation) of asset \(digest) was cancelled") }
    }

    // MARK: Requests

    /// `GET …/assets/{digest}/upload`: how much of the content the server holds.
    /// Sent again with a new token if the credentials replace one the server refused, as
    /// operations are (``HTTPSyncClient``).
    func uploadStatus(_ upload: AssetUploadRequest) async throws(SyncError) -> AssetUploadStatus {
        try checkCancellation()
        let query = WireProtocol.assetQuery(zoneID: upload.zoneID, size: upload.size)
        return try await client.authorized { token throws(SyncError) in
            let request = makeRequest(
                WireProtocol.assetUploadPath(digest, scope: scope), query: query, method: .GET, token: token)
            let (status, headers, body) = try await exchange(request, timeout: configuration.requestTimeout)
            return try decodeStatus(status, headers, body)
        }
    }

    /// `PUT …/assets/{digest}`: the file from `offset` to its end as one streamed body; the
    /// server's status after it.
    func uploadPiece(
        _ upload: AssetUploadRequest, from offset: Int64, file: FileCheck
    ) async throws(SyncError) -> AssetUploadStatus {
        try checkCancellation()
        let query = WireProtocol.assetQuery(zoneID: upload.zoneID, size: upload.size, offset: offset)
        var request = makeRequest(
            WireProtocol.assetPath(digest, scope: scope), query: query, method: .PUT,
            token: try await client.currentToken.token())
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        let (client, operation) = (client, operation)
        let progress = TransferProgress(clock: configuration.clock)
        request.body = .stream(
            AssetFileBody(url: upload.fileURL, size: upload.size, offset: offset, file: file, progress: progress),
            length: .known(upload.size - offset))
        let answer = try await withStallLimit(progress) { [request] progress in
            let response = try await HTTPSyncClient.httpClient.execute(request, deadline: .distantFuture)
            progress.advance()
            var buffer = try await response.body.collect(upTo: client.configuration.maxResponseBytes)
            return (Int(response.status.code), response.headers, buffer.readBytes(length: buffer.readableBytes) ?? [])
        }
        client.configuration.logger.trace(
            "answered",
            metadata: [
                "operation": "\(operation)", "status": "\(answer.0)", "bytes.out": "\(upload.size - offset)",
            ])
        return try decodeStatus(answer.0, answer.1, answer.2)
    }

    /// `GET …/assets/{digest}` from the end of `file` (`Range: bytes=N-`), each piece of the
    /// answer's body appended to it as it arrives. Returns once the file holds the whole
    /// content; throws with the file holding whatever arrived.
    /// Sent again with a new token if the credentials replace one the server refused (before
    /// any byte arrives), as operations are (``HTTPSyncClient``).
    func downloadPiece(_ download: AssetDownloadRequest, into file: DownloadFile) async throws(SyncError) {
        try await client.authorized { token throws(SyncError) in
            try await downloadPiece(download, into: file, token: token)
        }
    }

    private func downloadPiece(
        _ download: AssetDownloadRequest, into file: DownloadFile, token: String
    ) async throws(SyncError) {
        try checkCancellation()
        let offset = file.offset
        let query = WireProtocol.assetQuery(zoneID: download.zoneID, size: download.size)
        var request = makeRequest(
            WireProtocol.assetPath(digest, scope: scope), query: query, method: .GET, token: token)
        if offset > 0 { request.headers.add(name: "Range", value: "bytes=\(offset)-") }
        let (client, operation, digest, size) = (client, operation, digest, download.size)
        try await withStallLimit(TransferProgress(clock: configuration.clock)) { [request] progress in
            let response = try await HTTPSyncClient.httpClient.execute(request, deadline: .distantFuture)
            progress.advance()
            let status = Int(response.status.code)
            let contentRange = response.headers.first(name: "Content-Range")
            var skip: Int64 = 0
            switch status {
            case 206:
                guard let range = contentRange.flatMap(Self.contentRange), range.first == offset, range.total == size
                else {
                    throw SyncError(
                        .internalError,
                        "the server answered a download of asset \(digest) from byte \(offset) with Content-Range \(contentRange ?? "(none)")"
                    )
                }
            case 200:
                // The whole content (a proxy may drop the range): skip what the file holds.
                skip = offset
            case 416 where offset == size && contentRange == "bytes */\(size)":
                // The file holds every byte already; the server has the content.
                return
            default:
                var buffer = try await response.body.collect(upTo: client.configuration.maxResponseBytes)
                throw HTTPSyncClient.error(
                    status: status, headers: response.headers,
                    body: buffer.readBytes(length: buffer.readableBytes) ?? [],
                    doing: "\(operation) of asset \(digest)")
            }
            // Pieces are gathered up to the chunk size; one is written and hashed while the next
            // arrives, so the connection is read while the disk and the digest work.
            var pending = ByteBuffer()
            var writing = PieceInFlight()
            defer { writing.cancel() }
            func settle() async throws { try await writing.finish() }
            func flush() async throws {
                guard pending.readableBytes > 0 else { return }
                let gathered = pending
                try await writing.start {
                    try gathered.withUnsafeReadableBytes { bytes throws(SyncError) in try file.write(bytes) }
                }
                pending = ByteBuffer()
            }
            do {
                for try await var piece in response.body {
                    progress.advance()
                    if skip > 0 {
                        let dropped = Int(min(Int64(piece.readableBytes), skip))
                        piece.moveReaderIndex(forwardBy: dropped)
                        skip -= Int64(dropped)
                    }
                    pending.writeBuffer(&piece)
                    if pending.readableBytes >= AssetTransfer.chunkSize { try await flush() }
                }
                try await flush()
                try await settle()
            } catch {
                // What arrived is kept, for the next attempt to resume from; after a failed
                // write nothing more is (the file must hold the content's first bytes only).
                if (try? await settle()) != nil {
                    try? await flush()
                    try? await settle()
                }
                throw error
            }
            guard file.offset == size else {
                throw SyncError(
                    .networkFailure, "the download of asset \(digest) ended at byte \(file.offset) of its \(size)")
            }
        }
        client.configuration.logger.trace(
            "answered",
            metadata: [
                "operation": "\(operation)", "bytes.in": "\(file.offset - offset)", "from": "\(offset)",
            ])
    }

    // MARK: Resuming

    /// Waits before the next attempt after `error`, or throws it: only a failure of the
    /// connection is resumed (and `zoneBusy` or `serviceUnavailable` after one, which is the
    /// server still holding the dropped upload), at most ``HTTPSyncClient/Configuration/assetResumeAttempts``
    /// times in a row without progress, after the wait of ``HTTPSyncClient/Configuration/reconnect``
    /// or the error's retry-after, whichever is longer.
    func waitBeforeResuming(after error: any Error, attempt: inout AttemptCounter) async throws(SyncError) {
        let error =
            (error as? SyncError)
            ?? SyncError(.internalError, "\(operation) of asset \(digest) failed", cause: "\(error)")
        let resumable: Bool =
            switch error.code {
            case .networkFailure, .serverResponseLost: true
            case .zoneBusy, .serviceUnavailable: attempt.failures > 0
            default: false
            }
        guard resumable, attempt.failed() else { throw error }
        var delay = configuration.reconnect.delay(afterFailures: attempt.failures - 1, random: Double.random(in: 0...1))
        if let retryAfter = error.retryAfter, retryAfter > delay { delay = retryAfter }
        configuration.logger.debug(
            "resuming an asset transfer",
            metadata: [
                "operation": "\(operation)", "asset": "\(digest.short)", "attempt": "\(attempt.failures)",
                "error": "\(error)",
            ])
        do {
            try await configuration.clock.sleep(for: delay)
        } catch {
            throw SyncError(
                .operationCancelled, "\(operation) of asset \(digest) was cancelled while it waited to resume")
        }
    }

    // MARK: Helpers

    private func makeRequest(_ path: String, query: String, method: HTTPMethod, token: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: client.url(path) + "?" + query)
        request.method = method
        request.headers.add(name: WireProtocol.authorizationHeader, value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: configuration.format.mediaType)
        request.headers.add(name: WireProtocol.deviceHeader, value: client.device.rawValue)
        if let operationGroup {
            request.headers.add(name: WireProtocol.operationGroupHeader, value: Wire.encodeHeader(operationGroup))
        }
        request.tlsConfiguration = configuration.tlsConfiguration
        return request
    }

    /// Sends a request without a body and reads its whole (small) answer.
    private func exchange(
        _ request: HTTPClientRequest, timeout: Duration
    ) async throws(SyncError) -> (Int, HTTPHeaders, [UInt8]) {
        do {
            let response = try await HTTPSyncClient.httpClient.execute(
                request, timeout: .nanoseconds(timeout.nanoseconds))
            var buffer = try await response.body.collect(upTo: configuration.maxResponseBytes)
            return (Int(response.status.code), response.headers, buffer.readBytes(length: buffer.readableBytes) ?? [])
        } catch {
            throw mapped(error)
        }
    }

    /// The status of a 200 answer, or the error of another.
    private func decodeStatus(
        _ status: Int, _ headers: HTTPHeaders, _ body: [UInt8]
    ) throws(SyncError) -> AssetUploadStatus {
        guard status == 200 else {
            throw HTTPSyncClient.error(
                status: status, headers: headers, body: body, doing: "\(operation) of asset \(digest)")
        }
        do {
            return try Wire.decode(AssetUploadStatus.self, from: body, as: configuration.format)
        } catch {
            throw SyncError(
                .internalError, "the server's answer to \(operation) of asset \(digest) could not be decoded",
                cause: error.message)
        }
    }

    /// What `error` of a request stands for: a ``SyncError`` as it is (the file's, or the
    /// server's), a transport failure as ``TransportFailure`` maps it.
    private func mapped(_ error: any Error) -> SyncError {
        if let error = error as? SyncError { return error }
        if error is TransferProgress.Stalled {
            return SyncError(
                .networkFailure,
                "\(operation) of asset \(digest) stalled: no byte moved for \(configuration.assetStallTimeout)")
        }
        return TransportFailure.map(
            error, doing: "\(operation) of asset \(digest)", mayHaveApplied: false, server: configuration.serverURL)
    }

    /// Runs `body` under the stall limit (``TransferProgress/run(limit:clock:_:)``); any error
    /// is mapped, a stall to `networkFailure`.
    private func withStallLimit<R: Sendable>(
        _ progress: TransferProgress, _ body: @escaping @Sendable (TransferProgress) async throws -> R
    ) async throws(SyncError) -> R {
        do {
            return try await progress.run(limit: configuration.assetStallTimeout, clock: configuration.clock, body)
        } catch {
            throw mapped(error)
        }
    }

    /// The first byte and the total of a `Content-Range: bytes N-M/T` header.
    static func contentRange(_ header: String) -> (first: Int64, total: Int64)? {
        let parts = header.trimmingCharacters(in: .whitespaces).split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes" else { return nil }
        let rangeAndTotal = parts[1].split(separator: "/", maxSplits: 1)
        guard rangeAndTotal.count == 2, let total = Int64(rangeAndTotal[1]),
            let dash = rangeAndTotal[0].firstIndex(of: "-"), let first = Int64(rangeAndTotal[0][..<dash])
        else { return nil }
        return (first, total)
    }
}

/// When a transfer last moved a byte, for ``AssetTransferCall``'s stall limit: a time on the
/// client's configured clock (``HTTPSyncClient/Configuration/clock``), so that a test clock
/// decides when a transfer has stood still long enough, not how busy the machine is.
final class TransferProgress: Sendable {
    /// The time on the clock since the progress was made.
    private let elapsed: @Sendable () -> Duration
    private let last = Mutex(Duration.zero)

    init<C: Clock>(clock: C) where C.Duration == Duration {
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
    }

    /// A byte moved (or an answer came).
    func advance() {
        let now = elapsed()
        last.withLock { $0 = now }
    }

    /// How long since the last ``advance()``.
    var idle: Duration { elapsed() - last.withLock { $0 } }

    /// What ``run(limit:clock:_:)`` throws when no byte moved for the limit.
    struct Stalled: Error {}

    /// Runs `body`, failing it with ``Stalled`` when it calls ``advance()`` no more for `limit`
    /// on `clock` (the clock this progress was made with): the one stall limit of every streamed
    /// transfer (assets, support bundles).
    func run<R: Sendable>(
        limit: Duration, clock: any Clock<Duration>, _ body: @escaping @Sendable (TransferProgress) async throws -> R
    ) async throws -> R {
        advance()
        return try await withThrowingTaskGroup(of: R?.self) { group in
            group.addTask { try await body(self) }
            group.addTask {
                while true {
                    let idle = self.idle
                    if idle >= limit { throw Stalled() }
                    try await clock.sleep(for: limit - idle)
                }
            }
            defer { group.cancelAll() }
            guard let result = try await group.next(), let value = result else { throw Stalled() }
            return value
        }
    }
}

/// The reader an upload opened first, for checking, at the last piece of every attempt, that
/// the file is still the one it opened. Only `checkUnchanged()` is called on it (a `stat`), one
/// attempt at a time.
final class FileCheck: @unchecked Sendable {
    private let reader: AssetFileReader

    init(_ reader: AssetFileReader) { self.reader = reader }

    func checkUnchanged() throws(SyncError) { try reader.checkUnchanged() }
}

/// A download's partial file, written by one attempt at a time (each on whatever thread its
/// response body arrives on, never two at once).
final class DownloadFile: @unchecked Sendable {
    private let file: AssetDownloadFile

    init(_ file: AssetDownloadFile) { self.file = file }

    var offset: Int64 { file.offset }

    func write(_ bytes: UnsafeRawBufferPointer) throws(SyncError) { try file.write(bytes) }

    func finish() throws(SyncError) -> URL { try file.finish() }
}

/// The body of an uploaded piece: the file from `offset` to its end, read a piece
/// (``AssetTransfer/chunkSize``) at a time as the connection takes them. Before the last piece
/// goes, the file is checked to be the one the upload opened (`assetFileModified` otherwise,
/// which ends the body short, so the server stores nothing).
struct AssetFileBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let url: URL
    let size: Int64
    let offset: Int64
    let file: FileCheck
    let progress: TransferProgress

    func makeAsyncIterator() -> Iterator { Iterator(body: self) }

    struct Iterator: AsyncIteratorProtocol {
        let body: AssetFileBody
        var reader: AssetFileReader?

        mutating func next() async throws -> ByteBuffer? {
            body.progress.advance()
            if reader == nil {
                reader = try AssetFileReader(url: body.url, expectedSize: body.size, from: body.offset)
            }
            guard let reader, let piece = try reader.read({ ByteBuffer(bytes: $0) }) else { return nil }
            if reader.offset == body.size { try body.file.checkUnchanged() }
            return piece
        }
    }
}
