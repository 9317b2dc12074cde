import AsyncHTTPClient
import ChildProcesses
import Foundation
import LogSyncContract
import LogSyncHTTP
import LogSyncWire
import SyncModel
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

/// `GET /metrics` of a `logsync-server` process after the contract suite's traffic
/// (LogSyncContract's checks over HTTP): the request counters equal the requests that reached
/// the server, route by route and status by status, as a proxy in front of it counted them; the
/// records counted saved and fetched are at least what the traffic saved and fetched; and the
/// route refuses anyone without the admin token (Docs/Deployment.md, "Operating").
@Suite("Metrics: a scrape of a server process", .timeLimit(.minutes(10)))
struct MetricsScrapeProcessTests {
    @Test(
        "after the contract suite's traffic, /metrics counts every request by route and status as it reached the server, and the records saved and fetched"
    )
    func scrapeAfterContractTraffic() async throws {
        try await withServerData { data in
            let adminFile = data.deletingLastPathComponent().appendingPathComponent("admin-tokens")
            let adminToken = try await ChildProcess.addAdminToken(to: adminFile)
            // The suite's floods of requests from one address are the transport's business
            // (ClientLimitTests), not this test's: no per-client limits.
            let server = try ChildProcess.start([
                "--data", data.path, "--admin-token-file", adminFile.path, "--port", "0",
                "--user-request-rate", "0", "--user-concurrent-requests", "0",
                "--address-request-rate", "0", "--address-concurrent-requests", "0",
            ])
            do {
                try await Self.check(server: server, port: try await server.waitForPort(), adminToken: adminToken)
            } catch {
                _ = try? await server.terminate()
                throw error
            }
            #expect(try await server.terminate().status == 0)
        }
    }

    static func check(server: ChildProcess, port: Int, adminToken: String) async throws {
        let serverURL = URL(string: "http://127.0.0.1:\(port)")!
        // Every device request goes through the proxy, which counts it by route and status.
        let seen = RequestTally()
        let proxy = try InterceptingProxy(upstreamPort: port) { path, answerHead in
            seen.record(path: path, answerHead: answerHead)
            return .forward
        }
        defer { proxy.close() }
        let devices = ContractDevices(
            proxyURL: URL(string: "http://127.0.0.1:\(proxy.port)")!,
            admin: AdminClient(serverURL: serverURL, adminToken: adminToken))
        let failures = await ContractSuite.run { user, scope, device in
            try await devices.database(user: user.name, scope: scope, device: device)
        }
        devices.close()
        #expect(failures.isEmpty, "\(failures)")

        // Every answer has been read: each was counted before it was written.
        let scrape = try await Self.scrape(serverURL, token: adminToken)
        #expect(scrape.status == 200)
        let metrics = try PrometheusText(scrape.body)
        let requests = metrics.samples(named: "logsync_http_requests_total")
        var counted: [RouteStatus: Double] = [:]
        for sample in requests {
            guard let route = sample.labels["route"], let status = sample.labels["status"].flatMap({ Int($0) }) else {
                Issue.record("a request sample without route or status: \(sample)")
                continue
            }
            counted[RouteStatus(route: route, status: status), default: 0] += sample.value
            #expect(sample.labels["code"] != nil, "\(sample)")
        }
        let operations = Set(WireOperation.allCases.map(\.rawValue))
        let served = counted.filter { operations.contains($0.key.route) }
        let reached = seen.counts.mapValues(Double.init)
        // Every check sends requests of its own.
        #expect(reached.values.reduce(0, +) >= Double(ContractSuite.checks.count))
        #expect(served == reached, "server \(served.sorted { "\($0.key)" < "\($1.key)" }) proxy \(reached)")
        // The admin requests the test made (straight to the server), and nothing else.
        let (users, sessions) = devices.adminRequests
        #expect(counted[RouteStatus(route: "admin create user", status: 200)] == Double(users))
        #expect(counted[RouteStatus(route: "admin mint session", status: 200)] == Double(sessions))
        #expect(
            Set(counted.keys.map(\.route)).subtracting(operations)
                == ["admin create user", "admin mint session"], "\(counted.keys)")
        // Each request timed: the duration histogram's count per route is its requests.
        for (route, total) in Dictionary(grouping: counted, by: \.key.route).mapValues({ $0.map(\.value).reduce(0, +) })
        {
            let timed = metrics.samples(named: "logsync_http_request_duration_seconds_count")
                .first { $0.labels["route"] == route }?.value
            #expect(timed == total, "\(route)")
        }
        let (saved, fetched) = devices.records
        #expect(saved > 0 && fetched > 0)
        #expect(metrics.total("logsync_records_saved_total") >= Double(saved))
        #expect(metrics.total("logsync_records_fetched_total") >= Double(fetched))
        #expect(metrics.samples(named: "logsync_commit_duration_seconds_count").first?.labels["store"] == "lmdb")

        // Without the admin token: 401, and no metric in the answer.
        for token in [nil, "lsadm_not-a-token", devices.someAccessToken] {
            let refused = try await Self.scrape(serverURL, token: token)
            #expect(refused.status == 401, "\(token ?? "no token")")
            #expect(!refused.body.contains("logsync_"))
        }
        // The text names routes, statuses and codes: never a user, a token or a path.
        for secret in [adminToken, devices.someAccessToken ?? "-", "/v1/", "alice"] {
            #expect(!scrape.body.contains(secret), "\(secret)")
        }
    }

    static func scrape(_ serverURL: URL, token: String?) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: serverURL.absoluteString + "/metrics")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        let body = try await response.body.collect(upTo: 16 << 20)
        return (Int(response.status.code), String(decoding: body.readableBytesView, as: UTF8.self))
    }
}

