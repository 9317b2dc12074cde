import BenchSupport
import Foundation

/// The benchmark's command line, parsed by hand. The parent's options are passed on to each
/// child together with `--phase`, `--durability` (one value), `--result` and `--phase-dir`.
struct BenchOptions {
    /// Records fetched in the initial sync, and edits sent.
    var records = 100_000
    /// Pending changes added per `state.add(pendingRecordZoneChanges:)` call in the send phase.
    var chunk = 100
    /// The server's page size (`maxChangesPerPage`): records per fetched page.
    var page = 400
    /// Which phases to run.
    var phases: [Phase] = [.fetch, .send, .open]
    /// Open: the device logs' lengths in entries, and the opens timed on each (one process each).
    var openSizes = [10_000, 1_000_000]
    var openRuns = 7
    /// The device logs' durabilities to measure.
    var durabilities: [String] = ["durable", "fast"]
    /// The scratch directory; `nil`: a fresh temporary directory.
    var directory: String?

    // Child-only.
    var phase: Phase?
    var resultPath: String?
    var phaseDirectory: String?

    enum Phase: String { case seed, fetch, send, build, open }

    /// Zones the records are spread over, round-robin.
    static let zones = 10
    /// Records per modify request when seeding the server (the server's limit, F151).
    static let seedRequestSize = 400

    static let usage = """
        usage: logsync-engine-bench [--records N] [--chunk N] [--page N] [--only fetch|send|open]
                                    [--durability durable,fast] [--open-sizes N,N] [--open-runs N] [--dir PATH]

          --records N     records fetched in the initial sync, and edits sent (default 100,000)
          --chunk N       pending changes per state.add call in the send phase (default 100)
          --page N        the server's page size, changes per fetched page (default 400)
          --only PHASE    run only the fetch, the send or the open phase
          --durability D  device-log durabilities to measure in fetch and send, comma-separated
                          (default durable,fast; the open phase always opens .durable)
          --open-sizes L  open: device-log lengths in entries, comma-separated (default 10000,1000000;
                          the ratio compares the last with the first)
          --open-runs N   open: timed opens per log, each in a fresh process (default 7)
          --dir PATH      scratch directory (default: a fresh temporary directory); what the
                          benchmark writes there is deleted at the end
        """

    static func parse(_ arguments: [String]) throws -> BenchOptions {
        var options = BenchOptions()
        var index = 1
        func value(_ flag: String) throws -> String {
            index += 1
            guard index < arguments.count else { throw BenchError("\(flag) needs a value\n\n\(usage)") }
            return arguments[index]
        }
        func integer(_ flag: String, minimum: Int) throws -> Int {
            let text = try value(flag)
            guard let number = Int(text.replacingOccurrences(of: "_", with: "").replacingOccurrences(of: ",", with: "")),
                number >= minimum
            else { throw BenchError("\(flag): \"\(text)\" is not an integer ≥ \(minimum)") }
            return number
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--records": options.records = try integer(argument, minimum: zones)
            case "--chunk": options.chunk = try integer(argument, minimum: 1)
            case "--page": options.page = try integer(argument, minimum: 1)
            case "--only":
                let text = try value(argument)
                guard let phase = Phase(rawValue: text), phase == .fetch || phase == .send || phase == .open else {
                    throw BenchError("--only: fetch, send or open, not \"\(text)\"")
                }
                options.phases = [phase]
            case "--durability":
                let list = try value(argument).split(separator: ",").map(String.init)
                guard !list.isEmpty, list.allSatisfy({ $0 == "durable" || $0 == "fast" }) else {
                    throw BenchError("--durability: durable, fast or durable,fast")
                }
                options.durabilities = list
            case "--open-sizes":
                let text = try value(argument)
                let sizes = text.split(separator: ",").map { Int($0.replacingOccurrences(of: "_", with: "")) }
                guard !sizes.isEmpty, sizes.allSatisfy({ ($0 ?? 0) >= OpenWorkload.minimumEntries }) else {
                    throw BenchError("--open-sizes: \"\(text)\" is not a comma-separated list of integers ≥ \(OpenWorkload.minimumEntries)")
                }
                options.openSizes = sizes.compactMap { $0 }
            case "--open-runs": options.openRuns = try integer(argument, minimum: 1)
            case "--dir": options.directory = try value(argument)
            case "--phase":
                let text = try value(argument)
                guard let phase = Phase(rawValue: text) else { throw BenchError("--phase: seed, fetch, send, build or open, not \"\(text)\"") }
                options.phase = phase
            case "--result": options.resultPath = try value(argument)
            case "--phase-dir": options.phaseDirectory = try value(argument)
            case "-h", "--help":
                emit(usage)
                exit(0)
            default:
                throw BenchError("unknown argument \"\(argument)\"\n\n\(usage)")
            }
            index += 1
        }
        return options
    }
}
