import ChildProcesses
import Foundation
import Testing

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
            [command[0], "--server", server.absoluteString, "--token", token, "--device", name, "--data", directory.path]
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

    /// `logsync-server --data data --port 0` started, and its URL once it listens.
    static func serve(_ data: String) async throws -> (ChildProcess, URL) {
        let server = try ChildProcess.start(["--data", data, "--port", "0"])
        return (server, URL(string: "http://127.0.0.1:\(try await server.waitForPort())")!)
    }

    @Test("F53 F83 F113 phone and laptop processes sync a note, conflict and converge; a watching tablet gets each change pushed")
    func twoDeviceProcesses() async throws {
        try await withTemporaryDirectory { directory in
            let (data, token) = try await Self.addAlice(in: directory)
            let (server, url) = try await Self.serve(data)
            let phone = Device(name: "phone", directory: directory.appendingPathComponent("phone"), token: token)
            let laptop = Device(name: "laptop", directory: directory.appendingPathComponent("laptop"), token: token)
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
            #expect(merged.contains(#"laptop: saved groceries {body: "milk, eggs", title: "Weekend groceries"}"#), "\(merged)")

            // The tablet did nothing: the server's push hints brought both edits (F83, F113).
            try await watching.waitForOutputLine(
                containing: #"tablet: fetched groceries {body: "milk, eggs", title: "Weekend groceries"}"#)
            let phoneNow = try await phone.run("sync", server: url)
            #expect(phoneNow.contains(#"phone: groceries {body: "milk, eggs", title: "Weekend groceries"}"#), "\(phoneNow)")

            // The tablet stops on SIGTERM; the laptop holds the same note without a network.
            let watched = try await watching.terminate()
            #expect(watched.status == 0 && watched.output.hasSuffix("tablet: stopped\n"), "\(watched)")
            let shown = try await laptop.run("show", server: url)
            #expect(shown == "laptop: groceries {body: \"milk, eggs\", title: \"Weekend groceries\"}\n")
            #expect(try await server.terminate().status == 0)
        }
    }

    @Test("F89 an edit made while the server is down stays pending in the device log and is sent after the restart")
    func editWhileServerDown() async throws {
        try await withTemporaryDirectory { directory in
            let (data, token) = try await Self.addAlice(in: directory)
            let phone = Device(name: "phone", directory: directory.appendingPathComponent("phone"), token: token)
            let laptop = Device(name: "laptop", directory: directory.appendingPathComponent("laptop"), token: token)
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

    @Test("a device with a wrong token, or none, is told so and changes nothing")
    func badToken() async throws {
        try await withTemporaryDirectory { directory in
            let (data, _) = try await Self.addAlice(in: directory)
            let (server, url) = try await Self.serve(data)
            let stranger = Device(name: "phone", directory: directory.appendingPathComponent("phone"), token: "lsk_not-a-real-token-0123456789")
            let refused = try await stranger.run("set", "n", "title", "x", server: url, expecting: 1)
            #expect(refused.contains("the server did not accept the token (notAuthenticated)"), "\(refused)")
            let none = try await ChildProcess.run(["sync", "--server", url.absoluteString, "--device", "phone"], program: "notes-device")
            #expect(none.status != 0 && none.errorOutput.contains("--token"), "\(none)")
            #expect(try await server.terminate().status == 0)
        }
    }
}
