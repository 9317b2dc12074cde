import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

/// A database whose next `modifyRecords` answers are lost after the server applied them:
/// reported by the server (`serverResponseLost`) or as a dropped connection (`networkFailure`).
final class LosingDatabase: ForwardingDatabase {
    let base: InProcessDatabase
    private let lose = Mutex(0)
    private let drop = Mutex(0)
    private let requestIDs = Mutex<[RequestID?]>([])

    init(_ base: InProcessDatabase) { self.base = base }

    /// The titles of the records in `zoneID` on the server, read past the losses.
    func titlesOnServer(_ zoneID: RecordZone.ID) async throws -> [RecordValue?] {
        try await base.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zoneID)).modifications.map {
            $0.record["title"]
        }
    }

    /// Loses the answers of the next `count` record modifications.
    func loseNextAnswers(_ count: Int) { lose.withLock { $0 = count } }

    /// Drops the connection of the next `count` record modifications after the server applied them.
    func dropNextConnections(_ count: Int) { drop.withLock { $0 = count } }

    /// The request ID of each `modifyRecords` call, in order.
    var modifyRequestIDs: [RequestID?] { requestIDs.withLock { $0 } }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        requestIDs.withLock { $0.append(request.requestID) }
        let response = try await base.modifyRecords(request)
        let lost = lose.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if lost { throw SyncError(.serverResponseLost, "the answer was lost on the way back") }
        let dropped = drop.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if dropped { throw SyncError(.networkFailure, "the connection dropped before the answer came") }
        return response
    }

}

/// A database whose next `modifyRecords` is applied by the server and then never answered until
/// ``release()``: the request of an app killed before the answer came.
final class HangingDatabase: ForwardingDatabase {
    let base: InProcessDatabase
    private let state = Mutex<(hangNext: Bool, hanging: CheckedContinuation<Void, Never>?, released: Bool)>(
        (false, nil, false))
    /// Whether a request hangs now, and who waits for one to.
    private let hangingNow = Mutex<(yes: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    private let requestIDs = Mutex<[RequestID?]>([])

    init(_ base: InProcessDatabase) { self.base = base }

    /// The next `modifyRecords` hangs after the server applied it.
    func hangNext() { state.withLock { $0.hangNext = true } }

    /// Returns once a `modifyRecords` hangs.
    func waitUntilHanging() async {
        await withCheckedContinuation { continuation in
            let now = hangingNow.withLock { state in
                if !state.yes { state.waiters.append(continuation) }
                return state.yes
            }
            if now { continuation.resume() }
        }
    }

    /// Ends the hanging request with a dropped connection.
    func release() {
        let waiter = state.withLock { state in
            state.released = true
            defer { state.hanging = nil }
            return state.hanging
        }
        waiter?.resume()
    }

    /// The request ID of each `modifyRecords` call, in order.
    var modifyRequestIDs: [RequestID?] { requestIDs.withLock { $0 } }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        requestIDs.withLock { $0.append(request.requestID) }
        let response = try await base.modifyRecords(request)
        let hang = state.withLock { state in
            defer { state.hangNext = false }
            return state.hangNext
        }
        guard hang else { return response }
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                if !state.released { state.hanging = continuation }
                return state.released
            }
            let waiters = hangingNow.withLock { state in
                state.yes = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
            if resumeNow { continuation.resume() }
        }
        throw SyncError(.networkFailure, "the connection dropped before the answer came")
    }

}

