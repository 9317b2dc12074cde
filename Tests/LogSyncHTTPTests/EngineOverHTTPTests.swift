import ChildProcesses
import Foundation
import LogStore
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncTesting
import TemporaryDirectory
import Testing

/// Two `SyncEngine`s in one process, each with its own device log and its own `HTTPSyncClient`,
/// syncing through a live server on loopback: the story of the README, over the network.
@Suite("End to end: engines over HTTP", .timeLimit(.minutes(4)))
struct EngineOverHTTPTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static func note(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: notes) }

    /// A notes app on a device of alice's on `live`, syncing over its own HTTP client (which the
    /// test closes), its log in `directory/name`; manual sync unless `automatic`, which runs on a
    /// test clock (so only work due at once, such as a pushed fetch, runs).
    static func device(
        _ name: String, live: LiveServer, directory: URL, automatic: Bool = false
    ) throws -> (TestDevice, HTTPSyncClient) {
        let client = live.client(LiveServer.aliceToken, device: DeviceID(name))
        let device = try TestDevice(
            name, database: client.database(), directory: directory.appendingPathComponent(name, isDirectory: true)
        ) { configuration in
            configuration.automaticallySync = automatic
            configuration.clock = TestClock()
        }
        return (device, client)
    }

    /// Whether `events`, from index `start` on, hold a fetch that brought the note `name`.
    static func fetched(_ name: String, after start: Int = 0) -> @Sendable ([SyncEngine.Event]) -> Bool {
        { events in
            events.dropFirst(start).contains { event in
                guard case .fetchedRecordZoneChanges(let changes) = event else { return false }
                return changes.modifications.contains { $0.record.recordID == note(name) }
            }
        }
    }

    // F44, F56, F75, F91, F92: the WWDC23 conflict, over HTTP. A sends "A"; B sends "B" before
    // fetching, gets serverRecordChanged with the server's record, merges (server wins) and
    // ends with "A", like A.
    @Test("F44 F92 two engines sync a note and resolve a conflict over HTTP")
    func syncAndConflict() async throws {
        try await withLiveServer { live, directory in
            let (a, aClient) = try Self.device("A", live: live, directory: directory)
            let (b, bClient) = try Self.device("B", live: live, directory: directory)
            defer {
                aClient.close()
                bClient.close()
            }

            try a.createZone(Self.notes)
            try a.write(Self.note("n"), "first")
            try await a.sync()
            try await b.sync()
            #expect(b.title(Self.note("n")) == "first")

            try a.write(Self.note("n"), "A")
            try await a.engine.sendChanges()
            try b.write(Self.note("n"), "B")
            let error = await #expect(throws: SyncError.self) { try await b.engine.sendChanges() }
            #expect(error?.code == .partialFailure)
            #expect(error?.partialErrors[.record(Self.note("n"))]?.code == .serverRecordChanged)
            #expect(b.title(Self.note("n")) == "A", "B merged into the server's record")
            #expect(try b.engine.state.pendingRecordZoneChanges.isEmpty)

            try await b.sync()
            try await a.sync()
            #expect(a.title(Self.note("n")) == "A")
            #expect(b.title(Self.note("n")) == "A")
            #expect(try a.engine.deviceLog.log.verifyProjections() == nil)
            #expect(try b.engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    // F83, F113, F115: a commit by the laptop reaches the phone as a push over its WebSocket, and
    // the phone's automatic engine fetches the change on its own.
    @Test("F83 F113 an automatic engine receives a push over its WebSocket and fetches")
    func pushOverWebSocket() async throws {
        try await withLiveServer { live, directory in
            try await subscribe(live)
            let (laptop, laptopClient) = try Self.device("laptop", live: live, directory: directory)
            try laptop.createZone(Self.notes)
            try await laptop.sync()
            let (phone, phoneClient) = try Self.device("phone", live: live, directory: directory, automatic: true)
            defer {
                laptopClient.close()
                phoneClient.close()
            }
            try await phone.waitForEvents("the phone's catch-up fetch") { $0.contains { $0.kind == .didFetchChanges } }
            await phoneClient.waitForPushChannels()

            let mark = phone.events.count
            try laptop.write(Self.note("pushed"), "from the laptop")
            try await laptop.engine.sendChanges()
            try await phone.waitForEvents("the pushed note was fetched", Self.fetched("pushed", after: mark))
            #expect(phone.title(Self.note("pushed")) == "from the laptop")
        }
    }

    // F29, F89, F113: the server stops in the middle. The laptop's send fails with a transient
    // network error and its change stays pending; the phone's push channel reconnects once the
    // server is back and the phone fetches once (hints may have been missed); the laptop's
    // resend lands, is pushed, and nothing committed before the restart is lost.
    @Test("F89 F113 a server restart in the middle loses nothing, and the engines resume")
    func serverRestart() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("server")
            // Restarted on the same port: one no server on port 0 can take meanwhile.
            let port = try portOutsideEphemeralRange()
            var live = try await LiveServer.start(in: data, port: port, durability: .durable)
            try await subscribe(live)
            let (laptop, laptopClient) = try Self.device("laptop", live: live, directory: directory)
            let (phone, phoneClient) = try Self.device("phone", live: live, directory: directory, automatic: true)
            defer {
                laptopClient.close()
                phoneClient.close()
            }
            try laptop.createZone(Self.notes)
            try laptop.write(Self.note("before"), "committed before the restart")
            try await laptop.sync()
            try await phone.waitForEvents("the phone has the first note", Self.fetched("before"))
            await phoneClient.waitForPushChannels()

            try await live.stop()
            try laptop.write(Self.note("during"), "written while the server was down")
            let failure = await #expect(throws: SyncError.self) { try await laptop.engine.sendChanges() }
            let itemError = failure?.partialErrors[.record(Self.note("during"))] ?? failure
            #expect(itemError?.code == .networkFailure, "\(String(describing: failure))")
            #expect(itemError?.isTransient == true)
            #expect(try laptop.engine.state.pendingRecordZoneChanges == [.saveRecord(Self.note("during"))])

            let mark = phone.events.count
            let connections = phoneClient.pushConnectionCount
            live = try await LiveServer.start(in: data, port: port, durability: .durable)
            try await phone.waitForEvents("the phone fetched after its push channel reconnected") {
                $0.dropFirst(mark).contains { $0.kind == .didFetchChanges }
            }
            #expect(phoneClient.pushConnectionCount == connections + 1)

            try await laptop.engine.sendChanges()
            #expect(try laptop.engine.state.pendingRecordZoneChanges.isEmpty)
            try await phone.waitForEvents("the phone has the note written during the outage", Self.fetched("during"))
            #expect(phone.title(Self.note("before")) == "committed before the restart")
            #expect(phone.title(Self.note("during")) == "written while the server was down")
            let server = try await live.client(LiveServer.aliceToken).database().fetchZoneChanges(
                zoneID: Self.notes, since: nil)
            #expect(Set(server.modifications.map(\.record.recordID)) == [Self.note("before"), Self.note("during")])
            try await live.stop()
        }
    }

    /// Saves the engines' database subscription, so that every commit is pushed.
    func subscribe(_ live: LiveServer) async throws {
        let response = try await live.client(LiveServer.aliceToken).database()
            .modifySubscriptions(saving: [Subscription(subscriptionID: SyncEngine.defaultSubscriptionID)], deleting: [])
        _ = try response.saveResults[SyncEngine.defaultSubscriptionID]?.get()
    }
}

