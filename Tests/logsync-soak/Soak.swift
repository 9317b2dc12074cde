import ArgumentParser
import Foundation
import LogSyncTesting
import Synchronization

/// The soak of the seeded simulation (Docs/Testing.md, "The soak"): many seeds of one
/// configuration, on every core, each seed in a worker process of its own stripe.
///
/// ```
/// swift run -c release logsync-soak --seeds 10000 --configuration sharing
/// swift run -c release logsync-soak --configuration sharing --seed 4242   # one seed, its trace
/// ```
///
/// The parent starts one worker per core (`--jobs`); worker `i` of `n` runs the seeds
/// `from + i`, `from + i + n`, … one after another, each in a temporary directory, and prints a
/// line per seed. The parent counts them, prints seeds per second as it goes, and at the end
/// every failing seed with the line that runs it again. A worker that dies (a crash, a trap)
/// names the seed it was running, which counts as failed, and the stripe goes on in a new worker.
@main
struct Soak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-soak",
        abstract: "Runs the seeded simulation over many seeds on every core, and names every failing seed.")

    enum Setup: String, ExpressibleByArgument, CaseIterable {
        case singleUser = "single-user"
        case sharing

        /// The simulation's configuration, its rerun command naming this tool.
        func configuration(operations: Int?) -> Simulation.Configuration {
            var configuration: Simulation.Configuration
            switch self {
            case .singleUser: configuration = Simulation.Configuration()
            case .sharing: configuration = .sharing
            }
            if let operations { configuration.operationsPerDevice = max(1, operations) }
            configuration.rerunCommand =
                "swift run -c release logsync-soak --configuration \(rawValue) --seed {seed}"
                + (operations.map { " --operations \($0)" } ?? "")
            return configuration
        }
    }

    @Option(
        help:
            "The configuration: single-user (three devices, account switches) or sharing (an owner and two participants, hierarchy shares, notes moving between hierarchies)."
    )
    var configuration: Setup = .singleUser

    @Option(help: "How many seeds to run.")
    var seeds: UInt64 = 1000

    @Option(help: "The first seed (10,000 by default: past the seeds `swift test` runs).")
    var from: UInt64 = 10_000

    @Option(
        help: "Runs this one seed alone, in this process, and prints its report or its failure with the whole trace.")
    var seed: UInt64?

    @Option(help: "How many worker processes run at once (the number of cores by default).")
    var jobs: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(help: "Operations per device (the configuration's, 100, by default).")
    var operations: Int?

    @Option(help: "Keeps each seed's directory in DIR/seed-N (only with --seed), for logtool.")
    var keep: String?

    // The worker's own options: the parent passes them.
    @Option(help: .hidden) var worker: Int?
    @Option(help: .hidden) var stride: UInt64 = 1
    @Option(help: .hidden) var through: UInt64 = 0

    func run() async throws {
        let simulation = configuration.configuration(operations: operations)
        if let seed {
            try await runOne(seed, simulation)
        } else if worker != nil {
            await runStripe(simulation)
        } else {
            try await runParent()
        }
    }

    // MARK: One seed

    private func runOne(_ seed: UInt64, _ configuration: Simulation.Configuration) async throws {
        let directory: URL
        if let keep {
            directory = URL(fileURLWithPath: keep).appendingPathComponent("seed-\(seed)", isDirectory: true)
            try? FileManager.default.removeItem(at: directory)
        } else {
            directory = Self.temporaryDirectory(seed)
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { if keep == nil { try? FileManager.default.removeItem(at: directory) } }
        do {
            let report = try await Simulation(seed: seed, directory: directory, configuration: configuration).run()
            emit("\(report)")
        } catch let failure as SimulationFailure {
            emit(failure.fullDescription)
            throw ExitCode.failure
        }
    }

    // MARK: The worker

    /// Runs the stripe's seeds, printing `start N` before each and `pass N` or `fail N <first
    /// finding>` after.
    private func runStripe(_ configuration: Simulation.Configuration) async {
        var seed = from
        while seed <= through {
            emit("start \(seed)")
            let directory = Self.temporaryDirectory(seed)
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                _ = try await Simulation(seed: seed, directory: directory, configuration: configuration).run()
                emit("pass \(seed)")
            } catch let failure as SimulationFailure {
                emit("fail \(seed) \(Self.oneLine(failure.findings.first ?? "?"))")
            } catch {
                emit("fail \(seed) stopped: \(Self.oneLine("\(error)"))")
            }
            try? FileManager.default.removeItem(at: directory)
            seed += stride
        }
    }

    static func oneLine(_ text: String) -> String {
        let line = text.replacingOccurrences(of: "\n", with: " ")
        return line.count > 300 ? String(line.prefix(300)) + "…" : line
    }

    static func temporaryDirectory(_ seed: UInt64) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent(
            "logsync-soak-\(ProcessInfo.processInfo.processIdentifier)-\(seed)-\(UUID().uuidString.prefix(8))",
            isDirectory: true)
    }

    // MARK: The parent

    private func runParent() async throws {
        guard seeds > 0 else { throw ValidationError("--seeds must be at least 1") }
        let last = from + seeds - 1
        let width = Int(min(UInt64(max(1, jobs)), seeds))
        let simulation = configuration.configuration(operations: operations)
        let name = configuration.rawValue
        var base = ["--configuration", name]
        if let operations { base += ["--operations", String(operations)] }
        let tally = SoakTally()
        let started = ContinuousClock.now
        let total = seeds
        emit(
            "soak: \(name), seeds \(from)…\(last), \(width) workers, \(simulation.operationsPerDevice) operations per device"
        )
        let progress = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(30))
                if Task.isCancelled { break }
                let (done, failed) = tally.counts
                let elapsed = Self.seconds(since: started)
                // The failed seeds so far, so that a run cut short still names them.
                let seeds = failed == 0 ? "" : " (\(tally.failures.map { String($0.seed) }.joined(separator: ", ")))"
                emit(
                    "soak: \(done) of \(total) seeds, \(failed) failed\(seeds), \(Int(elapsed)) s, "
                        + "\(Self.rate(done, elapsed)) seeds/s")
            }
        }
        let first = from
        let arguments = base
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<width {
                group.addTask {
                    await Self.runWorker(
                        arguments, first: first + UInt64(index), last: last, stride: UInt64(width), tally)
                }
            }
        }
        progress.cancel()
        let elapsed = Self.seconds(since: started)
        let (done, failed) = tally.counts
        for failure in tally.failures {
            emit("FAILED seed \(failure.seed): \(failure.finding)")
            emit("  rerun: " + simulation.rerunCommand.replacingOccurrences(of: "{seed}", with: String(failure.seed)))
        }
        emit(
            "soak: \(name), \(done) seeds in \(String(format: "%.1f", elapsed)) s, \(Self.rate(done, elapsed)) seeds/s, "
                + "\(width) workers, \(failed) failed")
        if failed > 0 { throw ExitCode.failure }
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = (ContinuousClock.now - start).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    static func rate(_ done: Int, _ seconds: Double) -> String {
        String(format: "%.2f", Double(done) / max(seconds, 1e-3))
    }

    /// Runs one stripe in worker processes: a worker that dies is replaced, from the seed after
    /// the one it was running.
    static func runWorker(_ base: [String], first: UInt64, last: UInt64, stride: UInt64, _ tally: SoakTally) async {
        var next = first
        while next <= last {
            let process = Process()
            process.executableURL =
                Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
            process.arguments =
                base + ["--worker", "1", "--from", String(next), "--through", String(last), "--stride", String(stride)]
            let pipe = Pipe()
            process.standardOutput = pipe
            var running: UInt64?
            do {
                try process.run()
            } catch {
                return tally.fail(next, "could not start a worker: \(error)")
            }
            for await line in lines(of: pipe.fileHandleForReading) {
                let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
                guard parts.count >= 2, let seed = UInt64(parts[1]) else { continue }
                switch parts[0] {
                case "start":
                    running = seed
                    continue
                case "pass":
                    tally.pass()
                case "fail":
                    tally.fail(seed, parts.count > 2 ? parts[2] : "?")
                default:
                    continue
                }
                running = nil
                next = seed + stride
            }
            process.waitUntilExit()
            if let running {
                tally.fail(running, "the worker died running it (status \(process.terminationStatus))")
                next = running + stride
            } else if process.terminationStatus != 0 {
                return tally.fail(next, "the worker exited with status \(process.terminationStatus)")
            } else {
                return  // the stripe is done
            }
        }
    }

    /// The lines a worker writes, as they come.
    static func lines(of handle: FileHandle) -> AsyncStream<String> {
        AsyncStream { continuation in
            Thread.detachNewThread {
                var buffer = Data()
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    buffer.append(chunk)
                    while let newline = buffer.firstIndex(of: 0x0A) {
                        continuation.yield(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                        buffer.removeSubrange(buffer.startIndex...newline)
                    }
                }
                continuation.finish()
            }
        }
    }
}

/// The seeds the workers have finished, and those that failed with their first finding.
final class SoakTally: Sendable {
    struct Failure: Sendable {
        let seed: UInt64
        let finding: String
    }

    private let state = Mutex<(done: Int, failures: [Failure])>((0, []))

    func pass() { state.withLock { $0.done += 1 } }

    func fail(_ seed: UInt64, _ finding: String) {
        state.withLock {
            $0.done += 1
            $0.failures.append(Failure(seed: seed, finding: finding))
        }
    }

    var counts: (done: Int, failed: Int) { state.withLock { ($0.done, $0.failures.count) } }
    var failures: [Failure] { state.withLock { $0.failures.sorted { $0.seed < $1.seed } } }
}

/// Writes a line to standard output at once, unbuffered: the parent reads each worker's lines as
/// they come, and a log file shows the progress as it is made.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
