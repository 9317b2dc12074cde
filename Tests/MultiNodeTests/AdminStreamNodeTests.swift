import ChildProcesses
import Foundation
import LogSyncHTTP
import SyncModel
import Testing

/// The admin change stream under two nodes on one PostgreSQL database (Docs/Protocol.md, "Admin
/// change stream"): a backend connected to one node hears of the commits made on the other,
/// and when that node may have missed some, its stream ends and the next one's catalogue has
/// them.
@Suite("The admin change stream across nodes", .timeLimit(.minutes(3)))
struct AdminStreamNodeTests {
    /// The token of every database change `user`'s client on some node reads from the start.
    static func token(of client: HTTPSyncClient) async throws -> DatabaseChangeToken {
        try await client.database().fetchDatabaseChanges(since: nil).changeToken
    }

    /// The catalogue of a new stream, up to its `caughtUp`, and the stream's iterator after it.
    static func catalogue(
        _ admin: AdminClient
    ) async throws -> ([ChangedDatabase], AsyncThrowingStream<AdminChangeEvent, any Error>.Iterator) {
        var events = admin.changeHints().makeAsyncIterator()
        var hints: [ChangedDatabase] = []
        while let event = try await events.next() {
            guard case .changed(let hint) = event else { return (hints, events) }
            hints.append(hint)
        }
        throw MultiNodeTestError("the stream ended before it caught up")
    }

    @Test(
        "a backend on node 1 hears of every commit made on node 2, subscribed or not; when node 1's listening connection drops its stream ends, and the next stream's catalogue has what was committed meanwhile"
    )
    func streamAcrossNodes() async throws {
        let store = try await MultiNodeTests.freshDatabase()
        try await Cluster.with(store: store) { cluster in
            let aliceToken = try await cluster.addUser("alice")
            let bobToken = try await cluster.addUser("bob")
            let adminFile = cluster.directory.appendingPathComponent("admin-tokens")
            let adminToken = try await ChildProcess.addAdminToken(to: adminFile)
            let options = ["--admin-token-file", adminFile.path]
            let node1 = try await cluster.startNode("node1", options: options)
            let node2 = try await cluster.startNode("node2", options: options)
            let admin = AdminClient(
                serverURL: node1.url, adminToken: adminToken)
            let alice = cluster.client(on: node2, token: aliceToken, device: "alice-phone")
            let bob = cluster.client(on: node2, token: bobToken, device: "bob-phone")

            // alice's note, on node 2, before the backend connects: in the catalogue.
            try await RevocationTests.saveNoteInNewZone("before", alice.database())
            let (catalogue, live) = try await Self.catalogue(admin)
            #expect(
                catalogue == [ChangedDatabase(user: "alice", scope: .private, token: try await Self.token(of: alice))])

            // bob's note, on node 2, which no subscription covers: node 1's stream names it.
            var events = live
            try await RevocationTests.saveNoteInNewZone("bob's", bob.database())
            let bobNow = try await Self.token(of: bob)
            while true {
                guard case .changed(let hint)? = try await events.next() else {
                    Issue.record("the stream ended before bob's note")
                    return
                }
                if hint.user == "bob" && hint.token == bobNow { break }
            }

            // PostgreSQL drops the nodes' listening connections: once node 1 listens again it may
            // have missed notices, and ends the stream.
            let name = String(store.split(separator: "/").last!)
            try RevocationTests.onServer(
                store,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND query LIKE 'LISTEN%'"
            )
            while let event = try await events.next() {
                if case .caughtUp = event { Issue.record("a second catalogue on one stream") }
            }
            try await RevocationTests.saveNote("after", alice.database())
            let (again, _) = try await Self.catalogue(admin)
            #expect(
                again == [
                    ChangedDatabase(user: "alice", scope: .private, token: try await Self.token(of: alice)),
                    ChangedDatabase(user: "bob", scope: .private, token: bobNow),
                ])
        }
    }
}

extension RevocationTests {
    /// Saves the Notes zone and note `name` in it through `database`.
    static func saveNoteInNewZone(_ name: String, _ database: HTTPCloudDatabase) async throws {
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
        try await saveNote(name, database)
    }
}
