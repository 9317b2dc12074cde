import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncWire
import SyncModel
import TemporaryDirectory
import Testing

/// `logsync-server user list`, `user revoke` and `user delete` against a data directory that a
/// `logsync-server` process serves, and their agreement with the admin routes, whose code they
/// share (`AdminOperations`).
@Suite("Admin users: the user commands", .timeLimit(.minutes(3)))
struct AdminUserProcessTests {
    /// `logsync-server --data DATA --admin-token-file FILE --port 0`, once it listens, and its port.
    static func serve(_ data: URL, adminFile: URL) async throws -> (process: ChildProcess, port: Int) {
        let server = try ChildProcess.start(["--data", data.path, "--admin-token-file", adminFile.path, "--port", "0"])
        return (server, try await server.waitForPort())
    }

    @Test(
        "user list lists the users as the admin route does; user revoke ends a user's sessions too; user delete takes a user and their data away, other users untouched"
    )
    func listRevokeDelete() async throws {
        try await withServerData { data in
            let alice = try await ChildProcess.run([
                "user", "add", "alice", "--email", "alice@example.com", "--data", data.path,
            ])
            #expect(alice.status == 0, "\(alice)")
            let aliceToken = alice.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let bobToken = try await addUser("bob", data: data)
            let adminFile = data.deletingLastPathComponent().appendingPathComponent("admin-tokens")
            let adminToken = try await ChildProcess.addAdminToken(to: adminFile)

            var (server, port) = try await Self.serve(data, adminFile: adminFile)
            let url = URL(string: "http://127.0.0.1:\(port)")!
            let admin = AdminClient(serverURL: url, adminToken: adminToken)
            for (user, token) in [("alice", aliceToken), ("bob", bobToken)] {
                let client = HTTPSyncClient(.init(serverURL: url, credentials: .token(token), device: "phone"))
                defer { client.close() }
                _ = try await client.database().modifyZones(
                    saving: [RecordZone(zoneName: "Notes-\(user)")], deleting: [])
            }
            try await admin.createUser("carol")
            let carol = try await admin.mintSession(for: "carol", device: "phone")
            let bobSession = try await admin.mintSession(for: "bob", device: "laptop")

            let listed = try await ChildProcess.run(["user", "list", "--data", data.path])
            #expect(listed.status == 0, "\(listed)")
            #expect(listed.output == "alice\talice@example.com\t0\nbob\t-\t1\ncarol\t-\t1\n", "\(listed)")
            let viaRoute = try await admin.users().users.map { "\($0.user)\t\($0.email ?? "-")\t\($0.sessions)" }
            #expect(listed.output == viaRoute.map { $0 + "\n" }.joined())
            let page = try await ChildProcess.run([
                "user", "list", "--after", "alice", "--limit", "1", "--data", data.path,
            ])
            #expect(page.output == "bob\t-\t1\n", "\(page)")

            // user revoke: bob's token and his session, refused by the running server.
            let revoked = try await ChildProcess.run(["user", "revoke", "bob", "--data", data.path])
            #expect(revoked.status == 0 && revoked.output == "1 token revoked, 1 session ended\n", "\(revoked)")
            try await TokenRevocationTests.waitUntil(
                "bob's token and session are refused", by: .now + TokenRevocationTests.patience
            ) {
                let token = try await TokenRevocationTests.fetchZones(port: port, token: bobToken).status
                let session = try await TokenRevocationTests.fetchZones(port: port, token: bobSession.accessToken)
                    .status
                return token == 401 && session == 401
            }
            #expect(try await TokenRevocationTests.fetchZones(port: port, token: carol.accessToken).status == 200)

            // user delete, the server stopped (Docs/Protocol.md, "Users").
            #expect(try await server.terminate().status == 0)
            let deleted = try await ChildProcess.run(["user", "delete", "alice", "--data", data.path])
            #expect(deleted.status == 0 && deleted.output == "user \"alice\" deleted\n", "\(deleted)")
            let again = try await ChildProcess.run(["user", "delete", "alice", "--data", data.path])
            #expect(again.status == 0 && again.output.contains("was not registered"), "\(again)")
            let bad = try await ChildProcess.run(["user", "delete", " alice", "--data", data.path])
            #expect(bad.status == 1 && bad.errorOutput.contains("logsync-server: error:"), "\(bad)")
            let after = try await ChildProcess.run(["user", "list", "--data", data.path])
            #expect(after.output == "bob\t-\t0\ncarol\t-\t1\n", "\(after)")

            (server, port) = try await Self.serve(data, adminFile: adminFile)
            #expect(try await TokenRevocationTests.fetchZones(port: port, token: aliceToken).status == 401)
            let carolClient = HTTPSyncClient(
                .init(
                    serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(carol.accessToken),
                    device: "phone"))
            defer { carolClient.close() }
            _ = try await carolClient.database().currentUserRecordID()
            let bobAgain = try await ChildProcess.run(["user", "add", "bob", "--data", data.path])
            let bobClient = HTTPSyncClient(
                .init(
                    serverURL: URL(string: "http://127.0.0.1:\(port)")!,
                    credentials: .token(bobAgain.output.trimmingCharacters(in: .whitespacesAndNewlines)),
                    device: "phone"))
            defer { bobClient.close() }
            #expect(try await bobClient.database().fetchAllZones().map(\.zoneID.zoneName).contains("Notes-bob"))
            #expect(try await server.terminate().status == 0)
        }
    }
}
