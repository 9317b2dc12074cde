import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncWire
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// What a hostile or broken client sends on a bare connection.
enum HostileRequest: String, CaseIterable, CustomStringConvertible, Sendable {
    case controlCharacterInHeader
    case nulInPath
    case tlsClientHello
    /// A head that never ends (slowloris).
    case headThatNeverEnds
    /// A body that never arrives.
    case bodyThatNeverArrives

    var description: String { rawValue }

    /// Whether the HTTP parser refuses it (answered 400 at once) rather than it stalling.
    var isMalformed: Bool {
        switch self {
        case .controlCharacterInHeader, .nulInPath, .tlsClientHello: true
        case .headThatNeverEnds, .bodyThatNeverArrives: false
        }
    }

    var bytes: [UInt8] { bytes(token: LiveServer.aliceToken) }

    /// The bytes sent, with `token` where a request carries one (so that it gets as far as its body).
    func bytes(token: String) -> [UInt8] {
        switch self {
        case .controlCharacterInHeader:
            Array(
                "POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: x\r\nX-Note: a\u{01}b\r\nContent-Length: 0\r\n\r\n"
                    .utf8)
        case .nulInPath:
            Array("POST /v1/databases/pri".utf8) + [0]
                + Array("vate/fetchZones HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".utf8)
        case .tlsClientHello:
            // The start of a TLS 1.2 ClientHello record: handshake (22), version 3.1, a length.
            [0x16, 0x03, 0x01, 0x00, 0xA5, 0x01, 0x00, 0x00, 0xA1, 0x03, 0x03] + Array(repeating: 0x2A, count: 32)
        case .headThatNeverEnds:
            Array("POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8)
        case .bodyThatNeverArrives:
            Array(
                "POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n0123456789"
                    .utf8)
        }
    }
}

/// The 400 a refused request got: its status line and the error of its body.
func refusal(_ connection: RawConnection) throws -> (statusLine: String, error: SyncError) {
    let bytes = connection.bytes
    let separator = Array("\r\n\r\n".utf8)
    guard
        let end = (0...max(0, bytes.count - 4)).first(where: {
            Array(bytes[$0..<min(bytes.count, $0 + 4)]) == separator
        })
    else {
        throw TestFailure("no complete answer head in \(connection.text.prefix(300))")
    }
    let head = String(decoding: bytes[..<end], as: UTF8.self)
    let body = Array(bytes[(end + 4)...])
    return (head.components(separatedBy: "\r\n")[0], try Wire.decode(SyncError.self, from: body, as: .protobuf))
}

/// The edges of connections (Docs/Protocol.md, "Connections"): what the parser refuses gets 400
/// and a close, stalled clients are cut off by the read and idle timeouts, push channels outlive
/// them, and the connection limit makes new connections wait.
@Suite("HTTP: hostile connections", .timeLimit(.minutes(2)))
struct HostileConnectionTests {
    static let short = HTTPSyncServer.Configuration(
        idleTimeout: .milliseconds(400), requestHeadTimeout: .milliseconds(400), requestBodyTimeout: .milliseconds(400))

    /// A raw connection to a server that gives a request's head `requestHeadTimeout` and is
    /// otherwise patient (an idle timeout of 60 s); the connection is closed when `body` returns.
    static func withRawConnection(
        requestHeadTimeout: Duration, _ body: (LiveServer, RawConnection) async throws -> Void
    ) async throws {
        var configuration = HTTPSyncServer.Configuration()
        configuration.idleTimeout = .seconds(60)
        configuration.requestHeadTimeout = requestHeadTimeout
        try await withLiveServer(configuration: configuration) { live, _ in
            let connection = try await RawConnection.open(to: live)
            defer { connection.close() }
            try await body(live, connection)
        }
    }

