// logsync-push-load: many devices' push channels against running logsync-server processes, a
// few of them committing at a steady rate, from a process of its own.
//
// Users `<prefix>-u<i>` each get `--devices-per-user` devices; every device holds one push
// channel (a WebSocket, as an app's HTTPSyncClient does), `--channels` in all. The first device
// of `--writers` users commits one small record in turn, `--commit-rate` commits per second over
// all writers, for `--duration` seconds. Measured:
// - push latency: from a commit's answer on its device to the hint naming it (or a later
//   commit) on each of the user's other devices; a hint that arrives before the answer counts 0;
// - commit latency: the `modifyRecords` request, sent to answered;
// - errors: failed commits, channels that did not connect or dropped, hints that never came;
// - each server's memory per connection: the resident set (`/proc/<pid>/status`, VmRSS) before
//   and after the channels opened, divided by the channels it holds (`--server-pid`).
//
// With several `--server` URLs (nodes over one PostgreSQL), device j of user u connects to
// server (u + j) mod count: a user's devices are spread over the nodes, so hints cross them.
//
// Users and sessions are made through the admin API (`--admin-token`) the first time and kept in
// `--sessions` for the next runs against the same data.
//
//   swift build -c release --product logsync-push-load --scratch-path .build-release
//   .build-release/release/logsync-push-load --server http://127.0.0.1:8080 --admin-token TOKEN \
//       --sessions /tmp/load-sessions --channels 10000 --writers 100 --duration 60 --server-pid PID
import ArgumentParser
import BenchSupport
import Foundation
import LogSyncHTTP
import LogSyncWire
import SyncModel
import Synchronization

