import Foundation
import HTTPTypes
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import SyncModel

/// The asset routes (Docs/Protocol.md, "Assets"), beside the operation routes and with the same
/// bearer token, device header and error bodies:
///
/// - `GET /v1/databases/{scope}/assets/{sha256 hex}/upload?zone=…&size=…`: how much of the
///   content the server holds (``AssetUploadStatus``), so that a client resumes from there;
/// - `PUT /v1/databases/{scope}/assets/{sha256 hex}?zone=…&size=…&offset=…`: a piece of the
///   content from `offset`, streamed from the body into the server's asset store about a piece
///   (``AssetTransfer/chunkSize``) at a time; the content is checked and stored when its last
///   byte arrives;
/// - `GET /v1/databases/{scope}/assets/{sha256 hex}?zone=…`: the content, streamed a piece at a
///   time, from the byte a `Range: bytes=N-` header names.
///
/// An asset body is never held whole in memory, and the operation routes' body limit does not
/// apply to it: an upload announces its size, which must be within ``Limits/maxAssetBytes``, and
/// a body that goes past it is refused.
struct AssetRoutes: Sendable {
    let http: HTTPSyncServer

    private var operations: OperationRoutes { OperationRoutes(http: http) }

    /// What every asset request names: the user and device asking, the database, the content
    /// and the zone whose records reference it.
    struct Target: Sendable, CustomStringConvertible {
        var user: UserID
        var device: DeviceID?
        var scope: DatabaseScope
        var digest: AssetDigest
        var zoneID: RecordZone.ID
        /// The group the request belongs to (`LogSync-Operation-Group`, F69), or `nil`.
        var operationGroup: OperationGroup?

        var description: String { "asset \(digest) for \(zoneID)" }
    }

    // MARK: Routes

    /// `GET …/assets/{digest}/upload`: the upload's status. Opening the upload checks what a
    /// `PUT` would be refused for before any byte is sent (the size limit, the quota, the zone),
    /// and answers `zoneBusy` while another request uploads the same content.
    func uploadStatus(_ request: Request, context: ServerRequestContext) async -> Response {
        await answering(request, context: context, "uploadStatus") { target, format in
            let size = try Self.integer(AssetParameter.size, of: request, for: target)
            let upload = try await beginUpload(target, size: size)
            defer { upload.close() }
            let status = AssetUploadStatus(received: upload.received, stored: upload.isStored, size: size)
            return (Self.statusResponse(status, format: format), ["asset.status": "\(status)"])
        }
    }

    /// `PUT …/assets/{digest}`: one piece of the content, from the `offset` parameter to the end
    /// of the body. The answer is the status after it; a body cut short (the client went away)
    /// leaves what arrived for the next upload of the content to resume.
    func upload(_ request: Request, context: ServerRequestContext) async -> Response {
        // Whether the body was read to its end: an error answered before leaves it unread, and
        // the connection is then closed rather than drained.
        let declared = request.headers[.contentLength].flatMap { Int64($0) }
        let body = UploadBodyRead(read: declared == 0)
        return await answering(request, context: context, "uploadAsset", unreadBody: { !body.read }) { target, format in
            let size = try Self.integer(AssetParameter.size, of: request, for: target)
            let offset = try Self.integer(AssetParameter.offset, of: request, for: target)
            // Compared without adding, so that no number a client sends can overflow.
            if let declared, offset >= 0, offset <= size, declared > size - offset {
                throw HTTPFailure(
                    400,
                    SyncError(
                        .invalidArguments,
                        "asset \(target.digest): a piece of \(declared) bytes from byte \(offset) goes past its announced size, \(size) bytes"
                    ))
            }
            let upload = try await beginUpload(target, size: size)
            defer { upload.close() }
            if upload.isStored {
                // Stored already (by another device, say): the body is not wanted. It is not
                // drained either: the answer goes out, then the connection closes.
                let status = AssetUploadStatus(received: size, stored: true, size: size)
                if !body.read { context.channel.close(mode: .input, promise: nil) }
                return (
                    Self.statusResponse(status, format: format, closeConnection: !body.read),
                    ["asset.status": "\(status)"]
                )
            }
            // A piece out of order, refused with the server's own message before the body is read.
            try await upload.write([], at: offset)
            let arrived = try await receiveUpload(
                request.body, into: upload, from: offset, size: size, naming: "asset \(target.digest)")
            body.read = true
            if upload.received == size {
                _ = try await upload.finish()
            }
            let status = AssetUploadStatus(received: upload.received, stored: upload.isStored, size: size)
            return (
                Self.statusResponse(status, format: format), ["asset.status": "\(status)", "bytes.in": "\(arrived)"]
            )
        }
    }

