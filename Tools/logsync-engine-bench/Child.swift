import ArgumentParser
import BenchSupport
import Foundation
import LogStore
import LogSync
import LogSyncPlatform
import LogSyncServer
import LogSyncWire
import SyncModel
import Synchronization

/// What one phase measured, written by the child as JSON for the parent.
struct PhaseResult: Codable {
    var phase = ""
    var durability = ""
    var records = 0
    /// Wall time of `fetchChanges()` or `sendChanges()`.
    var seconds = 0.0
    /// CPU time (user + system) of the process during that call.
    var cpuSeconds = 0.0
    /// Time inside the server's methods (the `TimedDatabase` wrapper), and their calls.
    var serverSeconds = 0.0
    var serverCalls = 0
    /// Time inside the delegate's `handleEvent`.
    var handleEventSeconds = 0.0
    var events = 0
    /// Send: time inside `nextRecordZoneChangeBatch`, split into reading the pending list and
    /// building the batch (the record provider included); the number of batches asked for.
    var pendingReadSeconds = 0.0
    var batchBuildSeconds = 0.0
    var batches = 0
    /// Send: the pending-list read of the first and of the last non-empty batch, and the pending
    /// list's length then.
    var firstPendingReadSeconds = 0.0
    var firstPendingCount = 0
    var lastPendingReadSeconds = 0.0
    var lastPendingCount = 0
    /// Send: adding the pending changes before the send (`state.add`, one commit per call).
    var addSeconds = 0.0
    var addCalls = 0
    /// Fetch: pages with records (`fetchedRecordZoneChanges` events). Send: records saved.
    var pages = 0
    var processed = 0
    /// Memory, kB: VmHWM and ru_maxrss at the end, RssAnon's sampled peak (every 10 ms), the
    /// end's VmRSS, RssAnon and RssFile, and VmHWM before the timed call.
    var hwm = 0
    var maxrss = 0
    var peakAnon = 0
    var rss = 0
    var anon = 0
    var file = 0
    var hwmBefore = 0
    /// Sizes of the device log's and the server's data files.
    var deviceLogBytes = 0
    var serverBytes = 0
    /// Seed only.
    var seedSeconds = 0.0
    var seedRequests = 0
    /// Open: `SyncEngine(configuration)` and the first `state.pendingRecordZoneChanges` (their
    /// sum is `seconds`), the page faults during both, and the log's entries.
    var openSeconds = 0.0
    var firstReadSeconds = 0.0
    var minorFaults = 0
    var majorFaults = 0
    var entries = 0
    /// Edits: the same edits from as many threads as there were tasks, then from as many tasks
    /// through `state.suspending` (wall and CPU time of each).
    var threadSeconds = 0.0
    var threadCPUSeconds = 0.0
    var suspendingSeconds = 0.0
    var suspendingCPUSeconds = 0.0
    /// Edits: the commits of each of the three runs, counted from the log (the entries of one
    /// transaction share its time).
    var commits = 0
    var threadCommits = 0
    var suspendingCommits = 0
    /// Fetch: RssAnon (kB) just before the timed call, and sampled during it as
    /// [records the app holds, RssAnon kB] each time another tenth of the records has arrived.
    var anonBefore = 0
    var curve: [[Int]] = []
    /// Floor: the heap the app's dictionary of every fetched record takes (RssAnon after filling
    /// it minus before, kB), and the records' mean encoded size (Protocol Buffers bytes).
    var appDataKB = 0
    var encodedRecordBytes = 0.0
    /// Send: the device log's entry payload bytes by entry kind name (after the send).
    var entryBytes: [String: Int] = [:]
    /// Send: CPU seconds of `lastKnownServerRecord(for:)` for every sent record in send order,
    /// keeping the entries read between calls (as it does) and reading each call's entry alone.
    var lookupKeptSeconds = 0.0
    var lookupAloneSeconds = 0.0
    /// Instrumented phases: the spans finished, and the size of the metrics' Prometheus text.
    var spans = 0
    var metricsBytes = 0
}

