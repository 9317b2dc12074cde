import AsyncHTTPClient
import Foundation
import LogSyncHTTP
import LogSyncServer
import LogSyncWire
import Metrics
import MetricsTestKit
import Prometheus
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSyncHTTPServer

/// The HTTP server's metrics (Docs/Deployment.md, "Operating"): requests counted by route,
/// status and code with the handles a test injects, push channels open, and `GET /metrics`
/// behind the admin credential.
@Suite("Server metrics over HTTP", .timeLimit(.minutes(2)))
struct ServerMetricsTests {
    static let adminToken = "lsadm_metrics-token-0123456789abcdef"

    /// A server with alice and bob (``LiveServer``'s tokens), the admin token, and `metrics`.
    static func withServer(
        metrics: ServerMetrics, adminCredential: Bool = true, _ body: (LiveServer) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            let tokens = TokenStore()
            try tokens.add(token: LiveServer.aliceToken, for: "alice")
            try tokens.add(token: LiveServer.bobToken, for: "bob")
            let running = try await RunningHTTPSyncServer.start(
                HTTPSyncServer(
                    server: server, tokens: tokens, configuration: .init(port: 0),
                    adminCredential: adminCredential ? try AdminCredential(tokens: [adminToken]) : nil,
                    metrics: metrics))
            let live = LiveServer(server: server, tokens: tokens, running: running)
            do {
                try await body(live)
            } catch {
                try? await live.stop()
                throw error
            }
            try await live.stop()
        }
    }

    static func requests(_ metrics: TestMetrics, _ route: String, _ status: Int, _ code: String) -> Int64 {
        (try? metrics.expectCounter(
            ServerMetrics.Name.requests, [("route", route), ("status", "\(status)"), ("code", code)]))?.totalValue ?? 0
    }

    @Test(
        "each request is counted by its route's name, status and error code, timed, and its bytes counted; no user, scope or digest becomes a label"
    )
    func countsRequests() async throws {
        let metrics = TestMetrics()
        try await Self.withServer(metrics: ServerMetrics(factory: metrics)) { live in
            let alice = live.client(LiveServer.aliceToken, device: "phone")
            defer { alice.close() }
            _ = try await alice.database().modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            _ = try await alice.database().fetchAllZones()
            _ = try await alice.database().fetchAllZones()
            // Refusals: a wrong token, an operation there is not, a path no route has.
            let wrong = try await rawRequest(
                live, "/v1/databases/private/fetchZones", headers: [("Authorization", "Bearer lsk_nobody")])
            #expect(wrong.status == 401)
            let unknown = try await rawRequest(live, "/v1/databases/private/dropEverything", headers: aliceHeaders())
            #expect(unknown.status == 400 || unknown.status == 404, "\(unknown)")
            let nowhere = try await rawRequest(live, "/v1/alice/secrets", method: .GET, headers: aliceHeaders())
            #expect(nowhere.status == 404)
            _ = try await rawRequest(live, "/health/live", method: .GET)

            #expect(Self.requests(metrics, "modifyZones", 200, "ok") == 1)
            #expect(Self.requests(metrics, "fetchZones", 200, "ok") == 2)
            #expect(Self.requests(metrics, "fetchZones", 401, "notAuthenticated") == 1)
            let unknownCode = try unknown.error().code.name
            #expect(Self.requests(metrics, "unknown", unknown.status, unknownCode) == 1)
            #expect(Self.requests(metrics, "unknown", 404, "serverRejectedRequest") == 1)
            #expect(Self.requests(metrics, "health live", 200, "ok") == 1)
            let timer = try metrics.expectTimer(ServerMetrics.Name.requestDuration, [("route", "fetchZones")])
            #expect(timer.values.count == 3)
            let bytesIn = try metrics.expectCounter(ServerMetrics.Name.requestBytes, [("route", "modifyZones")])
            let bytesOut = try metrics.expectCounter(ServerMetrics.Name.responseBytes, [("route", "modifyZones")])
            #expect(bytesIn.totalValue > 0 && bytesOut.totalValue > 0)
            // Labels are route names, statuses and codes: never a user, a scope, a token or a path.
            let labels = metrics.counters.flatMap(\.dimensions).map(\.1) + metrics.timers.flatMap(\.dimensions).map(\.1)
            for secret in ["alice", "private", "Notes", "secrets", "lsk_"] {
                #expect(!labels.contains { $0.contains(secret) }, "\(secret) in \(labels)")
            }
        }
    }

    @Test("a push channel counts as open from before its subscribed frame until it closes")
    func pushChannelsOpen() async throws {
        let metrics = TestMetrics()
        try await Self.withServer(metrics: ServerMetrics(factory: metrics)) { live in
            let alice = live.client(LiveServer.aliceToken, device: "phone")
            let hints = alice.database().pushHints()
            await alice.waitForPushChannels()
            let open = try metrics.expectMeter(ServerMetrics.Name.pushChannelsOpen)
            #expect(open.lastValue == 1)
            alice.close()
            for await _ in hints {}
            // The server sees the close after the client does.
            try await TokenRevocationTests.waitUntil(
                "the server counts the channel closed", by: .now + TokenRevocationTests.patience
            ) { open.lastValue == 0 }
        }
    }

    @Test(
        "GET /metrics answers Prometheus text to the admin token only (401 otherwise), and the text names no user or token"
    )
    func scrape() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: registry), registry: registry)
        try await Self.withServer(metrics: metrics) { live in
            let alice = live.client(LiveServer.aliceToken, device: "phone")
            defer { alice.close() }
            _ = try await alice.database().modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            for headers in [[], aliceHeaders(), [("Authorization", "Bearer lsadm_wrong")]] {
                let refused = try await rawRequest(live, "/metrics", method: .GET, headers: headers)
                #expect(refused.status == 401, "\(refused)")
                #expect(try refused.error().code == .notAuthenticated)
                #expect(!String(decoding: refused.body, as: UTF8.self).contains("logsync_"))
            }
            let scraped = try await rawRequest(
                live, "/metrics", method: .GET, headers: [("Authorization", "Bearer \(Self.adminToken)")])
            #expect(scraped.status == 200)
            #expect(scraped.header("Content-Type") == MetricsRoutes.mediaType)
            let text = String(decoding: scraped.body, as: UTF8.self)
            #expect(
                text.contains(#"logsync_http_requests_total{route="modifyZones",status="200",code="ok"} 1"#), "\(text)")
            #expect(
                text.contains(#"logsync_http_requests_total{route="metrics",status="401",code="notAuthenticated"} 3"#))
            #expect(text.contains("# TYPE logsync_http_request_duration_seconds histogram"))
            // The store's size, read at the scrape: the LMDB files under the server's directory.
            let storeBytes = try #require(
                text.split(separator: "\n").first { $0.hasPrefix(#"logsync_store_bytes{store="lmdb"} "#) },
                "\(text)")
            #expect((Double(storeBytes.split(separator: " ").last ?? "") ?? 0) > 0, "\(storeBytes)")
            for secret in ["alice", LiveServer.aliceToken, Self.adminToken, "lsadm_", "Notes"] {
                #expect(!text.contains(secret), "\(secret)")
            }
        }
    }

    @Test("without a registry, or without an admin credential, there is no GET /metrics")
    func noRoute() async throws {
        try await Self.withServer(metrics: ServerMetrics()) { live in
            let answer = try await rawRequest(
                live, "/metrics", method: .GET, headers: [("Authorization", "Bearer \(Self.adminToken)")])
            #expect(answer.status == 404)
        }
        let registry = PrometheusCollectorRegistry()
        try await Self.withServer(metrics: ServerMetrics(registry: registry), adminCredential: false) { live in
            let answer = try await rawRequest(live, "/metrics", method: .GET)
            #expect(answer.status == 404)
        }
    }
}
