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
        let route = RouteName.of(request, context: context)
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