enum Child {
    /// Measures `phase` in this process and writes the result where `--result` says.
    static func run(_ phase: EngineBench.Phase, _ options: EngineBench) async throws {
        do {
            guard let directory = options.phaseDirectory else { throw BenchError("--phase needs --phase-dir") }
            let url = URL(fileURLWithPath: directory, isDirectory: true)
            let result: PhaseResult
            switch phase {
            case .seed: result = try await seedPhase(options, url)
            case .fetch: result = try await fetchPhase(options, url)
            case .floor: result = try await floorPhase(options, url)
            case .send: result = try await sendPhase(options, url)
            case .edits: result = try await editsPhase(options, url)
            case .editsFloor: result = try editsFloorPhase(options, url)
            case .build: result = try buildPhase(options, url)
            case .open: result = try openPhase(options, url)
            case .shareSeed: result = try await shareSeedPhase(options, url)
            case .ownerFetch, .participantFetch: result = try await sharedFetchPhase(phase, options, url)
            case .commit: result = try await commitPhase(options, url)
            case .bundleExport: result = try bundleExportPhase(options, url)
            case .bundleCopy: result = try bundleCopyPhase(options, url)
            case .bundle: throw BenchError("--phase bundle: the parent runs build, bundle-export and bundle-copy")
            case .instrumentation:
                throw BenchError(
                    "--phase instrumentation: the parent runs fetch and commit, with --instrumented and without")
            case .share:
                throw BenchError("--phase share: the parent runs share-seed, owner-fetch and participant-fetch")
            case .decode: throw BenchError("--phase decode: the parent decodes, in its own process")
            }
            try ChildProcess.write(result, to: options.resultPath)
        } catch {
            emit("logsync-engine-bench (child): \(error)")
            throw ExitCode.failure
        }
    }

    /// The device log's durability, and its name.
    static func durability(_ options: EngineBench) -> DurabilityName { options.durabilities[0] }

    static func openServer(
        _ directory: URL, _ options: EngineBench, _ instrumentation: Instrumentation? = nil
    ) throws -> SyncServer {
        var configuration = SyncServer.Configuration(
            directory: directory, durability: .fast, maxChangesPerPage: options.page)
        if let instrumentation {
            configuration.metricsFactory = instrumentation.factory
            configuration.tracer = instrumentation.tracer
        }
        return try SyncServer(configuration)
    }

    // MARK: Seed

    static func seedPhase(_ options: EngineBench, _ directory: URL) async throws -> PhaseResult {
        let server = try openServer(directory.appendingPathComponent("server"), options)
        defer { server.shutdown() }
        let (seconds, requests) = try await seed(
            server.database(for: "alice", device: "seeder"), count: options.recordCount, progress: true)
        var result = PhaseResult(phase: "seed", records: options.recordCount)
        result.seedSeconds = seconds
        result.seedRequests = requests
        return result
    }

    // MARK: Initial sync

    static func fetchPhase(_ options: EngineBench, _ directory: URL) async throws -> PhaseResult {
        let (device, serverDirectory) = try PhaseDevice.named("fetch", server: "server", in: directory, options)
        return try await initialSync(device, "fetch", options, serverDirectory: serverDirectory)
    }

    /// A fresh engine's `fetchChanges()` to the end, timed; the delegate must then hold every
    /// record of the workload's type (a share record besides is not counted).
    static func initialSync(
        _ device: PhaseDevice, _ phase: String, _ options: EngineBench, serverDirectory: URL
    ) async throws -> PhaseResult {
        defer { device.server.shutdown() }
        var result = PhaseResult(phase: phase, durability: durability(options).rawValue, records: options.recordCount)
        let app = device.app
        result.anonBefore = Memory.read().anon
        let sampler = PeakSampler(total: options.recordCount) { app.store.withLock { $0.records.count } }
        try await measure(&result, sampler) { try await device.engine.fetchChanges() }
        result.curve = sampler.curve

        let figures = device.app.store.withLock { $0 }
        let records = figures.records.values.count { $0.recordType == RecordWorkload.recordType }
        guard records == options.recordCount else {
            throw BenchError(
                "the delegate holds \(records) records after the \(phase) phase, not \(options.recordCount)")
        }
        device.finish(&result, serverDirectory: serverDirectory)
        result.pages = figures.pages
        result.processed = records
        return result
    }

    // MARK: The floor of an initial sync

