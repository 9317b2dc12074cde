import ArgumentParser
import LogSyncDiagnostics
import LogToolCore

/// `logtool`: inspect LogSync's append-only logs. One subcommand per file in this directory.
@main
struct LogTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logtool",
        abstract: "Inspect LogSync's append-only logs.",
        discussion: """
            Commands that read a log open it read-only, so they can run while another process \
            appends to it.

            Errors are reported on one line on standard error, with a non-zero exit status: 1 \
            (2 for diff, whose status 1 means that the logs differ), 64 for a usage error.

            Long passes show their progress on standard error when it is a terminal.
            """,
        subcommands: [
            Dump.self, Stats.self, Replay.self, Diff.self, Timeline.self, Blame.self, Bisect.self, Verify.self,
            Demo.self,
        ])
}

/// Runs `body` with buffered standard output. On an error, writes what was buffered, then one
/// line `logtool: error: …` on standard error, and exits with `errorStatus` (1 by default).
///
/// An `ExitCode` thrown by `body` is not an error: what was buffered is written and the tool
/// exits with that status.
func reportingErrors(errorStatus: ExitCode = .failure, _ body: (inout StandardOutput) throws -> Void) throws {
    var output = StandardOutput()
    do {
        try body(&output)
        try output.flush()
    } catch let exit as ExitCode {
        do {
            try output.flush()
        } catch {
            StandardOutput.writeToStandardError(error.logToolErrorLine)
            throw errorStatus
        }
        throw exit
    } catch {
        try? output.flush()
        StandardOutput.writeToStandardError(error.logToolErrorLine)
        throw errorStatus
    }
}
