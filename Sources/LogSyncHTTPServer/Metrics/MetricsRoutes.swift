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
    let http: HTTPSyncServer

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
        let routes = MetricsRoutes(
            registry: registry, admin: AdminRoutes(http: http, credential: credential), http: http)
        router.get("/metrics") { request, context in await routes.scrape(request, context: context) }
    }

    func scrape(_ request: Request, context: ServerRequestContext) async -> Response {
        do throws(HTTPFailure) {
            try admin.authorize(request, logger: context.logger)
        } catch {
            return OperationRoutes.errorResponse(error.error, status: error.status, format: .json)
        }
        // The store's size, read now (a listing of files, or one query): a scrape shows it
        // without a task sampling it in between. A store that cannot tell leaves the gauges as
        // they were.
        let storage = http.server.storage
        do {
            if let size = try await storage.perform({ try storage.storedSize() }) {
                http.metrics.record(size, store: storage.metricsStoreName)
            }
        } catch {
            context.logger.warning("the store's size was not read", metadata: ["error": "\(error)"])
        }
        var headers = HTTPFields()
        headers[.contentType] = Self.mediaType
        headers[.cacheControl] = "no-store"
        return Response(
            status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
}