    /// The least work a device that keeps what it fetched can do: the same pages the engine
    /// fetches, as the HTTP transport delivers them (protobuf bytes), decoded into records and
    /// appended as they came, one LogStore entry and one commit per page, with no engine. The
    /// pages are read from the server and encoded before the clock starts.
    static func floorPhase(_ options: EngineBench, _ directory: URL) async throws -> PhaseResult {
        let serverDirectory = directory.appendingPathComponent("server")
        let server = try openServer(serverDirectory, options)
        defer { server.shutdown() }
        let database = TimedDatabase(server.database(for: "alice", device: "floor"))
        var pages: [[UInt8]] = []
        try await forEachZonePage(of: database) { pages.append(Wire.encode($0, as: .protobuf)) }

        var result = PhaseResult(phase: "floor", durability: durability(options).rawValue, records: options.recordCount)
        let logDirectory = directory.appendingPathComponent("floor-\(durability(options))")
        let log = try Log.open(
            at: logDirectory, named: "floor",
            options: LogEnvironment.Options(durability: durability(options).durability))
        // The app's part, as in the engine's runs: every record kept in a dictionary, its count
        // published for the memory curve.
        var kept: [Record.ID: Record] = [:]
        let held = Atomic<Int>(0)
        let sampler = PeakSampler(total: options.recordCount) { held.load(ordering: .relaxed) }
        result.anonBefore = Memory.read().anon
        try await measure(&result, sampler) {
            for bytes in pages {
                let page = try Wire.decode(FetchZoneChangesResponse.self, from: bytes, as: .protobuf)
                for modification in page.modifications { kept[modification.record.recordID] = modification.record }
                held.store(kept.count, ordering: .relaxed)
                try log.append(NewEntry(kind: 1, payload: bytes))
            }
        }
        result.curve = sampler.curve
        let records = kept.count
        guard records == options.recordCount else {
            throw BenchError("the floor decoded \(records) records, not \(options.recordCount)")
        }
        fillMemory(&result)
        result.appDataKB = Memory.read().anon - result.anonBefore
        result.encodedRecordBytes =
            Double(kept.values.reduce(0) { $0 + $1.protoBytes().count }) / Double(max(records, 1))
        withExtendedLifetime(kept) {}
        result.serverSeconds = database.totalSeconds
        result.serverCalls = database.figures.values.reduce(0) { $0 + $1.calls }
        result.pages = pages.count
        result.processed = records
        result.deviceLogBytes = fileSize(logDirectory.appendingPathComponent("data.mdb"))
        return result
    }

    // MARK: Sharing

    /// The owner of the shared zone, and the participant.
    static let owner: UserID = "alice"
    static let participant: UserID = "bob"

    /// Seeds the records into one zone of the owner's, shares the zone whole with the
    /// participant (read-write), who accepts.
    static func shareSeedPhase(_ options: EngineBench, _ directory: URL) async throws -> PhaseResult {
        let server = try openServer(directory.appendingPathComponent("server"), options)
        defer { server.shutdown() }
        let database = server.database(for: owner, device: "seeder")
        let (seconds, requests) = try await seed(
            database, count: options.recordCount, progress: true, in: sharedWorkload)

        try server.registerUser(participant, emailAddress: "\(participant.rawValue)@example.com")
        var share = Share(recordZoneID: sharedWorkload.zoneID(0))
        share.addParticipant(
            Share.Participant(emailAddress: "\(participant.rawValue)@example.com", permission: .readWrite))
        let saved = try await database.modifyRecords(saving: [share.record], deleting: []).saveResults[share.recordID]
        guard case .success(let record)? = saved, let url = try Share(record: record).url else {
            throw BenchError("saving the share of \(share.zoneID) failed: \(String(describing: saved))")
        }
        let accepted = try await server.database(for: participant, scope: .shared, device: "seeder")
            .acceptShares(AcceptSharesRequest(shareURLs: [url])).results[url]
        guard case .success? = accepted else {
            throw BenchError("accepting the share failed: \(String(describing: accepted))")
        }

        var result = PhaseResult(phase: "share-seed", records: options.recordCount)
        result.seedSeconds = seconds
        result.seedRequests = requests
        return result
    }