@main
struct PushLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-push-load",
        abstract: "Many devices' push channels against running logsync-server processes, some committing.")

    @Option(name: .customLong("server"), help: "A server's base URL; repeat for several nodes.")
    var servers: [String]

    @Option(help: "An admin token of the servers (logsync-server admin-token add), to make users and sessions.")
    var adminToken: String?

    @Option(help: "A file of sessions (one `user device access-token` a line), made if missing.")
    var sessions: String?

    @Option(help: "The users' name prefix.")
    var prefix = "load"

    @Option(help: "Push channels (devices) in all.")
    var channels = 10_000

    @Option(help: "Devices of each user.")
    var devicesPerUser = 10

    @Option(help: "Users whose first device commits.")
    var writers = 100

    @Option(help: "Commits per second over all writers.")
    var commitRate = 100.0

    @Option(help: "Seconds of commits.")
    var duration = 60.0

    @Option(help: "Channels connecting at once.")
    var connectBatch = 250

    @Option(help: "Seconds a batch of channels may take to connect; those that did not are errors.")
    var connectTimeout = 60.0

    @Option(name: .customLong("server-pid"), help: "A server's process ID, for its memory; repeat, in --server order.")
    var serverPIDs: [Int32] = []

    func run() async throws {
        guard !servers.isEmpty else { throw ValidationError("give at least one --server") }
        let users = (channels + devicesPerUser - 1) / devicesPerUser
        let writerCount = min(writers, users)
        let urls = try servers.map { text -> URL in
            guard let url = URL(string: text) else { throw ValidationError("--server \(text) is not a URL") }
            return url
        }
        print(
            "logsync-push-load: \(channels) channels, \(users) users × \(devicesPerUser) devices, "
                + "\(writerCount) writers, \(commitRate) commits/s for \(duration) s, \(servers.count) server(s)")
        print("load average at start: \(loadAverage())")

        let tokens = try await sessionTokens(users: users, urls: urls)
        let devices = (0..<channels).map { index in Device(user: index / devicesPerUser, index: index % devicesPerUser)
        }
        let client = Connector(urls: urls, tokens: tokens).client

        // Each writer's user: a zone and the database subscription, so that its devices are hinted.
        let zone = RecordZone.ID(zoneName: "Load")
        try await forEach(0..<writerCount, concurrently: 16) { user in
            let database = client(Device(user: user, index: 0)).database()
            _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            _ = try await database.modifySubscriptions(saving: [Subscription(subscriptionID: "load")], deleting: [])
        }

        let before = serverPIDs.map(residentKiB)
        let arrivals = Arrivals(users: users)
        var clients: [HTTPSyncClient] = []
        var pumps: [Task<Void, Never>] = []
        let opening = ContinuousClock.now
        for batch in stride(from: 0, to: devices.count, by: connectBatch) {
            var opened: [HTTPSyncClient] = []
            for device in devices[batch..<min(batch + connectBatch, devices.count)] {
                let client = client(device)
                let hints = client.database().pushHints()
                opened.append(client)
                pumps.append(
                    Task {
                        for await hint in hints {
                            let now = ContinuousClock.now
                            guard let offset = hint.changeToken?.offset.rawValue else { continue }
                            arrivals.record(user: device.user, device: device.index, offset: offset, at: now)
                        }
                    })
            }
            clients += opened
            guard await connected(opened, within: .seconds(connectTimeout)) else { break }
        }
        let openSeconds = seconds(since: opening)
        let unconnected = clients.filter { $0.pushConnectionCount == 0 }
        for client in unconnected { client.close() }
        print(
            "\(clients.count - unconnected.count) of \(channels) channels open in \(String(format: "%.1f", openSeconds)) s"
        )
        if !unconnected.isEmpty {
            var reasons: [String: Int] = [:]
            for client in unconnected {
                reasons["\(client.lastPushFailure.map { "\($0)" } ?? "none yet")", default: 0] += 1
            }
            for (reason, count) in reasons.sorted(by: { $0.value > $1.value }).prefix(5) {
                print("  not connected (\(count)): \(reason)")
            }
        }
        // Let the servers settle (buffers of the upgrade requests freed) before reading memory.
        try await Task.sleep(for: .seconds(2))
        let after = serverPIDs.map(residentKiB)

        // The commits: writer w commits at w/rate + k·writers/rate seconds.
        let interval = Double(writerCount) / commitRate
        let commits = Commits()
        let run = UInt32.random(in: 0...UInt32.max)  // new record names in every run
        let start = ContinuousClock.now
        try await forEach(0..<writerCount, concurrently: writerCount) { writer in
            let database = client(Device(user: writer, index: 0)).database()
            var round = 0
            while true {
                let due = start + .seconds(Double(writer) / commitRate + Double(round) * interval)
                guard due < start + .seconds(duration) else { break }
                try await Task.sleep(until: due, clock: .continuous)
                var record = Record(
                    recordType: "Note", recordID: Record.ID(recordName: "w\(writer)-\(round)-\(run)", zoneID: zone))
                record["n"] = .int64(Int64(round))
                let sent = ContinuousClock.now
                do {
                    let response = try await database.modifyRecords(saving: [record], deleting: [])
                    let answered = ContinuousClock.now
                    guard case .success(let saved)? = response.saveResults[record.recordID],
                        let offset = saved.recordChangeTag.flatMap(UInt64.init)
                    else {
                        commits.fail("no saved record with a change tag: \(response.saveResults)")
                        round += 1
                        continue
                    }
                    commits.add(Commit(user: writer, offset: offset, sent: sent, answered: answered))
                } catch {
                    commits.fail("\(error)")
                }
                round += 1
            }
        }
        // The last hints: until every expected one came, or 10 seconds.
        let settle = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < settle,
            arrivals.missing(commits.all, devicesPerUser: devicesPerUser, channels: channels) > 0
        {
            try await Task.sleep(for: .milliseconds(50))
        }

        var push = Samples()
        var pushFromSent = Samples()
        var early = 0
        for commit in commits.all {
            for device in 1..<devicesPerUser where commit.user * devicesPerUser + device < channels {
                guard
                    let arrival = arrivals.first(
                        user: commit.user, device: device, atLeast: commit.offset, after: commit.sent)
                else { continue }
                if arrival < commit.answered { early += 1 }
                push.values.append(max(0, (arrival - commit.answered).seconds))
                pushFromSent.values.append((arrival - commit.sent).seconds)
            }
        }
        let missing = arrivals.missing(commits.all, devicesPerUser: devicesPerUser, channels: channels)
        let drops = clients.reduce(0) { $0 + max(0, $1.pushConnectionCount - 1) }
        for client in clients { client.close() }
        for pump in pumps { await pump.value }

        let commitSamples = Samples(values: commits.all.map { ($0.answered - $0.sent).seconds })
        print()
        print(
            table([
                ["", "samples", "p50", "p99", "max"],
                [
                    "commit (modifyRecords sent → answered)", grouped(commitSamples.values.count),
                    ms(commitSamples.median), ms(commitSamples.p99), ms(commitSamples.values.max() ?? 0),
                ],
                [
                    "push (commit answered → hint on another device)", grouped(push.values.count), ms(push.median),
                    ms(push.p99), ms(push.values.max() ?? 0),
                ],
                [
                    "push (commit sent → hint on another device)", grouped(pushFromSent.values.count),
                    ms(pushFromSent.median), ms(pushFromSent.p99), ms(pushFromSent.values.max() ?? 0),
                ],
            ]))
        print()
        print(
            table([
                ["errors", "count"],
                ["commits failed", grouped(commits.failures.count)],
                ["hints missing", grouped(missing)],
                ["channels not connected", grouped(unconnected.count + channels - clients.count)],
                ["channel reconnections", grouped(drops)],
                ["hints before the commit's answer (counted 0 ms)", grouped(early)],
            ]))
        for failure in commits.failures.prefix(5) { print("  commit failure: \(failure)") }
        if !serverPIDs.isEmpty {
            print()
            var rows = [["server", "pid", "RSS before", "RSS after", "channels", "KiB per channel"]]
            for (index, pid) in serverPIDs.enumerated() {
                let held = devices.filter { (($0.user + $0.index) % urls.count) == index }.count
                rows.append([
                    servers[index], "\(pid)", "\(mib(before[index])) MiB", "\(mib(after[index])) MiB", grouped(held),
                    String(format: "%.1f", Double(after[index] - before[index]) / Double(max(1, held))),
                ])
            }
            print(table(rows))
        }
        print()
        print("load average at end: \(loadAverage())")
        let errors = commits.failures.count + missing + drops + unconnected.count + channels - clients.count
        if errors > 0 { throw ExitCode(1) }
    }

    /// Whether every channel of `clients` connected within `limit`.
    func connected(_ clients: [HTTPSyncClient], within limit: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for client in clients { await client.waitForPushChannels() }
                return !Task.isCancelled
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let result = await group.next() ?? false
            group.cancelAll()
            return result
        }
    }

    /// Each device's access token: read from `--sessions`, or made through the admin API (and
    /// written there when given).
    func sessionTokens(users: Int, urls: [URL]) async throws -> [String: String] {
        var tokens: [String: String] = [:]
        if let sessions, let text = try? String(contentsOfFile: sessions, encoding: .utf8) {
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ")
                if fields.count == 3 { tokens["\(fields[0]) \(fields[1])"] = String(fields[2]) }
            }
        }
        let wanted = (0..<users).flatMap { user in
            (0..<devicesPerUser).map { Device(user: user, index: $0) }
        }.filter { tokens[$0.key] == nil }
        guard !wanted.isEmpty else { return tokens }
        guard let adminToken else {
            throw ValidationError("\(wanted.count) devices have no session: give --admin-token to make them")
        }
        print("making \(wanted.count) sessions through the admin API…")
        let admin = AdminClient(serverURL: urls[0], adminToken: adminToken)
        let made = Mutex<[String: String]>([:])
        let byUser = Dictionary(grouping: wanted, by: \.user)
        try await forEach(Array(byUser.keys), concurrently: 16) { user in
            let name = "\(prefix)-u\(user)"
            try await admin.createUser(name)
            for device in byUser[user]! {
                let session = try await admin.mintSession(for: name, device: device.name)
                made.withLock { $0[device.key] = session.accessToken }
            }
        }
        tokens.merge(made.withLock { $0 }) { $1 }
        if let sessions {
            let lines = tokens.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            try (lines.joined(separator: "\n") + "\n").write(toFile: sessions, atomically: true, encoding: .utf8)
        }
        return tokens
    }

    /// Each device's client: its server and its session's token.
    struct Connector: Sendable {
        let urls: [URL]
        let tokens: [String: String]

        func client(_ device: Device) -> HTTPSyncClient {
            HTTPSyncClient(
                .init(
                    serverURL: urls[(device.user + device.index) % urls.count],
                    credentials: .token(tokens[device.key]!), device: DeviceID(device.name)))
        }
    }

    struct Device: Sendable {
        let user: Int
        let index: Int
        var name: String { "d\(index)" }
        var key: String { "u\(user) \(name)" }
    }
}

