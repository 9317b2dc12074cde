import Foundation
import HTTPTypes
import Hummingbird
import LogSyncWire
import NIOCore
import SyncModel
import Synchronization

/// Counts and times every request (``ServerMetrics``): by its route's name, never its path, so
/// that user names, scopes and digests never become labels; by status; and by the `SyncError`
/// code its answer carries (`ok` for a success). The counters are updated when the route has
/// made its answer, before the answer is written: a client that has read an answer finds it
/// counted in the next scrape.
///
/// Body bytes are the declared lengths: the request's `Content-Length`, the answer's body length
/// (or `Content-Length`, for a streamed asset download).
struct MetricsMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let metrics: RequestMetrics

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        let route = Self.route(method: request.method, path: context.endpointPath, context: context)
        let outcome = RequestOutcome()
        let bytesIn = request.headers[.contentLength].flatMap { Int($0) }
        do {
            let response = try await RequestOutcome.$current.withValue(outcome) {
                try await next(request, context)
            }
            let code = outcome.code.map(\.name) ?? (response.status.code < 400 ? "ok" : "none")
            metrics.record(
                route: route, status: response.status.code, code: code, duration: .now - started, bytesIn: bytesIn,
                bytesOut: response.body.contentLength ?? response.headers[.contentLength].flatMap { Int($0) })
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.record(
                route: route, status: status, code: outcome.code.map(\.name) ?? "none", duration: .now - started,
                bytesIn: bytesIn, bytesOut: nil)
            throw error
        }
    }

    /// The name of a request's route, from the pattern the router matched (`endpointPath`, with
    /// its parameters in braces):
    /// the operation for the device and admin operation routes, a fixed name otherwise, and
    /// `unknown` for a path no route matches (or an operation there is not).
    static func route(method: HTTPRequest.Method, path: String?, context: Context) -> String {
        guard let path else { return "unknown" }
        switch (method, path) {
        case (_, "/{version}/databases/{scope}/{operation}"):
            return operation(context.parameters.get("operation"))
        case (_, "/{version}/admin/databases/{user}/{scope}/{operation}"):
            return "admin " + operation(context.parameters.get("operation"))
        default:
            return Self.routes["\(method) \(path)"] ?? "\(method) \(path)"
        }
    }

    private static func operation(_ name: String?) -> String {
        name.flatMap { WireOperation(rawValue: $0) }?.rawValue ?? "unknown"
    }

    /// The names of the routes other than operations, by method and pattern. A route missing
    /// here is named by its method and pattern, which is as bounded.
    static let routes: [String: String] = [
        "GET /{version}/databases/{scope}/push": "push",
        "GET /{version}/databases/{scope}/assets/{digest}/upload": "asset upload status",
        "PUT /{version}/databases/{scope}/assets/{digest}": "asset upload",
        "GET /{version}/databases/{scope}/assets/{digest}": "asset download",
        "POST /{version}/sessions": "sign-in",
        "POST /{version}/sessions/refresh": "refresh",
        "GET /{version}/devices": "devices",
        "DELETE /{version}/devices/{device}": "revoke device",
        "GET /{version}/admin/users": "admin list users",
        "POST /{version}/admin/users": "admin create user",
        "POST /{version}/admin/users/{user}/sessions": "admin mint session",
        "DELETE /{version}/admin/users/{user}/sessions": "admin revoke sessions",
        "DELETE /{version}/admin/users/{user}": "admin delete user",
        "GET /{version}/admin/changes": "admin changes",
        "GET /health/live": "health live",
        "GET /health/ready": "health ready",
        "GET /metrics": "metrics",
    ]
}

/// What the routes tell ``MetricsMiddleware`` of the answer they made: the `SyncError` code of
/// a refusal (set by `OperationRoutes.errorResponse`).
final class RequestOutcome: Sendable {
    private let state = Mutex<SyncError.Code?>(nil)

    /// The code of the refusal the route answered, if it refused.
    var code: SyncError.Code? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }

    /// The outcome of the request the current task serves, if ``MetricsMiddleware`` counts it.
    @TaskLocal static var current: RequestOutcome?
}