/// `RunningHTTPSyncServer.stop()` (and so SIGTERM) with clients that hold connections: idle ones
/// close at once, requests in flight finish, and what is still busy after the grace period is
/// closed; the stop never waits for a client's own idle timeout.
@Suite("HTTP: graceful stop", .timeLimit(.minutes(2)))
struct GracefulStopTests {
    /// `POST allSubscriptions` in JSON, with a body of `length` bytes (`{}` when 2), not sent here.
    static func allSubscriptions(bodyLength: Int) -> String {
        "POST /v1/databases/private/allSubscriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "Authorization: Bearer \(LiveServer.aliceToken)\r\nContent-Type: application/json\r\n"
            + "Accept: application/json\r\nContent-Length: \(bodyLength)\r\n\r\n"
    }

    static func answers(in text: String) -> Int { text.components(separatedBy: "HTTP/1.1 200").count - 1 }

    /// Runs `body` with a server it is to stop itself; stops it if `body` throws.
    func withServer(
        _ configuration: HTTPSyncServer.Configuration = .init(), _ body: (LiveServer) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LiveServer.start(
                in: directory.appendingPathComponent("server"), configuration: configuration)
            do {
                try await body(live)
            } catch {
                try? await live.stop()
                throw error
            }
        }
    }

    // What AsyncHTTPClient's pool leaves behind when a request it opened a connection for is
    // taken by another connection freed meanwhile: a connection that never carries a request,
    // idle until the client's 60-second idle timeout. The stop used to wait for that timeout.
    @Test("a connection on which nothing was sent is closed at once, and the stop does not wait for it")
    func connectionWithoutRequest() async throws {
        // A grace period longer than the stop's limit: a stop that waited for it would fail.
        try await withServer(.init(shutdownGracePeriod: .seconds(120))) { live in
            let idle = try await RawConnection.open(to: live)
            // A listener accepts in order: once a later connection is answered, this one is accepted.
            let answer = try await rawRequest(live, "/v1/databases/private/allSubscriptions", headers: aliceHeaders())
            #expect(answer.status == 200)
            // Well under the grace period: nothing waits for it.
            _ = try await stopTimed(live) { idle.close() }
            try await idle.waitUntil("the server closed the idle connection") { $0.isClosed }
            #expect(idle.text.isEmpty)
        }
    }

    /// A connection that has sent two requests pipelined, the second's head read with the first
    /// but its body not complete, once the first is answered.
    static func halfwayThroughASecondRequest(_ live: LiveServer) async throws -> RawConnection {
        let connection = try await RawConnection.open(to: live)
        try await connection.send(allSubscriptions(bodyLength: 0) + allSubscriptions(bodyLength: 2) + "{")
        try await connection.waitUntil("the first answer") { answers(in: $0.text) == 1 && $0.text.hasSuffix("{}") }
        return connection
    }

    @Test("a request in flight when the stop begins finishes, then its connection closes")
    func requestInFlightFinishes() async throws {
        // A grace period no busy machine outlasts: the request in flight must finish because the
        // server waits for it, not because the test was quick. The half-sent body's own timeouts
        // (30 s of no progress, 75 s idle) are longer too: on a machine busy with the rest of the
        // suite, the wait for the first answer and the stop took longer than 30 s, and the body
        // timeout, not the stop, closed the connection.
        let patient = HTTPSyncServer.Configuration(
            shutdownGracePeriod: .seconds(120), idleTimeout: .seconds(600), requestBodyTimeout: .seconds(600))
        try await withServer(patient) { live in
            let client = try await Self.halfwayThroughASecondRequest(live)
            let stopping = Task { try await live.stop() }
            // The server stops listening before it tells its connections to finish. The deadline
            // leaves room for a machine busy with the rest of the suite (large asset transfers).
            let deadline = ContinuousClock.now + .seconds(30)
            while let probe = try? await RawConnection.open(to: live) {
                probe.close()
                guard ContinuousClock.now < deadline else { throw TestFailure("the server still accepts connections") }
                try await Task.sleep(for: .milliseconds(5))
            }
            try await client.send("}")
            try await client.waitUntil("the second answer and the end of the connection") { $0.isClosed }
            #expect(Self.answers(in: client.text) == 2, "\(client.text)")
            #expect(client.text.hasSuffix("{}"))
            try await stopping.value
        }
    }

    @Test("a client stalled halfway through a request is cut off at the end of the grace period")
    func stalledRequest() async throws {
        try await withServer(.init(shutdownGracePeriod: .milliseconds(200))) { live in
            let stalled = try await Self.halfwayThroughASecondRequest(live)
            let elapsed = try await stopTimed(live) { stalled.close() }
            #expect(elapsed >= .milliseconds(200), "the request in flight was given its grace period")
            try await stalled.waitUntil("the server closed the stalled connection") { $0.isClosed }
            #expect(Self.answers(in: stalled.text) == 1)
        }
    }

    @Test("a WebSocket upgrade sent halfway does not hold up the stop")
    func halfSentUpgrade() async throws {
        try await withServer(.init(shutdownGracePeriod: .milliseconds(200))) { live in
            let upgrading = try await RawConnection.open(to: live)
            try await upgrading.send(
                "GET /v1/databases/private/push HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(LiveServer.aliceToken)\r\n"
                    + "Upgrade: websocket\r\nConnection: Upgrade\r\n")
            let answer = try await rawRequest(live, "/v1/databases/private/allSubscriptions", headers: aliceHeaders())
            #expect(answer.status == 200)
            _ = try await stopTimed(live) { upgrading.close() }
            try await upgrading.waitUntil("the server closed the half-upgraded connection") { $0.isClosed }
            #expect(upgrading.text.isEmpty)
        }
    }
}
