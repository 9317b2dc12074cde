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
//   .build-h/release/logsync-http-bench [--records N] [--devices N] [--commits N] [--dir PATH]
//
// Docs/Performance.md ("Over HTTP") has the figures of the reference machine.
import BenchSupport
import Foundation
import LogStore
import Logging
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import Synchronization

struct Options {
    var records = 100_000
    var devices = 100
    var commits = 100
    var directory: String?

    init(_ arguments: [String]) throws {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            func value() throws -> String {
                guard let value = iterator.next() else { throw BenchFailure("\(argument) needs a value") }
                return value
            }
            func number() throws -> Int {
                guard let number = Int(try value()), number > 0 else { throw BenchFailure("\(argument) needs a positive number") }
                return number
            }
            switch argument {
            case "--records": records = try number()
            case "--devices": devices = try number()
            case "--commits": commits = try number()
            case "--dir": directory = try value()
            default: throw BenchFailure("unknown argument \(argument); see the comment at the top of main.swift")
            }
        }
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum Workload {
    static let zones = (0..<10).map { RecordZone.ID(zoneName: "zone-\($0)") }

    static func record(_ index: Int, series: String) -> Record {
        var record = Record(recordType: "Item", recordID: Record.ID(recordName: "\(series)-\(index)", zoneID: zones[index % zones.count]))
        record["title"] = .string(String(repeating: "t", count: 80))
        record["body"] = .string(String(repeating: "Body text of item \(index). ", count: 6).prefix(160).description)
        record["author"] = .string("user-\(index % 977)")
        record["count"] = .int64(Int64(index))
        record["position"] = .int64(Int64(index &* 2_654_435_761 % 1_000_003))
        return record
    }
}

/// A delegate that keeps the records it is given and sends the records it holds.
final class Device: SyncEngineDelegate {
    let records = Mutex<[Record.ID: Record]>([:])

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        if case .fetchedRecordZoneChanges(let changes) = event {
            records.withLock { records in for change in changes.modifications { records[change.record.recordID] = change.record } }
        }
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = ((try? syncEngine.state.pendingRecordZoneChanges) ?? []).filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in self.records.withLock { $0[id] } }
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
    let running: RunningHTTPSyncServer

    static func start(_ directory: URL) async throws -> Server {
        let server = try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast))
        let tokens = TokenStore()
        try tokens.add(token: token, for: "bench")
        let running = try await RunningHTTPSyncServer.start(HTTPSyncServer(
            server: server, tokens: tokens, configuration: .init(port: 0),
            logger: Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })))
        return Server(server: server, running: running)
    }

    func client(device: String) -> HTTPSyncClient {
        HTTPSyncClient(.init(serverURL: URL(string: "http://127.0.0.1:\(running.port)")!, token: Self.token, device: DeviceID(device)))
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
    let log = try DeviceLog(directory: directory, options: LogEnvironment.Options(durability: .fast, initialMapSize: 64 << 20))
    var configuration = SyncEngine.Configuration(database: database, deviceLog: log, delegate: device)
    configuration.automaticallySync = false
    return try SyncEngine(configuration)
}

/// Phase 1: seed, then time a fresh device's `fetchChanges()`.
func initialSync(_ transport: Transport, records: Int, scratch: ScratchDirectory) async throws -> Double {
    let directory = scratch.subdirectory("fetch-\(transport == .http ? "http" : "local")")
    let server = try await Server.start(directory.appendingPathComponent("server"))
    let seeder = server.server.database(for: "bench", device: "seeder")
    _ = try await seeder.modifyZones(saving: Workload.zones.map { RecordZone(zoneID: $0) }, deleting: [])
    for first in stride(from: 0, to: records, by: 400) {
        let batch = (first..<min(first + 400, records)).map { Workload.record($0, series: "seed") }
        _ = try await seeder.modifyRecords(ModifyRecordsRequest(recordsToSave: batch))
    }
    let device = Device()
    let fresh = try engine(server.database(transport, device: "fresh"), directory.appendingPathComponent("device"), device)
    let started = ContinuousClock.now
    try await fresh.fetchChanges()
    let elapsed = seconds(since: started)
    let count = device.records.withLock { $0.count }
    guard count == records else { throw BenchFailure("\(transport): the fresh device got \(count) of \(records) records") }
    try await server.stop()
    scratch.remove(directory)
    return elapsed
}

