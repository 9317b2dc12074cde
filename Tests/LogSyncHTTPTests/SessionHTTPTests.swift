import AsyncHTTPClient
import ChildProcesses
import Foundation
import LogStore
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSyncServer

/// A test double of an identity provider's verifier: it accepts the tokens of its table, and
/// refuses every other with a reason for the server's log. The real verifier checks JWTs.
struct TableVerifier: IdentityVerifier {
    let identities: [String: VerifiedIdentity]

    func verify(_ token: String) async throws(IdentityError) -> VerifiedIdentity {
        guard let identity = identities[token] else { throw IdentityError("not in the test's table") }
        return identity
    }
}

/// Devices as sessions over HTTP: sign in with an identity token, sync with the access token,
/// refresh, a reused refresh token ending the session, and a device signed out by another whose
/// push channel ends at once while the other device keeps syncing.
@Suite("Sessions over HTTP", .timeLimit(.minutes(2)))
struct SessionHTTPTests {
    static let aliceIdentity = "identity-token-of-alice"
    static let bobIdentity = "identity-token-of-bob"
    static let alice: UserID = "test:alice"
    static let allZones = Array("{\"allZones\": true}".utf8)

    /// A wall clock the test moves by hand.
    final class MovableDate: Sendable {
        private let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { date.withLock { $0 } }
        func advance(by interval: TimeInterval) { date.withLock { $0 += interval } }
    }

    /// A server with sessions on a loopback port, and `verifier` (the table's by default).
    struct Served: Sendable {
        let server: SyncServer
        let sessions: SessionStore
        let running: RunningHTTPSyncServer
        let clock: MovableDate
        var url: URL { URL(string: "http://127.0.0.1:\(running.port)")! }
        var client: SessionClient { SessionClient(serverURL: url) }

