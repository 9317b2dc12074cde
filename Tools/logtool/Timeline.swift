import ArgumentParser
import Foundation
import LogStore
import LogSync
import LogSyncDiagnostics
import LogSyncServer
import LogToolCore
import ModelEntries

/// `logtool timeline DEVICE_LOG… [--server SERVER_LOG] [--record NAME] [--from N] [--to M] [--format F] [--output PATH] [--json]`
struct Timeline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Draw several device logs and their server's log on one timeline.",
        discussion: """
            DEVICE_LOG… are engine device log directories or support bundles; --server is the \
            environment of the server database's log they synced with (a user's directory under \
            the server's data directory, or a server extract made by `logsync-server export-log`; \
            --server-log names the log in it: private, shared, by default the database a bundle \
            given names, else the only one). A server extract or user directory given among \
            DEVICE_LOG… is the server's lane too: `logtool timeline report.lsb server.lsb`. Each device step is placed against the server offsets it saw or caused: a \
            batch points to the server entries its request created (request IDs match), a \
            fetched page spans the offsets it read (tokens are offsets); conflicts, retries, \
            pushes and account changes are marked.

            --format html (the default) writes a self-contained HTML page holding the picture \
            as SVG, with each step's details shown on hover; --format svg the SVG alone; \
            --format text one line per step, for terminals. With --output the page or picture \
            goes to that file (and its path is printed), else to standard output.

            --record keeps the steps about one record (by name); --from and --to keep the \
            server offsets in that range and the device steps between them.

            --json writes one JSON object (lanes, record, serverRange, steps) instead. See \
            Docs/logtool.md.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case html, svg, text
    }

    @Argument(
        help:
            "The device logs' directories or support bundles, one lane each (named after the directory); a server extract or user directory among them is the server's lane.",
        completion: .directory)
    var devices: [String]

    @OptionGroup var server: ServerLogOptions

    @Option(help: ArgumentHelp("Keep only the steps about this record (by name).", valueName: "name"))
    var record: String?

    @Option(help: ArgumentHelp("The first server offset to keep (default: 1).", valueName: "offset"))
    var from: UInt64?

    @Option(help: ArgumentHelp("The last server offset to keep (default: the last).", valueName: "offset"))
    var to: UInt64?

    @Option(help: "What to write: html (a page with the picture and hover details), svg or text.")
    var format: Format = .html

    @Option(
        help: ArgumentHelp("The file to write the page or picture to (default: standard output).", valueName: "path"))
    var output: String?

    @OptionGroup var json: JSONObjectOptions

    func validate() throws {
        if devices.isEmpty { throw ValidationError("give at least one device log") }
        if let from, from == 0 { throw ValidationError("offsets start at 1; --from 0 names no entry") }
        if let to, to == 0 { throw ValidationError("offsets start at 1; --to 0 names no entry") }
        if let from, let to, to < from { throw ValidationError("--to \(to) is before --from \(from)") }
        if (from != nil || to != nil) && server.server == nil && devices.count < 2 {
            throw ValidationError("--from and --to are server offsets: give --server")
        }
    }

    func run() async throws {
        try reportingErrors { output in
            var progress = ProgressIndicator.standardError(label: "timeline", total: nil)
            defer { progress.finish() }
            let (sources, serverSource) = try pairedSources(devices, server: server)
            if (from != nil || to != nil) && serverSource == nil {
                throw LogToolError("--from and --to are server offsets: give a server log")
            }
            var range: ClosedRange<LogOffset>?
            if from != nil || to != nil { range = LogOffset(from ?? 1)...LogOffset(to ?? UInt64.max) }
            let timeline = try LogSyncDiagnostics.Timeline.build(
                devices: sources, server: serverSource,
                options: .init(record: try nameAsHeld(record, inLogsAt: devices), serverOffsets: range)
            ) { progress.report($0) }
            progress.finish()
            if json.json {
                output.write(timeline.json + "\n")
                return
            }
            let text =
                switch format {
                case .html: timeline.html
                case .svg: timeline.svg
                case .text: timeline.text
                }
            if let path = self.output {
                do {
                    try text.write(to: URL(fileURLWithPath: path), atomically: true, encoding: .utf8)
                } catch {
                    throw LogToolError("cannot write \(path): \(error.localizedDescription)")
                }
                output.write(
                    "wrote the timeline (\(timeline.lanes.count) lanes, \(timeline.steps.count) steps) to \(path)\n")
            } else {
                output.write(text)
            }
        }
    }
}

/// `--server PATH [--server-log NAME]`: a server database's log.
struct ServerLogOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The server database's log environment (a user's directory, such as DATA/users/u1, or a server extract).",
            valueName: "path"),
        completion: .directory)
    var server: String?

    @Option(help: ArgumentHelp("The log in the server's environment (default: the only one there).", valueName: "name"))
    var serverLog: String?
}

/// The server log at `path` (a user's directory or a server extract), opened read-only, as a
/// lane named `server`: `requested`, else the log of `scope`, else the only scope's.
func serverSource(at path: String, requested: String?, scope: String?) throws -> LogSyncDiagnostics.Timeline.Source {
    let environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: .init(readOnly: true))
    let available = try environment.logNames()
    let name =
        if LogSelection.side(available: available, manifestKind: try manifestKind(of: environment)) == .server {
            try LogSelection.serverLog(requested: requested, scope: scope, available: available, path: environment.path)
        } else {
            try LogSelection.choose(requested: requested, available: available, path: environment.path)
        }
    // A range extract holds its entries from offset 1: the device's links (server offsets,
    // tokens) would point at the wrong entries, so it is refused, as a range bundle is.
    if try manifestKind(of: environment) == UInt16(SupportBundleLayout.serverExtractManifestKind.rawValue),
        let base = try ServerExtract.manifest(at: URL(fileURLWithPath: path)).scopes[name]?.baseOffset, base > 0
    {
        throw LogToolError(
            "\(path) is a server extract of a range from offset \(base + 1) of log \"\(name)\": timeline and blame "
                + "link a device to the server's offsets from 1, so give an extract from offset 1 (without --from)")
    }
    return .init(name: "server", log: try environment.openLog(named: name))
}

/// The kind of entry 1 of the environment's log `bundle` (1 a device's bundle, 2 a server's
/// extract), or `nil` when it has none.
func manifestKind(of environment: LogEnvironment) throws -> UInt16? {
    try SupportBundleLayout.manifestEntry(in: environment)?.kind.rawValue
}

/// The lanes of `paths`: device logs and bundles, and at most one server log (a user's
/// directory or a server extract) among them or in `server`. The server's log is that of the
/// database the first device bundle names, unless --server-log says.
func pairedSources(
    _ paths: [String], server: ServerLogOptions
) throws -> (devices: [LogSyncDiagnostics.Timeline.Source], server: LogSyncDiagnostics.Timeline.Source?) {
    var devicePaths: [String] = []
    var serverPaths: [String] = server.server.map { [$0] } ?? []
    var scope: String?
    for path in paths {
        let environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: .init(readOnly: true))
        let kind = try manifestKind(of: environment)
        if LogSelection.side(available: try environment.logNames(), manifestKind: kind) == .server {
            serverPaths.append(path)
        } else {
            devicePaths.append(path)
            if kind == UInt16(SupportBundle.manifestKind.rawValue), scope == nil {
                scope = try SupportBundle.manifest(at: URL(fileURLWithPath: path)).configuration["database"]
            }
        }
    }
    guard serverPaths.count <= 1 else {
        throw LogToolError(
            "give one server log, not \(serverPaths.count) (\(serverPaths.joined(separator: ", ")))")
    }
    guard !devicePaths.isEmpty else { throw LogToolError("give at least one device log or bundle") }
    return (
        try deviceSources(devicePaths),
        try serverPaths.first.map { try serverSource(at: $0, requested: server.serverLog, scope: scope) }
    )
}

/// The device logs at `paths`, opened read-only for their entries, each named after its
/// directory (`phone`, `laptop`; `phone-2` for a second directory of the same name).
func deviceSources(_ paths: [String]) throws -> [LogSyncDiagnostics.Timeline.Source] {
    var names: Set<String> = []
    return try paths.map { path in
        let log = try DeviceReplay.openDeviceLogEntries(at: path)
        let base = URL(fileURLWithPath: log.environment.path).lastPathComponent
        var name = base
        var number = 2
        while names.contains(name) {
            name = "\(base)-\(number)"
            number += 1
        }
        names.insert(name)
        return .init(name: name, log: log)
    }
}