/// Phase 2: queue the edits, then time `sendChanges()`.
func sending(_ transport: Transport, records: Int, scratch: ScratchDirectory) async throws -> Double {
    let directory = scratch.subdirectory("send-\(transport == .http ? "http" : "local")")
    let server = try await Server.start(directory.appendingPathComponent("server"))
    let device = Device()
    let sender = try engine(server.database(transport, device: "sender"), directory.appendingPathComponent("device"), device)
    try sender.state.add(pendingDatabaseChanges: Workload.zones.map { .saveZone(RecordZone(zoneID: $0)) })
    for first in stride(from: 0, to: records, by: 1_000) {
        let batch = (first..<min(first + 1_000, records)).map { Workload.record($0, series: "edit") }
        device.records.withLock { records in for record in batch { records[record.recordID] = record } }
        try sender.state.add(pendingRecordZoneChanges: batch.map { .saveRecord($0.recordID) })
    }
    let started = ContinuousClock.now
    try await sender.sendChanges()
    let elapsed = seconds(since: started)
    let left = try sender.state.pendingRecordZoneChanges.count
    guard left == 0 else { throw BenchFailure("\(transport): \(left) changes still pending after sendChanges") }
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
func pushLatency(devices: Int, commits: Int, scratch: ScratchDirectory) async throws -> (latency: Samples, commit: Samples) {
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
        pumps.append(Task {
            for await hint in hints {
                guard let offset = hint.changeToken?.offset else { continue }
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
        let expected = try server.server.admin.currentToken(of: "bench").offset + 1
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
        for time in box.state.withLock({ $0.arrivals }) {
            let (whole, atto) = (time - started).components
            latency.values.append(Double(whole) + Double(atto) * 1e-18)
        }
    }
    for client in clients { client.close() }
    for pump in pumps { await pump.value }
    try await server.stop()
    scratch.remove(directory)
    return (latency, commit)
}

let options: Options
do {
    options = try Options(CommandLine.arguments)
} catch {
    FileHandle.standardError.write(Data("logsync-http-bench: \(error)\n".utf8))
    exit(2)
}
let scratch = try ScratchDirectory(options.directory)
defer { scratch.finish() }
emit("logsync-http-bench: \(grouped(options.records)) records, \(options.devices) devices, \(options.commits) commits")
emit("machine: \(cpuModel()), load \(loadAverage())")

var rows: [[String]] = [["phase", "transport", "seconds", "records/s", "HTTP / in process"]]
for (name, phase) in [("initial sync (fetchChanges)", initialSync), ("sending (sendChanges)", sending)] as [(String, (Transport, Int, ScratchDirectory) async throws -> Double)] {
    var perSecond: [Transport: Double] = [:]
    for transport in Transport.allCases {
        emit("  \(name), \(transport.rawValue)…")
        let elapsed = try await phase(transport, options.records, scratch)
        perSecond[transport] = Double(options.records) / elapsed
        rows.append([name, transport.rawValue, String(format: "%.2f", elapsed), grouped(Int(perSecond[transport]!)),
                     transport == .http ? ratio(perSecond[.http]! / perSecond[.inProcess]!) : ""])
    }
}
emit()
emit(table(rows))

emit("  push latency, \(options.devices) devices…")
let push = try await pushLatency(devices: options.devices, commits: options.commits, scratch: scratch)
emit()
emit(table([
    ["push: commit request sent → hint received", "samples", "median", "p99"],
    ["\(options.devices) devices × \(options.commits) commits", grouped(push.latency.values.count), ms(push.latency.median), ms(push.latency.p99)],
    ["the commit request alone", grouped(push.commit.values.count), ms(push.commit.median), ms(push.commit.p99)],
]))
emit("load at the end: \(loadAverage())")
