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
            private database. The device keeps its notes in DATA/notes.json and runs two engines, \
            as a CloudKit app does: one on the private database, with its device log in DATA/sync, \
            and one on the shared database, with its device log in DATA/sync-shared (read them \
            with `logtool dump DATA/sync`).

            Start a server that trusts an identity issuer, sign two devices in, and they sync:

              logsync-server dev-issuer init --directory issuer > identity.json
              logsync-server --data ./server --identity-config identity.json &
              JWT=$(logsync-server dev-issuer sign --directory issuer --subject alice \\
                  --audience logsync-dev)
              notes-device sign-in --device phone --identity-token "$JWT"
              notes-device sign-in --device laptop --identity-token "$JWT"
              notes-device set --device phone groceries title "Groceries"
              notes-device sync --device laptop

            A device keeps its session in DATA/session.json and refreshes it by itself. Scripts \
            may use a bearer token instead (`logsync-server user add alice`, then --token or \
            LOGSYNC_TOKEN).

            Sharing with other users of the server (signed in with an identity token that \
            carries their e-mail address, `dev-issuer sign --email ADDRESS`, or added with \
            `user add NAME --email ADDRESS`): the owner shares the zone and sends each \
            participant the URL it prints; they accept it, then see and (if read-write) edit \
            the owner's notes with --owner:

              notes-device share --device alice-phone \\
                  --with bob@example.com --permission read-write
              notes-device accept --device bob-laptop logsync://share/…
              notes-device set --device bob-laptop \\
                  --owner alice@example.com groceries body "milk"
              notes-device unshare --device alice-phone --remove bob@example.com
            """,
        subcommands: [
            SignIn.self, SignOut.self, Set.self, Attach.self, Delete.self, Sync.self, Send.self, Show.self,
            Watch.self, ShareNotes.self, Unshare.self, Accept.self, Report.self,
        ])
}

/// The help of `--owner`.
let ownerHelp = ArgumentHelp(
    "The owner of the shared Notes zone the note is in: their e-mail address or user record name (the user's own zone by default).",
    valueName: "user")

/// Where the server is, who the user is, and which device this is.
struct DeviceOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The server's URL.", valueName: "url"))
    var server = "http://127.0.0.1:8080"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The user's bearer token from `logsync-server user add` (default: $LOGSYNC_TOKEN; without one, the session of `sign-in`).",
            valueName: "token"))
    var token: String?

    @Option(name: .long, help: ArgumentHelp("This device's name, such as phone or laptop.", valueName: "name"))
    var device: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where the device keeps its notes and device logs (default: ./notes-NAME).", valueName: "directory"))
    var data: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The most changes each fetch request asks for (default: the server's page size).", valueName: "n"))
    var fetchPageSize: Int?

    func validate() throws {
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ValidationError("--server must be an http:// or https:// URL, not \(server)")
        }
        guard !device.isEmpty, !device.contains("/") else {
            throw ValidationError("--device must be a name without '/'")
        }
        if let fetchPageSize, fetchPageSize < 1 {
            throw ValidationError("--fetch-page-size must be 1 or more, not \(fetchPageSize)")
        }
    }

    var bearerToken: String? {
        let token = token ?? ProcessInfo.processInfo.environment["LOGSYNC_TOKEN"]
        return token.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    var directory: URL { URL(fileURLWithPath: data ?? "notes-\(device)", isDirectory: true) }

    /// Where the device's session is kept once it signed in (`sign-in`).
    var sessionFile: URL { directory.appending(path: "session.json") }

    /// The device's session, kept in ``sessionFile``.
    var session: SessionCredentials {
        SessionCredentials(
            sessions: SessionClient(serverURL: URL(string: server)!), device: DeviceID(device),
            storage: .file(sessionFile))
    }

    /// A bearer token when one is given, the device's session otherwise.
    var credentials: Credentials { bearerToken.map { .token($0) } ?? session.credentials }

    /// Opens the device: its store, its engine over HTTP, its delegate.
    ///
    /// - Throws: ``NotesDeviceError`` when the device has neither a token nor a session.
    func open(automatic: Bool = false) throws -> NotesDevice {
        guard bearerToken != nil || FileManager.default.fileExists(atPath: sessionFile.path) else {
            throw NotesDeviceError(
                "\(device): sign the device in first (`notes-device sign-in --device \(device) --identity-token JWT`), or give a user's token with --token or in LOGSYNC_TOKEN (see `logsync-server user add`)"
            )
        }
        return try NotesDevice(
            server: URL(string: server)!, credentials: credentials, device: device, directory: directory,
            automatic: automatic, fetchPageSize: fetchPageSize)
    }
}

/// A device opened: the app's store, the HTTP client, and two engines with their delegates, as a
/// CloudKit app has them: one on the private database (the user's own Notes zone and its share,
/// device log DATA/sync) and one on the shared database (the Notes zones other users share with
/// this user, device log DATA/sync-shared).
struct NotesDevice {
    let app: NotesApp
    let sharedApp: NotesApp
    let client: HTTPSyncClient
    let engine: SyncEngine
    let sharedEngine: SyncEngine

    init(
        server: URL, credentials: Credentials, device: String, directory: URL, automatic: Bool, fetchPageSize: Int?
    ) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try NotesStore(file: directory.appending(path: "notes.json"))
        app = NotesApp(device: device, store: store, scope: .private)
        sharedApp = NotesApp(device: device, store: store, scope: .shared)
        client = HTTPSyncClient(.init(serverURL: server, credentials: credentials, device: DeviceID(device)))
        var configuration = SyncEngine.Configuration(
            database: client.database(.private), logDirectory: directory.appending(path: "sync"), delegate: app)
        configuration.automaticallySync = automatic
        configuration.fetchResultsLimit = fetchPageSize
        engine = try SyncEngine(configuration)
        var shared = SyncEngine.Configuration(
            database: client.database(.shared), logDirectory: directory.appending(path: "sync-shared"),
            delegate: sharedApp)
        shared.automaticallySync = automatic
        shared.fetchResultsLimit = fetchPageSize
        sharedEngine = try SyncEngine(shared)
        // The zone the notes live in, until the server has confirmed it (saving a zone that
        // exists changes nothing on the server).
        let zone = RecordZone(zoneID: NotesStore.zoneID)
        if store.read({ $0.zoneCreated }) != true, try !engine.state.pendingDatabaseChanges.contains(.saveZone(zone)) {
            try engine.state.add(pendingDatabaseChanges: [.saveZone(zone)])
        }
    }

    var store: NotesStore { app.store }

    /// The engine that syncs a zone: the private one for the user's own zone, the shared one
    /// for a zone another user shares.
    func engine(for zoneID: RecordZone.ID) -> SyncEngine { zoneID == NotesStore.zoneID ? engine : sharedEngine }

    /// The zone a command edits: the user's own, or the Notes zone `owner` shares with the user.
    /// - Throws: ``NotesDeviceError`` naming the owner when no such share was accepted.
    func zone(owner: String?) throws -> RecordZone.ID {
        guard let owner else { return NotesStore.zoneID }
        guard let zoneID = store.sharedZone(owner: owner) else {
            throw NotesDeviceError(
                "\(app.device) holds no Notes zone shared by \(owner); accept its share first (`notes-device accept URL`), or `sync`"
            )
        }
        return zoneID
    }

    /// Sends what is pending in the given engines (both by default), again while the delegates
    /// queue merges (at most three rounds each).
    /// - Throws: ``NotesDeviceError`` when the server cannot be reached; the edits stay pending.
    func send(_ engines: [SyncEngine]? = nil) async throws {
        for engine in engines ?? [engine, sharedEngine] {
            for _ in 0..<3 {
                do {
                    try await engine.sendChanges()
                } catch let error as SyncError where error.code == .partialFailure {
                    // Per-record failures: the delegate has handled (and reported) each one.
                } catch let error as SyncError {
                    throw NotesDeviceError(
                        "\(app.device): could not send: \(explain(error)). The edits stay pending; run `sync` again.")
                }
                if try engine.state.pendingRecordZoneChanges.isEmpty && engine.state.pendingDatabaseChanges.isEmpty {
                    break
                }
            }
        }
    }

    /// Fetches what changed on the server, in the given engines (both by default).
    func fetch(_ engines: [SyncEngine]? = nil) async throws {
        for engine in engines ?? [engine, sharedEngine] {
            do {
                try await engine.fetchChanges()
            } catch let error as SyncError {
                throw NotesDeviceError("\(app.device): could not fetch: \(explain(error))")
            }
        }
    }

    /// Fails the command when the server refused a change for good in this run (each refusal
    /// was printed when it came back).
    /// - Throws: ``NotesDeviceError`` naming each refused change and why.
    func checkRefusals() throws {
        let refused = app.refusals.withLock { $0 } + sharedApp.refusals.withLock { $0 }
        guard !refused.isEmpty else { return }
        throw NotesDeviceError("\(app.device): the server refused \(refused.joined(separator: "; "))")
    }

    /// Prints every note the device holds.
    func showAll() { show(app) }
}

/// What went wrong, for a person: the code's name and what to do.
func explain(_ error: SyncError) -> String {
    switch error.code {
    case .notAuthenticated:
        "the server did not accept the device's credentials (notAuthenticated): sign in again (`notes-device sign-in`), or check --token or LOGSYNC_TOKEN"
    case .networkFailure, .networkUnavailable:
        "the server did not answer (networkFailure): \(error.message)"
    default:
        "\(error.code.name): \(error.message)"
    }
}

/// Prints every note the store holds, own notes first, then those of each shared zone.
func show(_ app: NotesApp) {
    let lines = app.store.descriptions()
    if lines.isEmpty { app.say("no notes") }
    for line in lines { app.say(line) }
}

/// A permission given to a participant, as the command line spells it.
enum SharePermission: String, ExpressibleByArgument, CaseIterable {
    case readWrite = "read-write"
    case readOnly = "read-only"
}

extension NotesDeviceCommand {
    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a field of a note (creating it) and send it.",
            discussion: """
                Sends without fetching first, as an app that was offline would: if another device \
                saved the note meanwhile, the server refuses the save, the device merges its edit \
                into the server's copy and sends the merge. With --owner, the note is in the Notes \
                zone that user shares with this one; if they share it read-only, the server refuses \
                the edit (permissionFailure), the device goes back to the server's copy and the \
                command fails.
                """)

        @OptionGroup var options: DeviceOptions
        @Option(help: ownerHelp) var owner: String?
        @Argument(help: "The note's name, such as groceries.") var note: String
        @Argument(help: "The field, such as title or body.") var field: String
        @Argument(help: "The text.") var text: String

        func run() async throws {
            let device = try options.open()
            let id = NotesStore.recordID(note, in: try device.zone(owner: owner))
            try device.store.update(zone: id.zoneID) { notebook in
                notebook.notes[note, default: [:]][field] = text
                notebook.unsaved[note, default: []].insert(field)
            }
            try device.engine(for: id.zoneID).state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            device.app.say("sets \(field) of \(device.store.label(id)) to \"\(text)\"")
            try await device.send([device.engine(for: id.zoneID)])
            try device.checkRefusals()
        }
    }

    struct Attach: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Attach a file to a note (creating it) and send it.",
            discussion: """
                The file is copied into DATA/attachments (the note keeps its own copy, as an app \
                keeps what the user attached) and sent as an asset: the engine uploads its \
                content, once per content, then saves the note. Other devices fetch the note with \
                the attachment's content in their engine's asset cache and show where it is.
                """)

        @OptionGroup var options: DeviceOptions
        @Option(help: ownerHelp) var owner: String?
        @Argument(help: "The note's name, such as groceries.") var note: String
        @Argument(help: "The file to attach.", completion: .file()) var file: String

        func run() async throws {
            let device = try options.open()
            let id = NotesStore.recordID(note, in: try device.zone(owner: owner))
            let source = URL(fileURLWithPath: file)
            let attachments = options.directory.appending(path: "attachments")
            let copy = attachments.appending(path: UUID().uuidString + "-" + source.lastPathComponent)
            do {
                try FileManager.default.createDirectory(at: attachments, withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: source, to: copy)
            } catch {
                throw NotesDeviceError("cannot attach \(file): \(error.localizedDescription)")
            }
            try device.store.update(zone: id.zoneID) { notebook in
                notebook.notes[note, default: [:]][Record.attachmentKey] = copy.path
                notebook.unsaved[note, default: []].insert(Record.attachmentKey)
            }
            try device.engine(for: id.zoneID).state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            device.app.say("attaches \(source.lastPathComponent) to \(device.store.label(id))")
            try await device.send([device.engine(for: id.zoneID)])
            try device.checkRefusals()
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a note and send the deletion.")

        @OptionGroup var options: DeviceOptions
        @Option(help: ownerHelp) var owner: String?
        @Argument(help: "The note's name.") var note: String

        func run() async throws {
            let device = try options.open()
            let id = NotesStore.recordID(note, in: try device.zone(owner: owner))
            guard device.store.note(id) != nil else {
                throw NotesDeviceError("\(options.device) has no note \(device.store.label(id))")
            }
            try device.store.update(zone: id.zoneID) {
                $0.notes[note] = nil
                $0.unsaved[note] = nil
            }
            try device.engine(for: id.zoneID).state.add(pendingRecordZoneChanges: [.deleteRecord(id)])
            device.app.say("deletes \(device.store.label(id))")
            try await device.send([device.engine(for: id.zoneID)])
            try device.checkRefusals()
        }
    }

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch what other devices and users saved, send what is pending, and print every note.",
            discussion: """
                Syncs both engines: the private database's (the user's own notes and their share) \
                and the shared database's (the notes other users share with this user, which \
                appear once their share is accepted and go when it ends).
                """)

        @OptionGroup var options: DeviceOptions

        func run() async throws {
            let device = try options.open()
            try await device.fetch()
            try await device.send()
            device.showAll()
            try device.checkRefusals()
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
            try device.checkRefusals()
        }
    }

    struct Report: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Export this device's support bundle and upload it for the user; print its ID.",
            discussion: """
                What a Report-a-problem button does: the private database's engine writes its \
                device log as a support bundle (SyncEngine.exportSupportBundle, field values \
                redacted; --keep-in-clear keeps the named fields readable), and the bundle is \
                uploaded for the user signed in (HTTPSyncClient.uploadSupportBundle, resumed if \
                cut). Only the server's operator can read it back (`logsync-server bundles get ID \
                --output report.lsb`). Docs/Privacy.md says what a bundle holds.
                """)

        @OptionGroup var options: DeviceOptions

        @Option(
            name: .long, help: ArgumentHelp("A field kept in clear in the bundle (repeatable).", valueName: "field"))
        var keepInClear: [String] = []

        func run() async throws {
            let device = try options.open()
            let bundle = FileManager.default.temporaryDirectory.appending(
                path: "notes-report-\(UUID().uuidString).lsb")
            defer { try? FileManager.default.removeItem(at: bundle) }
            let summary = try device.engine.exportSupportBundle(
                to: bundle, options: .init(keepInClear: Swift.Set(keepInClear), appVersion: "notes-device"))
            let id = try await device.client.uploadSupportBundle(at: bundle)
            print("support bundle \(id) uploaded (\(summary.entryCount) entries, key ID \(summary.manifest.keyID))")
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the notes this device holds, without syncing.",
            discussion: "A note of a zone another user shares is named with its owner: groceries of alice@example.com.")

        @OptionGroup var options: DeviceOptions

        func run() async throws {
            let store = try NotesStore(file: options.directory.appending(path: "notes.json"))
            show(NotesApp(device: options.device, store: store))
        }
    }

    struct ShareNotes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "share",
            abstract: "Share this user's Notes zone with other users of the server, and print the share's URL.",
            discussion: """
                Saves a zone-wide share of the zone "Notes" (created on the first share) through \
                the private database's engine, like any record. Each user named with --with is \
                a participant, pending until they accept the share's URL with `notes-device \
                accept URL`; sharing again with a participant changes their permission. Users \
                are named by the e-mail address given to `logsync-server user add NAME --email \
                ADDRESS`, or by user record name (_user2). `share --url` prints the URL alone.
                """)

        @OptionGroup var options: DeviceOptions
        @Option(
            name: .customLong("with"),
            help: ArgumentHelp(
                "A user to share with: an e-mail address or a user record name. Repeat for several.", valueName: "user")
        )
        var users: [String] = []
        @Option(help: "What they may do with the notes: read-write or read-only.")
        var permission: SharePermission = .readOnly
        @Flag(
            name: .customLong("url"), help: "Print the share's URL alone, as this device last saw it, without syncing.")
        var urlOnly = false

        func validate() throws {
            if urlOnly && !users.isEmpty { throw ValidationError("--url prints the URL alone: give it without --with") }
            if !urlOnly && users.isEmpty {
                throw ValidationError("name a user to share with (--with ADDRESS), or print the URL (--url)")
            }
            for user in users where user.contains("@") {
                do { try UserIdentity.validate(emailAddress: user) } catch { throw ValidationError(error.message) }
            }
        }

        func run() async throws {
            if urlOnly {
                let store = try NotesStore(file: options.directory.appending(path: "notes.json"))
                guard let url = store.read({ $0.share?.url }) else {
                    throw NotesDeviceError(
                        "\(options.device) knows no share of Notes: share it first (`notes-device share --with ADDRESS`), or `sync`"
                    )
                }
                print(url)
                return
            }
            let device = try options.open()
            try device.store.update { contents in
                var share = contents.share ?? .init()
                for user in users { share.unsaved[user] = permission.rawValue }
                contents.share = share
            }
            try device.engine.state.add(pendingRecordZoneChanges: [.saveRecord(NotesStore.shareID)])
            device.app.say("shares Notes with \(users.joined(separator: ", ")) (\(permission.rawValue))")
            try await device.send([device.engine])
            try device.checkRefusals()
        }
    }

    struct Unshare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove users from the share of this user's Notes zone, or stop sharing it.",
            discussion: """
                With --remove, saves the share without those users: the zone leaves their shared \
                databases, and their devices drop its notes at their next sync. Without it, \
                deletes the share: the zone leaves every participant's shared database.
                """)

        @OptionGroup var options: DeviceOptions
        @Option(
            name: .customLong("remove"),
            help: ArgumentHelp(
                "A participant to remove: an e-mail address or a user record name. Repeat for several.",
                valueName: "user"))
        var users: [String] = []

        func run() async throws {
            let device = try options.open()
            guard let share = device.store.read({ $0.share }) else {
                throw NotesDeviceError(
                    "\(options.device) knows no share of Notes: nothing to remove (run `sync` if another device shared it)"
                )
            }
            if users.isEmpty {
                try device.store.update { $0.share = nil }
                try device.engine.state.add(pendingRecordZoneChanges: [.deleteRecord(NotesStore.shareID)])
                device.app.say("stops sharing Notes")
            } else {
                let known = Swift.Set(share.participants.keys.map { $0.lowercased() })
                for user in users where !known.contains(user.lowercased()) {
                    throw NotesDeviceError(
                        "\(user) is not a participant of the share of Notes as \(options.device) knows it (\(known.sorted().joined(separator: ", "))); run `sync` first if another device changed it"
                    )
                }
                try device.store.update { contents in
                    for user in users { contents.share?.unsaved[user] = "remove" }
                }
                try device.engine.state.add(pendingRecordZoneChanges: [.saveRecord(NotesStore.shareID)])
                device.app.say("removes \(users.joined(separator: ", ")) from the share of Notes")
            }
            try await device.send([device.engine])
            try device.checkRefusals()
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept a share of another user's Notes zone from its URL, and fetch its notes.",
            discussion: """
                Reads the share's metadata (fetchShareMetadata), accepts it (acceptShares), then \
                fetches through the shared database's engine: the owner's zone appears there, \
                named with the owner's user record name. Its notes are then edited with `set \
                --owner ADDRESS` and synced with `sync`.
                """)

        @OptionGroup var options: DeviceOptions
        @Argument(
            help: ArgumentHelp("The share's URL, as its owner's `notes-device share` printed it.", valueName: "url"))
        var url: String

        func validate() throws {
            guard let url = URL(string: url), url.scheme != nil else { throw ValidationError("not a URL: \(url)") }
        }

        func run() async throws {
            let device = try options.open()
            let shareURL = URL(string: url)!
            let database = device.client.database(.shared)
            func refused(_ error: SyncError) -> NotesDeviceError {
                NotesDeviceError("\(options.device): cannot accept \(url): \(explain(error)); nothing accepted")
            }
            let metadata: Share.Metadata
            do {
                metadata = try await database.fetchShareMetadata(url: shareURL)
            } catch let error as SyncError {
                throw refused(error)
            }
            let zoneID = metadata.share.zoneID
            guard NotesStore.isNotesZone(zoneID), metadata.share.isZoneWide else {
                throw NotesDeviceError(
                    "\(options.device): \(url) shares \(metadata.share), not a Notes zone; nothing accepted")
            }
            let result: Result<Share, SyncError>?
            do {
                let response = try await database.acceptShares([metadata])
                result = response.results[metadata.url ?? shareURL] ?? response.results.values.first
            } catch let error as SyncError {
                throw refused(error)
            }
            switch result {
            case .success?: break
            case .failure(let error)?: throw refused(error)
            case nil:
                throw NotesDeviceError("\(options.device): cannot accept \(url): the server did not answer for it")
            }
            let owner = metadata.ownerIdentity.emailAddress
            try device.store.update { contents in
                var zone = contents.shared?[zoneID.ownerName] ?? .init()
                zone.owner = owner ?? zone.owner
                zone.permission = metadata.participantPermission.spelled
                contents.shared = (contents.shared ?? [:]).merging([zoneID.ownerName: zone]) { $1 }
            }
            device.app.say(
                "accepted the share of Notes of \(owner ?? zoneID.ownerName): \(metadata.participantPermission.spelled)"
            )
            try await device.fetch([device.sharedEngine])
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
            await device.sharedEngine.cancelOperations()
            device.app.say("stopped")
            // Now, before the automatic engine starts anything else: everything it fetched is in
            // notes.json and its device log already.
            Foundation.exit(0)
        }
    }
}
