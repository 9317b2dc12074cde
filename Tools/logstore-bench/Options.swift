import Foundation
import LogStore

/// The benchmark's command line, parsed by hand (no ArgumentParser: the benchmark has no
/// dependencies beyond LogStore, its fixtures and LMDB).
struct BenchOptions {
    /// Entries per configuration (transactions of 1 entry use `min(singleEntryCap, entries)`).
    var entries = 1_000_000
    var durabilities: [Durability] = [.fast, .durable]
    var payloadSizes = [128, 1024]
    var transactionSizes = [1, 100, 10_000]
    var variants = Variant.allCases
    /// The scratch directory; `nil`: a fresh temporary directory, deleted at the end.
    var directory: String?
    /// How many times each measurement is repeated, the variants interleaved; the fastest run
    /// is reported. Three by default: single runs on a shared 2-core machine are too noisy.
    var repeats = 3

    /// Transactions of one entry are limited to this many entries (one commit each).
    static let singleEntryCap = 10_000

    static let usage = """
        usage: logstore-bench [--entries N] [--quick] [--only fast|durable] [--dir PATH]
                              [--payload 128|1024|N[,N…]] [--txn 1|100|10000|N[,N…]]
                              [--variant raw|logstore|projection[,…]] [--repeat N]

          --entries N   entries appended per configuration (default 1,000,000; transactions of
                        one entry append at most 10,000)
          --quick       100,000 entries per configuration
          --only D      run only the .fast or only the .durable configurations
          --dir PATH    scratch directory (default: a fresh temporary directory, deleted at the
                        end); each run's data is deleted right after the run
          --payload     payload sizes in bytes, comma-separated (default 128,1024)
          --txn         entries per transaction, comma-separated (default 1,100,10000)
          --variant     which paths to run (default raw,logstore,projection); for profiling
          --repeat N    repeat each measurement N times, the variants interleaved, and
                        report the fastest run (default 3)
        """

    static func parse(_ arguments: [String]) throws -> BenchOptions {
        var options = BenchOptions()
        var index = 1
        func value(_ flag: String) throws -> String {
            index += 1
            guard index < arguments.count else { throw BenchError("\(flag) needs a value\n\n\(usage)") }
            return arguments[index]
        }
        func positive(_ text: String, _ flag: String) throws -> Int {
            guard let number = Int(text.replacingOccurrences(of: "_", with: "").replacingOccurrences(of: ",", with: "")),
                number > 0
            else { throw BenchError("\(flag): \"\(text)\" is not a positive integer") }
            return number
        }
        func list(_ text: String, _ flag: String) throws -> [Int] {
            try text.split(separator: ",").map { try positive(String($0), flag) }
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--entries": options.entries = try positive(try value(argument), argument)
            case "--quick": options.entries = 100_000
            case "--only":
                switch try value(argument) {
                case "fast": options.durabilities = [.fast]
                case "durable": options.durabilities = [.durable]
                case let other: throw BenchError("--only takes fast or durable, not \"\(other)\"")
                }
            case "--dir": options.directory = try value(argument)
            case "--payload": options.payloadSizes = try list(try value(argument), argument)
            case "--txn": options.transactionSizes = try list(try value(argument), argument)
            case "--repeat": options.repeats = try positive(try value(argument), argument)
            case "--variant":
                options.variants = try value(argument).split(separator: ",").map { name in
                    guard let variant = Variant(rawValue: String(name)) else {
                        throw BenchError("--variant takes raw, logstore or projection, not \"\(name)\"")
                    }
                    return variant
                }
            case "-h", "--help":
                emit(usage)
                exit(0)
            default:
                throw BenchError("unknown argument \"\(argument)\"\n\n\(usage)")
            }
            index += 1
        }
        for size in options.payloadSizes where size < Workload.keyBytes + 2 {
            throw BenchError("--payload: \(size) bytes cannot hold a KeyValueEntry.set with a \(Workload.keyBytes)-byte key")
        }
        return options
    }

    /// The entries appended with transactions of `transactionSize`.
    func entryCount(transactionSize: Int) -> Int {
        transactionSize == 1 ? min(Self.singleEntryCap, entries) : entries
    }
}

/// The three paths measured.
enum Variant: String, CaseIterable {
    /// The LMDB C API directly: the ceiling.
    case raw
    /// `Log.append` with no projection.
    case logstore
    /// `Log.append` with `LatestValueProjection`.
    case projection
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