        func syncClient(_ token: String, device: DeviceID) -> HTTPSyncClient {
            HTTPSyncClient(
                .init(
                    serverURL: url, credentials: .token(token), device: device,
                    reconnect: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200))))
        }

        /// The status and JSON body of a request sent as given.
        func request(
            _ path: String, method: HTTPMethod = .POST, token: String? = nil, device: String? = nil,
            body: [UInt8]? = nil
        ) async throws -> (status: Int, body: String) {
            var request = HTTPClientRequest(url: url.absoluteString + path)
            request.method = method
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            if let device { request.headers.add(name: WireProtocol.deviceHeader, value: device) }
            request.headers.add(name: "Accept", value: "application/json")
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
            var buffer = try await response.body.collect(upTo: 1 << 20)
            return (Int(response.status.code), String(decoding: buffer.readableBytesView, as: UTF8.self))
        }

        /// The end of the sessions' log and the registered users: equal before and after means
        /// a request wrote nothing.
        func written() throws -> (LogOffset, [UserID]) {
            (try sessions.log.lastOffset, try server.users.allUsers())
        }
    }

    func withSessionServer(
        verifier: (any IdentityVerifier)? = TableVerifier(identities: [
            aliceIdentity: VerifiedIdentity(issuer: "test", subject: "alice", expires: nil),
            bobIdentity: VerifiedIdentity(issuer: "test", subject: "bob", expires: nil),
        ]),
        _ body: (Served) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            let clock = MovableDate()
            let sessions = try SessionStore(
                server: server, lifetimes: .init(access: .seconds(900), refresh: .seconds(86_400)),
                now: { clock.now })
            let tokens = TokenStore(sessions: sessions)
            let running = try await RunningHTTPSyncServer.start(
                HTTPSyncServer(
                    server: server, tokens: tokens, configuration: .init(port: 0), identityVerifier: verifier))
            let served = Served(server: server, sessions: sessions, running: running, clock: clock)
            do {
                try await body(served)
            } catch {
                try? await running.stop()
                server.shutdown()
                throw error
            }
            try await running.stop()
            server.shutdown()
        }
    }

    @Test(
        "a device signs in, syncs with its access token, refreshes; the old access token is refused, and a reused refresh token ends the session"
    )
    func signInSyncRefreshReuse() async throws {
        try await withSessionServer { served in
            let tokens = try await served.client.signIn(
                identityToken: Self.aliceIdentity, device: "phone", name: "Alice's phone")
            #expect(tokens.user == "test:alice" && tokens.device == "phone")
            #expect(tokens.accessExpires == served.clock.now + 900)
            let phone = served.syncClient(tokens.accessToken, device: "phone")
            defer { phone.close() }
            _ = try await phone.database().modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])

            let devices = try await served.client.devices(accessToken: tokens.accessToken)
            #expect(devices.map(\.device) == ["phone"] && devices.map(\.name) == ["Alice's phone"])
            #expect(devices.map(\.current) == [true])

            let next = try await served.client.refresh(tokens.refreshToken)
            #expect(next.accessToken != tokens.accessToken && next.refreshToken != tokens.refreshToken)
            let old = try await served.request(
                WireProtocol.path(.fetchZones, scope: .private), token: tokens.accessToken, body: Self.allZones)
            #expect(old.status == 401, "\(old)")
            let renewed = served.syncClient(next.accessToken, device: "phone")
            defer { renewed.close() }
            _ = try await renewed.database().currentUserRecordID()

            // The old refresh token again: taken as theft, the session ends.
            await #expect(throws: SyncError.self) { try await served.client.refresh(tokens.refreshToken) }
            let afterReuse = try await served.request(
                WireProtocol.path(.fetchZones, scope: .private), token: next.accessToken, body: Self.allZones)
            #expect(afterReuse.status == 401, "\(afterReuse)")
            await #expect(throws: SyncError.self) { try await served.client.refresh(next.refreshToken) }
            #expect(try served.sessions.sessions(of: Self.alice).isEmpty)
        }
    }

    @Test(
        "a session is bound to its device: a request naming another device is refused (400), on operations, assets and push; one naming none is the session's device's"
    )
    func sessionBoundToItsDevice() async throws {
        try await withSessionServer { served in
            let tokens = try await served.client.signIn(identityToken: Self.aliceIdentity, device: "phone")
            let fetch = WireProtocol.path(.fetchZones, scope: .private)
            let other = try await served.request(
                fetch, token: tokens.accessToken, device: "laptop", body: Self.allZones)
            #expect(other.status == 400, "\(other)")
            #expect(
                other.body.contains(
                    "names device \\\"laptop\\\", but the access token is the session of device \\\"phone\\\""),
                "\(other)")
            let asset = try await served.request(
                WireProtocol.assetUploadPath(
                    try AssetDigest(parsing: String(repeating: "ab", count: 32)), scope: .private)
                    + "?zone=Notes&size=3",
                method: .GET, token: tokens.accessToken, device: "laptop")
            #expect(asset.status == 400, "\(asset)")
            #expect(
                try await served.request(fetch, token: tokens.accessToken, device: "phone", body: Self.allZones).status
                    == 200)
            #expect(try await served.request(fetch, token: tokens.accessToken, body: Self.allZones).status == 200)

            // The push channel of another device is not opened; the session's own is.
            let refused = try await RawConnection.open(port: served.running.port)
            defer { refused.close() }
            try await refused.send(
                IdentifierHTTPTests.upgrade(
                    "/v1/databases/private/push",
                    ["Authorization: Bearer \(tokens.accessToken)", "LogSync-Device: laptop"]))
            try await refused.waitUntil("the upgrade is answered") { $0.text.contains("\r\n\r\n") }
            #expect(refused.text.hasPrefix("HTTP/1.1 400"), "\(refused.text)")
            let own = try await TokenRevocationTests.openPushChannel(
                port: served.running.port, token: tokens.accessToken, device: "phone")
            own.close()
        }
    }

    @Test("an expired access token gets 401 saying it expired; the refreshed one works")
    func expiredAccessToken() async throws {
        try await withSessionServer { served in
            let tokens = try await served.client.signIn(identityToken: Self.aliceIdentity, device: "phone")
            let path = WireProtocol.path(.fetchZones, scope: .private)
            #expect(try await served.request(path, token: tokens.accessToken, body: Self.allZones).status == 200)
            served.clock.advance(by: 900)
            let expired = try await served.request(path, token: tokens.accessToken, body: Self.allZones)
            #expect(expired.status == 401)
            #expect(expired.body.contains("expired"), "\(expired)")
            let unknown = try await served.request(path, token: "lsa_" + String(repeating: "A", count: 43))
            #expect(unknown.status == 401 && !unknown.body.contains("expired"), "\(unknown)")
            let next = try await served.client.refresh(tokens.refreshToken)
            #expect(try await served.request(path, token: next.accessToken, body: Self.allZones).status == 200)
        }
    }

    @Test(
        "signing a device out ends its push channel at once and refuses its token, while the user's other device keeps syncing"
    )
    func revokeDeviceEndsItsPushChannel() async throws {
        try await withSessionServer { served in
            let phone = try await served.client.signIn(identityToken: Self.aliceIdentity, device: "phone")
            let laptop = try await served.client.signIn(identityToken: Self.aliceIdentity, device: "laptop")
            let bob = try await served.client.signIn(identityToken: Self.bobIdentity, device: "phone")
            let phoneChannel = try await TokenRevocationTests.openPushChannel(
                port: served.running.port, token: phone.accessToken, device: "phone")
            defer { phoneChannel.close() }
            let laptopChannel = try await TokenRevocationTests.openPushChannel(
                port: served.running.port, token: laptop.accessToken, device: "laptop")
            defer { laptopChannel.close() }

            // A device of another user, and one never signed in: the same answer, nothing done.
            let before = try served.written()
            for device in ["tablet", "laptop"] {
                let token = device == "laptop" ? bob.accessToken : laptop.accessToken
                let other = try await served.request(WireSessions.devicePath(device), method: .DELETE, token: token)
                #expect(other.status == 204, "\(other)")
            }
            #expect(try served.written() == before)
            #expect(try served.sessions.sessions(of: Self.alice).count == 2)

            try await served.client.revoke(device: "phone", accessToken: laptop.accessToken)
            try await TokenRevocationTests.waitUntil(
                "the phone's push channel is closed", by: .now + TokenRevocationTests.patience
            ) { TokenRevocationTests.closedAsRevoked(phoneChannel) }
            let refused = try await served.request(
                WireProtocol.path(.fetchZones, scope: .private), token: phone.accessToken, body: Self.allZones)
            #expect(refused.status == 401, "\(refused)")
            await #expect(throws: SyncError.self) { try await served.client.refresh(phone.refreshToken) }

            let laptopClient = served.syncClient(laptop.accessToken, device: "laptop")
            defer { laptopClient.close() }
            _ = try await laptopClient.database().modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            #expect(!TokenRevocationTests.closedAsRevoked(laptopChannel))
            #expect(try await served.client.devices(accessToken: laptop.accessToken).map(\.device) == ["laptop"])
            #expect(try await served.client.devices(accessToken: bob.accessToken).map(\.device) == ["phone"])
        }
    }

    @Test("refused sign-ins write nothing: a bad identity token (401, no reason given), a bad body, an oversized one")
    func refusalsWriteNothing() async throws {
        try await withSessionServer { served in
            let before = try served.written()
            let body = WireSessions.encode(WireSessions.SignIn(device: "phone"))
            let badToken = try await served.request(WireSessions.signInPath, token: "forged", body: body)
            #expect(badToken.status == 401, "\(badToken)")
            #expect(badToken.body.contains("invalid token") && !badToken.body.contains("table"), "\(badToken)")
            let noToken = try await served.request(WireSessions.signInPath, body: body)
            #expect(noToken.status == 401, "\(noToken)")
            let malformed = try await served.request(
                WireSessions.signInPath, token: Self.aliceIdentity, body: Array("{\"device\": 7}".utf8))
            #expect(malformed.status == 400, "\(malformed)")
            let badDevice = try await served.request(
                WireSessions.signInPath, token: Self.aliceIdentity, body: Array("{\"device\": \"\"}".utf8))
            #expect(badDevice.status == 400, "\(badDevice)")
            let oversized = try await served.request(
                WireSessions.signInPath, token: Self.aliceIdentity,
                body: WireSessions.encode(
                    WireSessions.SignIn(device: "phone", name: String(repeating: "n", count: 5000))))
            #expect(oversized.status == 413, "\(oversized)")
            let badRefresh = try await served.request(
                WireSessions.refreshPath, body: WireSessions.encode(WireSessions.Refresh(refreshToken: "lsr_forged")))
            #expect(badRefresh.status == 401, "\(badRefresh)")
            let noAuthList = try await served.request(WireSessions.devicesPath, method: .GET)
            #expect(noAuthList.status == 401, "\(noAuthList)")
            #expect(try served.written() == before)
        }
    }

    @Test(
        "F119 a sign-in registers the e-mail address the issuer vouches for, so owners can invite the user; another user's address stays theirs"
    )
    func signInRegistersEmail() async throws {
        let verifier = TableVerifier(identities: [
            "bob": VerifiedIdentity(issuer: "test", subject: "bob", expires: nil, emailAddress: "bob@example.com"),
            "mallory": VerifiedIdentity(
                issuer: "test", subject: "mallory", expires: nil, emailAddress: "BOB@example.com"),
        ])
        try await withSessionServer(verifier: verifier) { served in
            _ = try await served.client.signIn(identityToken: "bob", device: "laptop")
            let bob = try #require(try served.server.userIdentity(forEmailAddress: "bob@example.com"))
            // Mallory's issuer vouches for bob's address too: she signs in, the address stays bob's.
            _ = try await served.client.signIn(identityToken: "mallory", device: "phone")
            #expect(try served.server.userIdentity(forEmailAddress: "bob@example.com") == bob)
            #expect(try served.sessions.sessions(of: "test:mallory").count == 1)
        }
    }

    @Test("without an identity verifier there is no sign-in route: 404, as for any unknown route")
    func noVerifierNoSignIn() async throws {
        try await withSessionServer(verifier: nil) { served in
            let answer = try await served.request(
                WireSessions.signInPath, token: Self.aliceIdentity,
                body: WireSessions.encode(WireSessions.SignIn(device: "phone")))
            #expect(answer.status == 404, "\(answer)")
            #expect(try served.written().1.isEmpty)
        }
    }
}

