import ArgumentParser
import BenchSupport
import Foundation
import GRDB
import LogStore
import LogSync
import LogSyncSQLite
import LogSyncServer
import SyncModel
import Synchronization

/// What one child measured, written as JSON for the parent.
struct PhaseResult: Codable {
    var phase = ""
    var rows = 0
    /// Wall and CPU time (user + system) of the timed part.
    var seconds = 0.0
    var cpuSeconds = 0.0
    /// Send: the app's transaction of the edits (before the clock); the engine's `state.add`
    /// calls (inside the clock).
    var transactionSeconds = 0.0
    var addSeconds = 0.0
    /// Memory, kB: RssAnon before the timed part and its sampled peak during it (every 10 ms),
    /// VmHWM at the end; the curve: [rows applied, RssAnon] at each tenth of the rows.
    var anonBefore = 0
    var peakAnon = 0
    var hwm = 0
    var curve: [[Int]] = []
    /// Fetched pages (the store's observer calls).
    var pages = 0
    /// Sizes of the SQLite file (with its write-ahead log) and of the device log, bytes.
    var sqliteBytes = 0
    var deviceLogBytes = 0
    /// Seed.
    var seedSeconds = 0.0
}

enum Child {
    static func run(_ phase: SQLiteBench.Phase, _ options: SQLiteBench) async throws {
        do {
            guard let directory = options.phaseDirectory else { throw BenchError("--phase needs --phase-dir") }
            let url = URL(fileURLWithPath: directory, isDirectory: true)
            let result: PhaseResult
            switch phase {
            case .seed: result = try await seed(options, url)
            case .storeFetch: result = try await storeFetch(options, url)
            case .grdbInsert: result = try grdbInsert(options, url)
            case .engineFetch: result = try await engineFetch(options, url)
            case .storeSend: result = try await storeSend(options, url)
            case .engineSend: result = try await engineSend(options, url)
            case .fetch, .send: throw BenchError("--phase \(phase.rawValue): the parent runs its children")
            }
            try ChildProcess.write(result, to: options.resultPath)
        } catch {
            emit("logsync-sqlite-bench (child): \(error)")
            throw ExitCode.failure
        }
    }

    static let user: UserID = "alice"

    /// The server under `directory/server` (shared by the seed and the initial syncs).
    static func openServer(_ directory: URL, _ options: SQLiteBench) throws -> SyncServer {
        try SyncServer(
            SyncServer.Configuration(directory: directory, durability: .fast, maxChangesPerPage: options.page))
    }

    // MARK: Seed

    /// The rows as records on the server, saved through its modify API in requests of 400 (its
    /// limit, F151), as another device's sends would leave them.
    static func seed(_ options: SQLiteBench, _ directory: URL) async throws -> PhaseResult {
        let server = try openServer(directory.appendingPathComponent("server"), options)
        defer { server.shutdown() }
        let database = server.database(for: user, device: "seeder")
        let started = ContinuousClock.now
        _ = try await database.modifyZones(saving: Items.zoneIDs.map { RecordZone(zoneID: $0) }, deleting: [])
        var first = 0
        while first < options.recordCount {
            let last = min(first + RecordWorkload.requestSize, options.recordCount)
            let records = (first..<last).map { Items.record(Items.row($0, series: "item")) }
            let response = try await database.modifyRecords(
                ModifyRecordsRequest(recordsToSave: records, requestID: RequestID("seed-\(first)")))
            try RecordWorkload.check(response, expected: records.count)
            first = last
        }
        var result = PhaseResult(phase: "seed", rows: options.recordCount)
        result.seedSeconds = seconds(since: started)
        return result
    }

    // MARK: Initial sync

