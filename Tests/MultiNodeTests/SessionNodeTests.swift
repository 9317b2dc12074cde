import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncPostgres
import LogSyncServer
import Logging
import PostgresProcess
import SyncModel
import Testing

/// Devices as sessions under two running nodes on one PostgreSQL database: a session made once
/// is honoured by both, and a device signed out (`logsync-server sessions revoke`, a third
/// process) is refused by both and loses its push channel, while the user's other device goes on.
/// The sessions are made in the store beforehand: the nodes have no identity verifier here.
@Suite("Sessions across nodes", .timeLimit(.minutes(3)))
struct SessionNodeTests {
    @Test(
        "sessions revoke under two nodes: both refuse the phone's access token, its push channel on node 2 gets no more hints, the laptop syncs on"
    )
    func deviceSignedOutEverywhere() async throws {
        let store = try await MultiNodeTests.freshDatabase()
        var quiet = Logger(label: "SessionNodeTests")
        quiet.logLevel = .critical
        let (phone, laptop): (SessionStore.Issued, SessionStore.Issued)
        do {
            let storage = try await PostgresStorage.open(url: store, connections: 1, logger: quiet)
            let server = try SyncServer(
                .init(directory: FileManager.default.temporaryDirectory.appendingPathComponent("unused")),
                storage: storage)
            let sessions = try SessionStore(server: server)
            phone = try sessions.create(user: "test:alice", device: "phone")
            laptop = try sessions.create(user: "test:alice", device: "laptop")
            server.shutdown()
        }
        try await Cluster.with(store: store) { cluster in
            let node1 = try await cluster.startNode("node1")
            let node2 = try await cluster.startNode("node2")
            let phoneProbes = RevocationTests.probes(cluster, token: phone.accessToken, on: [node1, node2])
            let laptopProbes = RevocationTests.probes(cluster, token: laptop.accessToken, on: [node1, node2])
            #expect(try await RevocationTests.noneRefused(phoneProbes + laptopProbes))
            let laptopDatabase = cluster.client(on: node1, token: laptop.accessToken, device: "laptop").database()
            _ = try await laptopDatabase.modifyZones(saving: [RecordZone(zoneID: RevocationTests.notes)], deleting: [])
            try await MultiNodeTests.subscribe(laptopDatabase)
            let (_, phoneHints) = await RevocationTests.listening(
                cluster, on: node2, token: phone.accessToken, device: "phone")
            // Another device name: a device's own commits are not pushed back to it (F114).
            let (_, laptopHints) = await RevocationTests.listening(
                cluster, on: node2, token: laptop.accessToken, device: "laptop-push")

            let revoked = try await ChildProcess.run(
                ["sessions", "revoke", "--user", "test:alice", "--device", "phone", "--store", cluster.store],
                directory: cluster.directory)
            #expect(revoked.status == 0 && revoked.output == "1 session revoked\n", "\(revoked)")
            try await waitUntil("both nodes refuse the phone's access token", limit: .seconds(60)) {
                try await RevocationTests.allRefused(phoneProbes)
            }

            let phoneMark = phoneHints.hints.count
            let laptopMark = laptopHints.hints.count
            try await RevocationTests.saveNote("after", laptopDatabase)
            try await waitUntil("the laptop's channel is hinted of the note") {
                laptopHints.hints.dropFirst(laptopMark).contains { $0.zoneID == RevocationTests.notes }
            }
            #expect(phoneHints.hints.count == phoneMark, "\(phoneHints.hints)")
            #expect(try await RevocationTests.noneRefused(laptopProbes))
        }
    }
}
