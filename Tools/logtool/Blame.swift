import ArgumentParser
import LogSyncDiagnostics
import LogToolCore

/// `logtool blame LOG [OTHER_LOG…] --record NAME [--zone NAME] [--server SERVER_LOG] [--json]`
struct Blame: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show where a record's value on a device came from.",
        discussion: """
            LOG is the device log of the device to ask about. It prints, in log order, every \
            event of the record there: the app's edits, the batch that sent it (content and \
            request ID), the server's answer (saved with its change tag, deleted, refused), \
            conflicts and how the delegate resolved them (queued the record again, or kept the \
            server's version), every fetched version with the server offset it came from, and \
            what the device holds now.

            LOG may be a support bundle, and --server a server extract (`logsync-server \
            export-log`) or a user's directory; a server extract given after LOG is taken as \
            --server. With --record, give the name as the bundle holds it (h-… when names are \
            hashed). With --server (the server database's log), it names the request that saved the \
            version held now and, for each field, the save that last changed it; the device \
            that sent it is named when its log is LOG or one of OTHER_LOG… (lanes are named \
            after their directories).

            --json writes one JSON object instead. See Docs/logtool.md.
            """)

    @Argument(help: "The device log's directory, then other devices' logs to name senders.", completion: .directory)
    var devices: [String]

    @Option(help: ArgumentHelp("The record's name.", valueName: "name"))
    var record: String

    @Option(help: ArgumentHelp("The record's zone (needed when the name is in several zones).", valueName: "name"))
    var zone: String?

    @OptionGroup var server: ServerLogOptions

    @OptionGroup var json: JSONObjectOptions

    func validate() throws {
        if devices.isEmpty { throw ValidationError("give the device log to ask about") }
    }

    func run() async throws {
        try reportingErrors { output in
            var progress = ProgressIndicator.standardError(label: "blame", total: nil)
            defer { progress.finish() }
            let (sources, serverSource) = try pairedSources(devices, server: server)
            let blame = try RecordBlame.build(
                record: try nameAsHeld(record, inLogsAt: devices) ?? record,
                zone: try nameAsHeld(zone, inLogsAt: devices), device: sources[0],
                otherDevices: Array(sources.dropFirst()),
                server: serverSource
            ) { progress.report($0) }
            progress.finish()
            output.write(json.json ? blame.json + "\n" : blame.text)
        }
    }
}
