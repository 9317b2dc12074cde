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
    private var json: JSONRoutes { JSONRoutes(http: http) }

    func signIn(_ request: Request, context: ServerRequestContext) async -> Response {
        await json.answer(request, context: context, route: "sign-in") { logger throws(HTTPFailure) in
            guard let verifier = http.identityVerifier else {
                throw HTTPFailure(404, SyncError(.serverRejectedRequest, "no route POST \(WireSessions.signInPath)"))
            }
            let body: WireSessions.SignIn = try await json.decodedBody(request)
            let device = try Self.device(body.device)
            let token = try OperationRoutes.bearerToken(request.headers[.authorization])
            let identity: VerifiedIdentity
            do throws(IdentityError) {
                identity = try await verifier.verify(token)
            } catch {
                logger.info("sign-in refused", metadata: ["reason": "\(error.reason)"])
                throw HTTPFailure(401, SyncError(.notAuthenticated, "invalid token"))
            }
            let issued = try await json.run("session store") {
                try sessions.create(user: identity.user, device: device, name: body.name ?? "")
            }
            if let email = identity.emailAddress {
                // The issuer vouches for the address: share owners may invite the user by it. An
                // address another user has already stays theirs; the sign-in still succeeds.
                do {
                    try await json.run("user registry") {
                        try http.server.registerUser(identity.user, emailAddress: email)
                    }
                } catch {
                    logger.warning(
                        "the identity token's e-mail address was not registered",
                        metadata: ["user": "\(identity.user.rawValue)", "error": "\(error)"])
                }
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
        await json.answer(request, context: context, route: "refresh") { logger throws(HTTPFailure) in
            let body: WireSessions.Refresh = try await json.decodedBody(request)
            let refused = HTTPFailure(
                401, SyncError(.notAuthenticated, "the refresh token is not valid; sign in again"))
            switch try await json.run("session store", { try sessions.refresh(body.refreshToken) }) {
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
        await json.answer(request, context: context, route: "devices") { _ throws(HTTPFailure) in
            let (user, current) = try authenticated(request)
            let list = try await json.run("session store") { try sessions.sessions(of: user) }
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
        await json.answer(request, context: context, route: "revoke device") { logger throws(HTTPFailure) in
            let (user, _) = try authenticated(request)
            // The path segment is percent-encoded (`WireSessions.devicePath`): a device ID may
            // hold any character but a control one.
            let device = try Self.device(OperationRoutes.pathParameter("device", of: context, naming: "the device ID"))
            let count = try await json.run("session store") { try sessions.revoke(user: user, device: device) }
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

    /// The user of the request's bearer token (a bearer token's or a session's) and its
    /// session, if it is a session's access token.
    private func authenticated(_ request: Request) throws(HTTPFailure) -> (UserID, String?) {
        switch try OperationRoutes.authentication(authorization: request.headers[.authorization], tokens: http.tokens) {
        case .bearer(let user): (user, nil)
        case .session(let grant): (grant.user, grant.session)
        case .expired, .unknown: preconditionFailure("refused by authentication(authorization:tokens:)")
        }
    }

    static func tokens(_ issued: SessionStore.Issued) -> WireSessions.Tokens {
        WireSessions.Tokens(
            user: issued.session.user.rawValue, device: issued.session.device.rawValue,
            accessToken: issued.accessToken, accessExpires: issued.session.accessExpires,
            refreshToken: issued.refreshToken, refreshExpires: issued.session.refreshExpires)
    }
}