    /// A fresh store's `fetchChanges()` into an empty SQLite file, to the end; every row must
    /// then be in the table.
    static func storeFetch(_ options: SQLiteBench, _ directory: URL) async throws -> PhaseResult {
        let server = try openServer(directory.appendingPathComponent("server"), options)
        defer { server.shutdown() }
        let run = directory.appendingPathComponent("store-fetch")
        try? FileManager.default.removeItem(at: run)
        defer { try? FileManager.default.removeItem(at: run) }
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        let path = run.appendingPathComponent("app.sqlite").path
        let store = try SyncedDatabase(
            writer: openFile(path, options), tables: [Items.declaration],
            privateDatabase: server.database(for: user, device: "phone"),
            logDirectory: run.appendingPathComponent("logs"),
            options: .init(configure: { $0.automaticallySync = false }))
        let applied = Atomic<Int>(0)
        let pages = Atomic<Int>(0)
        store.addObserver { changes in
            applied.add(changes.rows.values.reduce(0) { $0 + $1.count }, ordering: .relaxed)
            pages.add(1, ordering: .relaxed)
        }
        var result = PhaseResult(phase: "store-fetch", rows: options.recordCount)
        let sampler = PeakSampler(total: options.recordCount) { applied.load(ordering: .relaxed) }
        result.anonBefore = Memory.read().anon
        try await measure(&result, sampler) { try await store.fetchChanges() }
        result.curve = sampler.curve
        let rows = try await store.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM items") ?? 0 }
        guard rows == options.recordCount else {
            throw BenchError("the store holds \(rows) rows after its initial sync, not \(options.recordCount)")
        }
        result.pages = pages.load(ordering: .relaxed)
        result.hwm = Memory.read().hwm
        result.sqliteBytes = fileSize(URL(fileURLWithPath: path)) + fileSize(URL(fileURLWithPath: path + "-wal"))
        result.deviceLogBytes = fileSize(run.appendingPathComponent("logs/private/data.mdb"))
        return result
    }

    /// The engine's part of the store's initial sync: a plain SyncEngine (device log durable, as
    /// the store's) fetching the same records to the end, its delegate counting them and keeping
    /// none.
    static func engineFetch(_ options: SQLiteBench, _ directory: URL) async throws -> PhaseResult {
        let server = try openServer(directory.appendingPathComponent("server"), options)
        defer { server.shutdown() }
        let run = directory.appendingPathComponent("engine-fetch")
        try? FileManager.default.removeItem(at: run)
        defer { try? FileManager.default.removeItem(at: run) }
        let app = App(records: [:])
        var configuration = SyncEngine.Configuration(
            database: server.database(for: user, device: "phone"), logDirectory: run.appendingPathComponent("logs"),
            delegate: app)
        configuration.automaticallySync = false
        let engine = try SyncEngine(configuration)
        var result = PhaseResult(phase: "engine-fetch", rows: options.recordCount)
        let sampler = PeakSampler(total: options.recordCount) { app.fetched.load(ordering: .relaxed) }
        result.anonBefore = Memory.read().anon
        try await measure(&result, sampler) { try await engine.fetchChanges() }
        result.curve = sampler.curve
        let fetched = app.fetched.load(ordering: .relaxed)
        guard fetched == options.recordCount else {
            throw BenchError("the engine fetched \(fetched) records, not \(options.recordCount)")
        }
        result.hwm = Memory.read().hwm
        result.deviceLogBytes = fileSize(run.appendingPathComponent("logs/data.mdb"))
        return result
    }

