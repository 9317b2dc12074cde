import ArgumentParser
import Foundation
import LogStore
import LogSyncDiagnostics
import LogToolCore

/// `logtool replay LOG [--to N] [--verify] [--json]`, `logtool replay LOG --against-fresh-server [--policy P] [--to N] [--json]`
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild a device log's engine state at an offset and print it.",
        discussion: """
            LOG is an engine's device log directory (SyncEngine.Configuration.logDirectory, the \
            environment holding the log named device). The entries 1...N (--to N, default: the \
            last) are replayed into a scratch directory in the system's temporary directory \
            (removed afterwards; the log is only read), and the engine state they give is \
            printed: pending record changes in order, pending database changes, the record \
            changes in flight, the untracked-changes flag, the zones with unfetched changes, the \
            known zones, the database change token, each zone's change token, the last known \
            server record of each record, the offset delivered through, the account and the \
            subscription.

            --verify then rebuilds the log's projections from all its entries and compares \
            them with the stored ones: "projections verified through offset N", or one line on \
            standard error naming the first difference and exit status 1.

            --json writes one JSON object with the keys log, path, lastOffset, state and \
            verification (null without --verify).

            --against-fresh-server instead re-issues the sends and fetches the log records \
            (through --to) against a fresh server of its own (in a scratch directory, removed \
            afterwards) and prints how its answers compare with the recorded ones: a summary, \
            then one line per mismatch and per request that cannot be compared; exit status 1 \
            when an answer differs. --policy decides the conflicts the replay meets: recorded \
            (as the log did), server-wins (the server's record is kept: the recorded resend is \
            not sent) or local-wins (the device's record is sent again on the server's).

            A log that is not a device log, an offset past the end and a corrupt entry (named by \
            its offset) are one-line errors with exit status 1. See Docs/logtool.md.
            """)

    @Argument(help: "The device log's directory (the one holding data.mdb).", completion: .directory)
    var path: String

    @Option(help: ArgumentHelp("The last offset to replay (default: the log's last).", valueName: "offset"))
    var to: UInt64?

    @Flag(help: "Also verify the stored projections against a rebuild from the whole log.")
    var verify = false

    @Flag(help: "Re-issue the log's recorded requests against a fresh server of its own and compare the answers.")
    var againstFreshServer = false

    enum Policy: String, ExpressibleByArgument, CaseIterable {
        case recorded = "recorded"
        case serverWins = "server-wins"
        case localWins = "local-wins"

        var policy: ServerReplayPolicy {
            switch self {
            case .recorded: .asRecorded
            case .serverWins: .serverRecordWins
            case .localWins: .localRecordWins
            }
        }
    }

    @Option(
        help:
            "With --against-fresh-server: how the device resolves the conflicts the replay meets (recorded, server-wins, local-wins)."
    )
    var policy: Policy = .recorded

    @OptionGroup var format: JSONObjectOptions

    func validate() throws {
        if let to, to == 0 { throw ValidationError("offsets start at 1; --to 0 names no entry") }
        if againstFreshServer && verify {
            throw ValidationError("--verify and --against-fresh-server do not go together")
        }
        if !againstFreshServer && policy != .recorded { throw ValidationError("--policy needs --against-fresh-server") }
    }

    func run() async throws {
        if againstFreshServer {
            // Async, so outside reportingErrors' synchronous body.
            let log: Log
            let report: ServerReplayReport
            do {
                log = try DeviceReplay.openDeviceLogEntries(at: path)
                report = try await ServerReplay(log: log).runAgainstFreshServer(
                    through: to.map { LogOffset($0) }, policy: policy.policy)
            } catch {
                try reportingErrors { _ in throw error }
                return
            }
            try reportingErrors { output in
                output.write(format.json ? report.json + "\n" : "\(report)\n")
                if !report.matches { throw ExitCode.failure }
            }
            return
        }
        try reportingErrors { output in
            var progress = ProgressIndicator.standardError(label: "replay", total: nil)
            defer { progress.finish() }
            let result = try DeviceReplay.run(path: path, through: to.map { LogOffset($0) }, verify: verify) {
                progress.report($0)
            }
            progress.finish()
            output.write(format.json ? result.json + "\n" : result.text)
            if case .differs(let mismatch)? = result.verification {
                throw LogToolError("projections not verified: \(mismatch)")
            }
        }
    }
}
