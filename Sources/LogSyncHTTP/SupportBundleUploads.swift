import AsyncHTTPClient
import Foundation
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel

extension HTTPSyncClient {
    /// Uploads the support bundle at `directory` (a `NAME.lsb` that
    /// `SyncEngine.exportSupportBundle(to:options:)` wrote: its `data.mdb`) for the user signed
    /// in, and returns its ID once the server verified and stored it (Docs/Protocol.md, "Support
    /// bundles"). An upload cut short resumes where the server stands, on a later call too: the
    /// bundle's ID is its SHA-256, and the server keeps what arrived. The user cannot read the
    /// bundle back; the operator can.
    ///
    /// - Parameters:
    ///   - directory: The bundle's directory, holding its `data.mdb`.
    ///   - attempts: How many times a cut upload is resumed (a lost connection, a busy upload of
    ///     the same bundle) before its error is thrown.
    /// - Throws: `SyncError`: `limitExceeded` over the server's size limit; `invalidArguments`
    ///   naming the part of a damaged bundle (nothing is stored); `assetFileModified` when the
    ///   file changed while it was sent; `assetFileNotFound` without a `data.mdb`;
    ///   `notAuthenticated`; a transport failure after the last attempt.
    public func uploadSupportBundle(at directory: URL, attempts: Int = 5) async throws(SyncError) -> String {
        let file = directory.appendingPathComponent("data.mdb")
        let (digest, size) = try AssetDigest.ofFile(at: file)
        let id = digest.hex
        var attempt = 0
        while true {
            attempt += 1
            do throws(SyncError) {
                let status = try await bundleUploadStatus(id, size: size)
                if let bundle = status.bundle { return bundle }
                let after = try await uploadBundlePiece(id, file: file, size: size, from: status.received)
                if let bundle = after.bundle { return bundle }
                throw SyncError(
                    .networkFailure, "the upload of support bundle \(id.prefix(12)) ended at byte \(after.received)")
            } catch {
                let resumable: Set<SyncError.Code> = [
                    .networkFailure, .zoneBusy, .serviceUnavailable, .networkUnavailable,
                ]
                guard attempt < attempts, resumable.contains(error.code) else { throw error }
                if let wait = error.retryAfter {
                    do {
                        try await configuration.clock.sleep(for: wait)
                    } catch {
                        throw SyncError(
                            .operationCancelled, "the upload of support bundle \(id.prefix(12)) was cancelled")
                    }
                }
                configuration.logger.debug(
                    "resuming a support bundle upload", metadata: ["bundle": "\(id)", "attempt": "\(attempt + 1)"])
            }
        }
    }

    /// `GET /v1/bundles/{id}/upload`: how much of the bundle the server holds.
    public func bundleUploadStatus(_ id: String, size: Int64) async throws(SyncError) -> WireBundles.UploadStatus {
        let requests = JSONRequests(
            serverURL: configuration.serverURL, requestTimeout: configuration.requestTimeout,
            tlsConfiguration: configuration.tlsConfiguration)
        return try await authorized { token throws(SyncError) in
            try requests.decoded(
                try await requests.send(
                    .GET, WireBundles.uploadStatusPath(id) + "?size=\(size)", token: token, body: nil,
                    doing: "support bundle upload status"))
        }
    }

