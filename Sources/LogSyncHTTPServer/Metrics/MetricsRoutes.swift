import Foundation
import HTTPTypes
import Hummingbird
import LogSyncWire
import NIOCore
import Prometheus
import SyncModel

/// `GET /metrics`: the Prometheus text of ``ServerMetrics/registry``, behind the admin
/// credential (the admin routes' 401 without an admin token). The text holds metric names,
/// route names, statuses, error codes and numbers: never a token, a user or a path.
struct MetricsRoutes: Sendable {
    /// The media type of Prometheus' text exposition format.
    static let mediaType = "text/plain; version=0.0.4; charset=utf-8"

    let registry: PrometheusCollectorRegistry
    let admin: AdminRoutes

    /// Counts every route added after it (``MetricsMiddleware``), and adds `GET /metrics`
    /// when `http` has a registry and an admin credential. Called first, so that every route
    /// is counted.
    static func register(on router: Router<ServerRequestContext>, http: HTTPSyncServer) {
        router.add(middleware: MetricsMiddleware(metrics: http.metrics.requests))
        guard let registry = http.metrics.registry else { return }
        guard let credential = http.adminCredential else {
            http.logger.warning("no GET /metrics: it needs an admin credential (--admin-token-file)")
            return
        }
        let routes = MetricsRoutes(registry: registry, admin: AdminRoutes(http: http, credential: credential))
        router.get("/metrics") { request, context in routes.scrape(request, context: context) }
    }

    func scrape(_ request: Request, context: ServerRequestContext) -> Response {
        do throws(HTTPFailure) {
            try admin.authorize(request, logger: context.logger)
        } catch {
            return OperationRoutes.errorResponse(error.error, status: error.status, format: .json)
        }
        var headers = HTTPFields()
        headers[.contentType] = Self.mediaType
        headers[.cacheControl] = "no-store"
        return Response(
            status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
}
