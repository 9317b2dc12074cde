import BenchSupport
import Foundation
import InMemoryTracing
import LogSyncServer
import Metrics
import Prometheus
import SyncModel
import Tracing

/// What `--instrumented` gives a phase's server and engine: metrics into a Prometheus registry
/// (what `logsync-server serve` bootstraps) and spans into an in-memory tracer, each span made,
/// tagged and kept as a tracer that exports would make it. Without it, both are the libraries'
/// defaults with nothing bootstrapped: swift-metrics' and swift-distributed-tracing's no-ops.
struct Instrumentation {
    let registry = PrometheusCollectorRegistry()
    let factory: PrometheusMetricsFactory
    let tracer = InMemoryTracer()

    init() { factory = PrometheusMetricsFactory(registry: registry) }

    /// Records what was recorded, so that the report shows the instrumented runs really recorded
    /// something: finished spans, and the size of the registry's Prometheus text.
    func finish(_ result: inout PhaseResult) {
        result.spans = tracer.finishedSpans.count
        result.metricsBytes = registry.emitToBuffer().count
    }
}

extension Child {
    /// Server commits alone: `--records` new records saved in requests of 400 into a fresh
    /// `.durable` server (the server's default), in process, instrumented or not.
    static func commitPhase(_ options: EngineBench, _ directory: URL) async throws -> PhaseResult {
        let instrumentation = options.instrumented ? Instrumentation() : nil
        var configuration = SyncServer.Configuration(
            directory: directory.appendingPathComponent("server"), durability: .durable, maxChangesPerPage: options.page
        )
        if let instrumentation {
            configuration.metricsFactory = instrumentation.factory
            configuration.tracer = instrumentation.tracer
        }
        let server = try SyncServer(configuration)
        defer { server.shutdown() }
        let database = server.database(for: "alice", device: "seeder")
        try await workload.createZones(in: database)
        let cpuBefore = cpuSeconds()
        let load = try await workload.save(options.recordCount, series: "commit", to: database)
        var result = PhaseResult(phase: "commit", durability: "durable", records: load.records)
        result.seconds = load.seconds
        result.cpuSeconds = cpuSeconds() - cpuBefore
        instrumentation?.finish(&result)
        return result
    }
}

extension Parent {
    /// The cost of instrumentation: the initial sync and the server's commits, each with metrics
    /// and tracing (``Instrumentation``) and with neither, alternately in one run, each run in a
    /// fresh process; the instrumented rate over the plain one, target ≥ 0.95.
    static func instrumentationRuns(_ options: EngineBench, _ scratch: ScratchDirectory) throws -> [[String]] {
        let durability = options.durabilities[0]
        let directory = try seededServer(
            .seed, "instrumentation", "\(grouped(options.recordCount)) records", options, scratch)
        var fetches: [Bool: [PhaseResult]] = [:]
        var commits: [Bool: [PhaseResult]] = [:]
        for run in 0..<options.instrumentationRunCount {
            // Half the runs measure the instrumented side first, so that neither side always
            // runs on a warmer machine.
            for instrumented in run % 2 == 0 ? [false, true] : [true, false] {
                let fetch = try child(
                    .fetch, durability: durability, options, directory, scratch, instrumented: instrumented)
                try? FileManager.default.removeItem(at: directory.appendingPathComponent("device-fetch-\(durability)"))
                fetches[instrumented, default: []].append(fetch)
                let commitDirectory = scratch.subdirectory("commit-\(run)-\(instrumented)")
                try FileManager.default.createDirectory(at: commitDirectory, withIntermediateDirectories: true)
                let commit = try child(
                    .commit, durability: .durable, options, commitDirectory, scratch, instrumented: instrumented)
                scratch.remove(commitDirectory)
                commits[instrumented, default: []].append(commit)
                emit(
                    "  run \(run + 1), \(instrumented ? "metrics and tracing" : "neither"): initial sync "
                        + "\(grouped(Int(Double(fetch.records) / fetch.seconds))) records/s, commits "
                        + "\(grouped(Int(Double(commit.records) / commit.seconds))) records/s"
                        + (instrumented
                            ? " (\(grouped(fetch.spans + commit.spans)) spans, \(grouped(fetch.metricsBytes)) + "
                                + "\(grouped(commit.metricsBytes)) B of Prometheus text)" : ""))
            }
        }
        scratch.remove(directory)
        func rate(_ results: [PhaseResult]?) -> Double {
            Samples(values: (results ?? []).map { Double($0.records) / $0.seconds }).median
        }
        var rows: [[String]] = [
            ["instrumentation", "runs", "neither, records/s (median)", "metrics and tracing", "ratio"]
        ]
        for (name, results) in [
            ("initial sync, device log .\(durability)", fetches), ("server commit, .durable, 400 per request", commits),
        ] {
            let plain = rate(results[false])
            let instrumented = rate(results[true])
            rows.append([
                name, "\(options.instrumentationRunCount)", grouped(Int(plain)), grouped(Int(instrumented)),
                ratio(instrumented / plain),
            ])
        }
        return rows
    }
}