    /// The owner's (private database) or the participant's (shared database) initial sync of
    /// the shared zone, by a fresh engine on a fresh device log.
    static func sharedFetchPhase(
        _ phase: EngineBench.Phase, _ options: EngineBench, _ directory: URL
    ) async throws -> PhaseResult {
        let serverDirectory = directory.appendingPathComponent("server")
        let logDirectory = directory.appendingPathComponent("device-\(phase.rawValue)")
        try? FileManager.default.removeItem(at: logDirectory)
        defer { try? FileManager.default.removeItem(at: logDirectory) }
        let device = try PhaseDevice(
            serverDirectory, logDirectory, options, user: phase == .ownerFetch ? owner : participant,
            scope: phase == .ownerFetch ? .private : .shared)
        return try await initialSync(device, phase.rawValue, options, serverDirectory: serverDirectory)
    }

    // MARK: Sending

    static func sendPhase(_ options: EngineBench, _ directory: URL) async throws -> PhaseResult {
        let (device, serverDirectory) = try PhaseDevice.named(
            "send", server: "server-send-\(durability(options))", in: directory, options)
        defer { device.server.shutdown() }
        let engine = device.engine

        var result = PhaseResult(phase: "send", durability: durability(options).rawValue, records: options.recordCount)
        let sampler = PeakSampler()
        // The app creates its zones, then the user's edits arrive; each chunk is saved in the
        // app's store and its pending changes added in one call.
        try engine.state.add(pendingDatabaseChanges: workload.zoneIDs.map { .saveZone(RecordZone(zoneID: $0)) })
        var first = 0
        while first < options.recordCount {
            let last = min(first + options.chunk, options.recordCount)
            let records = (first..<last).map { workload.record($0, series: "edit") }
            device.app.store.withLock { store in for record in records { store.records[record.recordID] = record } }
            let started = ContinuousClock.now
            try engine.state.add(pendingRecordZoneChanges: records.map { .saveRecord($0.recordID) })
            result.addSeconds += seconds(since: started)
            result.addCalls += 1
            first = last
        }

        try await measure(&result, sampler) { try await engine.sendChanges() }

        let left = try engine.state.pendingRecordZoneChanges.count
        let figures = device.app.store.withLock { $0 }
        guard left == 0, figures.saved == options.recordCount, figures.failed == 0 else {
            throw BenchError(
                "after the send: \(figures.saved) saved, \(figures.failed) failed (\(figures.firstFailure ?? "-")), \(left) still pending"
            )
        }
        device.finish(&result, serverDirectory: serverDirectory)
        // The device log against the records it sent: the mean encoded size of the records as
        // the server saved them (the last known server records), and the payload bytes of each
        // kind of entry (the record as sent, `batchPrepared`; its result, `batchResult` or
        // `batchSaved`; the app's edits, `pendingRecordZoneChangesAdded`).
        // Reading them one by one is timed both ways (processor time: the server is idle): each
        // call reading the entry that holds its record alone, then keeping the entries read.
        let ids = (0..<options.recordCount).map { workload.recordID($0, series: "edit") }
        var saved: [Record] = []
        saved.reserveCapacity(ids.count)
        for keeping in [false, true] {
            saved.removeAll(keepingCapacity: true)
            let start = cpuSeconds()
            for id in ids {
                guard let record = try engine.deviceLog.lastKnownServerRecord(for: id, keepingEntries: keeping) else {
                    throw BenchError("no last known server record for \(id) after the send")
                }
                saved.append(record)
            }
            let seconds = cpuSeconds() - start
            if keeping { result.lookupKeptSeconds = seconds } else { result.lookupAloneSeconds = seconds }
        }
        let encoded = saved.reduce(0) { $0 + $1.protoBytes().count }
        result.encodedRecordBytes = Double(encoded) / Double(max(options.recordCount, 1))
        try engine.deviceLog.log.forEachEntry { entry in
            let name = DeviceEntry.Kind.name(of: entry.kind) ?? "kind \(entry.kind)"
            result.entryBytes[name, default: 0] += entry.payload.count
        }
        result.pendingReadSeconds = figures.pendingReadSeconds
        result.batchBuildSeconds = figures.batchBuildSeconds
        result.batches = figures.batches
        result.firstPendingReadSeconds = figures.pendingReads.first?.seconds ?? 0
        result.firstPendingCount = figures.pendingReads.first?.count ?? 0
        let lastNonEmpty = figures.pendingReads.last(where: { $0.count > 0 })
        result.lastPendingReadSeconds = lastNonEmpty?.seconds ?? 0
        result.lastPendingCount = lastNonEmpty?.count ?? 0
        result.processed = figures.saved
        if ProcessInfo.processInfo.environment["ENGINE_BENCH_BATCH_TIMES"] != nil {
            for (i, read) in figures.pendingReads.enumerated() where i % 25 == 0 || i == figures.pendingReads.count - 1
            {
                emit("    batch \(i): pending list of \(grouped(read.count)) read in \(ms(read.seconds))")
            }
        }
        return result
    }

