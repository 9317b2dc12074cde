import ArgumentParser
import Foundation
import LogStore
import LogSync
import LogSyncDiagnostics
import LogToolCore

/// `logtool replay LOG [--to N] [--verify] [--json]`,
/// `logtool replay LOG --against-fresh-server [--server SERVERSIDE [--server-log NAME]] [--policy P] [--to N] [--json]`
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild a device log's engine state at an offset and print it.",
        discussion: """
            LOG is an engine's device log directory (SyncEngine.Configuration.logDirectory, the \
            environment holding the log named device) or a support bundle (NAME.lsb, \
            SyncEngine.exportSupportBundle), whose manifest is named on the first line: \
            "support bundle: format 1, library 0.9.0, app 2.1, created …, device entries 1...N, \
            values redacted, names hashed" (with --json, the key bundle comes first). The entries 1...N (--to N, default: the \
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

            --server SERVERSIDE (with --against-fresh-server) seeds the fresh server from the \
            server's side of the story: a server extract (logsync-server export-log) or a server \
            user's directory (DATA/users/uN). Its log is the one of the device's database (a \
            bundle's manifest names it; private otherwise; --server-log chooses another). Before \
            each of the device's requests, the server's entries that precede it and that the \
            device did not write (other devices', told apart by request IDs) are put into the \
            fresh server at their own offsets; the device's request is then re-issued and \
            compared, and so are the entries it appends with the server's at the same offsets. \
            The report adds how many entries were seeded and what the device holds at the end. \
            A server side that does not fit (another key or user, offsets that do not line up) \
            is a one-line error naming the offset.

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

    @OptionGroup(title: "The server's side (with --against-fresh-server)") var server: ServerLogOptions

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
        if !againstFreshServer && (server.server != nil || server.serverLog != nil) {
            throw ValidationError("--server needs --against-fresh-server")
        }
        if server.server != nil && policy != .recorded {
            // A policy departs from the server's side, whose later entries would then not line up.
            throw ValidationError(
                "--policy does not go with --server: a replay seeded from the server's side follows it")
        }
    }

    /// The manifest of the bundle at `path`, or `nil` for a device log that is not a bundle.
    func bundleManifest() throws -> SupportBundle.Manifest? {
        let environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: .init(readOnly: true))
        guard try environment.logNames().contains("bundle") else { return nil }
        return try SupportBundle.manifest(at: URL(fileURLWithPath: path))
    }

    /// `json` (an object) with the key `bundle` first, when `manifest` is given: the manifest's
    /// versions, range and redaction settings, its key's ID but never the key.
    static func json(_ json: String, bundle manifest: SupportBundle.Manifest?) throws -> String {
        guard let manifest, json.hasPrefix("{") else { return json }
        var object: [String: Any] = [
            "formatVersion": manifest.formatVersion, "libraryVersion": manifest.libraryVersion,
            "created": manifest.created.formatted(.iso8601), "firstOffset": manifest.firstOffset,
            "lastOffset": manifest.lastOffset, "baseOffset": manifest.baseOffset,
            "redactValues": manifest.redactValues, "hashNames": manifest.hashNames, "keyID": manifest.keyID,
        ]
        if let app = manifest.appVersion { object["appVersion"] = app }
        if let database = manifest.configuration["database"] { object["database"] = database }
        let bundle = try JSONSerialization.data(
            withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        let rest = json.dropFirst()
        return "{\"bundle\":" + String(decoding: bundle, as: UTF8.self) + (rest.hasPrefix("}") ? "" : ",") + rest
    }

    /// The line naming a bundle and its manifest's versions.
    static func describe(_ manifest: SupportBundle.Manifest) -> String {
        var parts = ["format \(manifest.formatVersion)", "library \(manifest.libraryVersion)"]
        if let app = manifest.appVersion { parts.append("app \(app)") }
        parts.append("created \(manifest.created.formatted(.iso8601))")
        let base = manifest.baseOffset
        parts.append(
            manifest.lastOffset == 0
                ? "no device entries"
                : "device entries \(manifest.firstOffset)...\(manifest.lastOffset)"
                    + (base == 0 ? "" : " (bundle offsets 1...\(manifest.lastOffset - base))"))
        parts.append(manifest.redactValues ? "values redacted" : "values in clear")
        parts.append(manifest.hashNames ? "names hashed" : "names in clear")
        if let database = manifest.configuration["database"] { parts.append("database \(database)") }
        return "support bundle: " + parts.joined(separator: ", ")
    }

    func run() async throws {
        if againstFreshServer {
            // Async, so outside reportingErrors' synchronous body.
            let log: Log
            let report: ServerReplayReport
            let manifest: SupportBundle.Manifest?
            do {
                log = try DeviceReplay.openDeviceLogEntries(at: path)
                manifest = try bundleManifest()
                if let serverPath = server.server {
                    let scope: DatabaseScope = manifest?.configuration["database"] == "shared" ? .shared : .private
                    let side = try ServerSide.open(
                        at: serverPath, scope: scope, log: server.serverLog, keyID: manifest?.keyID,
                        redacted: manifest.map { $0.redactValues || $0.hashNames } ?? false)
                    report = try await ServerReplay(log: log).runAgainstFreshServer(
                        seededFrom: side, scope: scope, through: to.map { LogOffset($0) }, policy: policy.policy)
                } else {
                    report = try await ServerReplay(log: log).runAgainstFreshServer(
                        through: to.map { LogOffset($0) }, policy: policy.policy)
                }
            } catch {
                try reportingErrors { _ in throw error }
                return
            }
            try reportingErrors { output in
                if !format.json, let manifest { output.write(Self.describe(manifest) + "\n") }
                output.write(format.json ? try Self.json(report.json, bundle: manifest) + "\n" : "\(report)\n")
                if !report.matches { throw ExitCode.failure }
            }
            return
        }
        try reportingErrors { output in
            let manifest = try bundleManifest()
            if !format.json, let manifest { output.write(Self.describe(manifest) + "\n") }
            var progress = ProgressIndicator.standardError(label: "replay", total: nil)
            defer { progress.finish() }
            let result = try DeviceReplay.run(path: path, through: to.map { LogOffset($0) }, verify: verify) {
                progress.report($0)
            }
            progress.finish()
            output.write(format.json ? try Self.json(result.json, bundle: manifest) + "\n" : result.text)
            if case .differs(let mismatch)? = result.verification {
                throw LogToolError("projections not verified: \(mismatch)")
            }
        }
    }
}
