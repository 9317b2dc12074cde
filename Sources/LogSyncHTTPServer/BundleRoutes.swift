import Foundation
import HTTPTypes
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import SyncModel

/// The support bundle routes (Docs/Protocol.md, "Support bundles"), for the user signed in, with
/// the operation routes' bearer token and error bodies, answers in JSON (`WireBundles`):
///
/// - `GET /v1/bundles/{sha256 hex}/upload?size=…`: how much of the bundle the server holds, so
///   that a client resumes from there;
/// - `PUT /v1/bundles/{sha256 hex}?size=…&offset=…`: the bundle's `data.mdb` from `offset`,
///   streamed from the body to the store a piece (``AssetTransfer/chunkSize``) at a time, never
///   whole in memory; once its last byte arrives the server checks it hashes to its ID,
///   verifies it (LogStore's structural check, the manifest, every entry of the device log) and
///   stores it, or stores nothing and answers why.
///
/// The size announced must be within `SyncServer.Configuration.maxSupportBundleBytes`. There is
/// no route for a user to read a bundle back: the admin routes (``AdminRoutes``) are the only
/// readers.
struct BundleRoutes: Sendable {
    let http: HTTPSyncServer

    private var operations: OperationRoutes { OperationRoutes(http: http) }

    /// `GET …/bundles/{id}/upload`: the upload's status.
    func uploadStatus(_ request: Request, context: ServerRequestContext) async -> Response {
        await answering(request, context: context, "bundle upload status") { user, id in
            let size = try Self.integer("size", of: request, id: id)
            let upload = try await begin(user: user, id: id, size: size)
            defer { upload.close() }
            return JSONRoutes.response(.ok, upload.status)
        }
    }

    /// `PUT …/bundles/{id}`: the bundle from the `offset` parameter to the end of the body. A
    /// body cut short leaves what arrived for the next upload to resume.
    func upload(_ request: Request, context: ServerRequestContext) async -> Response {
        let declared = request.headers[.contentLength].flatMap { Int64($0) }
        let body = UploadBodyRead(read: declared == 0)
        return await answering(request, context: context, "bundle upload", unreadBody: { !body.read }) { user, id in
            let size = try Self.integer("size", of: request, id: id)
            let offset = try Self.integer("offset", of: request, id: id)
            if let declared, offset >= 0, offset <= size, declared > size - offset {
                throw HTTPFailure(
                    400,
                    SyncError(
                        .invalidArguments,
                        "support bundle \(id.short): a piece of \(declared) bytes from byte \(offset) goes past its announced size, \(size) bytes"
                    ))
            }
            let upload = try await begin(user: user, id: id, size: size)
            defer { upload.close() }
            if upload.stored != nil {
                if !body.read { context.channel.close(mode: .input, promise: nil) }
                var response = JSONRoutes.response(.ok, upload.status)
                if !body.read { response.headers[.connection] = "close" }
                return response
            }
            do {
                // A piece out of order is refused before the body is read.
                try await upload.write([], at: offset)
                _ = try await receiveUpload(
                    request.body, into: upload, from: offset, size: size, naming: "support bundle \(id.short)")
                body.read = true
                if upload.received == size {
                    let stored = try await upload.finish()
                    context.logger.notice(
                        "support bundle stored",
                        metadata: ["user": "\(user.rawValue)", "bundle": "\(stored.id)", "bytes": "\(stored.size)"])
                }
                return JSONRoutes.response(.ok, upload.status)
            } catch {
                throw Self.failure(error, id)
            }
        }
    }

    // MARK: Steps

    /// Authenticates the request and parses its bundle ID, runs `body`, and answers the failure
    /// it throws with the wire's error body.
    private func answering(
        _ request: Request, context: ServerRequestContext, _ route: String, unreadBody: () -> Bool = { false },
        _ body: (UserID, AssetDigest) async throws -> Response
    ) async -> Response {
        let started = ContinuousClock.now
        var logger = context.logger
        logger[metadataKey: "route"] = "\(route)"
        do {
            try OperationRoutes.checkVersion(context)
            let (user, _) = try operations.authenticatedDevice(request)
            let id: AssetDigest
            do {
                id = try AssetDigest(parsing: context.parameters.get("id") ?? "")
            } catch {
                throw HTTPFailure(400, error)
            }
            return try await body(user, id)
        } catch {
            let failure = Self.failure(error, nil)
            return OperationRoutes.refusal(
                failure, closing: failure.closeConnection || unreadBody(), logger: logger, since: started,
                context: context, format: .json)
        }
    }

    private func begin(user: UserID, id: AssetDigest, size: Int64) async throws(HTTPFailure) -> SupportBundleUpload {
        do {
            return try await http.server.beginSupportBundleUpload(user: user, id: id, size: size)
        } catch {
            throw Self.failure(error, id)
        }
    }