    // MARK: Concurrent edits

    /// The records edited in the edits phase: one pending save per `state.add` call, from
    /// `options.editTasks` tasks at once, each acknowledged when its commit is on disk (for
    /// `.durable`); the device log's group commit shares commits between the waiting calls.
    static func editsPhase(_ options: EngineBench, _ directory: URL) async throws -> PhaseResult {
        let (device, serverDirectory) = try PhaseDevice.named("edits", server: "server-edits", in: directory, options)
        defer { device.server.shutdown() }
        let engine = device.engine
        let ids = (0..<options.recordCount).map { workload.record($0, series: "edit").recordID }
        let tasks = options.editTasks
        var result = PhaseResult(phase: "edits", durability: durability(options).rawValue, records: options.recordCount)
        let sampler = PeakSampler()
        try await measure(&result, sampler) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        for index in stride(from: task, to: ids.count, by: tasks) {
                            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(ids[index])])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let pending = try engine.state.pendingRecordZoneChanges.count
        guard pending == options.recordCount else {
            throw BenchError("\(pending) changes pending after \(options.recordCount) edits")
        }
        device.finish(&result, serverDirectory: serverDirectory)
        result.entries = Int(try engine.deviceLog.log.lastOffset.rawValue)
        result.processed = pending
        let edits = UInt64(options.recordCount)
        result.commits = try commitCount(engine.deviceLog.log, LogOffset(rawValue: 1)...LogOffset(rawValue: edits))

        // The same edits again (re-adding a pending save appends an entry all the same), from
        // as many threads: `state.add` blocks its caller until the commit, so tasks on the
        // cooperative pool (one thread per core) keep only that many calls waiting at once.
        let threads = tasks
        let errors = Mutex<[any Error]>([])
        let done = DispatchGroup()
        let threadCPUBefore = cpuSeconds()
        let started = ContinuousClock.now
        for thread in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                do {
                    for index in stride(from: thread, to: ids.count, by: threads) {
                        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(ids[index])])
                    }
                } catch {
                    errors.withLock { $0.append(error) }
                }
            }
        }
        done.wait()
        result.threadSeconds = seconds(since: started)
        result.threadCPUSeconds = cpuSeconds() - threadCPUBefore
        if let error = errors.withLock({ $0.first }) { throw error }
        result.threadCommits = try commitCount(
            engine.deviceLog.log, LogOffset(rawValue: edits + 1)...LogOffset(rawValue: 2 * edits))

        // The same edits once more, from as many tasks, through the suspending mutations: a task
        // waiting for its commit is suspended and leaves its thread to the others.
        let suspendingCPUBefore = cpuSeconds()
        let suspendingStarted = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for index in stride(from: task, to: ids.count, by: tasks) {
                        try await engine.state.suspending.add(pendingRecordZoneChanges: [.saveRecord(ids[index])])
                    }
                }
            }
            try await group.waitForAll()
        }
        result.suspendingSeconds = seconds(since: suspendingStarted)
        result.suspendingCPUSeconds = cpuSeconds() - suspendingCPUBefore
        let entries = Int(try engine.deviceLog.log.lastOffset.rawValue)
        guard entries == 3 * options.recordCount else {
            throw BenchError("\(entries) entries after three rounds of \(options.recordCount) edits")
        }
        result.suspendingCommits = try commitCount(
            engine.deviceLog.log, LogOffset(rawValue: 2 * edits + 1)...LogOffset(rawValue: 3 * edits))
        return result
    }

    /// The transactions that appended the entries of `range`: the entries of one transaction
    /// share its time (taken once per append), and two transactions never got the same
    /// microsecond in these runs' commits (each takes longer than that).
    static func commitCount(_ log: Log, _ range: ClosedRange<LogOffset>) throws -> Int {
        var commits = 0
        var last: EntryTime?
        try log.forEachEntry(from: range.lowerBound, through: range.upperBound) { entry in
            if entry.time != last { commits += 1 }
            last = entry.time
        }
        return commits
    }

    /// The edits' floor: entries of the size of one edit's `pendingRecordZoneChangesAdded`,
    /// appended with LogStore alone, 100 per commit, same durability, one writer.
    static func editsFloorPhase(_ options: EngineBench, _ directory: URL) throws -> PhaseResult {
        let logDirectory = directory.appendingPathComponent("edits-floor-\(durability(options))")
        let log = try Log.open(
            at: logDirectory, named: "floor",
            options: LogEnvironment.Options(durability: durability(options).durability))
        // The payload of one edit's entry: a pending save of the edits' first record.
        let payload = [UInt8](repeating: 0x5A, count: 36)
        var result = PhaseResult(
            phase: "edits-floor", durability: durability(options).rawValue, records: options.recordCount)
        let started = ContinuousClock.now
        let cpuBefore = cpuSeconds()
        var first = 0
        while first < options.recordCount {
            let count = min(100, options.recordCount - first)
            try log.append((0..<count).map { _ in NewEntry(kind: 1, payload: payload) })
            first += count
        }
        result.seconds = seconds(since: started)
        result.cpuSeconds = cpuSeconds() - cpuBefore
        result.processed = options.recordCount
        return result
    }

    /// Times `body` (wall and CPU time) into `result`, with its memory before and the sampled peak.
    static func measure(
        _ result: inout PhaseResult, _ sampler: PeakSampler, _ body: () async throws -> Void
    ) async throws {
        result.hwmBefore = Memory.read().hwm
        let cpuBefore = cpuSeconds()
        let started = ContinuousClock.now
        try await body()
        result.seconds = seconds(since: started)
        result.cpuSeconds = cpuSeconds() - cpuBefore
        result.peakAnon = sampler.stop()
    }

    static func fillMemory(_ result: inout PhaseResult) {
        let memory = Memory.read()
        result.hwm = memory.hwm
        result.rss = memory.rss
        result.anon = memory.anon
        result.file = memory.file
        result.peakAnon = max(result.peakAnon, memory.anon)
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        result.maxrss = Int(usage.ru_maxrss)
    }
}

