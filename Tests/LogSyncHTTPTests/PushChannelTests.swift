import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// The client's push channel: backoff, the hint after a reconnection, and the end of a stream.
@Suite("HTTP: push channel", .timeLimit(.minutes(2)))
struct PushChannelTests {
    @Test("the reconnection wait grows exponentially from the initial delay, capped, with bounded jitter")
    func backoff() {
        let policy = ReconnectPolicy(
            initialDelay: .milliseconds(250), maxDelay: .seconds(30), multiplier: 2, jitter: 0.2)
        #expect(policy.delay(afterFailures: 0, random: 0.5) == .milliseconds(250))
        #expect(policy.delay(afterFailures: 1, random: 0.5) == .milliseconds(500))
        #expect(policy.delay(afterFailures: 3, random: 0.5) == .seconds(2))
        #expect(policy.delay(afterFailures: 10, random: 0.5) == .seconds(30))
        #expect(policy.delay(afterFailures: 1_000, random: 0.5) == .seconds(30))
        #expect(policy.delay(afterFailures: 0, random: 0) == .milliseconds(200))
        #expect(policy.delay(afterFailures: 0, random: 1) == .milliseconds(300))
        #expect(policy.delay(afterFailures: 10, random: 1) == .seconds(36))
    }

    // F113, F117: after the server comes back, the stream yields one hint that names nothing, so
    // the device fetches once: hints sent while it was away are lost.
    @Test("F113 after a reconnection the stream yields one hint naming nothing, then the server's hints")
    func hintAfterReconnection() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("server")
            // Restarted on the same port: one no server on port 0 can take meanwhile.
            let port = try portOutsideEphemeralRange()
            var live = try await LiveServer.start(in: data, port: port)
            let client = live.client(LiveServer.aliceToken, device: "phone")
            defer { client.close() }
            let writer = live.client(LiveServer.aliceToken, device: "laptop").database()
            _ = try await writer.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            _ = try await writer.modifySubscriptions(saving: [Subscription(subscriptionID: "engine")], deleting: [])
            var hints = client.database().pushHints().makeAsyncIterator()
            await client.waitForPushChannels()
            #expect(client.pushConnectionCount == 1)

            try await live.stop()
            live = try await LiveServer.start(in: data, port: port)
            let reconnected = try #require(await hints.next())
            #expect(reconnected == PushHint(databaseScope: .private))
            #expect(client.pushConnectionCount == 2)

            var note = Record(
                recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes")))
            note["title"] = "after the restart"
            _ = try await writer.modifyRecords(saving: [note], deleting: [])
            let hint = try #require(await hints.next())
            #expect(hint.zoneID == RecordZone.ID(zoneName: "Notes"))
            #expect(hint.changeToken == (try live.server.admin.currentToken(of: "alice")))
            try await live.stop()
        }
    }

    // F114: a push channel skips the commits of its own device, so its upgrade must name one.
    @Test(
        "F114 a push upgrade without a LogSync-Device header gets 400 saying the header is needed; a malformed one 400 saying it is invalid"
    )
    func pushUpgradeNeedsADevice() async throws {
        try await withLiveServer { live, _ in
            let authorization = "Authorization: Bearer \(LiveServer.aliceToken)"
            let cases: [(headers: [String], says: String)] = [
                ([authorization, "Accept: application/json"], "needs a LogSync-Device header"),
                (
                    [
                        authorization, "Accept: application/json",
                        "LogSync-Device: \(String(repeating: "d", count: 256))",
                    ], "holds an invalid device ID"
                ),
            ]
            for (headers, says) in cases {
                let connection = try await RawConnection.open(to: live)
                defer { connection.close() }
                try await connection.send(IdentifierHTTPTests.upgrade("/v1/databases/private/push", headers))
                try await connection.waitUntil("the answer") { $0.text.contains("\r\n\r\n") && $0.text.hasSuffix("}") }
                #expect(connection.text.hasPrefix("HTTP/1.1 400"), "\(connection.text.prefix(400))")
                let body = try #require(connection.text.range(of: "\r\n\r\n")).upperBound
                let error = try Wire.decode(SyncError.self, from: Array(connection.text[body...].utf8), as: .json)
                #expect(error.code == .invalidArguments, "\(error)")
                #expect(error.message.contains(says), "\(error)")
            }
        }
    }

    // F113, F114: a client made without a device ID names a random one of its own on every
    // request and push channel, so it gets hints of other devices' commits and none of its own.
    @Test("F113 F114 a client made without a device gets push: hints of another device's commits, none of its own")
    func clientWithoutDeviceGetsPush() async throws {
        try await withLiveServer { live, _ in
            let client = live.client(LiveServer.aliceToken)
            defer { client.close() }
            let other = live.client(LiveServer.aliceToken)
            #expect(client.device.rawValue.hasPrefix("client-") && client.device != other.device)
            #expect(throws: Never.self) { try client.device.validate() }
            let notes = RecordZone.ID(zoneName: "Notes")
            let own = client.database()
            _ = try await own.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
            _ = try await own.modifySubscriptions(saving: [Subscription(subscriptionID: "engine")], deleting: [])
            let received = HintLog()
            let stream = own.pushHints()
            let reader = Task { for await hint in stream { received.append(hint) } }
            defer { reader.cancel() }
            await client.waitForPushChannels()

            func save(_ name: String, through database: HTTPCloudDatabase) async throws -> DatabaseChangeToken {
                var note = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
                note["title"] = .string(name)
                _ = try await database.modifyRecords(saving: [note], deleting: [])
                return try live.server.admin.currentToken(of: "alice")
            }
            let ownToken = try await save("own", through: own)
            let otherToken = try await save("other", through: other.database())
            let deadline = ContinuousClock.now + .seconds(30)
            while !received.hints.contains(where: { $0.changeToken == otherToken }) {
                guard ContinuousClock.now < deadline else {
                    throw TestFailure("no hint of the other device's commit: \(received.hints)")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(!received.hints.contains { $0.changeToken == ownToken }, "\(received.hints)")
        }
    }

    @Test("closing the client ends its streams, and the server's channels end with them")
    func closeEndsStreams() async throws {
        try await withLiveServer { live, _ in
            let client = live.client(LiveServer.aliceToken, device: "phone")
            let stream = client.database().pushHints()
            await client.waitForPushChannels()
            client.close()
            var iterator = stream.makeAsyncIterator()
            #expect(await iterator.next() == nil)
            // withLiveServer's graceful stop returns only once every connection has closed.
        }
    }

    @Test("after close, a new push stream ends at once and never connects")
    func streamAfterClose() async throws {
        try await withLiveServer { live, _ in
            let client = live.client(LiveServer.aliceToken, device: "phone")
            client.close()
            let stream = client.database().pushHints()
            let ended = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for await _ in stream {}
                    return !Task.isCancelled
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(30))
                    return false
                }
                defer { group.cancelAll() }
                return await group.next() ?? false
            }
            #expect(ended, "the stream was still open 30 seconds after it was opened on a closed client")
            #expect(client.pushConnectionCount == 0)
        }
    }
}

/// The hints a stream delivered, kept as they arrive by a task reading it.
final class HintLog: Sendable {
    private let received = Mutex<[PushHint]>([])

    var hints: [PushHint] { received.withLock { $0 } }

    func append(_ hint: PushHint) { received.withLock { $0.append(hint) } }
}