    /// `PUT /v1/bundles/{id}`: the file from `offset` to its end as one streamed body.
    func uploadBundlePiece(
        _ id: String, file: URL, size: Int64, from offset: Int64
    ) async throws(SyncError) -> WireBundles.UploadStatus {
        var request = HTTPClientRequest(
            url: url(WireBundles.uploadPath(id)) + "?size=\(size)&offset=\(offset)")
        request.method = .PUT
        let token = try await currentToken.token()
        request.headers.add(name: WireProtocol.authorizationHeader, value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: WireFormat.json.mediaType)
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.headers.add(name: WireProtocol.deviceHeader, value: device.rawValue)
        request.tlsConfiguration = configuration.tlsConfiguration
        let reader = try AssetFileReader(url: file, expectedSize: size)
        let progress = TransferProgress(clock: configuration.clock)
        request.body = .stream(
            AssetFileBody(url: file, size: size, offset: offset, file: FileCheck(reader), progress: progress),
            length: .known(size - offset))
        let status: Int
        let headers: HTTPHeaders
        let answer: [UInt8]
        do {
            // As an asset's upload: no deadline, but no byte moving for assetStallTimeout fails it.
            let maxResponseBytes = configuration.maxResponseBytes
            (status, headers, answer) = try await progress.run(
                limit: configuration.assetStallTimeout, clock: configuration.clock
            ) { [request] progress in
                let response = try await Self.httpClient.execute(request, deadline: .distantFuture)
                progress.advance()
                var buffer = try await response.body.collect(upTo: maxResponseBytes)
                return (
                    Int(response.status.code), response.headers, buffer.readBytes(length: buffer.readableBytes) ?? []
                )
            }
        } catch let error as SyncError {
            throw error
        } catch is TransferProgress.Stalled {
            throw SyncError(
                .networkFailure,
                "the upload of support bundle \(id.prefix(12)) stalled: no byte moved for \(configuration.assetStallTimeout)"
            )
        } catch {
            throw TransportFailure.map(
                error, doing: "support bundle upload", mayHaveApplied: false, server: configuration.serverURL)
        }
        guard status == 200 else {
            throw Self.error(status: status, headers: headers, body: answer, doing: "support bundle upload")
        }
        do {
            return try WireSessions.decode(WireBundles.UploadStatus.self, from: answer)
        } catch {
            throw SyncError(
                .internalError, "the server's answer to a support bundle upload does not decode", cause: "\(error)")
        }
    }
}

/// Support bundles (Docs/Protocol.md, "Support bundles"): what `logsync-server bundles list|get`
/// does, for the operator only.
extension AdminClient {
    /// The stored support bundles, oldest first: every user's, or `user`'s.
    ///
    /// - Throws: `SyncError`: `notAuthenticated` for a token that is not an admin token; a
    ///   transport failure.
    public func supportBundles(of user: String? = nil) async throws(SyncError) -> [WireBundles.Bundle] {
        let list: WireBundles.Bundles = try requests.decoded(
            try await send(.GET, WireBundles.adminBundlesPath(user: user), body: nil, doing: "list bundles"))
        return list.bundles
    }

    /// Downloads the stored bundle `id` into `directory` (created; it must not hold a
    /// `data.mdb` yet), as a bundle directory `logtool` reads. Returns its size.
    ///
    /// - Throws: `SyncError`: `unknownItem` for an ID not stored; `notAuthenticated`;
    ///   `invalidArguments` when `directory` holds a `data.mdb` already; a transport failure.
    @discardableResult
    public func downloadSupportBundle(_ id: String, to directory: URL) async throws(SyncError) -> Int64 {
        let file = directory.appendingPathComponent("data.mdb")
        if FileManager.default.fileExists(atPath: file.path) {
            throw SyncError(.invalidArguments, "\(directory.path) holds a data.mdb already; name a new directory")
        }
        var request = HTTPClientRequest(url: serverURL.route(WireBundles.adminBundlePath(id)))
        request.method = .GET
        request.headers.add(name: WireProtocol.authorizationHeader, value: "Bearer \(adminToken)")
        request.tlsConfiguration = tlsConfiguration
        let partial = directory.appendingPathComponent("data.mdb.partial")
        do {
            let response = try await HTTPSyncClient.httpClient.execute(
                request, timeout: .nanoseconds(max(requestTimeout, .seconds(600)).nanoseconds))
            guard response.status.code == 200 else {
                var buffer = try await response.body.collect(upTo: 1 << 20)
                throw HTTPSyncClient.error(
                    status: Int(response.status.code), headers: response.headers,
                    body: buffer.readBytes(length: buffer.readableBytes) ?? [], doing: "admin download bundle")
            }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            FileManager.default.createFile(atPath: partial.path, contents: nil)
            let handle = try FileHandle(forWritingTo: partial)
            defer { try? handle.close() }
            var size: Int64 = 0
            for try await piece in response.body {
                try handle.write(contentsOf: Data(piece.readableBytesView))
                size += Int64(piece.readableBytes)
            }
            try handle.synchronize()
            try FileManager.default.moveItem(at: partial, to: file)
            return size
        } catch let error as SyncError {
            throw error
        } catch {
            try? FileManager.default.removeItem(at: partial)
            throw TransportFailure.map(error, doing: "admin download bundle", mayHaveApplied: false, server: serverURL)
        }
    }
}
