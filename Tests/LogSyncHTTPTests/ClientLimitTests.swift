import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// Limits per client (Docs/Protocol.md, "HTTP", "Limits"): a user or an address past its request
/// rate or its requests in progress is refused with 429 `requestRateLimited` and a retry-after,
/// before anything of its request is done, while other users and addresses are served. The rate
/// limits run on a clock the tests move: no test waits for time to pass.
@Suite("HTTP: limits per client", .timeLimit(.minutes(2)))
struct ClientLimitTests {
    /// A monotonic clock that moves only when told to.
    final class ManualClock: Sendable {
        private let now = Mutex(Duration.seconds(1000))
        func read() -> Duration { now.withLock { $0 } }
        func advance(by duration: Duration) { now.withLock { $0 += duration } }
    }

    static let notes = RecordZone.ID(zoneName: "Notes")

    /// A live server with these limits per user and per address, counted on a clock of their
    /// own, which `body` moves.
    static func withLimitedServer(
        user: HTTPSyncServer.ClientLimits = .unlimited, address: HTTPSyncServer.ClientLimits = .unlimited,
        _ body: (_ live: LiveServer, _ clock: ManualClock) async throws -> Void
    ) async throws {
        let clock = ManualClock()
        var configuration = HTTPSyncServer.Configuration()
        configuration.userLimits = user
        configuration.addressLimits = address
        configuration.clientLimitClock = { clock.read() }
        try await withLiveServer(configuration: configuration) { live, _ in try await body(live, clock) }
    }

    /// A `modifyRecords` of one note, as raw bytes of HTTP/1.1 asking for a JSON answer, from
    /// `token`'s user; the connection closes after the answer.
    static func saveNote(_ token: String, title: String) -> [UInt8] {
        var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
        note["title"] = .string(title)
        let body = Wire.encode(ModifyRecordsRequest(recordsToSave: [note], savePolicy: .allKeys), as: .protobuf)
        let head =
            "POST /v1/databases/private/modifyRecords HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
            + "Content-Type: application/x-protobuf\r\nAccept: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// The status of a raw answer and the error of its JSON body, if it has one.
    static func parse(_ answer: String) throws -> (status: Int, retryAfterHeader: String?, error: SyncError?) {
        let status = Int(answer.split(separator: " ", maxSplits: 2).dropFirst().first ?? "") ?? 0
        let retryAfter = answer.split(separator: "\r\n").first { $0.lowercased().hasPrefix("retry-after:") }
            .map { $0.dropFirst("retry-after:".count).trimmingCharacters(in: .whitespaces) }
        guard status != 200, let body = answer.range(of: "\r\n\r\n").map({ answer[$0.upperBound...] }) else {
            return (status, retryAfter, nil)
        }
        return (status, retryAfter, try Wire.decode(SyncError.self, from: Array(body.utf8), as: .json))
    }

    @Test(
        "a user past the rate limit gets 429 with a retry-after and nothing is written; another user is served; time moves, it is served again"
    )
    func userRate() async throws {
        let limits = HTTPSyncServer.ClientLimits(requestsPerSecond: 1, burst: 3, concurrentRequests: 0)
        try await Self.withLimitedServer(user: limits) { live, clock in
            let alice = live.client(LiveServer.aliceToken).database()
            let bob = live.client(LiveServer.bobToken).database()
            _ = try await alice.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            _ = try await bob.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            _ = try await alice.fetchAllZones()
            _ = try await alice.fetchAllZones()  // alice's burst of 3 is spent

            let before = try live.lastOffset(of: "alice")
            let refused = try Self.parse(
                try await exchange(port: live.port, send: Self.saveNote(LiveServer.aliceToken, title: "too many")))
            #expect(refused.status == 429)
            #expect(refused.retryAfterHeader == "1")
            let error = try #require(refused.error)
            #expect(error.code == .requestRateLimited)
            #expect(error.retryAfter == .seconds(1))
            #expect(
                error.message
                    == "user \"alice\" sent more requests than this server takes from one user: 1 per second, in bursts of 3",
                "\(error)")
            #expect(try live.lastOffset(of: "alice") == before, "a refused request writes nothing")

            // Through the client, as the engine sees it: the code it retries after the wait (F89, F152).
            let seen = await #expect(throws: SyncError.self) { _ = try await alice.fetchAllZones() }
            #expect(seen?.code == .requestRateLimited)
            #expect(seen?.retryAfter == .seconds(1))

            // Bob, from the same address, is served.
            let bobs = try Self.parse(
                try await exchange(port: live.port, send: Self.saveNote(LiveServer.bobToken, title: "bob's")))
            #expect(bobs.status == 200)

            // Half a second later, half a token: still refused, told to wait the other half.
            clock.advance(by: .milliseconds(500))
            let early = await #expect(throws: SyncError.self) { _ = try await alice.fetchAllZones() }
            #expect(early?.retryAfter == .milliseconds(500))
            clock.advance(by: .milliseconds(500))
            let saved = try Self.parse(
                try await exchange(port: live.port, send: Self.saveNote(LiveServer.aliceToken, title: "in time")))
            #expect(saved.status == 200)
            #expect(try live.lastOffset(of: "alice") > before)
        }
    }

