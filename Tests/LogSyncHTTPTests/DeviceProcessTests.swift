import ChildProcesses
import Foundation
import LogStore
import LogSync
import LogSyncHTTP
import LogSyncServer
import LogSyncWire
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The README's "Over the network" walkthrough with every party a process of its own: a
/// `logsync-server` and `notes-device`s (the phone, the laptop, a tablet that watches), each
/// device with its own data directory and device log. Reads like the timeline it runs.
@Suite("Two device processes and logsync-server", .timeLimit(.minutes(3)))
struct DeviceProcessTests {
    /// A `notes-device` of alice's, run as the README shows it.
    struct Device {
        let name: String
        let directory: URL
        /// The user's bearer token, or `nil` for a device that signed in (``signIn(_:server:)``).
        let token: String?

        func arguments(_ command: [String], server: URL) -> [String] {
            [command[0], "--server", server.absoluteString] + (token.map { ["--token", $0] } ?? [])
                + ["--device", name, "--data", directory.path] + command.dropFirst()
        }

        /// `notes-device sign-in` with `identityToken`: the device's session, kept in its folder.
        func signIn(_ identityToken: String, server: URL) async throws -> String {
            try await run("sign-in", "--identity-token", identityToken, server: server)
        }

        /// Runs `notes-device COMMAND …` to its end; `expecting` is its exit status.
        @discardableResult
        func run(_ command: String..., server: URL, expecting status: Int32 = 0) async throws -> String {
            let finished = try await ChildProcess.run(arguments(command, server: server), program: "notes-device")
            #expect(finished.status == status, "\(name) \(command.joined(separator: " ")): \(finished)")
            return finished.output + finished.errorOutput
        }

        func start(_ command: String..., server: URL) throws -> ChildProcess {
            try ChildProcess.start(arguments(command, server: server), program: "notes-device")
        }
    }

