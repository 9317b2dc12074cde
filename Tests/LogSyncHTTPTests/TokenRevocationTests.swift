import AsyncHTTPClient
import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import NIOCore
import SyncModel
import TemporaryDirectory
import Testing

/// Revocation on the LMDB store, against `logsync-server` processes: a token taken away while the
/// server runs is refused once the server next checks its file (every 250 ms), with no restart and
/// no unknown token presented first, and its push channel closes; a token file that goes missing or
/// turns to garbage never takes the users away.
@Suite("Token revocation", .timeLimit(.minutes(2)))
struct TokenRevocationTests {
    /// `logsync-server --data DATA --port 0`, once it listens, and its port.
    static func serve(_ data: URL) async throws -> (process: ChildProcess, port: Int) {
        let server = try ChildProcess.start(["--data", data.path, "--port", "0"])
        return (server, try await server.waitForPort())
    }

    /// The status and body of `POST /v1/databases/private/fetchZones` with `token`, sent as is.
    static func fetchZones(port: Int, token: String) async throws -> (status: Int, body: [UInt8]) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/databases/private/fetchZones")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: "{\"allZones\": true}"))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        var body = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), body.readBytes(length: body.readableBytes) ?? [])
    }

    /// How long a condition may take on a machine busy with the rest of the suite. The server
    /// checks its token file every 250 ms; how soon a revocation takes effect on a quiet machine
    /// is measured in Docs/Performance.md, not here.
    static let patience: Duration = .seconds(60)

    /// Checks `condition` every 10 ms until it holds; fails naming `what` once `deadline` has
    /// passed (a second after the revocation, say).
    static func waitUntil(
        _ what: String, by deadline: ContinuousClock.Instant, _ condition: () async throws -> Bool
    ) async throws {
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("not by the deadline: \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// A push channel opened by hand on a raw connection, to see the server close it.
    static func openPushChannel(port: Int, token: String, device: String) async throws -> RawConnection {
        let channel = try await RawConnection.open(port: port)
        try await channel.send(
            IdentifierHTTPTests.upgrade(
                "/v1/databases/private/push", ["Authorization: Bearer \(token)", "LogSync-Device: \(device)"]))
        // The answer's head, then the `subscribed` frame.
        try await channel.waitUntil("the push channel is subscribed") { connection in
            let text = connection.text
            guard text.hasPrefix("HTTP/1.1 101"), let end = text.range(of: "\r\n\r\n") else { return false }
            return !text[end.upperBound...].isEmpty
        }
        return channel
    }

    /// Whether `channel` received a WebSocket close frame with code 1008 (policy violation).
    static func closedAsRevoked(_ channel: RawConnection) -> Bool {
        let bytes = channel.bytes
        return bytes.indices.dropLast(3).contains { at in
            bytes[at] == 0x88 && bytes[at + 2] == 0x03 && bytes[at + 3] == 0xF0
        }
    }

    @Test(
        "user revoke while the server runs: the user's requests get 401 without a restart or an unknown token first, the same answer as an unknown token's, the push channel closes with 1008, other users go on"
    )
    func revokeWhileRunning() async throws {
        try await withServerData { data in
            let alice = try await addUser("alice", data: data)
            let bob = try await addUser("bob", data: data)
            let (server, port) = try await Self.serve(data)
            #expect(try await Self.fetchZones(port: port, token: alice).status == 200)
            let channel = try await Self.openPushChannel(port: port, token: alice, device: "watch")
            defer { channel.close() }

            let revoked = try await ChildProcess.run(["user", "revoke", "alice", "--data", data.path])
            #expect(revoked.status == 0, "\(revoked)")
            #expect(revoked.output == "1 token revoked\n", "\(revoked)")
            let deadline = ContinuousClock.now + Self.patience
            // No request with an unknown token comes first: the server notices the file by itself.
            try await Self.waitUntil("the push channel of the revoked token is closed", by: deadline) {
                Self.closedAsRevoked(channel)
            }
            try await Self.waitUntil("a request with the revoked token gets 401", by: deadline) {
                try await Self.fetchZones(port: port, token: alice).status == 401
            }
            #expect(channel.text.contains("the token was revoked"))

            // An attacker holding the revoked token learns nothing more than with a made-up one.
            let withRevoked = try await Self.fetchZones(port: port, token: alice)
            let withUnknown = try await Self.fetchZones(
                port: port, token: "lsk_never-given-0123456789abcdefghijklmnopq")
            #expect(withRevoked.status == 401 && withUnknown.status == 401)
            #expect(withRevoked.body == withUnknown.body, "\(String(decoding: withRevoked.body, as: UTF8.self))")
            #expect(try await Self.fetchZones(port: port, token: bob).status == 200)

            // Revoking again finds nothing, and says so.
            let again = try await ChildProcess.run(["user", "revoke", "alice", "--data", data.path])
            #expect(again.status == 1, "\(again)")
            #expect(again.errorOutput.contains("user \"alice\" has no token"), "\(again)")
            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
        }
    }

    @Test("user revoke --token takes one token away, given as the token or as its digest, and keeps the user's others")
    func revokeOneToken() async throws {
        try await withServerData { data in
            let phone = try await addUser("alice", data: data)
            let laptop = try await addUser("alice", data: data)
            let watch = try await addUser("alice", data: data)
            let (server, port) = try await Self.serve(data)

            let byToken = try await ChildProcess.run(["user", "revoke", "--token", phone, "--data", data.path])
            #expect(byToken.output == "1 token revoked\n", "\(byToken)")
            let digest = try #require(TokenStore.digest(ofTokenOrDigest: watch))
            let byDigest = try await ChildProcess.run([
                "user", "revoke", "--token", digest.uppercased().replacingOccurrences(of: "SHA256:", with: "sha256:"),
                "--data", data.path,
            ])
            #expect(byDigest.output == "1 token revoked\n", "\(byDigest)")
            try await Self.waitUntil("both revoked tokens get 401", by: .now + Self.patience) {
                let phoneStatus = try await Self.fetchZones(port: port, token: phone).status
                let watchStatus = try await Self.fetchZones(port: port, token: watch).status
                return phoneStatus == 401 && watchStatus == 401
            }
            #expect(try await Self.fetchZones(port: port, token: laptop).status == 200)

            let bad = try await ChildProcess.run(["user", "revoke", "--token", "sha256:xyz", "--data", data.path])
            #expect(bad.status != 0 && bad.errorOutput.contains("--token must be"), "\(bad)")
            let both = try await ChildProcess.run(["user", "revoke", "alice", "--token", laptop, "--data", data.path])
            #expect(both.status != 0 && both.errorOutput.contains("not both"), "\(both)")
            _ = try await server.terminate()
        }
    }

    @Test(
        "the token file deleted, then replaced by garbage, while the server runs: the users it had keep working, and each is an error in the log naming the file"
    )
    func fileLostOrBroken() async throws {
        try await withServerData { data in
            let alice = try await addUser("alice", data: data)
            let file = data.appendingPathComponent("tokens")
            let (server, port) = try await Self.serve(data)
            #expect(try await Self.fetchZones(port: port, token: alice).status == 200)

            try FileManager.default.removeItem(at: file)
            let missing = try await server.waitForErrorLine(
                containing: "the token file cannot be read", "it is missing")
            #expect(missing.contains("error") && missing.contains(file.path), "\(missing)")
            #expect(try await Self.fetchZones(port: port, token: alice).status == 200)
            // An unknown token does not make it read the (missing) file into an empty set either.
            #expect(
                try await Self.fetchZones(port: port, token: "lsk_never-given-0123456789abcdefghijklmnopq").status
                    == 401)
            #expect(try await Self.fetchZones(port: port, token: alice).status == 200)

            try Data("# tokens\nthis is not a token line\n\u{1}\u{2}garbage\n".utf8).write(to: file)
            let garbage = try await server.waitForErrorLine(containing: "the token file cannot be read", "line 2")
            #expect(garbage.contains(file.path), "\(garbage)")
            #expect(try await Self.fetchZones(port: port, token: alice).status == 200)

            // A file that reads well decides again: without alice's line, alice is out.
            try Data("# nobody\n".utf8).write(to: file)
            try await Self.waitUntil("alice gets 401 once the good file without her is read", by: .now + Self.patience)
            {
                try await Self.fetchZones(port: port, token: alice).status == 401
            }
            _ = try await server.terminate()
        }
    }

    @Test(
        "a token file with CRLF line ends, a byte order mark and a # header authenticates its users; user add and user revoke keep its line ends"
    )
    func crlfFile() async throws {
        try await withServerData { data in
            let file = try tokenFile(in: data)
            let text =
                "\u{FEFF}# logsync-server tokens, edited on Windows\r\n"
                + "\(TokenStoreTests.aliceDigest) alice\r\n\r\n"
                + "\(LiveServer.bobToken) bob\r\n"
            try Data(text.utf8).write(to: file)
            let store = try TokenStore(file: file)
            #expect(store.user(for: LiveServer.aliceToken) == "alice")
            #expect(store.user(for: LiveServer.bobToken) == "bob")
            #expect(store.clearTokenLines == [4])

            let carol = try await addUser("carol", data: data)
            let (server, port) = try await Self.serve(data)
            for token in [LiveServer.aliceToken, LiveServer.bobToken, carol] {
                #expect(try await Self.fetchZones(port: port, token: token).status == 200)
            }
            let revoked = try await ChildProcess.run(["user", "revoke", "bob", "--data", data.path])
            #expect(revoked.output == "1 token revoked\n", "\(revoked)")
            try await Self.waitUntil("bob gets 401", by: .now + Self.patience) {
                try await Self.fetchZones(port: port, token: LiveServer.bobToken).status == 401
            }
            #expect(try await Self.fetchZones(port: port, token: carol).status == 200)
            _ = try await server.terminate()

            // Read as bytes: Foundation's decoding drops a byte order mark.
            let after = String(decoding: try Data(contentsOf: file), as: UTF8.self)
            let carolDigest = try #require(TokenStore.digest(ofTokenOrDigest: carol))
            #expect(
                after
                    == "\u{FEFF}# logsync-server tokens, edited on Windows\r\n\(TokenStoreTests.aliceDigest) alice\r\n\r\n\(carolDigest) carol\r\n"
            )
        }
    }

    @Test("a store in memory: revoking a token or a user ends the push channels opened with them, and only those")
    func inMemoryRevocationEndsChannels() async throws {
        let store = TokenStore()
        try store.add(token: LiveServer.aliceToken, for: "alice")
        try store.add(token: LiveServer.bobToken, for: "bob")
        let aliceChannel = store.untilRevoked(token: LiveServer.aliceToken, user: "alice")
        let bobChannel = store.untilRevoked(token: LiveServer.bobToken, user: "bob")
        let unknown = store.untilRevoked(token: "lsk_never-given-0123456789abcdef", user: "alice")
        var iterator = unknown.makeAsyncIterator()
        #expect(await iterator.next() == nil, "a channel of a token the store does not have ends at once")

        let aliceDigest = try #require(TokenStore.digest(ofTokenOrDigest: LiveServer.aliceToken))
        #expect(try store.revoke(.credential(aliceDigest)) == 1)
        var aliceIterator = aliceChannel.makeAsyncIterator()
        #expect(await aliceIterator.next() == nil)
        #expect(store.user(for: LiveServer.aliceToken) == nil)
        #expect(store.user(for: LiveServer.bobToken) == "bob")

        #expect(try store.revoke(.user("bob")) == 1)
        var bobIterator = bobChannel.makeAsyncIterator()
        #expect(await bobIterator.next() == nil)
        #expect(store.count == 0)
    }
}
