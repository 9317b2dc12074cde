import ArgumentParser
import LogToolCore

/// `logtool`: inspect LogSync's append-only logs. One subcommand per file in this directory.
@main
struct LogTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logtool",
        abstract: "Inspect LogSync's append-only logs.",
        discussion: """
            Commands that read a log open it read-only, so they can run while another process
            appends to it.
            Errors are reported on one line on standard error, with a non-zero exit status.
            """,
        subcommands: [Dump.self, Stats.self, Replay.self, Demo.self])
}

/// Runs `body` with buffered standard output. On an error, writes what was buffered, then one
/// line `logtool: error: …` on standard error, and exits with status 1.
func reportingErrors(_ body: (inout StandardOutput) throws -> Void) throws {
    var output = StandardOutput()
    do {
        try body(&output)
        try output.flush()
    } catch {
        try? output.flush()
        StandardOutput.writeToStandardError(error.logToolErrorLine)
        throw ExitCode.failure
    }
}
