import CoreMetrics
import Metrics
import Prometheus

extension Serve {
    /// The process's metrics backends: Prometheus, whose registry `GET /metrics` shows, and the
    /// last hour kept in memory for the console's charts (``ServeConsole/history``);
    /// ``bootstrapMetrics()`` multiplexes them.
    static func metricsFactories(prometheus registry: PrometheusCollectorRegistry) -> [any MetricsFactory] {
        [PrometheusMetricsFactory(registry: registry), ServeConsole.history]
    }

    /// Bootstraps swift-metrics once for the process, before the store and the server make their
    /// handles, and returns the registry for `GET /metrics`.
    static func bootstrapMetrics() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        let factories = metricsFactories(prometheus: registry)
        MetricsSystem.bootstrap(factories.count == 1 ? factories[0] : MultiplexMetricsHandler(factories: factories))
        return registry
    }
}
