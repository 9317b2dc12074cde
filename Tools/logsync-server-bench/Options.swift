import BenchSupport
import Foundation

/// The benchmark's command line, parsed by hand (the benchmark depends on the server only).
struct BenchOptions {
    /// Records in the big database.
    var records = 1_000_000
    /// Records in the small database the big one is compared with.
    var smallRecords = 10_000
    /// Records loaded with `.durable` commits for the durable throughput figure.
    var durableRecords = 20_000
    /// The scratch directory; `nil`: a fresh temporary directory. Removed at the end either way
    /// (only the part this program created, when the directory existed before).
    var directory: String?

    /// Zones per database.
    static let zones = 100
    /// Records per modify request: the server's limit (F151).
    static let requestSize = 400
    /// Records saved into the fetched zone after the recent token was taken.
    static let recentChanges = 100
    /// Timed repetitions of each fetch per database (two passes of half, databases alternating).
    static let repetitions = 200
    /// Untimed fetches before each timed pass.
    static let warmup = 20
    /// The target: fetch time since a recent token, big database over small, at most this.
    static let maximumRatio = 2.0

    static let usage = """
        usage: logsync-server-bench [--records N] [--quick] [--dir PATH]

          --records N   records in the big database (default 1,000,000; the small one has 10,000)
          --quick       100,000 records in the big database
          --dir PATH    scratch directory (default: a fresh temporary directory); the data the
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
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--records":
                let text = try value(argument)
                guard let number = Int(text.replacingOccurrences(of: "_", with: "").replacingOccurrences(of: ",", with: "")),
                    number >= BenchOptions.zones
                else { throw BenchError("--records: \"\(text)\" is not an integer ≥ \(BenchOptions.zones)") }
                options.records = number
            case "--quick": options.records = 100_000
            case "--dir": options.directory = try value(argument)
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
