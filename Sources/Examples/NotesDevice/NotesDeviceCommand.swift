import ArgumentParser
import Dispatch
import Foundation
import LogSync
import LogSyncHTTP

/// One device of a notes app, as a process of its own, syncing through a `logsync-server`.
/// Run two of them with different `--device` names (and data directories) and they sync.
@main
struct NotesDeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notes-device",
        abstract: "One device of a notes app, syncing its notes through a logsync-server.",
        discussion: """
            Each note has text fields (title, body, …) and lives in the zone "Notes" of the user's \
            private database. The device keeps its notes in DATA/notes.json and its engine's \
            device log in DATA/sync (read it with `logtool dump DATA/sync`).

            Start a server, add a user, then run two devices against it:

              logsync-server user add alice --data ./server    # prints the token
              logsync-server --data ./server --port 8080 &
              notes-device --token TOKEN --device phone set groceries title "Groceries"
              notes-device --token TOKEN --device laptop sync
            """,
        subcommands: [Set.self, Delete.self, Sync.self, Send.self, Show.self, Watch.self])
}

/// Where the server is, who the user is, and which device this is.
struct DeviceOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The server's URL.", valueName: "url"))
    var server = "http://127.0.0.1:8080"

    @Option(name: .long, help: ArgumentHelp(
        "The user's bearer token from `logsync-server user add` (default: $LOGSYNC_TOKEN).", valueName: "token"))
    var token: String?

    @Option(name: .long, help: ArgumentHelp("This device's name, such as phone or laptop.", valueName: "name"))
    var device: String

    @Option(name: .long, help: ArgumentHelp(
        "Where the device keeps its notes and device log (default: ./notes-NAME).", valueName: "directory"))
    var data: String?

    func validate() throws {
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ValidationError("--server must be an http:// or https:// URL, not \(server)")
        }
        guard bearerToken != nil else {
            throw ValidationError("give the user's token with --token or in LOGSYNC_TOKEN (see `logsync-server user add`)")
        }
        guard !device.isEmpty, !device.contains("/") else { throw ValidationError("--device must be a name without '/'") }
    }

    var bearerToken: String? {
        let token = token ?? ProcessInfo.processInfo.environment["LOGSYNC_TOKEN"]
        return token.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    var directory: URL { URL(fileURLWithPath: data ?? "notes-\(device)", isDirectory: true) }

    /// Opens the device: its store, its engine over HTTP, its delegate.
    func open(automatic: Bool = false) throws -> NotesDevice {
        try NotesDevice(
            server: URL(string: server)!, token: bearerToken ?? "", device: device, directory: directory,
            automatic: automatic)
    }
}

/// A device opened: the app's store and delegate, the HTTP client and the engine.
struct NotesDevice {
    let app: NotesApp
    let client: HTTPSyncClient
    let engine: SyncEngine

    init(server: URL, token: String, device: String, directory: URL, automatic: Bool) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try NotesStore(file: directory.appending(path: "notes.json"))
        app = NotesApp(device: device, store: store)
        client = HTTPSyncClient(.init(serverURL: server, token: token, device: DeviceID(device)))
        var configuration = SyncEngine.Configuration(
            database: client.database(.private), logDirectory: directory.appending(path: "sync"), delegate: app)
        configuration.automaticallySync = automatic
        engine = try SyncEngine(configuration)
        // The zone the notes live in, until the server has confirmed it (saving a zone that
        // exists changes nothing on the server).
        let zone = RecordZone(zoneID: NotesStore.zoneID)
        if store.read({ $0.zoneCreated }) != true, try !engine.state.pendingDatabaseChanges.contains(.saveZone(zone)) {
            try engine.state.add(pendingDatabaseChanges: [.saveZone(zone)])
        }
    }

    /// Sends what is pending, again while the delegate queues merges (at most three rounds).
    /// - Throws: ``NotesDeviceError`` when the server cannot be reached; the edits stay pending.
    func send() async throws {
        for _ in 0..<3 {
            do {
                try await engine.sendChanges()
            } catch let error as SyncError where error.code == .partialFailure {
                // Per-record failures: the delegate has handled (and reported) each one.
            } catch let error as SyncError {
                throw NotesDeviceError("\(app.device): could not send: \(explain(error)). The edits stay pending; run `sync` again.")
            }
            if try engine.state.pendingRecordZoneChanges.isEmpty && engine.state.pendingDatabaseChanges.isEmpty { return }
        }
    }

    /// Fetches what changed on the server.
    func fetch() async throws {
        do {
            try await engine.fetchChanges()
        } catch let error as SyncError {
            throw NotesDeviceError("\(app.device): could not fetch: \(explain(error))")
        }
    }

    /// What went wrong, for a person: the code's name and what to do.
    private func explain(_ error: SyncError) -> String {
        switch error.code {
        case .notAuthenticated:
            "the server did not accept the token (notAuthenticated); check --token or LOGSYNC_TOKEN (see `logsync-server user add`)"
        case .networkFailure, .networkUnavailable:
            "the server did not answer (networkFailure): \(error.message)"
        default:
            "\(error.code.name): \(error.message)"
        }
    }

    /// Prints every note the device holds.
    func showAll() {
        let notes = app.store.read { $0.notes }
        if notes.isEmpty { app.say("no notes") }
        for (name, fields) in notes.sorted(by: { $0.key < $1.key }) { app.say(describe(name, fields)) }
    }
}

