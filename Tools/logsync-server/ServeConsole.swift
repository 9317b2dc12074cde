import Foundation
import LogSyncConsole
import LogSyncHTTPServer

/// The console of `logsync-server serve` (Docs/Deployment.md, "Console").
enum ServeConsole {
    /// Adds the console's routes to `http` (which has an admin credential), with the last hour
    /// of the process's metrics for its charts.
    static func add(to http: inout HTTPSyncServer) {
        guard let console = Console(http: http, history: history) else { return }
        http.routeExtensions.append(console.routes)
    }

    /// The last hour of the process's metrics, for the console's charts: one of the metrics
    /// backends `serve` bootstraps (``Serve/metricsFactories(prometheus:)``).
    static let history = MetricsHistory()
}
