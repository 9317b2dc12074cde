import Foundation
import LogSync
import LogSyncDiagnostics
import LogSyncServer

// The example's output: a timeline, one line per step.

/// Prints a step of the timeline.
func heading(_ text: String) {
    print("\n== \(text)")
}

/// Prints what a device did, with the note concerned, if any.
func say(_ device: String, _ text: String, _ record: Record? = nil) {
    let note = record.map { " \($0.recordID.recordName) \(describe($0.stringFields))" } ?? ""
    print("  \(device.padding(toLength: 7, withPad: " ", startingAt: 0))\(text)\(note)")
}

/// Prints a device's copy of a note.
func show(_ device: Device, _ id: Record.ID) {
    let fields = device.app.notes.withLock { $0[id] } ?? [:]
    say(device.app.device, "has \(id.recordName) \(describe(fields))")
}

/// Prints the end of the story: the log of the device whose save the server refused (the last
/// device if none was), as `swift run logtool dump` prints it, then where the logs are and the
/// commands that read them.
func showLogs(_ devices: [Device], server: SyncServer) async throws {
    for device in devices { try await waitUntilIdle(device) }
    let conflict = try firstConflict(in: devices)
    let device = conflict?.device ?? devices[devices.count - 1]
    let log = device.engine.deviceLog.log
    heading(
        "The \(device.app.device)'s log, as logtool dump prints it"
            + (conflict.map { "; the conflict is at offset \($0.offset)" } ?? "; this time no save was refused"))
    var dump = ""
    try EntryDumper(formatter: EntryFormatter(decoder: .forLog(named: log.name))).dump(log, to: &dump)
    print(dump, terminator: "")

    heading("The picture of the run: both devices and the server on one timeline")
    let picture = try writeTimeline(devices, server: server)
    print("  open \(picture.path) in a browser (the same picture as SVG: \(picture.deletingPathExtension().path).svg)")

    heading("Read the logs with logtool (Docs/Debugging.md explains the output)")
    func path(_ device: Device) -> String { shellQuoted(device.engine.deviceLog.log.environment.path) }
    let serverPath = shellQuoted(try server.admin.log(of: "alice").environment.path)
    for each in devices { say(each.app.device, path(each)) }
    say("server", "\(serverPath)  (alice's private database: --log private)")
    print("")
    var commands = [
        ("dump \(path(device))", "the dump above"),
        ("dump \(path(device)) --kind batchResult --kind batchSaved", "the answers to its sends"),
        ("stats \(path(device))", "its entries, counted by kind"),
        conflict.map { ("replay \(path(device)) --to \($0.offset)", "its state just after the conflict") }
            ?? ("replay \(path(device))", "its state at the end"),
    ]
    for other in devices where other.app.device != device.app.device {
        commands.append(("dump \(path(other))", "the \(other.app.device)'s log"))
    }
    commands.append(("dump \(serverPath) --log private", "the server's log"))
    let width = commands.map(\.0.count).max() ?? 0
    for (command, comment) in commands {
        print("  swift run logtool \(command.padding(toLength: width, withPad: " ", startingAt: 0))  # \(comment)")
    }
    // Longer commands, each after its comment.
    let all = devices.map(path).joined(separator: " ")
    let others = devices.filter { $0.app.device != device.app.device }.map(path).joined(separator: " ")
    for (comment, command) in [
        ("the picture, as text", "timeline \(all) --server \(serverPath) --format text"),
        (
            "where the \(device.app.device)'s note came from, field by field",
            "blame \(path(device)) \(others) --record groceries --server \(serverPath)"
        ),
        (
            "the \(device.app.device)'s index checked against a replay of its entries",
            "bisect \(path(device)) --invariant projections"
        ),
    ] {
        print("  # \(comment)\n  swift run logtool \(command)")
    }
    try exportSupportBundles(devices, server: server)
}