    /// The whole number of the query parameter `name`: 400 naming it when missing or not a number.
    static func integer(_ name: String, of request: Request, id: AssetDigest) throws(HTTPFailure) -> Int64 {
        guard let text = request.uri.queryParameters[name[...]] else {
            throw HTTPFailure(
                400,
                SyncError(
                    .invalidArguments,
                    "a request for support bundle \(id.short) has no \(name) parameter; add \(name)=<bytes>"))
        }
        guard let value = Int64(text), value >= 0 else {
            throw HTTPFailure(
                400,
                SyncError(
                    .invalidArguments,
                    "the \(name) parameter of a request for support bundle \(id.short) is \"\(text)\", not a whole number of bytes"
                ))
        }
        return value
    }

    static func failure(_ error: any Error, _ id: AssetDigest?) -> HTTPFailure {
        if let failure = error as? HTTPFailure { return failure }
        if let error = error as? SyncError {
            // An announced size over the limit: the body is not wanted.
            if error.code == .limitExceeded { return HTTPFailure(413, error, closeConnection: true) }
            return HTTPFailure(error)
        }
        let what = id.map { "the request for support bundle \($0.short)" } ?? "the support bundle request"
        return HTTPFailure(500, SyncError(.internalError, "\(what) failed on the server", cause: "\(error)"))
    }

    static func wire(_ bundle: StoredBundle) -> WireBundles.Bundle {
        WireBundles.Bundle(
            id: bundle.id, user: bundle.user, size: bundle.size, uploaded: bundle.uploaded,
            appVersion: bundle.appVersion, libraryVersion: bundle.libraryVersion, keyID: bundle.keyID,
            firstOffset: bundle.firstOffset, lastOffset: bundle.lastOffset, baseOffset: bundle.baseOffset,
            database: bundle.database)
    }
}

/// The admin routes of support bundles (Docs/Protocol.md, "Support bundles"): the operator's
/// only way to read them, behind the admin token like every admin route.
extension AdminRoutes {
    func registerBundleRoutes(on router: Router<ServerRequestContext>) {
        router.get("/:version/admin/bundles") { request, context in
            await listBundles(request, context: context)
        }
        router.get("/:version/admin/bundles/:id") { request, context in
            await downloadBundle(request, context: context)
        }
    }

    /// `GET /v1/admin/bundles[?user=U]`: every stored bundle, or the user's, oldest first.
    func listBundles(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "list bundles") { _ throws(HTTPFailure) in
            let user = try request.uri.queryParameters["user"].map { text throws(HTTPFailure) in
                try Self.user(String(text))
            }
            let server = http.server
            do {
                let bundles = try await server.supportBundles(of: user)
                return .json(WireBundles.Bundles(bundles: bundles.map(BundleRoutes.wire)))
            } catch {
                throw BundleRoutes.failure(error, nil)
            }
        }
    }

    /// `GET /v1/admin/bundles/{id}`: the stored bundle's `data.mdb`, streamed; 404 `unknownItem`
    /// for an ID not stored (asked only once the admin token is accepted).
    func downloadBundle(_ request: Request, context: ServerRequestContext) async -> Response {
        let started = ContinuousClock.now
        var logger = context.logger
        logger[metadataKey: "route"] = "admin download bundle"
        do throws(HTTPFailure) {
            try OperationRoutes.checkVersion(context)
            try authorize(request, logger: logger)
            let id = try OperationRoutes.pathParameter("id", of: context, naming: "the bundle ID")
            let server = http.server
            let found: StoredBundle?
            do {
                found = try await server.supportBundle(id: id)
            } catch {
                throw BundleRoutes.failure(error, nil)
            }
            guard let bundle = found else {
                throw HTTPFailure(404, SyncError(.unknownItem, "no support bundle \(id) is stored"))
            }
            logger.notice("support bundle downloaded", metadata: ["bundle": "\(bundle.id)", "user": "\(bundle.user)"])
            var headers = HTTPFields()
            headers[.contentType] = "application/octet-stream"
            headers[.cacheControl] = "no-store"
            let body = ResponseBody(contentLength: Int(bundle.size)) { writer in
                var offset: Int64 = 0
                while offset < bundle.size {
                    let piece = try await server.readSupportBundle(
                        bundle, from: offset, maxLength: AssetTransfer.chunkSize)
                    guard !piece.isEmpty else {
                        throw SyncError(
                            .assetNotAvailable,
                            "support bundle \(bundle.id) ended at byte \(offset) of its \(bundle.size)")
                    }
                    try await writer.write(ByteBuffer(bytes: piece))
                    offset += Int64(piece.count)
                }
                try await writer.finish(nil)
            }
            return Response(status: .ok, headers: headers, body: body)
        } catch {
            return OperationRoutes.refusal(
                error, closing: error.closeConnection, logger: logger, since: started, context: context, format: .json)
        }
    }
}
