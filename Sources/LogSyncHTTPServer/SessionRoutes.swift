import Foundation
import HTTPTypes
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import SyncModel

/// The session routes (Docs/Protocol.md, "Authentication"), bodies in JSON (`WireSessions`):
///
/// - `POST /v1/sessions`: sign in with an identity token (``HTTPSyncServer/identityVerifier``);
/// - `POST /v1/sessions/refresh`: a refresh token for a new pair;
/// - `GET /v1/devices`: the user's signed-in devices;
/// - `DELETE /v1/devices/{device}`: sign a device of the user out.
///
/// A refused identity or refresh token gets 401 with a message that says only that it is not
/// valid; why is logged. A refused request writes nothing.
struct SessionRoutes: Sendable {
    let http: HTTPSyncServer
    let sessions: SessionStore

    func signIn(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "sign-in") { logger throws(HTTPFailure) in
            guard let verifier = http.identityVerifier else {
                throw HTTPFailure(404, SyncError(.serverRejectedRequest, "no route POST \(WireSessions.signInPath)"))
            }
            let body: WireSessions.SignIn = try await decodedBody(request)
            let device = try Self.device(body.device)
            let token = try OperationRoutes.bearerToken(request.headers[.authorization])
            let identity: VerifiedIdentity
            do throws(IdentityError) {
                identity = try await verifier.verify(token)
            } catch {
                logger.info("sign-in refused", metadata: ["reason": "\(error.reason)"])
                throw HTTPFailure(401, SyncError(.notAuthenticated, "invalid token"))
            }
            let issued = try await run {
                try sessions.create(user: identity.user, device: device, name: body.name ?? "")
            }
            logger.info(
                "signed in",
                metadata: [
                    "user": "\(identity.user.rawValue)", "device": "\(device.rawValue)",
                    "session": "\(issued.session.id)",
                ])
            return .json(Self.tokens(issued))
        }
    }

    func refresh(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "refresh") { logger throws(HTTPFailure) in
            let body: WireSessions.Refresh = try await decodedBody(request)
            let refused = HTTPFailure(
                401, SyncError(.notAuthenticated, "the refresh token is not valid; sign in again"))
            switch try await run({ try sessions.refresh(body.refreshToken) }) {
            case .refreshed(let issued):
                return .json(Self.tokens(issued))
            case .reused(let session, let user):
                logger.warning(
                    "a replaced refresh token was presented again; its session is revoked",
                    metadata: ["user": "\(user.rawValue)", "session": "\(session)"])
                throw refused
            case .expired:
                logger.info("refresh refused: the refresh token expired")
                throw refused
            case .unknown:
                logger.info("refresh refused: unknown refresh token")
                throw refused
            }
        }
    }

    func devices(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "devices") { _ throws(HTTPFailure) in
            let (user, current) = try authenticated(request)
            let list = try await run { try sessions.sessions(of: user) }
            return .json(
                WireSessions.Devices(
                    devices: list.map { session in
                        WireSessions.Device(
                            device: session.device.rawValue, name: session.name, signedIn: session.created,
                            refreshed: session.refreshed, current: session.id == current)
                    }))
        }
    }

    func revoke(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "revoke device") { logger throws(HTTPFailure) in
            let (user, _) = try authenticated(request)
            let device = try Self.device(context.parameters.get("device") ?? "")
            let count = try await run { try sessions.revoke(user: user, device: device) }
            if count > 0 {
                logger.info(
                    "device signed out", metadata: ["user": "\(user.rawValue)", "device": "\(device.rawValue)"])
            }
            return .noContent
        }
    }

    // MARK: Steps

    /// `name` as a device ID, checked by `DeviceID.validate()`.
    static func device(_ name: String) throws(HTTPFailure) -> DeviceID {
        let device = DeviceID(name)
        do {
            try device.validate()
        } catch {
            throw HTTPFailure(400, error)
        }
        return device
    }

    /// What a route answers: JSON, or nothing (204).
    enum Answer {
        case json(any Encodable)
        case noContent
    }

    /// Runs a route's `body`, answering its result or the failure it threw.
    private func answer(
        _ request: Request, context: ServerRequestContext, route: String,
        _ body: (Logger) async throws(HTTPFailure) -> Answer
    ) async -> Response {
        let started = ContinuousClock.now
        var logger = context.logger
        logger[metadataKey: "route"] = "\(route)"
        do throws(HTTPFailure) {
            try OperationRoutes.checkVersion(context)
            switch try await body(logger) {
            case .json(let value):
                var headers = HTTPFields()
                headers[.contentType] = WireFormat.json.mediaType
                headers[.cacheControl] = "no-store"
                return Response(
                    status: .ok, headers: headers,
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: WireSessions.encode(value))))
            case .noContent:
                return Response(status: .noContent)
            }
        } catch {
            return OperationRoutes.refusal(
                error, closing: error.closeConnection, logger: logger, since: started, context: context, format: .json)
        }
    }

    /// The user of the request's bearer token (a bearer token's or a session's) and its
    /// session, if it is a session's access token.
    private func authenticated(_ request: Request) throws(HTTPFailure) -> (UserID, String?) {
        switch try OperationRoutes.authentication(authorization: request.headers[.authorization], tokens: http.tokens) {
        case .bearer(let user): (user, nil)
        case .session(let grant): (grant.user, grant.session)
        case .expired, .unknown: preconditionFailure("refused by authentication(authorization:tokens:)")
        }
    }

    /// The request's JSON body, read up to `WireSessions.maxBodyBytes`.
    ///
    /// - Throws: ``HTTPFailure`` 413 for a larger body, 400 naming what does not decode.
    private func decodedBody<T: Decodable>(_ request: Request) async throws(HTTPFailure) -> T {
        let limit = WireSessions.maxBodyBytes
        let tooLarge = HTTPFailure(
            413, SyncError(.limitExceeded, "the request body is larger than this route's limit of \(limit) bytes"),
            closeConnection: true)
        let body = try await OperationRoutes.readBody(request, limit: limit) { _ in tooLarge }
        do {
            return try WireSessions.decode(T.self, from: body)
        } catch {
            throw HTTPFailure(
                400, SyncError(.invalidArguments, "the request body is not the JSON this route takes: \(error)"))
        }
    }

    /// Runs the blocking `body` where the storage allows blocking.
    private func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws(HTTPFailure) -> R {
        do {
            return try await http.server.storage.perform(body)
        } catch let error as SyncError {
            throw HTTPFailure(error)
        } catch {
            throw HTTPFailure(
                503, SyncError(.serviceUnavailable, "the session store failed: \(error)", retryAfter: .seconds(1)))
        }
    }

    static func tokens(_ issued: SessionStore.Issued) -> WireSessions.Tokens {
        WireSessions.Tokens(
            user: issued.session.user.rawValue, device: issued.session.device.rawValue,
            accessToken: issued.accessToken, accessExpires: issued.session.accessExpires,
            refreshToken: issued.refreshToken, refreshExpires: issued.session.refreshExpires)
    }
}
