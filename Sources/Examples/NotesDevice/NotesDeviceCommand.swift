import ArgumentParser
import Dispatch
import Foundation
import GRDB
import LogSync
import LogSyncHTTP
import LogSyncSQLite

/// One device of a notes app, as a process of its own, syncing through a `logsync-server`.
/// Run two of them with different `--device` names (and data directories) and they sync.
@main
struct NotesDeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notes-device",
        abstract: "One device of a notes app, syncing its notes through a logsync-server.",
        discussion: """
            Each note has a title, a body and an attachment, and lives in the folder Notes, in \
            the zone "Notes" of the user's private database. The device keeps its folders and \
            notes in a SQLite file, DATA/notes.sqlite, whose tables sync themselves \
            (LogSyncSQLite), through two engines, as a CloudKit app has them: one on the private \
            database, with its device log in DATA/sync/private, and one on the shared database, \
            with its device log in DATA/sync/shared (read them with `logtool dump \
            DATA/sync/private`).

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
            participant the URL it prints (the share of the folder Notes and its notes); they \
            accept it, then see and (if read-write) edit the owner's notes with --owner:

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

    /// Opens the device: its store, its engines over HTTP, what it prints. `signedIn: false`
    /// (`show`, `share --url`) opens it without credentials: it reads its SQLite file, and
    /// never reaches the server.
    ///
    /// - Throws: ``NotesDeviceError`` when the device has neither a token nor a session, or its
    ///   SQLite file cannot be opened.
    func open(automatic: Bool = false, signedIn: Bool = true) throws -> NotesDevice {
        guard !signedIn || bearerToken != nil || FileManager.default.fileExists(atPath: sessionFile.path) else {
            throw NotesDeviceError(
                "\(device): sign the device in first (`notes-device sign-in --device \(device) --identity-token JWT`), or give a user's token with --token or in LOGSYNC_TOKEN (see `logsync-server user add`)"
            )
        }
        return try NotesDevice(
            server: URL(string: server)!, credentials: credentials, device: device, directory: directory,
            automatic: automatic, fetchPageSize: fetchPageSize)
    }
}

/// A device opened: its notes store (a SQLite file whose tables sync themselves through two
/// engines, one on the private database, device log DATA/sync/private, and one on the shared
/// database, DATA/sync/shared), the HTTP client, and what it prints.
struct NotesDevice {
    let app: NotesApp
    let client: HTTPSyncClient

    init(
        server: URL, credentials: Credentials, device: String, directory: URL, automatic: Bool, fetchPageSize: Int?
    ) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        client = HTTPSyncClient(.init(serverURL: server, credentials: credentials, device: DeviceID(device)))
        let database: SyncedDatabase
        do {
            // Each command hands its writes to the engines itself, right before it sends; a
            // write whose process ended before that is handed off when the store opens again.
            database = try SyncedDatabase(
                path: directory.appending(path: "notes.sqlite").path, tables: NotesStore.tables,
                privateDatabase: client.database(.private), sharedDatabase: client.database(.shared),
                logDirectory: directory.appending(path: "sync"),
                options: .init(
                    configure: {
                        $0.automaticallySync = automatic
                        $0.fetchResultsLimit = fetchPageSize
                    }, handsOffOnCommit: false),
                migrate: NotesStore.migrate)
        } catch let error as SyncedDatabaseError {
            throw NotesDeviceError("\(device): \(error)")
        }
        app = NotesApp(device: device, store: NotesStore(database: database))
    }

    var store: NotesStore { app.store }
    var database: SyncedDatabase { store.database }
    var engine: SyncEngine { database.privateEngine }
    var engines: [SyncEngine] { [database.privateEngine] + (database.sharedEngine.map { [$0] } ?? []) }

    /// The user's record name: as the server told it once (kept in the store), or asked now.
    /// - Throws: ``NotesDeviceError`` when the server cannot tell it.
    func me() async throws -> String {
        if let me = store.me { return me }
        do {
            let me = try await client.database(.private).currentUserRecordID().recordName
            try store.remember(me: me)
            return me
        } catch let error as SyncError {
            throw NotesDeviceError("\(app.device): could not learn who the user is: \(explain(error))")
        }
    }

    /// The owner of the Notes zone a command edits: the user, or the user who shares with them
    /// the Notes zone of `owner` (a user record name).
    /// - Throws: ``NotesDeviceError`` naming the owner when no such share was accepted.
    func owner(_ owner: String?) async throws -> String {
        guard let owner else { return try await me() }
        _ = try? await me()
        guard let ownerName = try store.sharedOwner(owner) else {
            throw NotesDeviceError(
                "\(app.device) holds no Notes zone shared by \(owner); accept its share first (`notes-device accept URL`), or `sync`"
            )
        }
        return ownerName
    }

    /// Hands the store's writes to the engines and sends what is pending, again while the
    /// store queues merges (at most three rounds each).
    /// - Throws: ``NotesDeviceError`` when the server cannot be reached; the edits stay pending.
    func send() async throws {
        try database.handOff()
        for engine in engines {
            for _ in 0..<3 {
                do {
                    try await engine.sendChanges()
                } catch let error as SyncError where error.code == .partialFailure {
                    // Per-record failures: the store has handled each one, and the app said it.
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

    /// Fetches what changed on the server, on both engines.
    func fetch() async throws {
        _ = try? await me()  // to tell the user's notes from those shared with them
        for engine in engines {
            do {
                try await engine.fetchChanges()
            } catch let error as SyncError {
                throw NotesDeviceError("\(app.device): could not fetch: \(explain(error))")
            }
        }
    }

    /// Fails the command when the server refused a change for good in this run (each refusal
    /// was printed when it came back). The store's own list of refusals is cleared: the
    /// command reported them.
    /// - Throws: ``NotesDeviceError`` naming each refused change and why.
    func checkRefusals() throws {
        try database.clearRefusals()
        let refused = app.refusals.withLock { $0 }
        guard !refused.isEmpty else { return }
        throw NotesDeviceError("\(app.device): the server refused \(refused.joined(separator: "; "))")
    }

    /// Prints every note the device holds.
    func showAll() {
        let lines = store.descriptions()
        if lines.isEmpty { app.say("no notes") }
        for line in lines { app.say(line) }
    }
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
        @Argument(help: "The field: title or body.") var field: String
        @Argument(help: "The text.") var text: String

        func validate() throws {
            try validateNoteName(note)
            guard NotesStore.fields.contains(field) else {
                throw ValidationError(
                    "a note has no field \(field): set \(NotesStore.fields.joined(separator: " or ")) (attach a file with `attach`)"
                )
            }
        }

        func run() async throws {
            let device = try options.open()
            let owner = try await device.owner(owner)
            try device.store.set(field, of: note, owner: owner, to: text)
            device.app.say(
                "sets \(field) of \(device.store.label(NotesStore.noteID(note, owner: owner))) to \"\(text)\"")
            try await device.send()
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

        func validate() throws { try validateNoteName(note) }

        func run() async throws {
            let device = try options.open()
            let owner = try await device.owner(owner)
            let source = URL(fileURLWithPath: file)
            let attachments = options.directory.appending(path: "attachments")
            let copy = attachments.appending(path: UUID().uuidString + "-" + source.lastPathComponent)
            do {
                try FileManager.default.createDirectory(at: attachments, withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: source, to: copy)
            } catch {
                throw NotesDeviceError("cannot attach \(file): \(error.localizedDescription)")
            }
            try device.store.set(NotesStore.attachment, of: note, owner: owner, to: copy.path)
            device.app.say(
                "attaches \(source.lastPathComponent) to \(device.store.label(NotesStore.noteID(note, owner: owner)))")
            try await device.send()
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
            let key = NotesStore.noteID(note, owner: try await device.owner(owner))
            guard try device.store.delete(key) else {
                throw NotesDeviceError("\(options.device) has no note \(device.store.label(key))")
            }
            device.app.say("deletes \(device.store.label(key))")
            try await device.send()
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
            try options.open(signedIn: false).showAll()
        }
    }

    struct ShareNotes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "share",
            abstract: "Share this user's folder Notes with other users of the server, and print the share's URL.",
            discussion: """
                Saves a share rooted at the folder's row: the folder and every note in it, now \
                and later (SyncedDatabase.share, F123), through the private database's engine, \
                like any record. Each user named with --with is \
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
                let device = try options.open(signedIn: false)
                guard let url = try device.ownShare()?.url else {
                    throw NotesDeviceError(
                        "\(options.device) knows no share of Notes: share it first (`notes-device share --with ADDRESS`), or `sync`"
                    )
                }
                print(url)
                return
            }
            let device = try options.open()
            let folder = NotesStore.folderID(owner: try await device.me())
            try await device.store.writer.write {
                try $0.execute(sql: "INSERT OR IGNORE INTO folders(id) VALUES (?)", arguments: [folder])
            }
            try device.database.share(
                table: "folders", primaryKey: folder,
                with: users.map {
                    Share.Participant(
                        userIdentity: identity($0), permission: permission == .readWrite ? .readWrite : .readOnly)
                })
            device.app.say("shares Notes with \(users.joined(separator: ", ")) (\(permission.rawValue))")
            try await device.send()
            try device.checkRefusals()
        }
    }

    struct Unshare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove users from the share of this user's folder Notes, or stop sharing it.",
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
            guard let share = try device.ownShare() else {
                throw NotesDeviceError(
                    "\(options.device) knows no share of Notes: nothing to remove (run `sync` if another device shared it)"
                )
            }
            let folder = NotesStore.folderID(owner: try await device.me())
            if users.isEmpty {
                try device.database.stopSharing(table: "folders", primaryKey: folder)
                device.app.say("stops sharing Notes")
            } else {
                let known = Swift.Set(share.participants.filter { $0.role != .owner }.map { $0.label.lowercased() })
                for user in users where !known.contains(user.lowercased()) {
                    throw NotesDeviceError(
                        "\(user) is not a participant of the share of Notes as \(options.device) knows it (\(known.sorted().joined(separator: ", "))); run `sync` first if another device changed it"
                    )
                }
                try device.database.share(
                    table: "folders", primaryKey: folder, with: [], removing: users.map(identity))
                device.app.say("removes \(users.joined(separator: ", ")) from the share of Notes")
            }
            try await device.send()
            try device.checkRefusals()
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept a share of another user's Notes zone from its URL, and fetch its notes.",
            discussion: """
                Reads the share's metadata (fetchShareMetadata), accepts it and fetches through \
                the shared database's engine (SyncedDatabase.acceptShare): the owner's zone \
                appears there, named with the owner's user record name, and its folder and notes \
                in the device's tables. Its notes are then edited with `set --owner ADDRESS` and \
                synced with `sync`.
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
            guard zoneID.zoneName == "Notes", metadata.share.rootRecordID?.recordName.hasSuffix(":folders") == true
            else {
                throw NotesDeviceError(
                    "\(options.device): \(url) shares \(metadata.share), not a folder of Notes; nothing accepted")
            }
            _ = try? await device.me()
            let owner = metadata.ownerIdentity.emailAddress
            let known = try device.store.isShared(ownerName: zoneID.ownerName)
            try device.store.keepShared(
                ownerName: zoneID.ownerName, email: owner, permission: metadata.participantPermission.spelled)
            do {
                // Accepts, then fetches through the shared database's engine.
                try await device.database.acceptShare(url: metadata.url ?? shareURL)
            } catch let error as SyncError {
                if !known { try device.store.forgetShared(ownerName: zoneID.ownerName) }
                throw refused(error)
            }
            device.app.say(
                "accepted the share of Notes of \(owner ?? zoneID.ownerName): \(metadata.participantPermission.spelled)"
            )
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
            await device.database.sharedEngine?.cancelOperations()
            device.app.say("stopped")
            // Now, before the automatic engine starts anything else: everything it fetched is in
            // notes.sqlite and its device log already.
            Foundation.exit(0)
        }
    }
}

extension NotesDevice {
    /// The share of the user's folder Notes as the store keeps it (saved here or fetched); `nil`
    /// when the user does not share it.
    func ownShare() throws -> Share? {
        guard let me = store.me else { return nil }
        do {
            return try database.share(table: "folders", primaryKey: NotesStore.folderID(owner: me))
        } catch SyncedDatabaseError.noSuchRow {
            return nil
        }
    }
}

/// A participant as the command line names them: an e-mail address, or a user record name.
func identity(_ who: String) -> UserIdentity {
    who.contains("@") ? UserIdentity(emailAddress: who) : UserIdentity(userRecordName: who)
}

/// A note's name names its record: ASCII, without control characters.
func validateNoteName(_ name: String) throws {
    guard !name.isEmpty, name.allSatisfy({ $0.isASCII && !$0.isNewline }), name.utf8.count <= 200 else {
        throw ValidationError("a note's name is 1 to 200 ASCII characters, not \(name)")
    }
}
