import AsyncHTTPClient
import ChildProcesses
import Foundation
import JWTKit
import LogSyncHTTP
import LogSyncIdentity
import LogSyncWire
import NIOCore
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSyncServer

/// Sign-in with real JWTs against a `logsync-server serve --identity-config` process on an LMDB
/// data directory: what a device sees over HTTP, what the operator sees in the server's log, and
/// what the store holds afterwards.
@Suite("Sign-in with identity tokens against a logsync-server process", .timeLimit(.minutes(3)))
struct SignInProcessTests {
    /// The issuer whose key set is a file that is not JSON: its tokens are refused whatever
    /// they say, since no key of it ever loads.
    static let brokenIssuer = "https://broken.example"

    /// The bad tokens sent over HTTP: the verifier's own table (``BadToken/all(margin:)``), the
    /// two time-sensitive ones with an hour's margin instead of a second's (the server's clock is
    /// the wall clock, read a moment after the test signed), and a token of the issuer whose keys
    /// fail to load.
    static let badTokens: [BadToken] =
        BadToken.all(margin: 3600) + [
            BadToken(name: "JWKS that fails to load", reason: "JWKS failed to load from ") { keys, now in
                try await keys.p256.sign(goodClaims(now: now, issuer: brokenIssuer))
            }
        ]

    /// `POST /v1/sessions` with `token` as the bearer, sent as is; the status and the body.
    static func signIn(port: Int, token: String, device: String) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(WireSessions.signInPath)")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: WireSessions.encode(WireSessions.SignIn(device: device))))
        // A guard against a hung server, not a measure.
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(buffer: body))
    }

    @Test(
        "over HTTP every bad identity token gets 401 saying only 'invalid token', its reason in the server's log, nothing stored; good RS256, ES256 and EdDSA tokens sign in and sync"
    )
    func badTokensRefusedGoodTokensSync() async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("data")
            try DevelopmentSigningKey.jwks(keys.acme).write(to: directory.appendingPathComponent("acme.json"))
            let broken = directory.appendingPathComponent("broken.json")
            try Data(#"{"keys": [{"kty": "#.utf8).write(to: broken)
            let configuration = IdentityConfiguration(issuers: [
                .init(name: "acme", issuer: Acme.iss, audiences: [Acme.audience], jwksFile: "acme.json"),
                .init(name: "broken", issuer: Self.brokenIssuer, audiences: [Acme.audience], jwksFile: "broken.json"),
            ])
            let configurationFile = directory.appendingPathComponent("identity.json")
            try JSONEncoder().encode(configuration).write(to: configurationFile)

            let server = try ChildProcess.start(
                ["--data", data.path, "--port", "0", "--identity-config", configurationFile.path])
            let port = try await server.waitForPort()

            // Each bad token in turn, from a device never signed in.
            for bad in Self.badTokens {
                let token = try await bad.make(keys, Date())
                let answer = try await Self.signIn(port: port, token: token, device: "intruder")
                #expect(answer.status == 401, "\(bad.name): \(answer)")
                #expect(answer.body.contains("invalid token"), "\(bad.name): \(answer.body)")
                for telling in [bad.reason, "kid", "signature", "expired", "audience", "issuer", "JWKS", "alg"] {
                    #expect(!answer.body.contains(telling), "\(bad.name): the answer tells \(telling): \(answer.body)")
                }
            }

            // A good token of each algorithm, each for a user of its own: signed in, then syncing
            // as the session.
            let url = URL(string: "http://127.0.0.1:\(port)")!
            let users = ["rs": keys.rsa, "es": keys.p256, "ed": keys.ed25519]
            for (subject, key) in users.sorted(by: { $0.key < $1.key }) {
                let token = try await key.sign(goodClaims(now: Date(), subject: subject))
                let tokens = try await SessionClient(serverURL: url).signIn(identityToken: token, device: "phone")
                #expect(tokens.user == "acme:\(subject)" && tokens.device == "phone")
                let client = HTTPSyncClient(
                    .init(serverURL: url, credentials: .token(tokens.accessToken), device: "phone"))
                defer { client.close() }
                let database = client.database()
                _ = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
                let zones = try await database.fetchAllZones()
                #expect(zones.map(\.zoneID.zoneName).contains("Notes"), "\(subject): \(zones)")
            }

            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")

            // The server's log names each refusal's reason, in the order the tokens were sent.
            let refusals = stopped.errorOutput.split(separator: "\n").filter { $0.contains("sign-in refused") }
            #expect(refusals.count == Self.badTokens.count, "\(stopped.errorOutput)")
            for (bad, line) in zip(Self.badTokens, refusals) {
                #expect(line.contains(bad.reason), "\(bad.name): \(line)")
            }
            #expect(
                refusals.last?.contains("JWKS failed to load from \(broken.path)") == true,
                "\(refusals.last ?? "no refusal logged")")

            // The store holds the three good users and their sessions, and nothing of the bad
            // tokens: no user, no session of the intruder device.
            let store = try SyncServer(.init(directory: data))
            defer { store.shutdown() }
            #expect(Set(try store.users.allUsers()) == ["acme:ed", "acme:es", "acme:rs"])
            let sessions = try SessionStore(server: store)
            for user in ["acme:alice", "acme:mallory", "broken:alice"] {
                #expect(try sessions.sessions(of: UserID(user)).isEmpty, "\(user)")
            }
            for subject in users.keys {
                #expect(try sessions.sessions(of: UserID("acme:\(subject)")).map(\.device) == ["phone"])
            }
        }
    }
}