extension NotesDeviceCommand {
    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a field of a note (creating it) and send it.",
            discussion: """
                Sends without fetching first, as an app that was offline would: if another device \
                saved the note meanwhile, the server refuses the save, the device merges its edit \
                into the server's copy and sends the merge.
                """)

        @OptionGroup var options: DeviceOptions
        @Argument(help: "The note's name, such as groceries.") var note: String
        @Argument(help: "The field, such as title or body.") var field: String
        @Argument(help: "The text.") var text: String

        func run() async throws {
            let device = try options.open()
            try device.app.store.update { contents in
                contents.notes[note, default: [:]][field] = text
                contents.unsaved[note, default: []].insert(field)
            }
            try device.engine.state.add(pendingRecordZoneChanges: [.saveRecord(NotesStore.recordID(note))])
            device.app.say("sets \(field) of \(note) to \"\(text)\"")
            try await device.send()
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a note and send the deletion.")

        @OptionGroup var options: DeviceOptions
        @Argument(help: "The note's name.") var note: String

        func run() async throws {
            let device = try options.open()
            guard device.app.store.note(note) != nil else { throw NotesDeviceError("\(options.device) has no note \(note)") }
            try device.app.store.update { $0.notes[note] = nil; $0.unsaved[note] = nil }
            try device.engine.state.add(pendingRecordZoneChanges: [.deleteRecord(NotesStore.recordID(note))])
            device.app.say("deletes \(note)")
            try await device.send()
        }
    }

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch what other devices saved, send what is pending, and print every note.")

        @OptionGroup var options: DeviceOptions

        func run() async throws {
            let device = try options.open()
            try await device.fetch()
            try await device.send()
            device.showAll()
        }
    }

    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send what is pending, without fetching first, and print every note.",
            discussion: """
                What an app relaunched with unsent edits does first: the edits kept in the device \
                log go out as they are. A batch whose answer never came (the device stopped \
                between the request and its answer) goes out under the same request ID, so the \
                server answers it as it did the first time instead of reporting a conflict.
                """)

        @OptionGroup var options: DeviceOptions

        func run() async throws {
            let device = try options.open()
            try await device.send()
            device.showAll()
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the notes this device holds, without syncing.")

        @OptionGroup var options: DeviceOptions

        func run() async throws {
            let store = try NotesStore(file: options.directory.appending(path: "notes.json"))
            let app = NotesApp(device: options.device, store: store)
            let notes = store.read { $0.notes }
            if notes.isEmpty { app.say("no notes") }
            for (name, fields) in notes.sorted(by: { $0.key < $1.key }) { app.say(describe(name, fields)) }
        }
    }

    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stay connected and print each note as another device changes it (until SIGINT or SIGTERM).",
            discussion: """
                The engine syncs on its own (automaticallySync): it fetches when the server's push \
                hint arrives over the device's WebSocket, and sends what is pending after a short \
                debounce. Prints `watching` once it has fetched and its push channel is connected.
                """)

        @OptionGroup var options: DeviceOptions

        func run() async throws {
            let device = try options.open(automatic: true)
            try await device.fetch()
            try await device.send()
            await device.client.waitForPushChannels()
            device.app.say("watching")
            // Until SIGINT or SIGTERM: then stop the engine's work and exit.
            let (stop, signalled) = AsyncStream<Int32>.makeStream()
            let sources = [SIGINT, SIGTERM].map { signalNumber in
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber)
                source.setEventHandler { signalled.yield(signalNumber) }
                source.resume()
                return source
            }
            for await _ in stop { break }
            for source in sources { source.cancel() }
            device.client.close()  // no more push hints
            await device.engine.cancelOperations()
            device.app.say("stopped")
            // Now, before the automatic engine starts anything else: everything it fetched is in
            // notes.json and its device log already.
            Foundation.exit(0)
        }
    }
}