    /// `logsync-server user add alice` in `directory/server`: the data directory and the token.
    static func addAlice(in directory: URL) async throws -> (data: String, token: String) {
        let data = directory.appendingPathComponent("server").path
        let added = try await ChildProcess.run(["user", "add", "alice", "--data", data])
        return (data, added.output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// alice added to a server's data in a fresh temporary directory (see ``addAlice(in:)``),
    /// which is removed when `body` returns.
    static func withAlice(_ body: (_ directory: URL, _ data: String, _ token: String) async throws -> Void) async throws
    {
        try await withTemporaryDirectory { directory in
            let (data, token) = try await addAlice(in: directory)
            try await body(directory, data, token)
        }
    }

    /// alice's phone and laptop, each in a folder of its own in `directory`.
    static func phoneAndLaptop(in directory: URL, token: String?) -> (phone: Device, laptop: Device) {
        (
            Device(name: "phone", directory: directory.appendingPathComponent("phone"), token: token),
            Device(name: "laptop", directory: directory.appendingPathComponent("laptop"), token: token)
        )
    }

    /// `logsync-server --data data --port 0` started, and its URL once it listens.
    static func serve(_ data: String, identityConfig: URL? = nil) async throws -> (ChildProcess, URL) {
        let server = try ChildProcess.start(
            ["--data", data, "--port", "0"] + (identityConfig.map { ["--identity-config", $0.path] } ?? []))
        return (server, URL(string: "http://127.0.0.1:\(try await server.waitForPort())")!)
    }

    @Test(
        "F53 F83 F113 phone and laptop processes sync a note, conflict and converge; a watching tablet gets each change pushed"
    )
    func twoDeviceProcesses() async throws {
        try await withTemporaryDirectory { directory in
            // A local identity issuer, a server trusting it, and three devices of alice's signing
            // in with its tokens (Docs/Protocol.md, "Sessions").
            let issuer = try await LocalIssuer.make(in: directory)
            let data = directory.appendingPathComponent("server").path
            let (server, url) = try await Self.serve(data, identityConfig: issuer.configurationFile)
            let (phone, laptop) = Self.phoneAndLaptop(in: directory, token: nil)
            let tablet = Device(name: "tablet", directory: directory.appendingPathComponent("tablet"), token: nil)
            let identityToken = try await issuer.token(subject: "alice")
            for device in [phone, laptop, tablet] {
                let signedIn = try await device.signIn(identityToken, server: url)
                #expect(signedIn == "\(device.name): signed in as dev:alice\n", "\(signedIn)")
            }

            // The phone creates the note (and its zone); the laptop fetches it.
            let created = try await phone.run("set", "groceries", "title", "Groceries", server: url)
            #expect(created.contains(#"phone: saved groceries {title: "Groceries"}"#), "\(created)")
            let fetched = try await laptop.run("sync", server: url)
            #expect(fetched.contains(#"laptop: fetched groceries {title: "Groceries"}"#), "\(fetched)")

            // A tablet stays connected and watches.
            let watching = try tablet.start("watch", server: url)
            try await watching.waitForOutputLine(containing: "tablet: watching")

            // Both edit before seeing the other's edit: the phone's save lands first, the
            // laptop's is refused, merged into the server's copy and sent again (F53).
            try await phone.run("set", "groceries", "title", "Weekend groceries", server: url)
            let merged = try await laptop.run("set", "groceries", "body", "milk, eggs", server: url)
            #expect(merged.contains("laptop: conflict on groceries"), "\(merged)")
            #expect(
                merged.contains(#"laptop: saved groceries {body: "milk, eggs", title: "Weekend groceries"}"#),
                "\(merged)")

            // The tablet did nothing: the server's push hints brought both edits (F83, F113).
            try await watching.waitForOutputLine(
                containing: #"tablet: fetched groceries {body: "milk, eggs", title: "Weekend groceries"}"#)
            let phoneNow = try await phone.run("sync", server: url)
            #expect(
                phoneNow.contains(#"phone: groceries {body: "milk, eggs", title: "Weekend groceries"}"#), "\(phoneNow)")

            // The tablet stops on SIGTERM; the laptop holds the same note without a network.
            let watched = try await watching.terminate()
            #expect(watched.status == 0 && watched.output.hasSuffix("tablet: stopped\n"), "\(watched)")
            let shown = try await laptop.run("show", server: url)
            #expect(shown == "laptop: groceries {body: \"milk, eggs\", title: \"Weekend groceries\"}\n")

            // The laptop reports a problem: its device log, redacted, goes to the server for the
            // operator (Docs/Privacy.md, "Uploaded bundles").
            let reported = try await laptop.run("report", server: url)
            #expect(
                reported.range(
                    of: #"^support bundle [0-9a-f]{64} uploaded \(\d+ entries, key ID [0-9a-f]{16}\)\n$"#,
                    options: .regularExpression)
                    != nil, "\(reported)")

            // The phone is signed out from elsewhere: its next sync learns that nobody is signed
            // in (its engine's accountChange), and fails; the laptop goes on (F104).
            let revoked = try await ChildProcess.run([
                "sessions", "revoke", "--user", "dev:alice", "--device", "phone", "--data", data,
            ])
            #expect(revoked.status == 0, "\(revoked)")
            // The server notices another process's revocation within about 250 ms.
            let kept = try WireSessions.decode(
                WireSessions.Tokens.self,
                from: Array(try Data(contentsOf: phone.directory.appendingPathComponent("session.json"))))
            let probe = HTTPSyncClient(.init(serverURL: url, credentials: .token(kept.accessToken), device: "phone"))
            try await TokenRevocationTests.waitUntil(
                "the server refuses the phone's session", by: .now + TokenRevocationTests.patience
            ) {
                do {
                    _ = try await probe.database().currentUserRecordID()
                    return false
                } catch let error as SyncError where error.code == .notAuthenticated {
                    return true
                }
            }
            let refused = try await phone.run("sync", server: url, expecting: 1)
            #expect(
                refused.contains("phone: signed out: the server no longer accepts this device's session"), "\(refused)")
            #expect(
                !FileManager.default.fileExists(atPath: phone.directory.appendingPathComponent("session.json").path))
            try await laptop.run("set", "groceries", "title", "Groceries for Sunday", server: url)
            #expect(try await server.terminate().status == 0)
        }
    }

    // F134: an attachment travels as an asset: the phone attaches a file to a note; the laptop
    // fetches the note with the content in its engine's asset cache, byte for byte; the
    // device logs name the asset by digest and size, and hold none of its bytes.
    @Test("F134 a note's attachment goes from the phone to the laptop as an asset")
    func attachment() async throws {
        try await Self.withAlice { directory, data, token in
            let (server, url) = try await Self.serve(data)
            let (phone, laptop) = Self.phoneAndLaptop(in: directory, token: token)
            let photo = directory.appendingPathComponent("beach.jpg")
            let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
            try Data(content).write(to: photo)

            try await phone.run("set", "trip", "title", "Beach", server: url)
            let attached = try await phone.run("attach", "trip", photo.path, server: url)
            #expect(attached.contains("phone: attaches beach.jpg to trip"), "\(attached)")
            #expect(
                attached.contains(
                    "phone: saved trip {attachment: 300000 bytes at \(phone.directory.path)/attachments/"),
                "\(attached)")

            let fetched = try await laptop.run("sync", server: url)
            let line = try #require(
                fetched.split(separator: "\n").first { $0.contains("laptop: fetched trip") }, "\(fetched)")
            let path = try #require(
                line.range(of: "bytes at ").map { String(line[$0.upperBound...].prefix { $0 != "," && $0 != "}" }) })
            #expect(line.contains("{attachment: 300000 bytes at "), "\(line)")
            #expect(line.hasSuffix(#", title: "Beach"}"#), "\(line)")
            #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == content)
            #expect(path.hasPrefix(laptop.directory.path), "the laptop's own cache: \(path)")