    /// `GET …/assets/{digest}`: the content, or with `Range: bytes=N-` (or `bytes=N-M`) the bytes
    /// from `N`, answered 206 with `Content-Range`. A range starting at or past the end is 416,
    /// with `Content-Range: bytes */<size>`.
    func download(_ request: Request, context: ServerRequestContext) async -> Response {
        await answering(request, context: context, "downloadAsset") { target, format in
            let expected = try Self.optionalInteger(AssetParameter.size, of: request, for: target)
            let download: AssetDownload
            do {
                download = try await http.server.openAssetDownload(
                    user: target.user, scope: target.scope, zoneID: target.zoneID, digest: target.digest,
                    device: target.device,
                    operationGroup: target.operationGroup)
            } catch {
                throw Self.failure(error, target)
            }
            let size = download.size
            if let expected, expected != size {
                throw HTTPFailure(
                    400,
                    SyncError(
                        .invalidArguments, "asset \(target.digest) has \(size) bytes on the server, not \(expected)"))
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/octet-stream"
            headers[.acceptRanges] = "bytes"
            headers[.eTag] = "\"\(target.digest)\""
            headers[HTTPField.Name(WireProtocol.versionHeader)!] = "\(WireProtocol.version)"
            var status = HTTPResponse.Status.ok
            var start: Int64 = 0
            var end = size
            if let range = request.headers[.range], let (first, last) = Self.byteRange(range) {
                guard first < size else {
                    headers[.contentRange] = "bytes */\(size)"
                    let error = SyncError(
                        .invalidArguments,
                        "asset \(target.digest) has \(size) bytes: a range from byte \(first) holds none")
                    var response = OperationRoutes.errorResponse(error, status: 416, format: format)
                    for field in headers where response.headers[field.name] == nil { response.headers.append(field) }
                    return (response, ["range": "\(range)"])
                }
                start = first
                end = last.map { $0 < size - 1 ? $0 + 1 : size } ?? size
                status = .partialContent
                headers[.contentRange] = "bytes \(start)-\(end - 1)/\(size)"
            }
            let length = end - start
            let body = ResponseBody(contentLength: Int(length)) { [start, end] writer in
                var offset = start
                while offset < end {
                    let piece = try await download.read(
                        from: offset, maxLength: Int(min(Int64(AssetTransfer.chunkSize), end - offset)))
                    guard !piece.isEmpty else {
                        throw SyncError(
                            .assetNotAvailable, "asset \(target.digest) ended at byte \(offset) of its \(size)")
                    }
                    try await writer.write(ByteBuffer(bytes: piece))
                    offset += Int64(piece.count)
                }
                try await writer.finish(nil)
            }
            return (
                Response(status: status, headers: headers, body: body), ["bytes.out": "\(length)", "from": "\(start)"]
            )
        }
    }

    // MARK: Steps

    /// Authenticates and parses the request, runs `body`, and turns whatever it throws into the
    /// error answer of the other routes (`WireStatus`, `ErrorResponse`); logs the outcome.
    private func answering(
        _ request: Request, context: ServerRequestContext, _ operation: String,
        unreadBody: () -> Bool = { false },
        _ body: (Target, WireFormat) async throws -> (Response, Logger.Metadata)
    ) async -> Response {
        let format = WireFormat.forResponse(accept: request.headers[.accept])
        let started = ContinuousClock.now
        var logger = context.logger
        logger[metadataKey: "operation"] = "\(operation)"
        do {
            let target = try target(request, context: context)
            logger[metadataKey: "scope"] = "\(target.scope)"
            logger[metadataKey: "asset"] = "\(target.digest.short)"
            let (response, metadata) = try await body(target, format)
            var all = metadata
            all["status"] = "\(response.status.code)"
            all["ms"] = "\((ContinuousClock.now - started).milliseconds)"
            logger.debug("answered", metadata: all)
            return response
        } catch {
            let failure = (error as? HTTPFailure) ?? Self.failure(error, nil)
            return OperationRoutes.refusal(
                failure, closing: failure.closeConnection || unreadBody(), logger: logger, since: started,
                context: context,
                format: format)
        }
    }

    /// The user, device, scope, digest and zone of a request: 404 for an unknown version or
    /// scope, 401 without a valid token, 400 for a bad device, digest or zone.
    private func target(_ request: Request, context: ServerRequestContext) throws(HTTPFailure) -> Target {
        let scope = try operations.scope(context)
        let (user, device) = try operations.authenticatedDevice(request)
        let digest: AssetDigest
        do {
            digest = try AssetDigest(parsing: context.parameters.get("digest") ?? "")
        } catch {
            throw HTTPFailure(400, error)
        }
        let parameters = request.uri.queryParameters
        guard let zoneName = parameters[AssetParameter.zone[...]].map(String.init), !zoneName.isEmpty else {
            throw HTTPFailure(
                400,
                SyncError(
                    .invalidArguments,
                    "a request for asset \(digest) names no zone: add ?\(AssetParameter.zone)=<zone name> (and \(AssetParameter.owner)=<owner> for a zone of another user)"
                ))
        }
        let owner = parameters[AssetParameter.owner[...]].map(String.init) ?? RecordZone.ID.defaultOwnerName
        var operationGroup: OperationGroup?
        if let header = request.headers[HTTPField.Name(WireProtocol.operationGroupHeader)!] {
            do {
                operationGroup = try Wire.decodeHeader(OperationGroup.self, from: header)
            } catch {
                throw HTTPFailure(400, error)
            }
        }
        return Target(
            user: user, device: device, scope: scope, digest: digest,
            zoneID: RecordZone.ID(zoneName: zoneName, ownerName: owner),
            operationGroup: operationGroup)
    }

    private typealias AssetParameter = WireProtocol.AssetParameter

    /// The whole number of a required query parameter: 400 naming it when it is missing or not
    /// a number.
    static func integer(_ name: String, of request: Request, for target: Target) throws(HTTPFailure) -> Int64 {
        guard let value = try optionalInteger(name, of: request, for: target) else {
            throw HTTPFailure(
                400,
                SyncError(
                    .invalidArguments, "a request for \(target) has no \(name) parameter; add \(name)=<bytes>"))
        }
        return value
    }

    /// The whole number of a query parameter, `nil` when it is absent: 400 naming it when it is
    /// not a number.
    static func optionalInteger(_ name: String, of request: Request, for target: Target) throws(HTTPFailure) -> Int64? {
        guard let text = request.uri.queryParameters[name[...]] else { return nil }
        guard let value = Int64(text) else {
            throw HTTPFailure(
                400,
                SyncError(
                    .invalidArguments,
                    "the \(name) parameter of a request for \(target) is \"\(text)\", not a whole number of bytes"))
        }
        return value
    }

    /// Begins (or resumes) the upload of `target`'s content.
    private func beginUpload(_ target: Target, size: Int64) async throws(HTTPFailure) -> AssetUpload {
        do {
            return try await http.server.beginAssetUpload(
                user: target.user, scope: target.scope, zoneID: target.zoneID, digest: target.digest, size: size,
                device: target.device, operationGroup: target.operationGroup)
        } catch {
            throw Self.failure(error, target)
        }
    }

    /// The failure of a `SyncError` (or of anything else, an `internalError` naming `target`).
    static func failure(_ error: any Error, _ target: Target?) -> HTTPFailure {
        if let failure = error as? HTTPFailure { return failure }
        if let error = error as? SyncError { return HTTPFailure(error) }
        let what = target.map { "the request for \($0)" } ?? "the asset request"
        return HTTPFailure(500, SyncError(.internalError, "\(what) failed on the server", cause: "\(error)"))
    }

    /// A 200 answer carrying `status`.
    static func statusResponse(
        _ status: AssetUploadStatus, format: WireFormat, closeConnection: Bool = false
    ) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = format.mediaType
        headers[HTTPField.Name(WireProtocol.versionHeader)!] = "\(WireProtocol.version)"
        if closeConnection { headers[.connection] = "close" }
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: Wire.encode(status, as: format))))
    }

    /// The first byte and the last (if named) of a `Range: bytes=N-` or `bytes=N-M` header;
    /// `nil` for any other form (a suffix range, several ranges, another unit), which the
    /// server ignores, answering the whole content, as HTTP allows.
    static func byteRange(_ header: String) -> (first: Int64, last: Int64?)? {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = trimmed.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        guard let first = Int64(spec[..<dash].trimmingCharacters(in: .whitespaces)), first >= 0 else { return nil }
        let rest = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if rest.isEmpty { return (first, nil) }
        guard let last = Int64(rest), last >= first else { return nil }
        return (first, last)
    }
}
