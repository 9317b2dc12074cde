import Foundation
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import SyncModel

/// The admin routes (Docs/Protocol.md, "Admin API"), for the app's own backend, under
/// `/v1/admin/`, bodies in JSON. They exist only on a server given an ``AdminCredential``, and
/// every one asks for it first: a request without an admin token, or with a user's token or
/// session, gets the same 401 and writes nothing.
struct AdminRoutes: Sendable {
    let http: HTTPSyncServer
    let credential: AdminCredential
    var json: JSONRoutes { JSONRoutes(http: http) }

    /// Adds the admin routes to `router`.
    static func register(on router: Router<ServerRequestContext>, http: HTTPSyncServer, credential: AdminCredential) {
        let routes = AdminRoutes(http: http, credential: credential)
        routes.registerUserRoutes(on: router)
        routes.registerOverviewRoute(on: router)
        routes.registerBundleRoutes(on: router)
        AdminChangeRoutes.register(on: router, admin: routes)
    }

    /// Runs an admin route's `body` once the request's admin token is accepted.
    func answer(
        _ request: Request, context: ServerRequestContext, route: String,
        _ body: (Logger) async throws(HTTPFailure) -> JSONRoutes.Answer
    ) async -> Response {
        await json.answer(request, context: context, route: "admin " + route) { logger throws(HTTPFailure) in
            try authorize(request, logger: logger)
            return try await body(logger)
        }
    }

    /// Refuses a request whose bearer token is not an admin token, with the same answer
    /// whatever it presented.
    func authorize(_ request: Request, logger: Logger) throws(HTTPFailure) {
        let refused = HTTPFailure(401, SyncError(.notAuthenticated, "invalid admin credential"))
        guard let token = try? OperationRoutes.bearerToken(request.headers[.authorization]),
            credential.accepts(token)
        else {
            logger.info("admin request refused: no admin token")
            throw refused
        }
    }
}
