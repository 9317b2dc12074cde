import AsyncHTTPClient
import Foundation
import LogSyncConsole
import LogSyncHTTPServer
import LogSyncServer
import NIOCore
import NIOHTTP1
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// A server with its console on a loopback port, alice's and bob's bearer tokens, sessions and
/// an admin credential.
struct ConsoleServer: Sendable {
    static let adminToken = "lsadm_console-admin-token-0123456789"
    static let aliceToken = "lsk_alice-token-0123456789abcdef"
    static let bobToken = "lsk_bob-token-0123456789abcdefgh"

    let server: SyncServer
    let tokens: TokenStore
    let sessions: SessionStore
    let running: RunningHTTPSyncServer
    let clock: TestClock
    /// The console's metrics history, which a test feeds as the server's metrics would.
    let history: MetricsHistory

    var url: String { "http://127.0.0.1:\(running.port)" }

    /// A clock the test moves (console links and sessions expire by it).
    final class TestClock: Sendable {
        let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func now() -> Date { time.withLock { $0 } }
        func advance(seconds: Double) { time.withLock { $0 += seconds } }
    }

    static func with(_ body: (ConsoleServer) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            let sessions = try SessionStore(server: server)
            let tokens = TokenStore(sessions: sessions)
            try tokens.add(token: aliceToken, for: "alice")
            try tokens.add(token: bobToken, for: "bob")
            let clock = TestClock()
            var http = HTTPSyncServer(
                server: server, tokens: tokens, configuration: .init(port: 0),
                adminCredential: try AdminCredential(tokens: [adminToken]))
            let history = MetricsHistory()
            let console = try #require(Console(http: http, history: history, now: clock.now))
            http.routeExtensions.append(console.routes)
            let running = try await RunningHTTPSyncServer.start(http)
            let served = ConsoleServer(
                server: server, tokens: tokens, sessions: sessions, running: running, clock: clock,
                history: history)
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

    /// An answer: status, headers, body.
    struct Answer: CustomStringConvertible {
        var status: Int
        var headers: HTTPHeaders
        var body: String
        var description: String { "\(status) \(headers) \(body.prefix(600))" }
    }

    /// A client that follows no redirect, so a test sees the 303 and its cookie.
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    func request(
        _ path: String, method: HTTPMethod = .GET, token: String? = nil, cookie: String? = nil, body: [UInt8]? = nil
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let cookie { request.headers.add(name: "Cookie", value: cookie) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await Self.client.execute(request, timeout: .seconds(120))
        let buffer = try await response.body.collect(upTo: 16 << 20)
        return Answer(
            status: Int(response.status.code), headers: response.headers,
            body: String(decoding: buffer.readableBytesView, as: UTF8.self))
    }
}

/// What the console must never show: tokens, sealed bytes, share secrets.
struct Secrets {
    var strings: [String]

    /// The secrets found in `html`.
    func found(in html: String) -> [String] { strings.filter { html.contains($0) } }
}

/// Alice's notes (one with a sealed field, one deleted) in a zone she shares with bob, who
/// accepts: what the console tests show. Returns what must never be shown.
func populate(_ server: SyncServer) async throws -> Secrets {
    try server.registerUser("bob", emailAddress: "bob@example.com")
    var secrets = try await populate(
        alice: server.database(for: "alice", device: "phone"), bobShared: server.database(for: "bob", scope: .shared))
    // A wrap of the zone's key for alice's device (F129): its bytes are never shown either.
    let alice = server.database(for: "alice", device: "phone")
    let pair = DeviceKeyPair()
    try await alice.registerDeviceKey(pair.publicKey)
    let zone = RecordZone.ID(zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
    let wrap = ZoneKey.generate(zoneID: zone, version: 1).wrapped(for: pair.publicKey)
    let saved = try await alice.saveZoneKeys(SaveZoneKeysRequest(keys: [wrap]))
    #expect(saved.results.values.allSatisfy { (try? $0.get()) != nil })
    for bytes in [wrap.wrapped, wrap.check] {
        secrets.strings += [bytes.base64EncodedString(), bytes.map { String(format: "%02x", $0) }.joined()]
    }
    return secrets
}

/// The same through any database: alice's private one, and bob's shared one (bob registered
/// with the address bob@example.com).
func populate(alice: some CloudDatabase, bobShared: some CloudDatabase) async throws -> Secrets {
    let notes = RecordZone.ID(zoneName: "Notes")
    _ = try await alice.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
    var secrets: [String] = []
    var records: [Record] = []
    for index in 0..<5 {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n\(index)", zoneID: notes))
        record["title"] = .string("note \(index)")
        let box = Data("SEALED-BOX-\(index)-0123456789abcdef0123456789".utf8)
        record["secret"] = .encrypted(.sealed(SealedValue(keyVersion: 1, box: box)))
        secrets += [
            String(decoding: box, as: UTF8.self), box.base64EncodedString(),
            box.map { String(format: "%02x", $0) }.joined(),
        ]
        records.append(record)
    }
    _ = try await alice.modifyRecords(saving: records, deleting: [])
    _ = try await alice.modifyRecords(saving: [], deleting: [Record.ID(recordName: "n4", zoneID: notes)])
    var share = Share(recordZoneID: notes)
    share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
    let saved = try await alice.modifyRecords(saving: [share.record], deleting: [])
    let result = try #require(saved.saveResults[share.recordID])
    let url = try #require(try Share(record: try result.get()).url)
    secrets.append(url.absoluteString)
    secrets.append(url.lastPathComponent)
    _ = try #require(
        try await bobShared.acceptShares(AcceptSharesRequest(shareURLs: [url]))
            .results[url]
    ).get()
    return Secrets(strings: secrets)
}

/// The `/console` links of a page, unescaped.
func consoleLinks(in html: String) -> [String] {
    var links: [String] = []
    var rest = html[...]
    while let start = rest.range(of: "href=\"") {
        rest = rest[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { break }
        let link = String(rest[..<end]).replacingOccurrences(of: "&amp;", with: "&")
        if link.hasPrefix("/console") { links.append(link) }
        rest = rest[end...]
    }
    return links
}

/// The value of `attribute` on the first element that has `marker` before it, as text.
func attribute(_ attribute: String, after marker: String, in html: String) -> String? {
    guard let start = html.range(of: marker) else { return nil }
    let tail = html[start.lowerBound...]
    guard let found = tail.range(of: "\(attribute)=\"") else { return nil }
    let value = tail[found.upperBound...]
    return value.firstIndex(of: "\"").map { String(value[..<$0]) }
}