    @Test("an address past its rate gets 429 whoever its users are; another address is served")
    func addressRate() async throws {
        let limits = HTTPSyncServer.ClientLimits(requestsPerSecond: 2, burst: 2, concurrentRequests: 0)
        try await Self.withLimitedServer(address: limits) { live, clock in
            for token in [LiveServer.aliceToken, LiveServer.bobToken] {
                let served = try Self.parse(
                    try await exchange(port: live.port, from: "127.0.0.1", send: Self.saveNote(token, title: "a")))
                #expect(served.status == 200, "served (the note fails alone: there is no Notes zone)")
            }
            let before = try live.lastOffset(of: "bob")
            let refused = try Self.parse(
                try await exchange(
                    port: live.port, from: "127.0.0.1", send: Self.saveNote(LiveServer.bobToken, title: "b")))
            #expect(refused.status == 429)
            #expect(
                refused.error?.message
                    == "address 127.0.0.1 sent more requests than this server takes from one address: 2 per second, in bursts of 2"
            )
            #expect(refused.error?.retryAfter == .milliseconds(500))
            #expect(try live.lastOffset(of: "bob") == before)
            // A request without a valid token counts against its address too.
            let anonymous = try Self.parse(
                try await exchange(
                    port: live.port, from: "127.0.0.1", send: Self.saveNote("lsk_nobody-0123456789abcdef", title: "c")))
            #expect(anonymous.status == 429)

            let elsewhere = try Self.parse(
                try await exchange(
                    port: live.port, from: "127.0.0.2", send: Self.saveNote(LiveServer.bobToken, title: "d")))
            #expect(elsewhere.status == 200, "\(elsewhere)")
        }
    }

    @Test(
        "a user with as many requests in progress as allowed gets 429 for one more; another user is served; one ends, the next is served"
    )
    func userConcurrency() async throws {
        let limits = HTTPSyncServer.ClientLimits(requestsPerSecond: 0, burst: 1, concurrentRequests: 2)
        try await Self.withLimitedServer(user: limits) { live, clock in
            let limiter = live.running.http.clientLimiter
            // Two requests of alice's whose bodies have not all arrived: in progress until they do.
            let held = try await [RawConnection.open(to: live), RawConnection.open(to: live)]
            for connection in held {
                try await connection.send(
                    "POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(LiveServer.aliceToken)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{")
            }
            try await held[0].waitUntil("alice has 2 requests in progress") { _ in
                limiter.inProgress(.user("alice")) == 2
            }

            let refused = await #expect(throws: SyncError.self) {
                _ = try await live.client(LiveServer.aliceToken).database().fetchAllZones()
            }
            #expect(refused?.code == .requestRateLimited)
            #expect(refused?.retryAfter == .seconds(1))
            #expect(
                refused?.message
                    == "user \"alice\" has 2 requests in progress, the most this server handles at once for one user; retry when one has finished"
            )
            _ = try await live.client(LiveServer.bobToken).database().fetchAllZones()

            // The first ends (its body completes, it is answered): alice may send one more.
            try await held[0].send("\"allZones\": true}  ")
            try await held[0].waitUntil("the first request is answered") { $0.text.contains("HTTP/1.1 200") }
            try await held[0].waitUntil("alice has 1 request in progress") { _ in
                limiter.inProgress(.user("alice")) == 1
            }
            _ = try await live.client(LiveServer.aliceToken).database().fetchAllZones()
            // The second's client goes away: its request ends with it.
            held[1].close()
            try await held[1].waitUntil("alice has no request in progress") { _ in
                limiter.inProgress(.user("alice")) == 0
            }
            held[0].close()
        }
    }

    @Test("push upgrades and asset requests count against the rates: refused with 429 past them")
    func pushAndAssets() async throws {
        let limits = HTTPSyncServer.ClientLimits(requestsPerSecond: 1, burst: 2, concurrentRequests: 0)
        try await Self.withLimitedServer(user: limits) { live, clock in
            func upgrade(_ token: String) -> [UInt8] {
                Array(
                    ("GET /v1/databases/private/push HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                        + "LogSync-Device: phone\r\nAccept: application/json\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8)
            }
            // Alice's first upgrade is taken (one token); the channel is not a request in progress.
            let channel = try await RawConnection.open(to: live)
            try await channel.send(bytes: upgrade(LiveServer.aliceToken))
            try await channel.waitUntil("the channel is upgraded") { $0.text.contains("101 Switching Protocols") }
            #expect(live.running.http.clientLimiter.inProgress(.user("alice")) == 0)

            // An asset request takes the second; the next upgrade is refused.
            let digest = String(repeating: "ab", count: 32)
            let status = try await rawRequest(
                live, "/v1/databases/private/assets/\(digest)/upload?zone=Notes&size=10", method: .GET,
                headers: [("Authorization", "Bearer \(LiveServer.aliceToken)")])
            #expect(status.status != 429, "\(status)")
            let refusedChannel = try await RawConnection.open(to: live)
            try await refusedChannel.send(bytes: upgrade(LiveServer.aliceToken))
            try await refusedChannel.waitUntil("the upgrade is refused") { $0.text.contains("\r\n\r\n{") }
            let refused = try Self.parse(refusedChannel.text)
            #expect(refused.status == 429, "\(refusedChannel.text)")
            #expect(refused.error?.code == .requestRateLimited)
            #expect(refused.retryAfterHeader == "1")
            let asset = try await rawRequest(
                live, "/v1/databases/private/assets/\(digest)/upload?zone=Notes&size=10", method: .GET,
                headers: [("Authorization", "Bearer \(LiveServer.aliceToken)")])
            #expect(asset.status == 429)
            #expect(try asset.error().code == .requestRateLimited)

            // Bob's upgrade goes through.
            let bobs = try await RawConnection.open(to: live)
            try await bobs.send(bytes: upgrade(LiveServer.bobToken))
            try await bobs.waitUntil("bob's channel is upgraded") { $0.text.contains("101 Switching Protocols") }
            for connection in [channel, refusedChannel, bobs] { connection.close() }
        }
    }

    @Test(
        "the token bucket: a burst, then the rate; the wait until the next token; a clock read out of order changes nothing"
    )
    func tokenBucket() {
        var bucket = TokenBucket(rate: 4, burst: 2, now: .seconds(10))
        #expect(bucket.take(at: .seconds(10)) == nil)
        #expect(bucket.take(at: .seconds(10)) == nil)
        #expect(bucket.take(at: .seconds(10)) == .milliseconds(250))
        #expect(bucket.take(at: .seconds(10) + .milliseconds(100)) == .milliseconds(150))
        #expect(bucket.take(at: .seconds(10) + .milliseconds(250)) == nil)
        #expect(bucket.take(at: .seconds(9)) == .milliseconds(250), "earlier than the last reading: no tokens added")
        #expect(!bucket.isFull(at: .seconds(10) + .milliseconds(250)))
        #expect(bucket.isFull(at: .seconds(11)))
        #expect(bucket.tokens <= 2)
    }

    @Test("logsync-server's flags set the limits: past --user-request-burst, 429 with Retry-After")
    func serverFlags() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("data").path
            let added = try await ChildProcess.run(["user", "add", "alice", "--data", data])
            let token = added.output.trimmingCharacters(in: .whitespacesAndNewlines)
            // One request per 1,000 seconds: the third cannot be in time, however slow the machine.
            let server = try ChildProcess.start([
                "--data", data, "--port", "0", "--user-request-rate", "0.001", "--user-request-burst", "2",
                "--address-request-rate", "0",
            ])
            let port = try await server.waitForPort()
            let database = HTTPSyncClient(
                .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(token))
            )
            .database()
            _ = try await database.fetchAllZones()
            _ = try await database.fetchAllZones()
            let answer = try Self.parse(try await exchange(port: port, send: Self.saveNote(token, title: "third")))
            #expect(answer.status == 429)
            // A token every 1,000 seconds: the wait is that, less the little time the first two took.
            #expect((900...1000).contains(Int(answer.retryAfterHeader ?? "") ?? 0), "\(answer)")
            #expect(answer.error?.code == .requestRateLimited)
            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")

            let bad = try await ChildProcess.run(["--data", data, "--user-request-burst", "0"])
            #expect(bad.status != 0)
            #expect(bad.errorOutput.contains("--user-request-burst must be at least 1"), "\(bad)")
        }
    }
}