    /// The floor: the same rows inserted with GRDB alone, one cached prepared statement, in one
    /// transaction into the same table of an empty file; the rows are built before the clock.
    static func grdbInsert(_ options: SQLiteBench, _ directory: URL) throws -> PhaseResult {
        let run = directory.appendingPathComponent("grdb-insert")
        try? FileManager.default.removeItem(at: run)
        defer { try? FileManager.default.removeItem(at: run) }
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        let path = run.appendingPathComponent("app.sqlite").path
        let queue = try openFile(path, options)
        let rows = (0..<options.recordCount).map { Items.row($0, series: "item") }
        var result = PhaseResult(phase: "grdb-insert", rows: rows.count)
        let sampler = PeakSampler()
        result.anonBefore = Memory.read().anon
        try measure(&result, sampler) {
            try queue.write { db in
                let statement = try db.cachedStatement(sql: Items.insert)
                for row in rows { try statement.execute(arguments: row.arguments) }
            }
        }
        let count = try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM items") ?? 0 }
        guard count == options.recordCount else { throw BenchError("the floor inserted \(count) rows") }
        result.hwm = Memory.read().hwm
        result.sqliteBytes = fileSize(URL(fileURLWithPath: path)) + fileSize(URL(fileURLWithPath: path + "-wal"))
        return result
    }

    // MARK: Sending

