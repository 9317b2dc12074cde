import Foundation
import LogSyncConsole
import LogSyncHTTPServer
import Metrics

/// The console of `logsync-server serve` (Docs/Deployment.md, "Console").
enum ServeConsole {
    /// Adds the console's routes to `http` (which has an admin credential), with the last hour
    /// of the process's metrics for its charts.
    static func add(to http: inout HTTPSyncServer) {
        guard let console = Console(http: http, history: history) else { return }
        http.routeExtensions.append(console.routes)
    }

    /// The metrics history of the console's charts, bootstrapped as the process's metrics
    /// backend on first use. Where the Prometheus backend is bootstrapped too, the two go
    /// together through `MultiplexMetricsHandler(factories: [prometheus, history])`.
    static let history: MetricsHistory = {
        let history = MetricsHistory()
        MetricsSystem.bootstrap(history)
        return history
    }()
}