/// `logsync-server sessions` against a running `logsync-server` on an LMDB store: the sessions
/// are made in the store beforehand (the server has no identity verifier configured here), and
/// another process signs a device out while the server serves it.
@Suite("Sessions of a logsync-server process", .timeLimit(.minutes(2)))
struct SessionCommandTests {
    @Test(
        "sessions revoke in another process: the device's push channel closes and its token is refused, the other device goes on; sessions list shows what is left"
    )
    func revokeFromAnotherProcess() async throws {
        try await withServerData { data in
            let (phone, laptop): (SessionStore.Issued, SessionStore.Issued)
            do {
                let server = try SyncServer(.init(directory: data, durability: .durable))
                let sessions = try SessionStore(server: server)
                phone = try sessions.create(user: "test:alice", device: "phone", name: "Phone")
                laptop = try sessions.create(user: "test:alice", device: "laptop", name: "Laptop")
                server.shutdown()
            }
            let (process, port) = try await TokenRevocationTests.serve(data)
            #expect(try await TokenRevocationTests.fetchZones(port: port, token: phone.accessToken).status == 200)
            let channel = try await TokenRevocationTests.openPushChannel(
                port: port, token: phone.accessToken, device: "phone")
            defer { channel.close() }

            let listed = try await ChildProcess.run(["sessions", "list", "--user", "test:alice", "--data", data.path])
            #expect(listed.status == 0, "\(listed)")
            #expect(
                listed.output.split(separator: "\n").map { $0.split(separator: "\t").first } == ["phone", "laptop"])

            let revoked = try await ChildProcess.run(
                ["sessions", "revoke", "--user", "test:alice", "--device", "phone", "--data", data.path])
            #expect(revoked.status == 0 && revoked.output == "1 session revoked\n", "\(revoked)")
            let deadline = ContinuousClock.now + TokenRevocationTests.patience
            try await TokenRevocationTests.waitUntil("the phone's push channel is closed", by: deadline) {
                TokenRevocationTests.closedAsRevoked(channel)
            }
            #expect(try await TokenRevocationTests.fetchZones(port: port, token: phone.accessToken).status == 401)
            #expect(try await TokenRevocationTests.fetchZones(port: port, token: laptop.accessToken).status == 200)

            let left = try await ChildProcess.run(["sessions", "list", "--user", "test:alice", "--data", data.path])
            #expect(left.output.hasPrefix("laptop\t") && left.output.hasSuffix("\tLaptop\n"), "\(left)")
            let all = try await ChildProcess.run(["sessions", "revoke", "--user", "test:alice", "--data", data.path])
            #expect(all.output == "1 session revoked\n", "\(all)")
            try await TokenRevocationTests.waitUntil("the laptop's token is refused", by: deadline) {
                try await TokenRevocationTests.fetchZones(port: port, token: laptop.accessToken).status == 401
            }
            let stopped = try await process.terminate()
            #expect(stopped.status == 0, "\(stopped)")
        }
    }
}
