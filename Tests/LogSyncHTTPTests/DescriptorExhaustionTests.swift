import ChildProcesses
import Foundation
import LogSyncHTTP
import NIOCore
import SyncModel
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Running out of file descriptors is an error on both sides, never a trap (Docs/Deployment.md,
/// "Descriptors"): a server process with few descriptors answers the connections it holds,
/// leaves the others in the listen backlog and serves them once connections close; a client
/// process with few descriptors gets typed, retryable errors.
@Suite("Out of file descriptors", .timeLimit(.minutes(10)))
struct DescriptorExhaustionTests {
    @Test(
        "a server with 128 descriptors told to hold 1,000 connections holds 64, stays up, and answers the rest as connections close"
    )
    func serverOutOfDescriptors() async throws {
        try await withServerData { data in
            let token = try await addUser("alice", data: data)
            // The connection limit is far above what the descriptors allow: the server lowers it,
            // keeping 64 descriptors free (running out would trap the thread pool).
            let server = try ChildProcess.start(
                [
                    "--data", data.path, "--port", "0", "--max-connections", "1000", "--listen-backlog", "512",
                    "--idle-timeout", "600", "--address-concurrent-requests", "0", "--address-request-rate", "0",
                ],
                descriptorLimit: 128)
            _ = try await server.waitForErrorLine(containing: "the connection limit is lowered")
            let port = try await server.waitForPort()
            let client = HTTPSyncClient(
                .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(token), device: "phone"))
            defer { client.close() }
            // alice's database is open (its descriptors taken) before the storm.
            _ = try await client.database().modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])

            let connections = try await withThrowingTaskGroup(of: RawConnection.self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        let connection = try await RawConnection.open(port: port)
                        try await connection.send("GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                        return connection
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            func answered() -> [RawConnection] { connections.filter { $0.text.hasPrefix("HTTP/1.1 200") } }
            // The server holds what it may (64 connections, the client's among them, give or take
            // the few accepted in the batch that reached the limit), no more.
            _ = try await server.waitForErrorLine(containing: "connection limit reached")
            try await Self.waitUntil("63 connections are answered") { answered().count >= 63 }
            #expect(answered().count < 80)
            #expect(HostileConnectionTests.openDescriptors(server.pid) < 128)
            #expect(kill(server.pid, 0) == 0, "the server is running")
            // Its existing connections are served: the client's pooled connection.
            var zones: Result<[String], any Error>
            do { zones = .success(try await client.database().fetchAllZones().map(\.zoneID.zoneName)) } catch {
                zones = .failure(error)
            }
            #expect((try? zones.get())?.contains("Notes") == true, "\(zones)")

            // As answered connections close, the ones waiting in the backlog are accepted.
            try await Self.waitUntil("every connection is answered") {
                let done = answered()
                for connection in done { connection.close() }
                return done.count == connections.count
            }
            let finished = try await server.terminate()
            #expect(finished.status == 0, "\(finished)")
            #expect(!finished.errorOutput.contains("Fatal error"), "\(finished)")
        }
    }

    @Test(
        "a load process with 64 descriptors opening 100 push channels opens 32, gets typed errors naming the descriptor limit for the others, and exits, no trap"
    )
    func clientOutOfDescriptors() async throws {
        try await withServerData { data in
            let adminFile = data.deletingLastPathComponent().appendingPathComponent("admin-tokens")
            let adminToken = try await ChildProcess.addAdminToken(to: adminFile)
            let server = try ChildProcess.start([
                "--data", data.path, "--port", "0", "--admin-token-file", adminFile.path,
                "--address-concurrent-requests", "0", "--address-request-rate", "0", "--user-request-rate", "0",
            ])
            let port = try await server.waitForPort()
            let load = try await ChildProcess.run(
                [
                    "--server", "http://127.0.0.1:\(port)", "--admin-token", adminToken, "--channels", "100",
                    "--devices-per-user", "10", "--writers", "1", "--commit-rate", "10", "--duration", "1",
                    "--connect-timeout", "20",
                ], program: "logsync-push-load", descriptorLimit: 64)
            // An error of the run (exit 1), not a signal (128 + its number).
            #expect(load.status == 1, "\(load)")
            #expect(load.output.contains("32 of 100 channels open"), "\(load)")
            #expect(load.output.contains("not connected (68): networkFailure"), "\(load)")
            #expect(load.output.contains("push channel not opened"), "\(load)")
            #expect(load.output.contains("descriptor limit"), "\(load)")
            let finished = try await server.terminate()
            #expect(finished.status == 0, "\(finished)")
        }
    }

    /// Waits until `condition` holds, checked every few milliseconds; fails after 120 seconds.
    static func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("timed out waiting until \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
