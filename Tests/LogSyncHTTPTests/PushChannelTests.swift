import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import SyncModel
import Testing

/// The client's push channel: backoff, the hint after a reconnection, and the end of a stream.
@Suite("HTTP: push channel", .timeLimit(.minutes(2)))
struct PushChannelTests {
    @Test("the reconnection wait grows exponentially from the initial delay, capped, with bounded jitter")
    func backoff() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(250), maxDelay: .seconds(30), multiplier: 2, jitter: 0.2)
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

            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes")))
            note["title"] = "after the restart"
            _ = try await writer.modifyRecords(saving: [note], deleting: [])
            let hint = try #require(await hints.next())
            #expect(hint.zoneID == RecordZone.ID(zoneName: "Notes"))
            #expect(hint.changeToken == (try live.server.admin.currentToken(of: "alice")))
            try await live.stop()
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
