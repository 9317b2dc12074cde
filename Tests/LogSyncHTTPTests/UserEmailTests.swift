import ChildProcesses
import Foundation
import LogSyncServer
import SyncModel
import TemporaryDirectory
import Testing

/// `logsync-server user add USER --email ADDRESS`: the address by which owners invite the user
/// to shares (F119).
@Suite("logsync-server user add --email")
struct UserEmailTests {
    @Test(
        "user add --email registers the address in the data directory; a bad or taken one is refused, nothing written")
    func userAddWithEmail() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("data")
            let added = try await ChildProcess.run([
                "user", "add", "bob", "--email", "bob@example.com", "--data", data.path,
            ])
            #expect(added.status == 0, "\(added)")
            #expect(added.output.hasPrefix("lsk_"), "the token is printed")

            for (email, problem) in [
                ("bob", "invalid e-mail address"), ("bob@example.com", "already belongs to another user"),
            ] {
                let refused = try await ChildProcess.run([
                    "user", "add", "carol", "--email", email, "--data", data.path,
                ])
                #expect(refused.status != 0, "\(refused)")
                #expect(refused.output.isEmpty, "no token is printed")
                #expect(refused.errorOutput.contains(problem), "\(refused)")
            }
            let tokens = try String(contentsOf: data.appendingPathComponent("tokens"), encoding: .utf8)
            #expect(!tokens.contains(" carol"), "a refused user gets no token")

            let server = try SyncServer(.init(directory: data, durability: .fast))
            let bob = try #require(try server.userIdentity(forEmailAddress: "BOB@example.com"))
            #expect(bob.userRecordName == (try server.userRecordID(for: "bob").recordName))
            server.shutdown()
        }
    }
}