    @Test(
        "what the HTTP parser refuses gets 400, an error naming the fault, and a close",
        arguments: HostileRequest.allCases.filter(\.isMalformed))
    func malformed(_ kind: HostileRequest) async throws {
        try await Self.withRawConnection(requestHeadTimeout: .seconds(60)) { live, connection in
            try await connection.send(bytes: kind.bytes)
            try await connection.waitUntil("the server closed the connection") { $0.isClosed }
            let (status, error) = try refusal(connection)
            #expect(status == "HTTP/1.1 400 Bad Request")
            #expect(error.code == .invalidArguments)
            let expected =
                switch kind {
                case .controlCharacterInHeader: "a control character"
                case .nulInPath: "a NUL"
                default: "TLS sent to a plain HTTP port"
                }
            #expect(
                error.message.hasPrefix("malformed HTTP request (") && error.message.contains(expected),
                "\(error.message)")
        }
    }

    @Test("a malformed request after an answered one on the same connection gets 400 and a close too")
    func malformedAfterHonest() async throws {
        try await withLiveServer { live, _ in
            let connection = try await RawConnection.open(to: live)
            defer { connection.close() }
            try await connection.send(
                "POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(LiveServer.aliceToken)\r\nContent-Length: 0\r\n\r\n"
            )
            try await connection.waitUntil("the first answer") {
                $0.text.hasPrefix("HTTP/1.1 200") && $0.text.contains("\r\n\r\n")
            }
            let first = connection.bytes.count
            try await connection.send(bytes: HostileRequest.controlCharacterInHeader.bytes)
            try await connection.waitUntil("the server closed the connection") { $0.isClosed }
            let rest = String(decoding: connection.bytes[first...], as: UTF8.self)
            #expect(rest.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(rest.prefix(200))")
            #expect(rest.contains("onnection: close"))
        }
    }

    @Test("a connection that sends nothing, or nothing more after its answer, is closed after the idle timeout")
    func idle() async throws {
        // Long enough that a loaded machine sends the request before the idle timeout can fire.
        var configuration = Self.short
        configuration.idleTimeout = .seconds(2)
        try await withLiveServer(configuration: configuration) { live, _ in
            let start = ContinuousClock.now
            let silent = try await RawConnection.open(to: live)
            defer { silent.close() }
            // The request goes out from the connection's event loop as soon as it is up: sent from
            // the test's task, it could wait its turn on a loaded machine's pool past the idle
            // timeout. Should the server's own event loop still be late by the whole timeout, that
            // is the timeout working, so try again with a new connection.
            var answered: RawConnection?
            for _ in 0..<5 where answered == nil {
                let keptAlive = try await RawConnection.open(
                    to: live,
                    sendingOnConnect:
                        "POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(LiveServer.aliceToken)\r\nContent-Length: 0\r\n\r\n"
                )
                try await keptAlive.waitUntil("the kept-alive connection is closed") { $0.isClosed }
                if !keptAlive.bytes.isEmpty { answered = keptAlive } else { keptAlive.close() }
            }
            let keptAlive = try #require(answered, "no request got through before the idle timeout in 5 tries")
            defer { keptAlive.close() }
            try await silent.waitUntil("the silent connection is closed") { $0.isClosed }
            #expect(ContinuousClock.now - start >= .seconds(2))
            #expect(silent.bytes.isEmpty)
            #expect(keptAlive.text.hasPrefix("HTTP/1.1 200"), "\(keptAlive.text.prefix(200))")
        }
    }

