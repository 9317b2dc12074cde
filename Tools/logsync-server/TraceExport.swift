import Foundation
import Logging

#if OTLP
    import OTel
    import ServiceLifecycle
    import Tracing
#endif

/// The export of the server's spans (Docs/Deployment.md, "Traces"): with the package trait
/// `OTLP` (`swift build --traits OTLP`), swift-otel's tracer, configured by the standard `OTEL_*`
/// environment variables and bootstrapped in `InstrumentationSystem` before the server is made,
/// so that the server's requests, commits and log writes are exported over OTLP/HTTP; without
/// the trait, none (swift-otel is not even built).
struct TraceExport: Sendable {
    /// What `serve --help` says about traces.
    static var help: String {
        #if OTLP
            """
            Traces: this build exports spans (a span per request, commit and log write, joined to \
            the devices' traces by their traceparent header) over OTLP/HTTP, configured by the \
            standard OTEL_* environment variables: OTEL_EXPORTER_OTLP_ENDPOINT (default \
            http://localhost:4318), OTEL_SERVICE_NAME (default logsync-server), \
            OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES…; OTEL_SDK_DISABLED=true or \
            OTEL_TRACES_EXPORTER=none turns the export off.
            """
        #else
            """
            Traces: this build exports none, and ignores OTEL_* variables; a build with \
            `swift build --traits OTLP` exports them over OTLP (Docs/Deployment.md, "Traces").
            """
        #endif
    }

    /// Ends the export, sending the spans still queued; `nil` when nothing is exported.
    private let finish: (@Sendable () async -> Void)?

    /// Starts the export the build and `environment` call for, logging what it does.
    static func start(logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment) -> Self {
        #if OTLP
            if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true"
                || environment["OTEL_TRACES_EXPORTER"]?.lowercased() == "none"
            {
                logger.info("traces not exported: OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none")
                return TraceExport(finish: nil)
            }
            var configuration = OTel.Configuration.default
            configuration.serviceName = "logsync-server"  // OTEL_SERVICE_NAME overrides it
            configuration.logs.enabled = false
            configuration.metrics.enabled = false
            do {
                let backend = try OTel.makeTracingBackend(configuration: configuration)
                InstrumentationSystem.bootstrap(backend.factory)
                let group = ServiceGroup(services: [backend.service], logger: logger)
                let running = Task { try await group.run() }
                logger.info(
                    "exporting traces over OTLP",
                    metadata: [
                        "endpoint":
                            "\(environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? environment["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? "http://localhost:4318")"
                    ])
                return TraceExport {
                    await group.triggerGracefulShutdown()
                    _ = try? await running.value
                }
            } catch {
                logger.error("traces not exported", metadata: ["error": "\(error)"])
                return TraceExport(finish: nil)
            }
        #else
            if environment.keys.contains(where: { $0.hasPrefix("OTEL_") }) {
                logger.warning(
                    "OTEL_* variables are set, but this build exports no traces: build logsync-server with `swift build --traits OTLP`"
                )
            }
            return TraceExport(finish: nil)
        #endif
    }

    /// Ends the export once the server stopped, sending the spans still queued.
    func stop() async {
        await finish?()
    }
}
