import HTTPTypes
import Hummingbird
import LogSyncWire
import NIOCore
import SyncModel

/// Holds every request that reaches the router (operations, asset transfers, refused push
/// upgrades, unknown routes) to the per-client limits (``ClientLimiter``) before its route sees
/// it: one over a limit is answered 429 `requestRateLimited` with a retry-after, its body unread,
/// and nothing of it is done. An admitted request counts as in progress until its answer has
/// been written, to its last byte for an asset download.
///
/// The user is the one its bearer token stands for, when the token is known; a request without
/// a valid token, or with an admin token, counts against its address only (a route answers 401
/// to the first). A push upgrade never
/// reaches the router: ``PushUpgradeGate`` admits it, and sends one it refuses here marked with
/// ``refusedHeader``.
struct ClientLimitMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let http: HTTPSyncServer

    /// The header ``PushUpgradeGate`` puts on a push upgrade it refused for the limits: the
    /// retry-after in milliseconds. Such a request is answered 429 without being counted again.
    static let refusedHeader = "LogSync-Client-Limited"

    /// A refused request's body is drained (keeping the connection) up to this size, and
    /// otherwise left unread and the connection closed after the answer.
    static let drainedBodyBytes = 64 * 1024

    /// Whether the request presents an admin token: it stands for no user, so it is not looked
    /// up among the users' tokens (which on PostgreSQL would ask the database every time), and
    /// counts against its address only.
    func isAdmin(_ request: Request) -> Bool {
        guard let credential = http.adminCredential,
            let token = try? OperationRoutes.bearerToken(request.headers[.authorization])
        else { return false }
        return credential.accepts(token)
    }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let refusal: SyncError
        if let marked = request.headers[HTTPField.Name(Self.refusedHeader)!] {
            refusal = SyncError(
                .requestRateLimited,
                "the push channel was refused: its user or address sent more requests than this server takes",
                retryAfter: .milliseconds(min(3_600_000, max(0, Int64(marked) ?? 1000))))
        } else {
            let user =
                isAdmin(request)
                ? nil
                : try? OperationRoutes.authenticate(authorization: request.headers[.authorization], tokens: http.tokens)
            switch http.clientLimiter.admit(user: user, address: Client(remoteAddress: context.channel.remoteAddress)) {
            case .success(let pass):
                var response = try await next(request, context)
                let body = response.body
                // The pass lives as long as the body: released once it has been written, or dropped.
                response.body = ResponseBody(contentLength: body.contentLength) { writer in
                    defer { pass.release() }
                    try await body.write(writer)
                }
                return response
            case .failure(let error):
                refusal = error
            }
        }
        let declared = request.headers[.contentLength].flatMap(Int.init)
        let closing = declared.map { $0 > Self.drainedBodyBytes } ?? (request.headers[.transferEncoding] != nil)
        return OperationRoutes.refusal(
            HTTPFailure(429, refusal), closing: closing, logger: context.logger, since: .now, context: context,
            format: WireFormat.forResponse(accept: request.headers[.accept]))
    }
}
