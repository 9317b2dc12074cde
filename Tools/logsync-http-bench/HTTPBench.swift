// logsync-http-bench: the engine over HTTP on loopback against the engine in process, in the
// same run, and push latency with many connected devices.
//
// 1. Initial sync: N records (≈300 B, 10 zones) seeded on a fresh server; a fresh device
//    engine runs `fetchChanges()` to the end, once with `InProcessDatabase`, once with an
//    `HTTPCloudDatabase` on a loopback `HTTPSyncServer` in this process. records/s, and the
//    ratio HTTP / in process.
// 2. Sending: N edits queued on a fresh device, `sendChanges()` to a fresh server, both ways.
// 3. Push latency: D devices (HTTP clients with a push stream each) of one user; another device
//    commits one record C times, waiting each time until every device has the hint naming the
//    commit's token. Latency: from sending the commit request to a device receiving its hint
//    (so it includes the commit's own request, whose median is printed beside it).
//
// Device logs and the server are `.fast` (commit costs are logsync-server-bench's and
// logsync-engine-bench's subject); the JSON format is not measured.
//
//   swift build -c release --product logsync-http-bench --scratch-path .build-h
//   .build-h/release/logsync-http-bench [--records N] [--devices N] [--commits N] [--quick] [--dir PATH]
//
// Docs/Performance.md ("Over HTTP") has the figures of the reference machine.
import ArgumentParser
import BenchSupport
import Foundation
import LogStore
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import Logging
import SyncModel
import Synchronization

@main
struct HTTPBench: BenchCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-http-bench",
        abstract:
            "The engine over HTTP on loopback against the engine in process, and push latency with many connected devices.",
        discussion: "Docs/Performance.md (\"Over HTTP\") has the figures of the reference machine.")

    @OptionGroup var common: CommonOptions

    @OptionGroup var records: SyncedRecordsOption

    @Option(
        help: ArgumentHelp("Connected devices awaiting each push (default 100, 10 with --quick).", valueName: "N"),
        transform: count())
    var devices: Int?

    @Option(
        help: ArgumentHelp("Commits whose push is timed (default 100, 20 with --quick).", valueName: "N"),
        transform: count())
    var commits: Int?

    @Option(
        help: ArgumentHelp(
            "Requests timed per credential in the authentication phase (default 4,000, 400 with --quick).",
            valueName: "N"),
        transform: count())
    var requests: Int?

    var recordCount: Int { records.total(common) }
    var requestCount: Int { requests ?? common.size(4_000, quick: 400) }
    var deviceCount: Int { devices ?? common.size(100, quick: 10) }
    var commitCount: Int { commits ?? common.size(100, quick: 20) }

    func measure(in scratch: ScratchDirectory) async throws {
        printHeader(
            "logsync-http-bench — the engine over loopback HTTP against the engine in process, and push latency",
            scratch: scratch)
        emit("  \(grouped(recordCount)) records, \(deviceCount) devices, \(commitCount) commits")

        var rows: [[String]] = [
            [
                "phase", "transport", "seconds", "records/s", "HTTP / in process", "floor records/s", "engine / floor",
            ]
        ]
        let phases: [(String, (Transport, Int, ScratchDirectory) async throws -> (engine: Double, floor: Double?))] = [
            ("initial sync (fetchChanges)", initialSync),
            ("sending (sendChanges)", { (try await sending($0, records: $1, scratch: $2), nil) }),
        ]
        for (name, phase) in phases {
            var perSecond: [Transport: Double] = [:]
            for transport in Transport.allCases {
                emit("  \(name), \(transport.rawValue)…")
                let (elapsed, floor) = try await phase(transport, recordCount, scratch)
                perSecond[transport] = Double(recordCount) / elapsed
                rows.append([
                    name, transport.rawValue, String(format: "%.2f", elapsed), grouped(Int(perSecond[transport]!)),
                    transport == .http ? ratio(perSecond[.http]! / perSecond[.inProcess]!) : "",
                    floor.map { grouped(Int(Double(recordCount) / $0)) } ?? "", floor.map { ratio($0 / elapsed) } ?? "",
                ])
            }
        }
        emit()
        emit(
            "floor: the same pages through the same transport with no engine: each page's records kept in a dictionary "
                + "and its bytes appended to a LogStore log, one entry and commit per page (.fast); measured in the same run"
        )
        emit(table(rows))

        emit("  authentication, \(grouped(requestCount)) requests each…")
        let authentication = try await authenticatedRequests(requestCount, scratch: scratch)
        emit()
        emit(
            table([
                ["authentication: fetchDatabaseChanges, 8 at a time", "requests/s", "session / static"],
                ["static bearer token (user add)", grouped(Int(authentication.bearer)), ""],
                [
                    "session access token (sign-in)", grouped(Int(authentication.session)),
                    ratio(authentication.session / authentication.bearer),
                ],
            ]))

        emit("  push latency, \(deviceCount) devices…")
        let push = try await pushLatency(devices: deviceCount, commits: commitCount, scratch: scratch)
        emit()
        emit(
            table([
                ["push: commit request sent → hint received", "samples", "median", "p99"],
                [
                    "\(deviceCount) devices × \(commitCount) commits", grouped(push.latency.values.count),
                    ms(push.latency.median), ms(push.latency.p99),
                ],
                [
                    "the commit request alone", grouped(push.commit.values.count), ms(push.commit.median),
                    ms(push.commit.p99),
                ],
            ]))
        printLoadAtEnd()
    }
}

