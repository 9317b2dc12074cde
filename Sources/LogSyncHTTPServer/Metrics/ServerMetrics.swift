import CoreMetrics
import LogSyncServer
import LogSyncWire
import Metrics
import Prometheus
import Synchronization

/// The HTTP server's metrics (Docs/Deployment.md, "Operating"): every request counted by route,
/// status and error code, timed, and its body bytes counted; the push channels open.
///
/// Made from an explicit `MetricsFactory`, the global one (`MetricsSystem.factory`) by
/// default, so that a test injects its own and a library never bootstraps anything. Without a
/// bootstrapped backend the handles are swift-metrics' no-ops.
///
/// With a `registry`, and an admin credential, the server answers `GET /metrics` with the
/// registry's Prometheus text:
///
/// ```swift
/// let registry = PrometheusCollectorRegistry()
/// MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))   // once, in the executable
/// let http = HTTPSyncServer(
///     server: syncServer, tokens: tokens, adminCredential: admin, metrics: ServerMetrics(registry: registry))
/// ```
public struct ServerMetrics: Sendable {
    /// What makes the handles.
    public let factory: any MetricsFactory
    /// The registry whose text `GET /metrics` answers; without one there is no such route.
    public let registry: PrometheusCollectorRegistry?
    let requests: RequestMetrics
    /// `logsync_push_channels_open`.
    let pushChannelsOpen: Meter

    /// Metrics made by `factory`, exposed at `GET /metrics` from `registry` if there is one.
    ///
    /// - Parameters:
    ///   - factory: What makes the handles; the global factory by default.
    ///   - registry: The Prometheus registry `GET /metrics` answers with. It shows what was
    ///     recorded through a `PrometheusMetricsFactory` on it, so `factory` (or the global
    ///     factory it multiplexes into) should hold one.
    public init(factory: any MetricsFactory = MetricsSystem.factory, registry: PrometheusCollectorRegistry? = nil) {
        self.factory = factory
        self.registry = registry
        requests = RequestMetrics(factory: factory)
        pushChannelsOpen = Meter(label: Name.pushChannelsOpen, factory: factory)
    }

    /// The metric names of the HTTP server.
    public enum Name {
        /// Counter of requests answered, by `route`, `status` and `code`.
        public static let requests = "logsync_http_requests_total"
        /// Timer of requests, by `route`: from routing to the answer's head.
        public static let requestDuration = "logsync_http_request_duration_seconds"
        /// Counter of request body bytes, by `route`.
        public static let requestBytes = "logsync_http_request_bytes_total"
        /// Counter of response body bytes, by `route`.
        public static let responseBytes = "logsync_http_response_bytes_total"
        /// Gauge (a meter) of the push channels open.
        public static let pushChannelsOpen = "logsync_push_channels_open"
        /// Gauge of the store's bytes, by `store`, read at each scrape.
        public static let storeBytes = "logsync_store_bytes"
        /// Gauge of the entries of every log in the store, by `store`, read at each scrape when
        /// the store can count them without opening each log (PostgreSQL).
        public static let logEntries = "logsync_log_entries"
    }

    /// Sets the store's gauges (``Name/storeBytes``, ``Name/logEntries``) from what `storage`
    /// tells of its size.
    func record(_ size: StoredSize, store: String) {
        let dimensions = [("store", store)]
        Gauge(label: Name.storeBytes, dimensions: dimensions, factory: factory).record(Double(size.bytes))
        if let entries = size.entries {
            Gauge(label: Name.logEntries, dimensions: dimensions, factory: factory).record(Double(entries))
        }
    }
}

/// The handles of requests, one per route (and status and code), made once and kept: a
/// request looks its handles up rather than building them.
final class RequestMetrics: Sendable {
    struct Outcome: Hashable {
        let route: String
        let status: Int
        let code: String
    }

    struct RouteHandles: Sendable {
        let duration: Metrics.Timer
        let bytesIn: Metrics.Counter
        let bytesOut: Metrics.Counter
    }

    let factory: any MetricsFactory
    private let outcomes = Mutex<[Outcome: Metrics.Counter]>([:])
    private let routes = Mutex<[String: RouteHandles]>([:])

    init(factory: any MetricsFactory) { self.factory = factory }

    /// Records one request of `route` answered with `status` and `code` (a `SyncError` code's
    /// name, or `ok`).
    func record(route: String, status: Int, code: String, duration: Duration, bytesIn: Int?, bytesOut: Int?) {
        counter(Outcome(route: route, status: status, code: code)).increment()
        let handles = handles(route)
        handles.duration.record(duration: duration)
        if let bytesIn, bytesIn > 0 { handles.bytesIn.increment(by: bytesIn) }
        if let bytesOut, bytesOut > 0 { handles.bytesOut.increment(by: bytesOut) }
    }

    private func counter(_ outcome: Outcome) -> Metrics.Counter {
        if let counter = outcomes.withLock({ $0[outcome] }) { return counter }
        let made = Metrics.Counter(
            label: ServerMetrics.Name.requests,
            dimensions: [("route", outcome.route), ("status", "\(outcome.status)"), ("code", outcome.code)],
            factory: factory)
        return outcomes.withLock { counters in
            if let counter = counters[outcome] { return counter }
            counters[outcome] = made
            return made
        }
    }

    private func handles(_ route: String) -> RouteHandles {
        if let handles = routes.withLock({ $0[route] }) { return handles }
        let dimensions = [("route", route)]
        let made = RouteHandles(
            duration: Metrics.Timer(
                label: ServerMetrics.Name.requestDuration, dimensions: dimensions, factory: factory),
            bytesIn: Metrics.Counter(label: ServerMetrics.Name.requestBytes, dimensions: dimensions, factory: factory),
            bytesOut: Metrics.Counter(label: ServerMetrics.Name.responseBytes, dimensions: dimensions, factory: factory)
        )
        return routes.withLock { routes in
            if let handles = routes[route] { return handles }
            routes[route] = made
            return made
        }
    }
}
