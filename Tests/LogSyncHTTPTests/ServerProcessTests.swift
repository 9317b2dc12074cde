import ChildProcesses
import Foundation
import LogSyncHTTP
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// `logsync-server` as a child process, as the README tells people to run it: a user added with
/// `user add`, two devices syncing through it, SIGTERM, and a restart that has kept everything.
@Suite("logsync-server as a process", .timeLimit(.minutes(2)))
struct ServerProcessTests {
    @Test("README: user add, serve, two devices sync, SIGTERM stops cleanly, a restart keeps every commit")
    func readmeWalkthrough() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("data")
            let token = try await addUser("alice", data: data)
            #expect(token.hasPrefix("lsk_") && !token.contains(" "))
            let tokenFile = try String(contentsOf: data.appendingPathComponent("tokens"), encoding: .utf8)
            #expect(tokenFile.contains(/\nsha256:[0-9a-f]{64} alice\n/) && !tokenFile.contains(token), "\(tokenFile)")
            let permissions =
                try FileManager.default.attributesOfItem(atPath: data.appendingPathComponent("tokens").path)[
                    .posixPermissions] as? Int
            #expect(permissions == 0o600)

            // Serve, and let two devices of alice's sync a note through it.
            let server = try ChildProcess.start(["--data", data.path, "--port", "0"])
            let port = try await server.waitForPort()
            let url = URL(string: "http://127.0.0.1:\(port)")!
            let phone = HTTPSyncClient(.init(serverURL: url, credentials: .token(token), device: "phone")).database()
            let laptop = HTTPSyncClient(.init(serverURL: url, credentials: .token(token), device: "laptop")).database()
            let zone = RecordZone.ID(zoneName: "Notes")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone))
            note["title"] = "from the phone"
            _ = try await phone.modifyRecords(saving: [note], deleting: [])
            let fetched = try await laptop.fetchZoneChanges(zoneID: zone, since: nil)
            #expect(fetched.modifications.map { $0.record["title"] } == [.string("from the phone")])

            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
            #expect(stopped.errorOutput.contains("stopped"), "\(stopped)")

            // The data directory holds every commit: a new server process answers with it.
            let again = try ChildProcess.start(["--data", data.path, "--port", "0"])
            let newPort = try await again.waitForPort()
            let laptopAgain = HTTPSyncClient(
                .init(
                    serverURL: URL(string: "http://127.0.0.1:\(newPort)")!, credentials: .token(token), device: "laptop"
                ))
            let refetched = try await laptopAgain.database().fetchZoneChanges(zoneID: zone, since: nil)
            #expect(refetched.modifications.map { $0.record["title"] } == [.string("from the phone")])
            let unauthorized = HTTPSyncClient(
                .init(
                    serverURL: URL(string: "http://127.0.0.1:\(newPort)")!,
                    credentials: .token("lsk_wrong-0123456789abcdef")))
            await #expect(throws: SyncError.self) { _ = try await unauthorized.database().fetchAllZones() }
            let end = try await again.terminate()
            #expect(end.status == 0, "\(end)")
        }
    }

    @Test("--help explains every flag; bad flags are refused with a message")
    func help() async throws {
        let help = try await ChildProcess.run(["serve", "--help"])
        #expect(help.status == 0)
        for flag in [
            "--data", "--tokens", "--host", "--port", "--max-body-bytes", "--tls-certificate", "--tls-key",
            "--shutdown-grace-period", "--log-level", "--idle-timeout", "--request-head-timeout",
            "--request-body-timeout", "--max-connections", "--listen-backlog", "--push-ping-interval",
            "--request-memory-budget", "--max-requests-waiting", "--user-request-rate", "--user-request-burst",
            "--user-concurrent-requests", "--address-request-rate", "--address-request-burst",
            "--address-concurrent-requests", "default: 127.0.0.1",
        ] {
            #expect(help.output.contains(flag), "serve --help does not mention \(flag)")
        }
        // Whether this build exports traces over OTLP (the package trait), and how to get it.
        #expect(help.output.contains("Traces: this build exports"), "\(help.output)")
        #expect(help.output.contains("OTLP"))
        let bad = try await ChildProcess.run(["--data", "/tmp/unused", "--port", "70000"])
        #expect(bad.status != 0)
        #expect(bad.errorOutput.contains("--port must be 0 to 65535"), "\(bad)")
    }
}