/// The records of both phases: about 300 bytes of field data each, over 10 zones.
let workload = RecordWorkload(zones: 10)

/// A delegate that keeps the records it is given and sends the records it holds.
final class Device: SyncEngineDelegate {
    let records = Mutex<[Record.ID: Record]>([:])

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        if case .fetchedRecordZoneChanges(let changes) = event {
            records.withLock { records in
                for change in changes.modifications { records[change.record.recordID] = change.record }
            }
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        // A cursor over the pending list (reading the whole list for every batch costs
        // O(n²) over a send; Docs/Performance.md, "Sending").
        try? await SyncEngine.RecordZoneChangeBatch(state: syncEngine.state, scope: context.options.scope) { id in
            self.records.withLock { $0[id] }
        }
    }
}

/// Where a device's engine sends its requests.
enum Transport: String, CaseIterable {
    case inProcess = "in process"
    case http = "HTTP (loopback)"
}

/// A fresh server in `directory`, reached both ways: in process, and over loopback HTTP.
struct Server {
    static let token = "lsk_bench-token-0123456789abcdef"
    let server: SyncServer
    let sessions: SessionStore
    let running: RunningHTTPSyncServer

    static func start(_ directory: URL) async throws -> Server {
        let server = try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast))
        let sessions = try SessionStore(server: server)
        let tokens = TokenStore(sessions: sessions)
        try tokens.add(token: token, for: "bench")
        let running = try await RunningHTTPSyncServer.start(
            HTTPSyncServer(
                server: server, tokens: tokens,
                configuration: .init(port: 0, userLimits: .unlimited, addressLimits: .unlimited),
                logger: Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })))
        return Server(server: server, sessions: sessions, running: running)
    }

    func client(device: String, token: String = Self.token) -> HTTPSyncClient {
        HTTPSyncClient(
            .init(
                serverURL: URL(string: "http://127.0.0.1:\(running.port)")!, credentials: .token(token),
                device: DeviceID(device)))
    }

    func database(_ transport: Transport, device: String) -> any CloudDatabase {
        switch transport {
        case .inProcess: server.database(for: "bench", device: DeviceID(device))
        case .http: client(device: device).database()
        }
    }

    func stop() async throws {
        try await running.stop()
        server.shutdown()
    }
}

func engine(_ database: any CloudDatabase, _ directory: URL, _ device: Device) throws -> SyncEngine {
    let log = try DeviceLog(
        directory: directory, options: LogEnvironment.Options(durability: .fast, initialMapSize: 64 << 20))
    var configuration = SyncEngine.Configuration(database: database, deviceLog: log, delegate: device)
    configuration.automaticallySync = false
    return try SyncEngine(configuration)
}