/// Lost answers: the engine resends the same request, and the server replays its answer (F103).
@Suite("Scenario: lost answers")
struct ResponseLostScenarios {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// An engine that syncs only when asked, its log in `log`, its random seed `seed` (else
    /// drawn at random, as in an app).
    static func manualEngine(
        _ database: any CloudDatabase, _ delegate: any SyncEngineDelegate, log: URL, seed: UInt64? = nil
    ) throws -> SyncEngine {
        var configuration = SyncEngine.Configuration(
            database: database,
            deviceLog: try DeviceLog(
                directory: log, options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20)),
            delegate: delegate)
        configuration.automaticallySync = false
        if let seed { configuration.randomSeed = seed }
        return try SyncEngine(configuration)
    }

    /// The phone: a notes app on alice's database behind a ``LosingDatabase``, its log in
    /// `directory/phone`, syncing when asked, with the random seed `seed` (else drawn at random,
    /// as in an app).
    static func phone(
        _ server: SyncServer, _ directory: URL, seed: UInt64? = nil
    ) throws -> (database: LosingDatabase, phone: TestDevice) {
        let database = LosingDatabase(server.database(for: "alice", device: "phone"))
        let phone = try TestDevice("phone", database: database, directory: directory.appendingPathComponent("phone")) {
            configuration in
            if let seed { configuration.randomSeed = seed }
        }
        return (database, phone)
    }

    // F103, F56
    @Test(
        "F103 a save applied by the server whose answer is lost is resent with the same request ID: a success, not a conflict"
    )
    func lostAnswerReplayed() async throws {
        try await withServer { directory, server in
            let (database, phone) = try Self.phone(server, directory, seed: 7)
            let engine = phone.engine
            try phone.createZone(Self.notes)
            try await engine.sendChanges()

            // Edit a record the server already holds, so a second application would conflict.
            let note = Record.ID(recordName: "n", zoneID: Self.notes)
            try phone.write(note, "first")
            try await engine.sendChanges()
            try phone.write(note, "second")
            database.loseNextAnswers(1)
            try await engine.sendChanges()

            let ids = database.modifyRequestIDs
            #expect(ids.count == 3)
            #expect(ids[1] == ids[2], "the resend carries the lost request's ID")
            #expect(ids[0] != ids[1])
            #expect(try engine.state.pendingRecordZoneChanges == [])
            #expect(try await database.titlesOnServer(Self.notes) == [.string("second")])
            #expect(phone.failedSaves.isEmpty, "no serverRecordChanged: \(phone.failedSaves)")
            #expect(try engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    // F103, F56: found by the sharing simulation's soak (seed 10126): the answer lost twice (the
    // engine resends once) left the edit neither pending nor acknowledged, and its conflict unseen.
    @Test("F103 an answer lost again after the engine's resend: the app sends the edit once more and sees its conflict")
    func answerLostTwiceSentAgain() async throws {
        try await withServer { directory, server in
            let (database, phone) = try Self.phone(server, directory, seed: 7)
            phone.resolveConflicts { local, server in max(local, server) }
            phone.setPolicy { $0.keepsUnacknowledgedEdits = true }
            let laptop = try TestDevice("laptop", server: server, directory: directory)
            try phone.createZone(Self.notes)
            try await phone.sync()
            let note = Record.ID(recordName: "n", zoneID: Self.notes)
            try laptop.write(note, "from the laptop")
            try await laptop.sync()

            // The phone has not seen the laptop's note: its save conflicts, and the answer saying
            // so is lost twice.
            try phone.write(note, "from the phone")
            database.loseNextAnswers(2)
            await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            #expect(phone.failedSaves == [.serverResponseLost])
            #expect(
                try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(note)], "the app queued the save again")
            // The resend conflicts (the server replays its answer, or the save meets the laptop's
            // note); the merge goes out and is acknowledged.
            for _ in 0..<2 {
                _ = try? await phone.engine.sendChanges()
                try await phone.engine.fetchChanges()
            }

            #expect(phone.unacknowledgedEdits.isEmpty)
            #expect(phone.tally.conflictsWon == 1)
            #expect(try await database.titlesOnServer(Self.notes) == [.string("from the phone")])
            #expect(phone.title(note) == "from the phone")
        }
    }

    // F89, F103: a dropped connection leaves the change pending; the retry is the same request.
    @Test(
        "F103 a batch whose connection dropped after the server applied it is retried under the same request ID: no false conflict"
    )
    func droppedConnectionRetriedUnderSameID() async throws {
        try await withServer { directory, server in
            let (database, phone) = try Self.phone(server, directory)
            let engine = phone.engine
            try phone.createZone(Self.notes)
            let note = Record.ID(recordName: "n", zoneID: Self.notes)
            try phone.write(note, "first")
            try await engine.sendChanges()

            // The server applies "second", the connection drops: the change stays pending (F89).
            try phone.write(note, "second")
            database.dropNextConnections(1)
            await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(note)])

            // The retry builds the same batch, so it goes under the same ID and the server replays
            // its answer: a success, where a new ID would have met its own save as a conflict.
            try await engine.sendChanges()
            let ids = database.modifyRequestIDs
            #expect(ids.count == 3)
            #expect(ids[1] == ids[2], "the retry carries the dropped request's ID")
            #expect(try engine.state.pendingRecordZoneChanges == [])
            #expect(!phone.failedSaves.contains(.serverRecordChanged), "\(phone.failedSaves)")

            // A batch that differs from the dropped one gets an ID of its own: "third" was
            // applied, so "fourth", built on "second", meets a real conflict.
            try phone.write(note, "third")
            database.dropNextConnections(1)
            await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            try phone.write(note, "fourth")  // still pending: queued again, the same save
            let conflict = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(conflict?.partialErrors[.record(note)]?.code == .serverRecordChanged)
            let later = database.modifyRequestIDs
            #expect(later.count == 5)
            #expect(later[3] != later[4])
            #expect(try await database.titlesOnServer(Self.notes) == [.string("third")])
            #expect(try engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    /// The saves of `id` in alice's server log (each one a `recordSaved` entry; a replayed
    /// answer appends none).
    static func saves(of id: Record.ID, on server: SyncServer) throws -> [Record] {
        var saves: [Record] = []
        try server.admin.log(of: "alice").forEachEntry { entry in
            if case .recordSaved(let record) = try ServerEntry(entry), record.recordID == id { saves.append(record) }
        }
        return saves
    }

    // F89, F103: the batch whose outcome is unknown is in the device log, not in the engine's
    // memory: an app relaunched after a dropped connection still retries under the same ID.
    @Test(
        "F103 after a dropped connection and a relaunch, the equal batch goes out under the recorded request ID: no false conflict"
    )
    func droppedConnectionRetriedAfterRelaunch() async throws {
        try await withServer { directory, server in
            let (database, phone) = try Self.phone(server, directory)
            try phone.createZone(Self.notes)
            let note = Record.ID(recordName: "n", zoneID: Self.notes)
            try phone.write(note, "first")
            try await phone.engine.sendChanges()

            // The server applies "second", the connection drops; the app quits.
            try phone.write(note, "second")
            database.dropNextConnections(1)
            await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            let prefix = phone.engine.requestIDPrefix
            let unanswered = try #require(try phone.engine.deviceLog.read { try $0.unansweredBatch() })
            #expect(unanswered.requestID == database.modifyRequestIDs[1])

            // Relaunched: a new engine on the same log, with a prefix of its own. The batch it
            // builds is the same request, so it carries the recorded ID, and the server replays.
            try phone.startEngine()
            #expect(phone.engine.requestIDPrefix != prefix)
            #expect(try phone.engine.deviceLog.read { try $0.unansweredBatch() } == unanswered)
            try await phone.engine.sendChanges()
            let ids = database.modifyRequestIDs
            #expect(ids.count == 3)
            #expect(ids[2] == ids[1], "the retry after the relaunch carries the dropped request's ID")
            #expect(try phone.engine.state.pendingRecordZoneChanges == [])
            #expect(!phone.failedSaves.contains(.serverRecordChanged), "\(phone.failedSaves)")
            #expect(try Self.saves(of: note, on: server).map { $0["title"] } == [.string("first"), .string("second")])
            #expect(try phone.engine.deviceLog.read { try $0.unansweredBatch() } == nil, "answered: nothing is unknown")
            #expect(try phone.engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    // F103: the app is killed after the request left and before its answer came: the log ends
    // with a batchPrepared and no result. The relaunched engine sends the same batch under its ID.
    @Test("F103 a batch prepared but never answered (the app stopped) is resent under its recorded ID after a relaunch")
    func unansweredBatchResentAfterRelaunch() async throws {
        try await withServer { directory, server in
            let base = server.database(for: "alice", device: "phone")
            let hanging = HangingDatabase(base)
            let phone = try TestDevice("phone", database: hanging, directory: directory.appendingPathComponent("phone"))
            try phone.createZone(Self.notes)
            let note = Record.ID(recordName: "n", zoneID: Self.notes)
            try phone.write(note, "first")
            try await phone.engine.sendChanges()

            // The server applies "second"; its answer never comes back, and the app is gone.
            try phone.write(note, "second")
            hanging.hangNext()
            let stuck = Task { [engine = phone.engine] in try await engine.sendChanges() }
            await hanging.waitUntilHanging()
            let unanswered = try #require(try phone.engine.deviceLog.read { try $0.unansweredBatch() })
            #expect(unanswered.requestID == hanging.modifyRequestIDs[1])

            try phone.startEngine()
            try await phone.engine.sendChanges()
            let ids = hanging.modifyRequestIDs
            #expect(ids.count == 3)
            #expect(ids[2] == ids[1], "the resend after the relaunch carries the unanswered request's ID")
            #expect(try phone.engine.state.pendingRecordZoneChanges == [])
            #expect(!phone.failedSaves.contains(.serverRecordChanged), "\(phone.failedSaves)")
            #expect(try Self.saves(of: note, on: server).map { $0["title"] } == [.string("first"), .string("second")])
            #expect(try phone.engine.deviceLog.log.verifyProjections() == nil)

            // The old launch's request ends (as a killed process's never would), so the test ends.
            hanging.release()
            _ = try? await stuck.value
        }
    }

    // F103: a different batch after the relaunch is a new request with an ID of its own.
    @Test("F103 after a relaunch, a batch that differs from the unanswered one gets a new request ID")
    func differentBatchAfterRelaunchGetsNewID() async throws {
        try await withServer { directory, server in
            let (database, phone) = try Self.phone(server, directory)
            try phone.createZone(Self.notes)
            let note = Record.ID(recordName: "n", zoneID: Self.notes)
            try phone.write(note, "first")
            database.dropNextConnections(1)
            await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }

            try phone.startEngine()
            try phone.write(note, "changed since")  // not the request that was dropped
            let conflict = await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            let ids = database.modifyRequestIDs
            #expect(ids.count >= 2)
            #expect(ids[1] != ids[0])
            // The server had applied "first": the new request meets it as another save.
            #expect(conflict?.partialErrors[.record(note)]?.code == .serverRecordChanged)
            #expect(try phone.engine.deviceLog.log.verifyProjections() == nil)
        }
    }

    // F103: request IDs come from the configuration's seed and the batch's log offset.
    @Test("F103 request IDs are made from the seed and the batch's offset: the same seed gives the same IDs")
    func requestIDsAreSeeded() async throws {
        var prefixes: [String] = []
        for run in 0..<2 {
            try await withServer { directory, server in
                let engine = try Self.manualEngine(
                    server.database(for: "alice"), IdleDelegate.shared,
                    log: directory.appendingPathComponent("d\(run)"), seed: 42)
                prefixes.append(engine.requestIDPrefix)
            }
        }
        #expect(prefixes[0] == prefixes[1])
        #expect(!prefixes[0].isEmpty)
    }
}

extension TestDevice {
    /// The error codes of the record saves that failed so far, in order.
    var failedSaves: [SyncError.Code] {
        events.flatMap { event -> [SyncError.Code] in
            guard case .sentRecordZoneChanges(let sent) = event else { return [] }
            return sent.failedRecordSaves.map(\.error.code)
        }
    }
}
