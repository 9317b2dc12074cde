import ArgumentParser
import LogStore
import LogToolCore

/// `logtool stats LOG [--log NAME]`
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a log's entry count, per-kind counts and payload bytes, time span and file size.",
        discussion: """
            Reads every entry once (lazily, as dump does) and prints, as aligned text: the log \
            and its directory, the number of entries, the total payload bytes, the times of the \
            first and last entries and the span between them, the size of the environment's \
            data.mdb (every log in the environment), then one row per kind: the kind number, \
            its name (server and device kinds, as dump names them; '-' for others), its entries \
            and their payload bytes.

            A corrupt entry stops it with one line on standard error naming its offset, and the \
            exit status is 1. See Docs/logtool.md.
            """)

    @OptionGroup var location: LogLocationOptions

    func run() async throws {
        try reportingErrors { standardOutput in
            let log = try location.openLog()
            let stats = try LogStats.collect(log, decoder: .forLog(named: log.name))
            standardOutput.write(stats.text)
        }
    }
}
