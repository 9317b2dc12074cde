import ArgumentParser
import LogSyncDiagnostics
import LogToolCore

/// `logtool verify LOG [--log NAME]`
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a log environment's file structure and every entry of its logs.",
        discussion: """
            Checks the structure of the environment's data.mdb without trusting LMDB: both meta \
            pages (their transaction IDs must be consecutive), every page header, node, key and \
            value bound, the B-tree shape and each table's page and entry counts, overflow \
            chains and free pages. Then reads every entry of the log chosen with --log, or of \
            every log in the environment: checksums, dense offsets and the tail record.

            Prints the file's page size, snapshot and pages, one row per table, and one line per \
            log. Damage is one line on standard error naming the page and, where known, the \
            entry's offset, and the exit status is 1. See Docs/logtool.md and Docs/LogFormat.md.
            """)

    @Argument(help: "The log's environment directory (the one holding data.mdb).", completion: .directory)
    var path: String

    @Option(
        name: .customLong("log"),
        help: ArgumentHelp("Read only this log's entries (default: every log in the environment).", valueName: "name"))
    var logName: String?

    func run() async throws {
        try reportingErrors { output in
            var progress = ProgressIndicator.standardError(label: "verify", total: nil)
            defer { progress.finish() }
            let result = try LogVerification.run(path: path, logName: logName) { progress.report($0) }
            progress.finish()
            output.write(result.text)
        }
    }
}
