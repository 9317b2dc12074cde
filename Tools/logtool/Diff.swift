import ArgumentParser
import LogSyncDiagnostics
import LogToolCore

/// `logtool diff LOG_A LOG_B [--json]`
struct Diff: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show where two device logs' entries and engine states first differ.",
        discussion: """
            LOG_A and LOG_B are engine device log directories (the environments holding the \
            log named device), for example a log and a fork of it made with \
            DeviceLog.rewind(to:into:) that went on differently. Both are read once, side by \
            side, and opened read-only (engines may be running on them); their entries are \
            replayed into scratch directories in the system's temporary directory (removed \
            afterwards).

            It prints the first offset at which the entries differ (compared by kind and \
            payload, not time) with each log's kind there, or that a log ends there; then the \
            first offset after which the engine states differ, with every field that differs \
            and both values (for zone tokens and server records, each zone or record that \
            differs). A log that ends early counts with its last state.

            --json writes one JSON object with the keys a, b, identical, entries and states.

            Exit status, as for diff(1): 0 when the logs hold the same entries, 1 when they \
            differ, 2 for an error (a missing path, a log that is not a device log, a corrupt \
            entry named by its offset). See Docs/logtool.md.
            """)

    @Argument(help: "The first device log's directory (A).", completion: .directory)
    var pathA: String

    @Argument(help: "The second device log's directory (B).", completion: .directory)
    var pathB: String

    @OptionGroup var format: JSONObjectOptions

    func run() async throws {
        try reportingErrors(errorStatus: ExitCode(2)) { output in
            var progress = ProgressIndicator.standardError(label: "diff", total: nil)
            defer { progress.finish() }
            let diff = try DeviceDiff.compare(pathA, pathB) { progress.report($0) }
            progress.finish()
            output.write(format.json ? diff.json + "\n" : diff.text)
            if !diff.isIdentical { throw ExitCode(1) }
        }
    }
}
