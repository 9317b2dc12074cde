import ArgumentParser
import LogStore
import LogSyncDiagnostics
import LogToolCore

/// `logtool stats LOG [--log NAME] [--json]`
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

            --json writes the same as one JSON object with the keys log, path, entries, \
            payloadBytes, first, last, firstMicros, lastMicros, spanMicros, fileSize and kinds \
            (kind, name, entries, payloadBytes per kind).

            A corrupt entry stops it with one line on standard error naming its offset, and the \
            exit status is 1. See Docs/logtool.md.
            """)

    @OptionGroup var location: LogLocationOptions
    @OptionGroup var format: JSONObjectOptions

    func run() async throws {
        try reportingErrors { standardOutput in
            var progress = ProgressIndicator.standardError(label: "stats", total: nil)
            defer { progress.finish() }
            let log = try location.openLog()
            let stats = try LogStats.collect(log, decoder: .forLog(log)) { progress.report($0) }
            progress.finish()
            standardOutput.write(format.json ? stats.json + "\n" : stats.text)
        }
    }
}
