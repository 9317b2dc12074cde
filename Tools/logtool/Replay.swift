import ArgumentParser
import Foundation
import LogStore
import LogSyncDiagnostics
import LogToolCore

/// `logtool replay LOG [--to N] [--verify] [--json]`
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

            A log that is not a device log, an offset past the end and a corrupt entry (named by \
            its offset) are one-line errors with exit status 1. See Docs/logtool.md.
            """)

    @Argument(help: "The device log's directory (the one holding data.mdb).", completion: .directory)
    var path: String

    @Option(help: ArgumentHelp("The last offset to replay (default: the log's last).", valueName: "offset"))
    var to: UInt64?

    @Flag(help: "Also verify the stored projections against a rebuild from the whole log.")
    var verify = false

    @OptionGroup var format: JSONObjectOptions

    func validate() throws {
        if let to, to == 0 { throw ValidationError("offsets start at 1; --to 0 names no entry") }
    }

    func run() async throws {
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
