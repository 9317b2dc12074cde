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
