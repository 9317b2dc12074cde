import AsyncHTTPClient
import Foundation
import LogSyncServer
import TemporaryDirectory
import Testing

@testable import LogSyncHTTPServer

/// `/health/live` and `/health/ready` of a server on LMDB: both answer without a token, in JSON,
/// and say nothing of any user; an LMDB store shares no notices, so readiness is the store's.
@Suite("Health over HTTP", .timeLimit(.minutes(2)))
struct HealthTests {
    struct Served: ServedOnLoopback {
        let running: RunningHTTPSyncServer
    }

    @Test("live and ready answer 200 without a token; ready names the store's check and no notifications")
    func liveAndReady() async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            try await serving(HTTPSyncServer(server: server, tokens: TokenStore(), configuration: .init(port: 0))) {
                running in
                let served = Served(running: running)
                let live = try await served.request("/health/live", method: .GET)
                #expect(live.status == 200 && live.body == #"{"checks":{},"status":"live"}"#, "\(live)")
                let ready = try await served.request("/health/ready", method: .GET)
                #expect(ready.status == 200, "\(ready)")
                #expect(ready.body == #"{"checks":{"store":"ok"},"status":"ready"}"#, "\(ready)")
                // Not under a version, and nothing else: another method or path is an unknown route.
                #expect(try await served.request("/health/ready").status == 404)
                #expect(try await served.request("/v1/health/ready", method: .GET).status == 404)
            }
        }
    }

    @Test("a store check that hangs makes the answer not wait for it")
    func storeCheckTimeout() async throws {
        // A check that answers only once the test lets it, after the answer was given.
        let (hang, release) = AsyncStream.makeStream(of: Void.self)
        let outcome = await HealthRoutes.within(.milliseconds(10)) {
            for await _ in hang {}
            return true
        }
        #expect(outcome == nil)
        release.finish()
        let quick = await HealthRoutes.within(.seconds(3600)) { 42 }
        #expect(try quick?.get() == 42)
    }
}
