import ChildProcesses
import Foundation
import LogStore
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncTesting
import Synchronization
import Testing

/// Two `SyncEngine`s in one process, each with its own device log and its own `HTTPSyncClient`,
/// syncing through a live server on loopback: the story of the README, over the network.
@Suite("End to end: engines over HTTP", .timeLimit(.minutes(2)))
struct EngineOverHTTPTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static func note(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: notes) }

    // F44, F56, F75, F91, F92: the WWDC23 conflict, over HTTP. A sends "A"; B sends "B" before
    // fetching, gets serverRecordChanged with the server's record, merges (server wins) and
    // ends with "A", like A.
    @Test("F44 F92 two engines sync a note and resolve a conflict over HTTP")
    func syncAndConflict() async throws {
        try await withLiveServer { live, directory in
            let a = try NotesDevice("A", live: live, directory: directory)
            let b = try NotesDevice("B", live: live, directory: directory)
            defer { a.close(); b.close() }

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
            let laptop = try NotesDevice("laptop", live: live, directory: directory)
            try laptop.createZone(Self.notes)
            try await laptop.sync()
            let phone = try NotesDevice("phone", live: live, directory: directory, automatic: true)
            defer { laptop.close(); phone.close() }
            try await phone.waitFor("the phone's catch-up fetch") { $0.contains { $0.kind == .didFetchChanges } }
            await phone.client.waitForPushChannels()

            let mark = phone.eventCount
            try laptop.write(Self.note("pushed"), "from the laptop")
            try await laptop.engine.sendChanges()
            try await phone.waitFor("the pushed note was fetched", after: mark) { events in
                events.contains { event in
                    guard case .fetchedRecordZoneChanges(let changes) = event else { return false }
                    return changes.modifications.contains { $0.record.recordID == Self.note("pushed") }
                }
            }
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
            let laptop = try NotesDevice("laptop", live: live, directory: directory)
            let phone = try NotesDevice("phone", live: live, directory: directory, automatic: true)
            defer { laptop.close(); phone.close() }
            try laptop.createZone(Self.notes)
            try laptop.write(Self.note("before"), "committed before the restart")
            try await laptop.sync()
            try await phone.waitFor("the phone has the first note") { _ in phone.title(Self.note("before")) != nil }
            await phone.client.waitForPushChannels()

            try await live.stop()
            try laptop.write(Self.note("during"), "written while the server was down")
            let failure = await #expect(throws: SyncError.self) { try await laptop.engine.sendChanges() }
            let itemError = failure?.partialErrors[.record(Self.note("during"))] ?? failure
            #expect(itemError?.code == .networkFailure, "\(String(describing: failure))")
            #expect(itemError?.isTransient == true)
            #expect(try laptop.engine.state.pendingRecordZoneChanges == [.saveRecord(Self.note("during"))])

            let mark = phone.eventCount
            let connections = phone.client.pushConnectionCount
            live = try await LiveServer.start(in: data, port: port, durability: .durable)
            try await phone.waitFor("the phone fetched after its push channel reconnected", after: mark) {
                $0.contains { $0.kind == .didFetchChanges }
            }
            #expect(phone.client.pushConnectionCount == connections + 1)

            try await laptop.engine.sendChanges()
            #expect(try laptop.engine.state.pendingRecordZoneChanges.isEmpty)
            try await phone.waitFor("the phone has the note written during the outage") { _ in
                phone.title(Self.note("during")) != nil
            }
            #expect(phone.title(Self.note("before")) == "committed before the restart")
            #expect(phone.title(Self.note("during")) == "written while the server was down")
            let server = try await live.client(LiveServer.aliceToken).database().fetchZoneChanges(zoneID: Self.notes, since: nil)
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

/// A notes app on one device: a `SyncEngine` over HTTP, the app's titles, and the events it got.
///
/// On a conflict it takes the server's title (server wins) and queues nothing; the titles it
/// sends are its own, on the system fields of the last record the server returned.
final class NotesDevice: SyncEngineDelegate {
    let client: HTTPSyncClient
    private let engineBox = Mutex<SyncEngine?>(nil)
    private let state = Mutex(State())

    private struct State {
        var notes: [Record.ID: String] = [:]
        var events: [SyncEngine.Event] = []
        var waiters: [(check: @Sendable ([SyncEngine.Event]) -> Bool, answer: OneAnswer<Bool>)] = []
    }

    var engine: SyncEngine { engineBox.withLock { $0! } }

    /// A device of alice's on `live`, its log in `directory/name`; manual sync unless `automatic`,
    /// which runs on a test clock (so only work due at once, such as a pushed fetch, runs).
    init(_ name: String, live: LiveServer, directory: URL, automatic: Bool = false) throws {
        client = live.client(LiveServer.aliceToken, device: DeviceID(name))
        let log = try DeviceLog(
            directory: directory.appendingPathComponent(name, isDirectory: true),
            options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20))
        var configuration = SyncEngine.Configuration(database: client.database(), deviceLog: log, delegate: self)
        configuration.automaticallySync = automatic
        configuration.clock = TestClock()
        let engine = try SyncEngine(configuration)
        engineBox.withLock { $0 = engine }
    }

    /// Ends the device's push streams.
    func close() { client.close() }

    func createZone(_ zoneID: RecordZone.ID) throws {
        try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zoneID))])
    }

    func write(_ id: Record.ID, _ title: String) throws {
        state.withLock { $0.notes[id] = title }
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    func sync() async throws {
        try await engine.sendChanges()
        try await engine.fetchChanges()
    }

    func title(_ id: Record.ID) -> String? { state.withLock { $0.notes[id] } }

    var eventCount: Int { state.withLock { $0.events.count } }

    /// Waits until the events from index `after` on satisfy `check`; fails after 30 seconds.
    func waitFor(
        _ what: String, after start: Int = 0, _ check: @escaping @Sendable ([SyncEngine.Event]) -> Bool
    ) async throws {
        let answer = OneAnswer<Bool>()
        let waiter: @Sendable ([SyncEngine.Event]) -> Bool = { events in check(Array(events.dropFirst(start))) }
        // Registered first, then checked outside the lock (a check may read the device): an event
        // that arrives in between is checked by handleEvent.
        let events = state.withLock { state in
            state.waiters.append((waiter, answer))
            return state.events
        }
        if waiter(events) { answer.give(true) }
        let timeout = Task {
            try? await Task.sleep(for: .seconds(30))
            answer.give(false)
        }
        defer { timeout.cancel() }
        guard await answer.value() else { throw TestFailure("timed out waiting until \(what)") }
    }

    // MARK: SyncEngineDelegate

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        let (events, waiters) = state.withLock { state in
            switch event {
            case .fetchedRecordZoneChanges(let changes):
                for modification in changes.modifications {
                    state.notes[modification.record.recordID] = modification.record["title"]?.stringValue ?? ""
                }
                for deletion in changes.deletions { state.notes[deletion.recordID] = nil }
            case .sentRecordZoneChanges(let sent):
                for failure in sent.failedRecordSaves where failure.error.code == .serverRecordChanged {
                    if let server = failure.error.serverRecord {
                        state.notes[server.recordID] = server["title"]?.stringValue ?? ""
                    }
                }
            default:
                break
            }
            state.events.append(event)
            return (state.events, state.waiters)
        }
        // Checked outside the lock, since a check may read the device.
        for waiter in waiters where waiter.check(events) { waiter.answer.give(true) }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = ((try? syncEngine.state.pendingRecordZoneChanges) ?? []).filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            guard let title = self.title(id) else { return nil }
            var record = (try? syncEngine.deviceLog.lastKnownServerRecord(for: id))?.systemFieldsCopy()
                ?? Record(recordType: "Note", recordID: id)
            record["title"] = .string(title)
            return record
        }
    }
}

extension RecordValue {
    /// The text of a string value.
    var stringValue: String? {
        if case .string(let text) = self { text } else { nil }
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
            let live = try await LiveServer.start(in: directory.appendingPathComponent("server"), configuration: configuration)
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

    @Test("a request in flight when the stop begins finishes, then its connection closes")
    func requestInFlightFinishes() async throws {
        try await withServer { live in
            let client = try await RawConnection.open(to: live)
            // Pipelined: the second request's head is read with the first, its body is not complete.
            try await client.send(Self.allSubscriptions(bodyLength: 0) + Self.allSubscriptions(bodyLength: 2) + "{")
            try await client.waitUntil("the first answer") { Self.answers(in: $0.text) == 1 && $0.text.hasSuffix("{}") }
            let stopping = Task { try await live.stop() }
            // The server stops listening before it tells its connections to finish.
            let deadline = ContinuousClock.now + .seconds(10)
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
            let stalled = try await RawConnection.open(to: live)
            try await stalled.send(Self.allSubscriptions(bodyLength: 0) + Self.allSubscriptions(bodyLength: 2) + "{")
            try await stalled.waitUntil("the first answer") { Self.answers(in: $0.text) == 1 && $0.text.hasSuffix("{}") }
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