/// `--support-bundles` (redacted, as an app would send them) or `--support-bundles=clear`
/// (values and names in clear, to replay against the server's own log, which is not redacted):
/// each device exports its support bundle beside the logs (`phone.lsb`, `laptop.lsb`), and the
/// commands that read them are printed (Docs/Debugging.md, "From a user's report: support
/// bundles"). Without either flag, nothing.
func exportSupportBundles(_ devices: [Device], server: SyncServer) throws {
    let arguments = CommandLine.arguments
    let clear = arguments.contains("--support-bundles=clear")
    guard clear || arguments.contains("--support-bundles") else { return }
    heading("Each device exports its support bundle" + (clear ? " (values and names in clear)" : " (redacted)"))
    let directory = URL(fileURLWithPath: devices[0].engine.deviceLog.log.environment.path).deletingLastPathComponent()
    let options =
        clear ? SupportBundle.Options(redactValues: false, hashNames: false) : SupportBundle.Options()
    var bundles: [(Device, String)] = []
    for device in devices {
        let bundle = directory.appending(path: "\(device.app.device).lsb")
        try device.engine.exportSupportBundle(to: bundle, options: options)
        say(device.app.device, "wrote \(bundle.path)")
        bundles.append((device, shellQuoted(bundle.path)))
    }
    let userDirectory = URL(fileURLWithPath: try server.admin.log(of: "alice").environment.path)
    say("server", "\(shellQuoted(userDirectory.path))  (alice's databases: the server's side)")
    for (device, bundle) in bundles {
        let name = device.app.device
        // A redacted bundle is read beside the server's extract made with its key; a bundle in
        // clear beside the server user's own log, which is in clear too.
        var serverSide = shellQuoted(userDirectory.path)
        if !clear {
            let data = userDirectory.deletingLastPathComponent().deletingLastPathComponent()
            serverSide = shellQuoted(directory.appending(path: "server-\(name).lsb").path)
            print(
                "  # the operator's side of the \(name)'s report: alice's server log, redacted with its bundle's key\n"
                    + "  swift run logsync-server export-log --data \(shellQuoted(data.path)) --user alice "
                    + "--bundle \(bundle) --output \(serverSide)")
        }
        print(
            "  # the \(name)'s requests rerun against a server seeded from the server's side\n"
                + "  swift run logtool replay \(bundle) --against-fresh-server --server \(serverSide)")
    }
}

/// The first device whose log holds a save refused with `serverRecordChanged`, and the offset of
/// that `batchResult` entry (or `batchSaved`, when the batch also saved records).
func firstConflict(in devices: [Device]) throws -> (device: Device, offset: UInt64)? {
    for device in devices {
        var offset: UInt64?
        try device.engine.deviceLog.log.forEachEntry { entry in
            guard offset == nil, let described = try EntryDecoder.device.describe(entry),
                ["batchResult", "batchSaved"].contains(described.kindName),
                case .list(let errors)? = described["errors"],
                errors.contains(where: { $0.hasSuffix(":serverRecordChanged") })
            else { return }
            offset = entry.offset.rawValue
        }
        if let offset { return (device, offset) }
    }
    return nil
}

/// Waits until `device`'s log has not grown for 200 ms: its engine has finished what it was doing.
func waitUntilIdle(_ device: Device) async throws {
    var last = try device.engine.deviceLog.log.lastOffset
    while true {
        try await Task.sleep(for: .milliseconds(200))
        let now = try device.engine.deviceLog.log.lastOffset
        if now == last { return }
        last = now
    }
}

/// `{body: "milk", title: "Groceries"}`.
func describe(_ fields: [String: String]) -> String {
    "{" + fields.sorted { $0.key < $1.key }.map { "\($0.key): \"\($0.value)\"" }.joined(separator: ", ") + "}"
}

/// Writes the timeline of `devices` and the server's log of alice's private database as
/// `timeline.html` (with hover details) and `timeline.svg` beside the logs, and returns the
/// page's URL.
func writeTimeline(_ devices: [Device], server: SyncServer) throws -> URL {
    let timeline = try Timeline.build(
        devices: devices.map { Timeline.Source(name: $0.app.device, log: $0.engine.deviceLog.log) },
        server: Timeline.Source(name: "server", log: try server.admin.log(of: "alice")))
    let directory = URL(fileURLWithPath: devices[0].engine.deviceLog.log.environment.path).deletingLastPathComponent()
    let page = directory.appending(path: "timeline.html")
    try timeline.html.write(to: page, atomically: true, encoding: .utf8)
    try timeline.svg.write(to: directory.appending(path: "timeline.svg"), atomically: true, encoding: .utf8)
    return page
}