/// Phase 1: seed, then time a fresh device's `fetchChanges()`, and the floor of the same work.
func initialSync(
    _ transport: Transport, records: Int, scratch: ScratchDirectory
) async throws -> (engine: Double, floor: Double?) {
    let directory = scratch.subdirectory("fetch-\(transport == .http ? "http" : "local")")
    let server = try await Server.start(directory.appendingPathComponent("server"))
    let seeder = server.server.database(for: "bench", device: "seeder")
    try await workload.createZones(in: seeder)
    _ = try await workload.save(records, series: "seed", to: seeder, requestIDs: false)
    let device = Device()
    let fresh = try engine(
        server.database(transport, device: "fresh"), directory.appendingPathComponent("device"), device)
    let started = ContinuousClock.now
    try await fresh.fetchChanges()
    let elapsed = seconds(since: started)
    let count = device.records.withLock { $0.count }
    guard count == records else {
        throw BenchError("\(transport): the fresh device got \(count) of \(records) records")
    }
    let floor = try await floorSync(
        server.database(transport, device: "floor"), records: records, log: directory.appendingPathComponent("floor"))
    try await server.stop()
    scratch.remove(directory)
    return (elapsed, floor)
}

/// The least a device that keeps what it fetched does through `database`: every page of every
/// zone fetched (and, over HTTP, decoded by the client), its records kept in a dictionary, its
/// bytes appended to a LogStore log, one entry and commit per page. Encoding the decoded page
/// back into bytes to append is timed apart and not counted. Returns the seconds.
func floorSync(_ database: any CloudDatabase, records: Int, log directory: URL) async throws -> Double {
    let log = try Log.open(at: directory, named: "floor", options: LogEnvironment.Options(durability: .fast))
    var kept: [Record.ID: Record] = [:]
    var encoding = 0.0
    let started = ContinuousClock.now
    try await forEachZonePage(of: database) { page in
        for modification in page.modifications { kept[modification.record.recordID] = modification.record }
        let encodeStarted = ContinuousClock.now
        let bytes = Wire.encode(page, as: .protobuf)
        encoding += seconds(since: encodeStarted)
        try log.append(NewEntry(kind: 1, payload: bytes))
    }
    let elapsed = seconds(since: started) - encoding
    guard kept.count == records else { throw BenchError("the floor got \(kept.count) of \(records) records") }
    return elapsed
}

/// Phase 2: queue the edits, then time `sendChanges()`.
func sending(_ transport: Transport, records: Int, scratch: ScratchDirectory) async throws -> Double {
    let directory = scratch.subdirectory("send-\(transport == .http ? "http" : "local")")
    let server = try await Server.start(directory.appendingPathComponent("server"))
    let device = Device()
    let sender = try engine(
        server.database(transport, device: "sender"), directory.appendingPathComponent("device"), device)
    try sender.state.add(pendingDatabaseChanges: workload.zoneIDs.map { .saveZone(RecordZone(zoneID: $0)) })
    for first in stride(from: 0, to: records, by: 1_000) {
        let batch = (first..<min(first + 1_000, records)).map { workload.record($0, series: "edit") }
        device.records.withLock { records in for record in batch { records[record.recordID] = record } }
        try sender.state.add(pendingRecordZoneChanges: batch.map { .saveRecord($0.recordID) })
    }
    let started = ContinuousClock.now
    try await sender.sendChanges()
    let elapsed = seconds(since: started)
    let left = try sender.state.pendingRecordZoneChanges.count
    guard left == 0 else { throw BenchError("\(transport): \(left) changes still pending after sendChanges") }
    try await server.stop()
    scratch.remove(directory)
    return elapsed
}

/// The commit whose hint the devices are awaited for, and when each device got it.
struct Awaited: Sendable {
    var offset = UInt64.max
    var arrivals: [ContinuousClock.Instant] = []
    var continuation: CheckedContinuation<Void, Never>?
}

