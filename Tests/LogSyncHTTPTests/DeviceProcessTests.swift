import ChildProcesses
import Foundation
import LogStore
import LogSync
import LogSyncServer
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
        let token: String

        func arguments(_ command: [String], server: URL) -> [String] {
            [
                command[0], "--server", server.absoluteString, "--token", token, "--device", name, "--data",
                directory.path,
            ]
                + command.dropFirst()
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
    static func phoneAndLaptop(in directory: URL, token: String) -> (phone: Device, laptop: Device) {
        (
            Device(name: "phone", directory: directory.appendingPathComponent("phone"), token: token),
            Device(name: "laptop", directory: directory.appendingPathComponent("laptop"), token: token)
        )
    }

    /// `logsync-server --data data --port 0` started, and its URL once it listens.
    static func serve(_ data: String) async throws -> (ChildProcess, URL) {
        let server = try ChildProcess.start(["--data", data, "--port", "0"])
        return (server, URL(string: "http://127.0.0.1:\(try await server.waitForPort())")!)
    }

    @Test(
        "F53 F83 F113 phone and laptop processes sync a note, conflict and converge; a watching tablet gets each change pushed"
    )
    func twoDeviceProcesses() async throws {
        try await Self.withAlice { directory, data, token in
            let (server, url) = try await Self.serve(data)
            let (phone, laptop) = Self.phoneAndLaptop(in: directory, token: token)
            let tablet = Device(name: "tablet", directory: directory.appendingPathComponent("tablet"), token: token)

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
                let log = try Data(contentsOf: device.directory.appendingPathComponent("sync/data.mdb"))
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
            let requestIDs = try Self.batchRequestIDs(in: phone.directory.appendingPathComponent("sync"))
            #expect(requestIDs.count == 3, "\(requestIDs)")
            #expect(
                requestIDs.count == 3 && requestIDs[2] == requestIDs[1] && requestIDs[1] != requestIDs[0],
                "\(requestIDs)")
            // The server: two saves of the note (the title, then the body), the second applied once.
            let saved = try Self.savedFields(of: "groceries", data: data)
            #expect(saved == [["title"], ["body", "title"]], "\(saved)")
        }
    }

    /// The request ID of each `batchPrepared` in the device log at `directory`, in order.
    static func batchRequestIDs(in directory: URL) throws -> [RequestID?] {
        let log = try DeviceLog(directory: directory, options: LogEnvironment.Options(readOnly: true))
        var ids: [RequestID?] = []
        try log.log.forEachEntry { entry in
            if case .batchPrepared(_, _, _, let requestID) = try DeviceEntry(entry) { ids.append(requestID) }
        }
        return ids
    }

    /// The field names of each save of the note `name` in alice's private database, in order.
    static func savedFields(of name: String, data: String) throws -> [[String]] {
        let server = try SyncServer(.init(directory: URL(fileURLWithPath: data)))
        defer { server.shutdown() }
        var saves: [[String]] = []
        try server.admin.log(of: "alice").forEachEntry { entry in
            if case .recordSaved(let record) = try ServerEntry(entry), record.recordID.recordName == name {
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
            #expect(refused.contains("the server did not accept the token (notAuthenticated)"), "\(refused)")
            let none = try await ChildProcess.run(
                ["sync", "--server", url.absoluteString, "--device", "phone"], program: "notes-device")
            #expect(none.status != 0 && none.errorOutput.contains("--token"), "\(none)")
            #expect(try await server.terminate().status == 0)
        }
    }
}