/// A route and an answer's status.
struct RouteStatus: Hashable, CustomStringConvertible {
    let route: String
    let status: Int
    var description: String { "\(route) \(status)" }
}

/// The requests the proxy forwarded, by operation and status.
final class RequestTally: Sendable {
    private let tally = Mutex<[RouteStatus: Int]>([:])

    var counts: [RouteStatus: Int] { tally.withLock { $0 } }

    /// Counts a `POST /v1/databases/{scope}/{operation}` by its operation and the status in
    /// `answerHead` (`HTTP/1.1 200 OK`); any other path by itself, which no operation route has.
    func record(path: String, answerHead: String) {
        let parts = path.split(separator: "/")
        let route = parts.count == 4 && parts[1] == "databases" ? String(parts[3]) : path
        let status = answerHead.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        tally.withLock { $0[RouteStatus(route: route, status: status), default: 0] += 1 }
    }
}

/// The contract suite's devices: each user created through the admin API the first time the
/// suite names them, each device a session of its own, its client sending through the proxy.
final class ContractDevices: Sendable {
    let proxyURL: URL
    let admin: AdminClient
    private struct State {
        var users: [String: Task<Void, any Error>] = [:]
        /// One session per device: a session minted again for a device ends its earlier one.
        var sessions: [[String]: Task<String, any Error>] = [:]
        var clients: [HTTPSyncClient] = []
        var accessToken: String?
    }
    private let state = Mutex(State())
    private let saved = Atomic<Int>(0)
    private let fetched = Atomic<Int>(0)

    init(proxyURL: URL, admin: AdminClient) {
        self.proxyURL = proxyURL
        self.admin = admin
    }

    func database(user: String, scope: DatabaseScope, device: DeviceID) async throws -> any CloudDatabase {
        let created = state.withLock { state in
            if let task = state.users[user] { return task }
            let task = Task { [admin] in _ = try await admin.createUser(user) }
            state.users[user] = task
            return task
        }
        try await created.value
        let minted = state.withLock { state in
            if let task = state.sessions[[user, device.rawValue]] { return task }
            let task = Task { [admin] in try await admin.mintSession(for: user, device: device.rawValue).accessToken }
            state.sessions[[user, device.rawValue]] = task
            return task
        }
        let accessToken = try await minted.value
        let client = HTTPSyncClient(.init(serverURL: proxyURL, credentials: .token(accessToken), device: device))
        state.withLock { state in
            state.clients.append(client)
            state.accessToken = accessToken
        }
        return CountingDatabase(base: client.database(scope), devices: self)
    }

    /// The admin requests made: users created, sessions minted.
    var adminRequests: (users: Int, sessions: Int) { state.withLock { ($0.users.count, $0.sessions.count) } }
    /// The records the servers' answers said were saved, and the records fetched.
    var records: (saved: Int, fetched: Int) { (saved.load(ordering: .relaxed), fetched.load(ordering: .relaxed)) }
    /// An access token of a device, which must not open /metrics.
    var someAccessToken: String? { state.withLock { $0.accessToken } }

    func counted(saved: Int = 0, fetched: Int = 0) {
        self.saved.add(saved, ordering: .relaxed)
        self.fetched.add(fetched, ordering: .relaxed)
    }

    func close() {
        for client in state.withLock({ $0.clients }) { client.close() }
    }
}

/// A database that counts the records its answers say were saved and fetched.
struct CountingDatabase: ForwardingDatabase {
    let base: HTTPCloudDatabase
    let devices: ContractDevices

    var databaseIdentity: DatabaseIdentity? { base.databaseIdentity }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        let response = try await base.modifyRecords(request)
        devices.counted(saved: response.saveResults.values.count { (try? $0.get()) != nil })
        return response
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        let response = try await base.fetchZoneChanges(request)
        devices.counted(fetched: response.modifications.count)
        return response
    }
}

/// Prometheus' text exposition format, read as the test needs it: one sample a line,
/// `name{label="value",…} number`, comments skipped.
struct PrometheusText {
    struct Sample: CustomStringConvertible {
        let name: String
        let labels: [String: String]
        let value: Double
        var description: String { "\(name)\(labels) \(value)" }
    }

    struct Malformed: Error, CustomStringConvertible {
        let line: String
        var description: String { "not a Prometheus sample: \(line)" }
    }

    let samples: [Sample]

    init(_ text: String) throws {
        samples = try text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map {
            try Self.sample(String($0))
        }
    }

    func samples(named name: String) -> [Sample] { samples.filter { $0.name == name } }

    /// The sum of every sample of `name`.
    func total(_ name: String) -> Double { samples(named: name).map(\.value).reduce(0, +) }

    static func sample(_ line: String) throws -> Sample {
        var rest = Substring(line)
        let name = rest.prefix { $0 != "{" && $0 != " " }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let key = rest.prefix { $0 != "=" }
                rest = rest.dropFirst(key.count)
                guard rest.hasPrefix("=\"") else { throw Malformed(line: line) }
                rest = rest.dropFirst(2)
                var value = ""
                while let character = rest.first, character != "\"" {
                    rest = rest.dropFirst()
                    if character == "\\", let escaped = rest.first {
                        rest = rest.dropFirst()
                        value.append(escaped == "n" ? "\n" : escaped)
                    } else {
                        value.append(character)
                    }
                }
                guard rest.first == "\"" else { throw Malformed(line: line) }
                rest = rest.dropFirst()
                labels[String(key)] = value
                if rest.first == "," { rest = rest.dropFirst() }
                guard !rest.isEmpty else { throw Malformed(line: line) }
            }
            rest = rest.dropFirst()
        }
        let fields = rest.split(separator: " ")
        guard let first = fields.first, let value = Double(first) else { throw Malformed(line: line) }
        return Sample(name: String(name), labels: labels, value: value)
    }
}