final class AwaitedCommit: Sendable {
    let state = Mutex(Awaited())
}

/// Phase 3: push latency to `devices` connected devices over `commits` commits.
func pushLatency(
    devices: Int, commits: Int, scratch: ScratchDirectory
) async throws -> (latency: Samples, commit: Samples) {
    let directory = scratch.subdirectory("push")
    let server = try await Server.start(directory.appendingPathComponent("server"))
    let writer = server.client(device: "writer").database()
    let zone = RecordZone.ID(zoneName: "Notes")
    _ = try await writer.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
    _ = try await writer.modifySubscriptions(saving: [Subscription(subscriptionID: "engine")], deleting: [])

    // Each device's pump notes when the hint of the awaited commit (or a later one) arrived.
    let box = AwaitedCommit()
    var clients: [HTTPSyncClient] = []
    var pumps: [Task<Void, Never>] = []
    for index in 0..<devices {
        let client = server.client(device: "device-\(index)")
        clients.append(client)
        let hints = client.database().pushHints()
        pumps.append(
            Task {
                for await hint in hints {
                    guard let offset = hint.changeToken?.offset.rawValue else { continue }
                    let now = ContinuousClock.now
                    let done = box.state.withLock { state -> CheckedContinuation<Void, Never>? in
                        guard offset >= state.offset else { return nil }
                        state.arrivals.append(now)
                        guard state.arrivals.count == devices, let continuation = state.continuation else { return nil }
                        state.continuation = nil
                        return continuation
                    }
                    done?.resume()
                }
            })
    }
    for client in clients { await client.waitForPushChannels() }

    var latency = Samples()
    var commit = Samples()
    for index in 0..<commits {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n\(index)", zoneID: zone))
        record["title"] = .string("commit \(index)")
        let expected = try server.server.admin.currentToken(of: "bench").offset.rawValue + 1
        box.state.withLock { $0 = Awaited(offset: expected) }
        let started = ContinuousClock.now
        _ = try await writer.modifyRecords(saving: [record], deleting: [])
        commit.values.append(seconds(since: started))
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = box.state.withLock { state in
                if state.arrivals.count >= devices { return true }
                state.continuation = continuation
                return false
            }
            if ready { continuation.resume() }
        }
        for time in box.state.withLock({ $0.arrivals }) { latency.values.append((time - started).seconds) }
    }
    for client in clients { client.close() }
    for pump in pumps { await pump.value }
    try await server.stop()
    scratch.remove(directory)
    return (latency, commit)
}

/// Phase 3: the same small request (a database's changes, none new) sent `count` times, 8 at a
/// time, with the static bearer token and with a session's access token, in one run: what a
/// session costs a request. Returns requests per second of each.
func authenticatedRequests(_ count: Int, scratch: ScratchDirectory) async throws -> (bearer: Double, session: Double) {
    let directory = scratch.subdirectory("authentication")
    let server = try await Server.start(directory.appendingPathComponent("server"))
    let issued = try server.sessions.create(user: "bench", device: "session-device")
    func rate(_ token: String, device: String) async throws -> Double {
        let database = server.client(device: device, token: token).database()
        _ = try await database.fetchDatabaseChanges(FetchDatabaseChangesRequest(since: nil))  // warm the connection
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for _ in stride(from: worker, to: count, by: 8) {
                        _ = try await database.fetchDatabaseChanges(FetchDatabaseChangesRequest(since: nil))
                    }
                }
            }
            try await group.waitForAll()
        }
        return Double(count) / seconds(since: started)
    }
    // Alternated, three times each, the best of each kept: neither gains from going second, and
    // a burst of other work on the machine costs one round, not the figure.
    var bearer: [Double] = []
    var session: [Double] = []
    for _ in 0..<3 {
        bearer.append(try await rate(Server.token, device: "bearer-device"))
        session.append(try await rate(issued.accessToken, device: "session-device"))
    }
    try await server.stop()
    scratch.remove(directory)
    return (bearer.max()!, session.max()!)
}
