import ChildProcesses
import Foundation
import LogSyncHTTP
import PostgresProcess
import SyncModel
import Testing

/// Devices as sessions under two running nodes on one PostgreSQL database: a device signs in
/// on either node with an identity token of a local issuer (`logsync-server dev-issuer`, trusted
/// by both nodes' `--identity-config`), its session is honoured by both, and a device signed out
/// (`logsync-server sessions revoke`, a third process) is refused by both and loses its push
/// channel, while the user's other device goes on.
@Suite("Sessions across nodes", .timeLimit(.minutes(3)))
struct SessionNodeTests {
    @Test(
        "signed in with JWTs on either node, sessions revoke under two nodes: both refuse the phone's access token, its push channel on node 2 gets no more hints, the laptop syncs on"
    )
    func deviceSignedOutEverywhere() async throws {
        let store = try await MultiNodeTests.freshDatabase()
        try await Cluster.with(store: store) { cluster in
            let issuer = cluster.directory.appendingPathComponent("issuer").path
            let made = try await ChildProcess.run(["dev-issuer", "init", "--directory", issuer])
            try #require(made.status == 0, "\(made)")
            let configuration = cluster.directory.appendingPathComponent("identity.json")
            try Data(made.output.utf8).write(to: configuration)
            let signed = try await ChildProcess.run(
                ["dev-issuer", "sign", "--directory", issuer, "--subject", "alice", "--audience", "logsync-dev"])
            try #require(signed.status == 0, "\(signed)")
            let identityToken = signed.output.trimmingCharacters(in: .whitespacesAndNewlines)

            let node1 = try await cluster.startNode("node1", options: ["--identity-config", configuration.path])
            let node2 = try await cluster.startNode("node2", options: ["--identity-config", configuration.path])
            // The phone signs in on node 1, the laptop on node 2: one user, dev:alice.
            let phone = try await SessionClient(serverURL: node1.url).signIn(
                identityToken: identityToken, device: "phone")
            let laptop = try await SessionClient(serverURL: node2.url).signIn(
                identityToken: identityToken, device: "laptop")
            let tablet = try await SessionClient(serverURL: node2.url).signIn(
                identityToken: identityToken, device: "tablet")
            #expect(phone.user == "dev:alice" && laptop.user == "dev:alice")
            let phoneProbes = RevocationTests.probes(
                cluster, token: phone.accessToken, on: [node1, node2], device: "phone")
            let laptopProbes = RevocationTests.probes(
                cluster, token: laptop.accessToken, on: [node1, node2], device: "laptop")
            #expect(try await RevocationTests.noneRefused(phoneProbes + laptopProbes))
            let laptopDatabase = cluster.client(on: node1, token: laptop.accessToken, device: "laptop").database()
            _ = try await laptopDatabase.modifyZones(saving: [RecordZone(zoneID: RevocationTests.notes)], deleting: [])
            try await MultiNodeTests.subscribe(laptopDatabase)
            let (_, phoneHints) = await RevocationTests.listening(
                cluster, on: node2, token: phone.accessToken, device: "phone")
            // Another device of alice's hears the laptop's commits: a device's own commits are
            // not pushed back to it (F114).
            let (_, tabletHints) = await RevocationTests.listening(
                cluster, on: node2, token: tablet.accessToken, device: "tablet")

            let revoked = try await ChildProcess.run(
                ["sessions", "revoke", "--user", "dev:alice", "--device", "phone", "--store", cluster.store],
                directory: cluster.directory)
            #expect(revoked.status == 0 && revoked.output == "1 session revoked\n", "\(revoked)")
            try await waitUntil("both nodes refuse the phone's access token", limit: .seconds(60)) {
                try await RevocationTests.allRefused(phoneProbes)
            }

            try await RevocationTests.expectHinted(
                tabletHints, notRevoked: phoneHints, after: "after", savedBy: laptopDatabase)
            #expect(try await RevocationTests.noneRefused(laptopProbes))
        }
    }
}