// MARK: The device

/// The device of the fetch and send phases: a fresh engine on its own device log (of the
/// durability measured), against the server in its directory through a `TimedDatabase`.
struct PhaseDevice {
    let server: SyncServer
    let database: TimedDatabase
    let logDirectory: URL
    let app: App
    let engine: SyncEngine
    /// With `--instrumented`, what the server and the engine record into.
    let instrumentation: Instrumentation?

    init(
        _ serverDirectory: URL, _ logDirectory: URL, _ options: EngineBench, user: UserID = "alice",
        scope: DatabaseScope = .private
    ) throws {
        instrumentation = options.instrumented ? Instrumentation() : nil
        server = try Child.openServer(serverDirectory, options, instrumentation)
        database = TimedDatabase(server.database(for: user, scope: scope, device: "phone"))
        self.logDirectory = logDirectory
        let deviceLog = try DeviceLog(
            directory: logDirectory, options: LogEnvironment.Options(durability: Child.durability(options).durability))
        app = App(deviceLog: deviceLog, batches: options.batches)
        var configuration = SyncEngine.Configuration(database: database, deviceLog: deviceLog, delegate: app)
        configuration.automaticallySync = false
        if let instrumentation {
            configuration.metricsFactory = instrumentation.factory
            configuration.tracer = instrumentation.tracer
        }
        engine = try SyncEngine(configuration)
    }

    /// The device of the phase `phase` (its log in `device-PHASE-DURABILITY`) on the server in
    /// `server`, both under `directory`, and the server's directory.
    static func named(
        _ phase: String, server: String, in directory: URL, _ options: EngineBench
    ) throws -> (PhaseDevice, URL) {
        let serverDirectory = directory.appendingPathComponent(server)
        let logDirectory = directory.appendingPathComponent("device-\(phase)-\(Child.durability(options))")
        return (try PhaseDevice(serverDirectory, logDirectory, options), serverDirectory)
    }

