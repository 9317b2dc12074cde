import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import SyncModel
import TemporaryDirectory
import Testing

/// Tokens at rest: the token file keeps SHA-256 digests (`sha256:<hex> <user>`), still reads the
/// older clear lines (`<token> <user>`) with a warning, and names the line of anything malformed.
@Suite("Token file", .timeLimit(.minutes(2)))
struct TokenStoreTests {
    /// `lsk_alice-token-0123456789abcdef` and its SHA-256 (`printf %s TOKEN | sha256sum`).
    static let aliceToken = LiveServer.aliceToken
    static let aliceDigest = "sha256:76dca26bedfbce4deed39b36968947f547979b51e7ab24108284fc8556a14c67"
    static let bobToken = LiveServer.bobToken
    static let bobDigest = "sha256:1370bbc256a66a9bb539b421c44aa9eebcadbb36faab97a874330861cbb6f884"

    @Test("user add prints the token once and the file keeps only its digest, which authenticates")
    func userAddKeepsOnlyTheDigest() async throws {
        try await withServerData { data in
            let token = try await addUser("alice@example.com", data: data)
            #expect(token.hasPrefix("lsk_") && token.count == 47)

            let file = data.appendingPathComponent("tokens")
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(!text.contains(token), "the token file holds the token in the clear:\n\(text)")
            #expect(!text.contains(String(token.dropFirst(4).prefix(16))), "part of the token is in the file:\n\(text)")
            let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
            #expect(lines.count == 1)
            #expect(lines.first?.wholeMatch(of: /sha256:[0-9a-f]{64} alice@example\.com/) != nil, "\(text)")

            let store = try TokenStore(file: file)
            #expect(store.user(for: token) == "alice@example.com")
            #expect(store.user(for: token + "x") == nil)
            #expect(store.user(for: String(token.dropLast())) == nil)
            #expect(store.clearTokenLines.isEmpty)

            // The server accepts it over HTTP too.
            let server = try ChildProcess.start(["--data", data.path, "--port", "0"])
            let port = try await server.waitForPort()
            let client = HTTPSyncClient(
                .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(token)))
            let user = try await client.database().currentUserRecordID()
            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
            #expect(!user.recordName.isEmpty)
            #expect(!stopped.errorOutput.contains("in the clear"), "\(stopped)")
        }
    }

    @Test("append writes the digest of the token it is given, and refuses a token already there")
    func appendWritesTheDigest() async throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("tokens")
            try TokenStore.append(token: Self.aliceToken, user: "alice", to: file)
            try TokenStore.append(token: Self.bobToken, user: "bob smith", to: file)
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(text.hasSuffix("\n\(Self.aliceDigest) alice\n\(Self.bobDigest) bob smith\n"), "\(text)")
            let permissions = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
            #expect(permissions == 0o600)

            #expect(throws: TokenStore.FileError.self) {
                try TokenStore.append(token: Self.aliceToken, user: "mallory", to: file)
            }
            let store = try TokenStore(file: file)
            #expect(store.count == 2)
            #expect(store.user(for: Self.aliceToken) == "alice")
            #expect(store.user(for: Self.bobToken) == "bob smith")
            // The digest is not a token: a stolen file gives no way in.
            #expect(store.user(for: Self.aliceDigest) == nil)
            #expect(store.user(for: String(Self.aliceDigest.dropFirst("sha256:".count))) == nil)
        }
    }

    @Test("a file of the older form, tokens in the clear, still works, and the server warns naming the lines")
    func clearTokensStillWork() async throws {
        try await withServerData { data in
            let file = try tokenFile(in: data)
            try Data(
                """
                # logsync-server tokens: "<token> <user ID>", one per line. Keep this file private.
                \(Self.aliceToken) alice
                \(Self.bobDigest) bob

                lsk_carol-token-0123456789abcdef carol

                """.utf8
            ).write(to: file)

            let store = try TokenStore(file: file)
            #expect(store.user(for: Self.aliceToken) == "alice")
            #expect(store.user(for: Self.bobToken) == "bob")
            #expect(store.user(for: "lsk_carol-token-0123456789abcdef") == "carol")
            #expect(store.clearTokenLines == [2, 5])

            let server = try ChildProcess.start(["--data", data.path, "--port", "0"])
            let port = try await server.waitForPort()
            let client = HTTPSyncClient(
                .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(Self.aliceToken)))
            _ = try await client.database().fetchAllZones()
            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
            let warnings = stopped.errorOutput.split(separator: "\n").filter { $0.contains("in the clear") }
            #expect(warnings.count == 1, "\(stopped)")
            #expect(warnings.first?.contains("lines=2,5") == true, "\(stopped)")
            #expect(warnings.first?.contains("warning") == true, "\(stopped)")
        }
    }

    @Test("user rehash replaces clear tokens by digests, keeps the rest, and the tokens still authenticate")
    func rehash() async throws {
        try await withServerData { data in
            let file = try tokenFile(in: data)
            let original = """
                # my users
                \(Self.aliceToken)   alice
                \(Self.bobDigest) bob

                """
            #expect(
                FileManager.default.createFile(
                    atPath: file.path, contents: Data(original.utf8), attributes: [.posixPermissions: 0o600]))

            let rehashed = try await ChildProcess.run(["user", "rehash", "--data", data.path])
            #expect(rehashed.status == 0, "\(rehashed)")
            #expect(rehashed.output == "1 token rehashed\n", "\(rehashed)")
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(text == "# my users\n\(Self.aliceDigest) alice\n\(Self.bobDigest) bob\n")
            let permissions = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
            #expect(permissions == 0o600)

            let store = try TokenStore(file: file)
            #expect(store.user(for: Self.aliceToken) == "alice")
            #expect(store.user(for: Self.bobToken) == "bob")
            #expect(store.clearTokenLines.isEmpty)

            let again = try await ChildProcess.run(["user", "rehash", "--data", data.path])
            #expect(again.output == "0 tokens rehashed\n", "\(again)")
            #expect(try String(contentsOf: file, encoding: .utf8) == text)
        }
    }

    /// A malformed token file and the line its error names.
    struct Malformed: Sendable, CustomTestStringConvertible {
        let name: String
        let lines: [String]
        let line: Int
        let problem: String
        var testDescription: String { name }
    }

    static let malformed: [Malformed] = [
        Malformed(
            name: "a digest with a character that is not hexadecimal",
            lines: ["# tokens", aliceDigest + " alice", "sha256:" + String(repeating: "g", count: 64) + " bob"],
            line: 3, problem: "64 hexadecimal digits"),
        Malformed(
            name: "a digest too short",
            lines: [String(aliceDigest.dropLast()) + " alice"], line: 1, problem: "64 hexadecimal digits"),
        Malformed(
            name: "a digest too long",
            lines: ["", aliceDigest + "0 alice"], line: 2, problem: "64 hexadecimal digits"),
        Malformed(name: "an empty digest", lines: ["sha256: alice"], line: 1, problem: "64 hexadecimal digits"),
        Malformed(
            name: "a digest given twice",
            lines: [aliceDigest + " alice", bobDigest + " bob", "# again", aliceDigest + " mallory"],
            line: 4, problem: "line 1"),
        Malformed(
            name: "a clear token and its own digest",
            lines: [
                aliceToken + " alice",
                aliceDigest.uppercased().replacingOccurrences(of: "SHA256:", with: "sha256:") + " alice",
            ],
            line: 2, problem: "line 1"),
        Malformed(name: "a digest without a user", lines: ["# tokens", bobDigest], line: 2, problem: "expected"),
        Malformed(name: "a clear token too short", lines: ["lsk_short bob"], line: 1, problem: "16 to 512"),
    ]

    @Test("a malformed line is a FileError naming it", arguments: malformed)
    func malformedLine(_ example: Malformed) async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("tokens")
            try Data((example.lines.joined(separator: "\n") + "\n").utf8).write(to: file)
            let error = try #require(throws: TokenStore.FileError.self) { _ = try TokenStore(file: file) }
            #expect(error.line == example.line, "\(error)")
            #expect(error.problem.contains(example.problem), "\(error)")
            #expect(error.description.contains("line \(example.line):"), "\(error)")
            // A server does not start on it either, and says which line.
            let served = try await ChildProcess.run(["--data", directory.path, "--port", "0"])
            #expect(served.status != 0)
            #expect(served.errorOutput.contains("line \(example.line):"), "\(served)")
        }
    }

    @Test("a store in memory keeps digests too: add, look up, refuse a token twice")
    func inMemory() throws {
        let store = TokenStore()
        try store.add(token: Self.aliceToken, for: "alice")
        #expect(store.user(for: Self.aliceToken) == "alice")
        #expect(store.user(for: Self.bobToken) == nil)
        #expect(store.count == 1)
        #expect(store.clearTokenLines.isEmpty)
        #expect(throws: TokenStore.FileError.self) { try store.add(token: Self.aliceToken, for: "mallory") }
        #expect(throws: TokenStore.FileError.self) { try store.add(token: "short", for: "bob") }
        #expect(store.user(for: Self.aliceToken) == "alice")
    }

    @Test(
        "a store in memory refuses a user ID every request would refuse, naming the rule",
        arguments: ["", " bob", String(repeating: "b", count: 512), "b\u{0}b"])
    func inMemoryRefusesInvalidUserIDs(user: String) throws {
        let store = TokenStore()
        let error = try #require(throws: TokenStore.FileError.self) {
            try store.add(token: Self.bobToken, for: UserID(rawValue: user))
        }
        #expect(error.problem.hasPrefix("invalid user ID: it "), "\(error)")
        #expect(store.user(for: Self.bobToken) == nil)
        #expect(store.count == 0)
    }
}