    /// The app inserts the edits in one transaction (before the clock); then the store's
    /// `sendChanges()`: the hand-off of the outbox to the engine, and the engine's send. Every
    /// edit must then be saved (no column left unsaved, nothing pending, no refusal).
    static func storeSend(_ options: SQLiteBench, _ directory: URL) async throws -> PhaseResult {
        let run = directory.appendingPathComponent("store-send")
        try? FileManager.default.removeItem(at: run)
        defer { try? FileManager.default.removeItem(at: run) }
        let server = try openServer(run.appendingPathComponent("server"), options)
        defer { server.shutdown() }
        let path = run.appendingPathComponent("app.sqlite").path
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        let store = try SyncedDatabase(
            writer: openFile(path, options), tables: [Items.declaration],
            privateDatabase: server.database(for: user, device: "phone"),
            logDirectory: run.appendingPathComponent("logs"),
            options: .init(configure: { $0.automaticallySync = false }, handsOffOnCommit: false))
        let rows = (0..<options.editCount).map { Items.row($0, series: "edit") }
        var result = PhaseResult(phase: "store-send", rows: rows.count)
        let transactionStarted = ContinuousClock.now
        try await store.writer.write { db in
            let statement = try db.cachedStatement(sql: Items.insert)
            for row in rows { try statement.execute(arguments: row.arguments) }
        }
        result.transactionSeconds = seconds(since: transactionStarted)
        let sampler = PeakSampler()
        result.anonBefore = Memory.read().anon
        try await measure(&result, sampler) { try await store.sendChanges() }
        let (unsaved, outbox) = try await store.writer.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM logsync_unsaved") ?? -1,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM logsync_outbox") ?? -1
            )
        }
        let pending = try store.privateEngine.state.pendingRecordZoneChanges.count
        let refusals = try store.refusals()
        guard unsaved == 0, outbox == 0, pending == 0, refusals.isEmpty else {
            throw BenchError(
                "after the store's send: \(unsaved) columns unsaved, \(outbox) rows in the outbox, \(pending) pending, "
                    + "\(refusals.count) refused (\(refusals.first.map { "\($0)" } ?? "-"))")
        }
        result.hwm = Memory.read().hwm
        result.sqliteBytes = fileSize(URL(fileURLWithPath: path)) + fileSize(URL(fileURLWithPath: path + "-wal"))
        result.deviceLogBytes = fileSize(run.appendingPathComponent("logs/private/data.mdb"))
        return result
    }

    /// The engine's own send of the same records: a plain SyncEngine (device log in a directory,
    /// durable, as the store's), its delegate holding the records in a dictionary; inside the
    /// clock the zones' and the records' pending changes are added (one call each, as the
    /// store's hand-off adds them), then `sendChanges()`.
    static func engineSend(_ options: SQLiteBench, _ directory: URL) async throws -> PhaseResult {
        let run = directory.appendingPathComponent("engine-send")
        try? FileManager.default.removeItem(at: run)
        defer { try? FileManager.default.removeItem(at: run) }
        let server = try openServer(run.appendingPathComponent("server"), options)
        defer { server.shutdown() }
        let records = (0..<options.editCount).map { Items.record(Items.row($0, series: "edit")) }
        let app = App(records: Dictionary(uniqueKeysWithValues: records.map { ($0.recordID, $0) }))
        var configuration = SyncEngine.Configuration(
            database: server.database(for: user, device: "phone"), logDirectory: run.appendingPathComponent("logs"),
            delegate: app)
        configuration.automaticallySync = false
        let engine = try SyncEngine(configuration)
        var result = PhaseResult(phase: "engine-send", rows: records.count)
        let sampler = PeakSampler()
        result.anonBefore = Memory.read().anon
        var addSeconds = 0.0
        try await measure(&result, sampler) {
            let started = ContinuousClock.now
            try engine.state.add(pendingDatabaseChanges: Items.zoneIDs.map { .saveZone(RecordZone(zoneID: $0)) })
            try engine.state.add(pendingRecordZoneChanges: records.map { .saveRecord($0.recordID) })
            addSeconds = seconds(since: started)
            try await engine.sendChanges()
        }
        result.addSeconds = addSeconds
        let pending = try engine.state.pendingRecordZoneChanges.count
        let (saved, failed) = app.sent.withLock { $0 }
        guard pending == 0, saved == records.count, failed == 0 else {
            throw BenchError("after the engine's send: \(saved) saved, \(failed) failed, \(pending) pending")
        }
        result.hwm = Memory.read().hwm
        result.deviceLogBytes = fileSize(run.appendingPathComponent("logs/data.mdb"))
        return result
    }

    /// A new SQLite file with the `items` table, in the journal mode asked for.
    static func openFile(_ path: String, _ options: SQLiteBench) throws -> DatabaseQueue {
        let queue = try DatabaseQueue(path: path)
        if options.journal == .wal {
            try queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA journal_mode = WAL") }
        }
        try queue.write { try $0.execute(sql: Items.schema) }
        return queue
    }

    // MARK: Measuring

    /// Times `body` (wall and CPU time) into `result`, with the sampled peak of RssAnon.
    static func measure(
        _ result: inout PhaseResult, _ sampler: PeakSampler, _ body: () async throws -> Void
    )
        async throws
    {
        let cpuBefore = cpuSeconds()
        let started = ContinuousClock.now
        try await body()
        result.seconds = seconds(since: started)
        result.cpuSeconds = cpuSeconds() - cpuBefore
        result.peakAnon = max(sampler.stop(), Memory.read().anon)
    }

    static func measure(_ result: inout PhaseResult, _ sampler: PeakSampler, _ body: () throws -> Void) throws {
        let cpuBefore = cpuSeconds()
        let started = ContinuousClock.now
        try body()
        result.seconds = seconds(since: started)
        result.cpuSeconds = cpuSeconds() - cpuBefore
        result.peakAnon = max(sampler.stop(), Memory.read().anon)
    }
}

/// The plain engine's app: its records in a dictionary, each batch built from the pending list
/// with the last known server record's system fields under the fields (as the store does).
final class App: SyncEngineDelegate {
    let records: [Record.ID: Record]
    let sent = Mutex<(saved: Int, failed: Int)>((0, 0))
    /// Records fetched (counted, not kept).
    let fetched = Atomic<Int>(0)

    init(records: [Record.ID: Record]) { self.records = records }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        if case .fetchedRecordZoneChanges(let changes) = event {
            fetched.add(changes.modifications.count, ordering: .relaxed)
        }
        if case .sentRecordZoneChanges(let changes) = event {
            sent.withLock {
                $0.saved += changes.savedRecords.count
                $0.failed += changes.failedRecordSaves.count + changes.failedRecordDeletes.count
            }
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        try? await SyncEngine.RecordZoneChangeBatch(state: syncEngine.state, scope: context.options.scope) { id in
            guard let local = self.records[id] else { return nil }
            guard let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id) else { return local }
            var record = known.systemFieldsCopy()
            for key in local.allKeys() { record[key] = local[key] }
            return record
        }
    }
}