    /// The figures of every phase: memory at the end, time in the delegate and in the server,
    /// the sizes of the device log and of the server's files.
    func finish(_ result: inout PhaseResult, serverDirectory: URL) {
        Child.fillMemory(&result)
        let figures = app.store.withLock { $0 }
        result.handleEventSeconds = figures.handleEventSeconds
        result.events = figures.events
        result.serverSeconds = database.totalSeconds
        result.serverCalls = database.figures.values.reduce(0) { $0 + $1.calls }
        result.deviceLogBytes = fileSize(logDirectory.appendingPathComponent("data.mdb"))
        result.serverBytes = directorySize(serverDirectory)
        instrumentation?.finish(&result)
    }
}

/// The app: holds its records in a dictionary, keeping every record it fetches; builds each
/// batch to send from the pending list as the documentation shows
/// (`state.pendingRecordZoneChanges`, filtered by the send's scope, into
/// `RecordZoneChangeBatch(pendingChanges:recordProvider:)`), and puts each record's fields on
/// the last known server record's system fields when there is one (as the scenario tests'
/// `TestDevice` does).
final class App: SyncEngineDelegate {
    struct Store {
        var records: [Record.ID: Record] = [:]
        var handleEventSeconds = 0.0
        var events = 0
        /// Fetching: pages with records.
        var pages = 0
        /// Sending: records saved and failed, the first failure.
        var saved = 0
        var failed = 0
        var firstFailure: String?
        /// Sending: time in `nextRecordZoneChangeBatch`, and each pending list read.
        var pendingReadSeconds = 0.0
        var batchBuildSeconds = 0.0
        var batches = 0
        var pendingReads: [(count: Int, seconds: Double)] = []
    }

    let store = Mutex(Store())
    let deviceLog: DeviceLog
    let batches: EngineBench.BatchSource

    init(deviceLog: DeviceLog, batches: EngineBench.BatchSource = .cursor) {
        self.deviceLog = deviceLog
        self.batches = batches
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        let started = ContinuousClock.now
        store.withLock { store in
            switch event {
            case .fetchedRecordZoneChanges(let changes):
                store.pages += 1
                for modification in changes.modifications {
                    store.records[modification.record.recordID] = modification.record
                }
                for deletion in changes.deletions { store.records.removeValue(forKey: deletion.recordID) }
            case .fetchedDatabaseChanges(let changes):
                let gone = Set(changes.deletions.map(\.zoneID))
                if !gone.isEmpty { store.records = store.records.filter { !gone.contains($0.key.zoneID) } }
            case .sentRecordZoneChanges(let sent):
                store.saved += sent.savedRecords.count
                store.failed += sent.failedRecordSaves.count + sent.failedRecordDeletes.count
                if store.firstFailure == nil, let failure = sent.failedRecordSaves.first {
                    store.firstFailure = "\(failure.record.recordID): \(failure.error)"
                }
            default:
                break
            }
            store.events += 1
            store.handleEventSeconds += seconds(since: started)
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let started = ContinuousClock.now
        if batches == .cursor {
            let batch = try? await SyncEngine.RecordZoneChangeBatch(
                state: syncEngine.state, scope: context.options.scope
            ) { id in
                self.record(for: id)
            }
            store.withLock { store in
                store.batches += 1
                store.batchBuildSeconds += (ContinuousClock.now - started).seconds
            }
            return batch
        }
        let pending = (try? syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)) ?? []
        let read = ContinuousClock.now
        let batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in self.record(for: id) }
        let built = ContinuousClock.now
        store.withLock { store in
            store.batches += 1
            store.pendingReadSeconds += (read - started).seconds
            store.batchBuildSeconds += (built - read).seconds
            store.pendingReads.append((pending.count, (read - started).seconds))
        }
        return batch
    }

    private func record(for id: Record.ID) -> Record? {
        guard let local = store.withLock({ $0.records[id] }) else { return nil }
        guard let known = try? deviceLog.lastKnownServerRecord(for: id) else { return local }
        var record = known.systemFieldsCopy()
        for key in local.allKeys() { record[key] = local[key] }
        return record
    }
}

// MARK: Measuring

/// The apparent size of every file under `url`.
func directorySize(_ url: URL) -> Int {
    guard let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.fileSizeKey]) else {
        return 0
    }
    var total = 0
    for case let file as URL in enumerator {
        total += (try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0
    }
    return total
}