/// One timed commit.
struct Commit: Sendable {
    let user: Int
    let offset: UInt64
    let sent: ContinuousClock.Instant
    let answered: ContinuousClock.Instant
}

final class Commits: Sendable {
    private let state = Mutex<(commits: [Commit], failures: [String])>(([], []))
    func add(_ commit: Commit) { state.withLock { $0.commits.append(commit) } }
    func fail(_ reason: String) { state.withLock { $0.failures.append(reason) } }
    var all: [Commit] { state.withLock { $0.commits } }
    var failures: [String] { state.withLock { $0.failures } }
}

/// The hints each device received: their token's offset and when.
final class Arrivals: Sendable {
    /// One user's devices' hints, under a lock of its own.
    final class User: Sendable {
        let devices = Mutex<[Int: [(offset: UInt64, at: ContinuousClock.Instant)]]>([:])
    }

    private let state: [User]

    init(users: Int) {
        state = (0..<users).map { _ in User() }
    }

    func record(user: Int, device: Int, offset: UInt64, at instant: ContinuousClock.Instant) {
        state[user].devices.withLock { $0[device, default: []].append((offset, instant)) }
    }

    /// When `device` of `user` first received a hint of `offset` or later, after `sent`.
    func first(
        user: Int, device: Int, atLeast offset: UInt64, after sent: ContinuousClock.Instant
    )
        -> ContinuousClock.Instant?
    {
        state[user].devices.withLock { devices in
            devices[device]?.first { $0.offset >= offset && $0.at >= sent }?.at
        }
    }

    /// How many (commit, other device) pairs have no hint yet, of the first `channels` devices.
    func missing(_ commits: [Commit], devicesPerUser: Int, channels: Int) -> Int {
        commits.reduce(0) { count, commit in
            count
                + (1..<devicesPerUser).filter { device in
                    commit.user * devicesPerUser + device < channels
                        && first(user: commit.user, device: device, atLeast: commit.offset, after: commit.sent) == nil
                }.count
        }
    }
}

/// VmRSS of process `pid` in KiB, or 0.
func residentKiB(_ pid: Int32) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

/// Runs `body` for each element, at most `width` at once.
func forEach<C: Collection>(
    _ items: C, concurrently width: Int, _ body: @escaping @Sendable (C.Element) async throws -> Void
) async throws where C.Element: Sendable {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var iterator = items.makeIterator()
        for _ in 0..<max(1, width) {
            guard let item = iterator.next() else { break }
            group.addTask { try await body(item) }
        }
        while try await group.next() != nil {
            guard let item = iterator.next() else { continue }
            group.addTask { try await body(item) }
        }
    }
}
