import ArgumentParser
import LogStore
import LogSyncDiagnostics
import LogToolCore

/// `logtool bisect LOG --invariant NAME [--to N] [--json]`
struct Bisect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find the first offset of a device log after which an invariant stops holding.",
        discussion: """
            LOG is an engine device log directory, opened read-only. The engine's state is \
            reconstructed (into scratch directories in the system's temporary directory, removed \
            afterwards) at the log's end, then at offsets chosen by bisection: about log2(N) + 1 \
            reconstructions for N entries. It prints each state checked, then the first offset \
            after which the invariant fails and why, or that it holds.

            The invariants:
              projections  the state the device index gives equals a replay of the entries in memory
              pending      no pending change disappears without a send result, a removal by the app or an account change
              tokens       change tokens never go backwards

            Exit status 0 when the invariant holds through the end, 1 when it fails (or for an \
            error). --json writes one JSON object (invariant, through, holds, firstBadOffset, \
            lastGoodOffset, violation, reconstructions, checks). See Docs/logtool.md.
            """)

    @Argument(help: "The device log's directory.", completion: .directory)
    var path: String

    @Option(help: ArgumentHelp("The invariant: projections, pending or tokens.", valueName: "name"))
    var invariant: String

    @Option(help: ArgumentHelp("The last offset to consider (default: the log's last).", valueName: "offset"))
    var to: UInt64?

    @OptionGroup var json: JSONObjectOptions

    func validate() throws {
        guard DeviceInvariant.named(invariant) != nil else {
            throw ValidationError(
                "unknown invariant \(invariant); the invariants are "
                    + DeviceInvariant.builtIn.map(\.name).joined(separator: ", "))
        }
        if let to, to == 0 { throw ValidationError("offsets start at 1; --to 0 names no entry") }
    }

    func run() async throws {
        try reportingErrors { output in
            var progress = ProgressIndicator.standardError(label: "bisect", total: nil)
            defer { progress.finish() }
            let log = try DeviceReplay.openDeviceLogEntries(at: path)
            let result = try DeviceLogBisect(log: log).run(
                DeviceInvariant.named(invariant)!, through: to.map { LogOffset($0) }
            ) { progress.report($0) }
            progress.finish()
            if json.json {
                output.write(result.json + "\n")
            } else {
                output.write(text(of: result, log: log))
            }
            if result.firstBadOffset != nil { throw ExitCode.failure }
        }
    }

    /// `bisect of log "device" in PATH, entries 1...N, invariant NAME: SUMMARY`, one line per
    /// state checked, then the verdict.
    func text(of result: DeviceBisectResult, log: Log) -> String {
        let summary = DeviceInvariant.named(result.invariant)?.summary ?? ""
        var text =
            "bisect of log \"\(log.name)\" in \(log.environment.path), entries 1...\(result.through), "
            + "invariant \(result.invariant): \(summary)\n"
        for check in result.checks {
            text += "  state after offset \(check.offset): \(check.holds ? "holds" : "fails")\n"
        }
        text += "\(result)\n"
        if let bad = result.firstBadOffset {
            text +=
                "holds after offset \(bad.rawValue - 1), fails after offset \(bad): read the entry with "
                + "logtool dump \(shellQuoted(log.environment.path)) --from \(bad) --to \(bad)\n"
        }
        return text
    }
}