            // The device logs know the attachment by digest and size, never by its bytes.
            for device in [phone, laptop] {
                let log = try Data(contentsOf: device.directory.appendingPathComponent("sync/private/data.mdb"))
                #expect(log.range(of: Data(content.prefix(64))) == nil, "\(device.name)'s device log holds no content")
            }
            #expect(try await server.terminate().status == 0)
        }
    }

    @Test("F89 an edit made while the server is down stays pending in the device log and is sent after the restart")
    func editWhileServerDown() async throws {
        try await Self.withAlice { directory, data, token in
            let (phone, laptop) = Self.phoneAndLaptop(in: directory, token: token)
            let (server, url) = try await Self.serve(data)
            try await phone.run("set", "todo", "title", "Call the plumber", server: url)
            #expect(try await server.terminate().status == 0)

            // Nobody answers: the edit is kept, and the device says so.
            let offline = try await phone.run("set", "todo", "body", "before Friday", server: url, expecting: 1)
            #expect(offline.contains("phone: could not send: the server did not answer (networkFailure)"), "\(offline)")
            #expect(offline.contains("The edits stay pending"), "\(offline)")
            let kept = try await phone.run("show", server: url)
            #expect(kept.contains(#"todo {body: "before Friday", title: "Call the plumber"}"#), "\(kept)")

            // The server comes back (on another port): the next sync sends the kept edit.
            let (again, newURL) = try await Self.serve(data)
            let sent = try await phone.run("sync", server: newURL)
            #expect(sent.contains(#"phone: saved todo {body: "before Friday", title: "Call the plumber"}"#), "\(sent)")
            let fetched = try await laptop.run("sync", server: newURL)
            #expect(fetched.contains(#"laptop: todo {body: "before Friday", title: "Call the plumber"}"#), "\(fetched)")
            #expect(try await again.terminate().status == 0)
        }
    }

    // F103: the device process is killed after its request reached the server and before the
    // answer came back. Relaunched, it sends the same batch under the ID its device log recorded,
    // and the server replays its first answer: no conflict with the device's own save.
    @Test(
        "F103 a device killed between its request and the answer sends it again after a relaunch: no false conflict, one save"
    )
    func killedBetweenRequestAndAnswer() async throws {
        try await Self.withAlice { directory, data, token in
            let (server, url) = try await Self.serve(data)
            let phone = Device(name: "phone", directory: directory.appendingPathComponent("phone"), token: token)
            try await phone.run("set", "groceries", "title", "Groceries", server: url)

            // Through a proxy that forwards the phone's modifyRecords, reads the server's whole
            // answer, and kills the phone instead of forwarding it.
            let device = Mutex<ChildProcess?>(nil)
            let withheld = OneAnswer<String>()
            let proxy = try InterceptingProxy(upstreamPort: url.port!, interceptedPath: "/modifyRecords") { answer in
                device.withLock { $0?.send(SIGKILL) }
                withheld.give(answer)
            }
            defer { proxy.close() }
            let proxied = URL(string: "http://127.0.0.1:\(proxy.port)")!
            let editing = try phone.start("set", "groceries", "body", "milk", server: proxied)
            device.withLock { $0 = editing }
            if proxy.hasIntercepted { editing.send(SIGKILL) }  // the answer came before the pid was known
            let answer = await withheld.value()
            #expect(answer.hasPrefix("HTTP/1.1 200"), "the server applied the save: \(answer)")
            let killed = await editing.finish()
            #expect(killed.status == 128 + SIGKILL, "\(killed)")
            #expect(!killed.output.contains("saved groceries {body"), "\(killed)")

            // Relaunched on the same data, straight to the server: it sends what is pending first.
            let sent = try await phone.run("send", server: url)
            #expect(sent.contains(#"phone: saved groceries {body: "milk", title: "Groceries"}"#), "\(sent)")
            #expect(!sent.contains("conflict"), "\(sent)")
            #expect(try await server.terminate().status == 0)

            // The device log: the relaunch sent its batch under the ID the killed launch recorded.
            let requestIDs = try Self.batchRequestIDs(in: phone.directory.appendingPathComponent("sync/private"))
            #expect(requestIDs.count == 3, "\(requestIDs)")
            #expect(
                requestIDs.count == 3 && requestIDs[2] == requestIDs[1] && requestIDs[1] != requestIDs[0],
                "\(requestIDs)")
            // The server: two saves of the note (the title, then the body), the second applied once.
            // (Its row's folder and name are fields too.)
            let saved = try Self.savedFields(of: "groceries", data: data)
            #expect(saved == [["folderID", "name", "title"], ["body", "folderID", "name", "title"]], "\(saved)")
        }
    }

    // F100, F144, F29: the laptop lists the Notes zone again (its tokens expired), one note a
    // page, and is killed between two pages once the listing has passed its start, so that its
    // page token is an ordinary one. Relaunched, it continues the listing where it stopped and
    // still reports the note deleted before the listing began: it ends with the server's notes.
    @Test(
        "F100 a device killed between two pages of a zone listing, past its start, ends after a relaunch with exactly the server's notes"
    )
    func killedBetweenTwoPagesOfAListing() async throws {
        try await Self.withAlice { directory, data, token in
            var (server, url) = try await Self.serve(data)
            let (phone, laptop) = Self.phoneAndLaptop(in: directory, token: token)
            for name in ["a", "b", "c", "d"] {
                try await phone.run("set", name, "title", name.uppercased(), server: url)
            }
            try await laptop.run("sync", server: url)

            // The phone deletes b; the server drops its tombstones, and with them every token the
            // laptop holds: the laptop's next sync lists the zone, which leaves b out.
            try await phone.run("delete", "b", server: url)
            #expect(try await server.terminate().status == 0)
            try Self.compactTombstones(of: "alice", data: data)
            (server, url) = try await Self.serve(data)

            // Through a proxy that holds the laptop after the listing's first page (the folder the
            // notes are in) while the phone deletes c and writes e and f, past the listing's start;
            // then lets the pages of a, d and c's deletion through (the listing is past its start),
            // and kills the laptop instead of forwarding the next one.
            let laptopProcess = Mutex<ChildProcess?>(nil)
            let firstPage = OneAnswer<Void>()
            let phoneDone = DispatchSemaphore(value: 0)
            let killed = OneAnswer<Void>()
            let pages = Mutex(0)
            let proxy = try InterceptingProxy(upstreamPort: url.port!) { path, head in
                guard path.hasSuffix("/private/fetchZoneChanges"), head.hasPrefix("HTTP/1.1 200") else {
                    return .forward
                }
                let page = pages.withLock {
                    $0 += 1
                    return $0
                }
                switch page {
                case 1:
                    firstPage.give(())
                    phoneDone.wait()
                    return .forward
                case 5:
                    laptopProcess.withLock { $0?.send(SIGKILL) }
                    killed.give(())
                    return .withhold
                default:
                    return .forward
                }
            }
            defer { proxy.close() }
            let proxied = URL(string: "http://127.0.0.1:\(proxy.port)")!
            let listing = try laptop.start("sync", "--fetch-page-size", "1", server: proxied)
            laptopProcess.withLock { $0 = listing }
            await firstPage.value()
            try await phone.run("delete", "c", server: url)
            try await phone.run("set", "e", "title", "E", server: url)
            try await phone.run("set", "f", "title", "F", server: url)
            phoneDone.signal()
            await killed.value()
            let stopped = await listing.finish()
            #expect(stopped.status == 128 + SIGKILL, "\(stopped)")

            // The laptop's log: four pages in, past the listing's start (an ordinary token), b
            // still known.
            let sync = laptop.directory.appendingPathComponent("sync/private")
            let me = try NotesDeviceStoreProcessTests.me(of: laptop)
            try Self.inspect(sync) { log throws in
                let zoneToken = try #require(try log.snapshotState().zoneChangeTokens.first { $0.zoneID == Self.notes })
                #expect(zoneToken.listingStart == .zero, "\(zoneToken)")
                #expect(try log.lastKnownServerRecord(for: Self.note("b", of: me)) != nil)
                #expect(try log.lastKnownServerRecord(for: Self.note("c", of: me)) == nil)
            }

            // Relaunched, straight to the server: the listing goes on from its page token, and
            // its end reports b deleted.
            try await laptop.run("sync", server: url)
            let shown = try await laptop.run("show", server: url)
            #expect(try await server.terminate().status == 0)
            let serverNotes = try await Self.liveNotes(of: "alice", data: data)
            #expect(serverNotes == ["a": "A", "d": "D", "e": "E", "f": "F"], "\(serverNotes)")
            let expected = serverNotes.sorted { $0.key < $1.key }.map { "laptop: \($0.key) {title: \"\($0.value)\"}\n" }
            #expect(shown == expected.joined(), "\(shown)")
            try Self.inspect(sync) { log throws in
                #expect(try log.lastKnownServerRecord(for: Self.note("b", of: me)) == nil)
                #expect(try log.log.verifyProjections() == nil)
            }
        }
    }

    /// The zone `notes-device` keeps its notes in, and a note of it: the row `name.owner` of its
    /// table `notes`, where `owner` is the user's record name.
    static let notes = RecordZone.ID(zoneName: "Notes")
    static func note(_ name: String, of owner: String) -> Record.ID {
        Record.ID(recordName: "\(name).\(owner):notes", zoneID: notes)
    }

    /// Runs `body` on the device log at `directory`, opened read-only.
    static func inspect(_ directory: URL, _ body: (DeviceLog) throws -> Void) throws {
        try body(try DeviceLog(directory: directory, options: LogEnvironment.Options(readOnly: true)))
    }

    /// Drops every tombstone of `user`'s private database, in the server data `data` (no server
    /// running on it): every change token issued until now expires.
    static func compactTombstones(of user: UserID, data: String) throws {
        let server = try SyncServer(.init(directory: URL(fileURLWithPath: data)))
        defer { server.shutdown() }
        try server.admin.compactTombstones(of: user, before: try server.admin.currentToken(of: user))
    }

    /// The title of each live note of `user`'s Notes zone, by the note's name, in the server data
    /// `data` (no server running on it).
    static func liveNotes(of user: UserID, data: String) async throws -> [String: String] {
        let server = try SyncServer(.init(directory: URL(fileURLWithPath: data)))
        defer { server.shutdown() }
        let database = server.database(for: user, device: "inspector")
        var titles: [String: String] = [:]
        var token: ZoneChangeToken?
        while true {
            let page = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: notes, since: token))
            for modification in page.modifications {
                guard case .string(let title)? = modification.record["title"],
                    case .string(let name)? = modification.record["name"]
                else { continue }
                titles[name] = title
            }
            token = page.changeToken
            if !page.moreComing { return titles }
        }
    }

    /// The request ID of each `batchPrepared` in the device log at `directory`, in order.
    static func batchRequestIDs(in directory: URL) throws -> [RequestID?] {
        let log = try DeviceLog(directory: directory, options: LogEnvironment.Options(readOnly: true))
        var ids: [RequestID?] = []
        try log.log.forEachEntry { entry in
            if case .batchPrepared(_, _, _, let requestID) = try DeviceEntry(entry, in: log.log) {
                ids.append(requestID)
            }
        }
        return ids
    }

    /// The field names of each save of the note named `name` in alice's private database, in order.
    static func savedFields(of name: String, data: String) throws -> [[String]] {
        let server = try SyncServer(.init(directory: URL(fileURLWithPath: data)))
        defer { server.shutdown() }
        var saves: [[String]] = []
        try server.admin.log(of: "alice").forEachEntry { entry in
            if case .recordSaved(let record) = try ServerEntry(entry), record["name"] == .string(name) {
                saves.append(record.allKeys().sorted())
            }
        }
        return saves
    }

    @Test("a device with a wrong token, or none, is told so and changes nothing")
    func badToken() async throws {
        try await withTemporaryDirectory { directory in
            let (data, _) = try await Self.addAlice(in: directory)
            let (server, url) = try await Self.serve(data)
            let stranger = Device(
                name: "phone", directory: directory.appendingPathComponent("phone"),
                token: "lsk_not-a-real-token-0123456789")
            let refused = try await stranger.run("set", "n", "title", "x", server: url, expecting: 1)
            #expect(
                refused.contains("the server did not accept the device's credentials (notAuthenticated)"), "\(refused)")
            let none = try await ChildProcess.run(
                ["sync", "--server", url.absoluteString, "--device", "phone"], program: "notes-device")
            #expect(none.status != 0 && none.errorOutput.contains("--token"), "\(none)")
            #expect(try await server.terminate().status == 0)
        }
    }
}