    @Test("a head that keeps trickling in is cut off at the head timeout, counted from its first byte")
    func slowHead() async throws {
        try await Self.withRawConnection(requestHeadTimeout: .milliseconds(300)) { live, connection in
            let start = ContinuousClock.now
            try await connection.send("POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: x\r\n")
            // One header byte every 50 ms: each read is progress, and still the head is late.
            while !connection.isClosed, ContinuousClock.now - start < .seconds(20) {
                try? await connection.send("X")
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(connection.isClosed)
            #expect(ContinuousClock.now - start < .seconds(20))
            #expect(connection.bytes.isEmpty)
        }
    }

    @Test("a body that stops arriving closes the connection after the body timeout")
    func stalledBody() async throws {
        var configuration = HTTPSyncServer.Configuration()
        configuration.idleTimeout = .seconds(60)
        configuration.requestHeadTimeout = .seconds(60)
        configuration.requestBodyTimeout = .milliseconds(300)
        try await withLiveServer(configuration: configuration) { live, _ in
            let before = try live.lastOffset(of: "alice")
            let connection = try await RawConnection.open(to: live)
            defer { connection.close() }
            try await connection.send(bytes: HostileRequest.bodyThatNeverArrives.bytes)
            try await connection.waitUntil("the server closed the connection") { $0.isClosed }
            #expect(try live.lastOffset(of: "alice") == before)
        }
    }

    @Test("push channels outlive the idle and read timeouts, and still carry hints")
    func pushOutlivesTimeouts() async throws {
        var configuration = Self.short
        configuration.idleTimeout = .milliseconds(200)
        configuration.requestHeadTimeout = .milliseconds(200)
        configuration.requestBodyTimeout = .milliseconds(200)
        try await withLiveServer(configuration: configuration) { live, _ in
            let client = live.client(LiveServer.aliceToken, device: "phone")
            defer { client.close() }
            // In process: an HTTP client's pooled connection would race the 200 ms idle timeout,
            // which is below its pool's (honest clients' pools keep connections under the default).
            let writer = live.server.database(for: "alice", scope: .private, device: "laptop")
            _ = try await writer.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            _ = try await writer.modifySubscriptions(saving: [Subscription(subscriptionID: "engine")], deleting: [])
            var hints = client.database().pushHints().makeAsyncIterator()
            await client.waitForPushChannels()
            // A plain connection opened now, and as quiet, is closed by the idle timeout: once it
            // is, the push channel (older) has been quiet longer than every timeout.
            let quiet = try await RawConnection.open(to: live)
            defer { quiet.close() }
            try await quiet.waitUntil("the server closed an idle connection") { $0.isClosed }
            var note = Record(
                recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes")))
            note["title"] = "after a quiet second"
            _ = try await writer.modifyRecords(saving: [note], deleting: [])
            let hint = try #require(await hints.next())
            #expect(hint.zoneID == RecordZone.ID(zoneName: "Notes"))
            #expect(client.pushConnectionCount == 1, "the push channel was cut and reconnected")
        }
    }

    @Test("beyond the connection limit new connections wait, and are served once one closes")
    func connectionLimit() async throws {
        var configuration = HTTPSyncServer.Configuration()
        configuration.maxConnections = 2
        try await withLiveServer(configuration: configuration) { live, _ in
            let request =
                "POST /v1/databases/private/fetchZones HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(LiveServer.aliceToken)\r\nContent-Length: 0\r\n\r\n"
            // Two connections the server has taken: each has had an answer.
            let first = try await RawConnection.open(to: live)
            try await first.send(request)
            try await first.waitUntil("the first connection is served") { $0.text.hasPrefix("HTTP/1.1 200") }
            let second = try await RawConnection.open(to: live)
            defer { second.close() }
            try await second.send(request)
            try await second.waitUntil("the second connection is served") { $0.text.hasSuffix("\r\n\r\n") }
            // A third waits in the backlog (the kernel accepted it, the server has not).
            let third = try await RawConnection.open(to: live)
            defer { third.close() }
            try await third.send(request)
            // The server still answers the second connection; the third's request is not served.
            let answered = second.bytes.count
            try await second.send(request)
            try await second.waitUntil("the second connection's next request is answered") {
                $0.bytes.count > answered && $0.text.hasSuffix("\r\n\r\n")
            }
            #expect(third.bytes.isEmpty)
            first.close()
            try await third.waitUntil("the waiting request is answered") { $0.text.hasPrefix("HTTP/1.1 200") }
        }
    }

    @Test("bad connection flags are refused with a message naming the flag")
    func badFlags() async throws {
        for (flag, value, message) in [
            ("--idle-timeout", "0", "--idle-timeout must be a number of seconds above 0"),
            ("--request-head-timeout", "0", "--request-head-timeout must be a number of seconds above 0"),
            ("--max-connections", "0", "--max-connections must be at least 1"),
            ("--listen-backlog", "0", "--listen-backlog must be at least 1"),
        ] {
            let bad = try await ChildProcess.run(["--data", "/tmp/unused", flag, value])
            #expect(bad.status != 0)
            #expect(bad.errorOutput.contains(message), "\(bad)")
        }
    }

    /// The open descriptors of process `pid`.
    static func openDescriptors(_ pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    @Test(
        "1,000 slow or malformed connections to a server with 256 descriptors: honest requests answered, descriptors fall back"
    )
    func storm() async throws {
        try await withServerData { data in
            let token = try await addUser("alice", data: data)
            let limit = 64
            // The storm's requests carry alice's token, from alice's address: the limits on
            // requests in progress per user and per address would refuse her honest requests
            // while hers stall (ClientLimitTests shows them). Here the connections are tested.
            let server = try ChildProcess.start(
                [
                    "--data", data.path, "--port", "0", "--max-connections", "\(limit)", "--listen-backlog", "1100",
                    "--idle-timeout", "30", "--request-head-timeout", "0.5", "--request-body-timeout", "0.5",
                    "--user-concurrent-requests", "0", "--address-concurrent-requests", "0",
                ],
                descriptorLimit: 256)
            let port = try await server.waitForPort()
            let client = HTTPSyncClient(
                .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(token), device: "phone"))
            defer { client.close() }
            let database = client.database()
            _ = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            let baseline = Self.openDescriptors(server.pid)
            #expect(baseline > 0)

            // The storm, with the descriptors of the server sampled meanwhile.
            let peak = Mutex(0)
            let sampling = Task {
                while !Task.isCancelled {
                    let count = Self.openDescriptors(server.pid)
                    peak.withLock { $0 = max($0, count) }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            let kinds = HostileRequest.allCases
            let outcomes = try await withThrowingTaskGroup(of: (HostileRequest, String?).self) { group in
                for index in 0..<1_000 {
                    let kind = kinds[index % kinds.count]
                    group.addTask {
                        let connection = try await RawConnection.open(port: port)
                        defer { connection.close() }
                        try? await connection.send(bytes: kind.bytes(token: token))  // a full backlog may have reset it
                        try await connection.waitUntil("the server closed a \(kind) connection", limit: .seconds(60)) {
                            $0.isClosed
                        }
                        guard kind.isMalformed else {
                            return (kind, connection.bytes.isEmpty ? nil : "answered \(connection.text.prefix(80))")
                        }
                        let (status, error) = try refusal(connection)
                        return (
                            kind,
                            status == "HTTP/1.1 400 Bad Request" && error.code == .invalidArguments
                                ? nil : "\(status) \(error)"
                        )
                    }
                }
                // Honest requests while the storm lasts.
                for index in 0..<5 {
                    let zones = try await database.fetchAllZones()
                    #expect(zones.map(\.zoneID.zoneName).contains("Notes"), "honest request \(index)")
                }
                var outcomes: [(HostileRequest, String?)] = []
                for try await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            sampling.cancel()
            #expect(outcomes.count == 1_000)
            for kind in kinds {
                let failures = outcomes.filter { $0.0 == kind }.compactMap(\.1)
                #expect(
                    failures.isEmpty, "\(kind): \(failures.count) unexpected answers, first: \(failures.first ?? "")")
            }
            // Accepting stops at the limit; a few more may be taken in the same batch of accepts.
            let highest = peak.withLock { $0 }
            #expect(highest <= baseline + limit + 8, "peak \(highest) descriptors, baseline \(baseline)")

            // The descriptors fall back (below the baseline, which counted the honest client's
            // connection, closed now), and the server still answers.
            client.close()
            let deadline = ContinuousClock.now + .seconds(15)
            var now = Self.openDescriptors(server.pid)
            while now > baseline, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                now = Self.openDescriptors(server.pid)
            }
            #expect(now <= baseline, "\(now) descriptors open after the storm, \(baseline) before")
            let again = HTTPSyncClient(
                .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(token), device: "phone"))
            defer { again.close() }
            _ = try await again.database().fetchAllZones()
            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
            #expect(!stopped.errorOutput.contains("Too many open files"), "\(stopped.errorOutput.suffix(2000))")
        }
    }
}
