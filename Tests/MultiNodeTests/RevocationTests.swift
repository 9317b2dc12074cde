import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncPostgres
import Logging
import PostgresProcess
import SyncModel
import Testing

/// Tokens revoked under two running nodes on one PostgreSQL database: every node refuses them as
/// soon as it hears the NOTIFY, with no restart, and ends their push channels, also a node that
/// could not hear the revocation when it was made.
@Suite("Token revocation across nodes", .timeLimit(.minutes(3)))
struct RevocationTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// Whether a request through `database` is refused as one with a token never given is.
    static func refused(_ database: HTTPCloudDatabase) async throws -> Bool {
        do {
            _ = try await database.fetchAllZones()
            return false
        } catch let error as SyncError where error.code == .notAuthenticated {
            return true
        }
    }

    /// A database of the user of `token` on each of `nodes`, for probing whether they refuse it,
    /// as `device` (a session's own device: sessions are bound to theirs).
    static func probes(
        _ cluster: Cluster, token: String, on nodes: [Node], device: DeviceID = "probe"
    ) -> [HTTPCloudDatabase] {
        nodes.map { cluster.client(on: $0, token: token, device: device).database() }
    }

    /// Whether every one of `databases` refuses its token.
    static func allRefused(_ databases: [HTTPCloudDatabase]) async throws -> Bool {
        for database in databases where try await !refused(database) { return false }
        return true
    }

    /// Whether none of `databases` refuses its token.
    static func noneRefused(_ databases: [HTTPCloudDatabase]) async throws -> Bool {
        for database in databases where try await refused(database) { return false }
        return true
    }

    /// A client of the user of `token` on `node` whose push channel is open, and the hints it gets.
    static func listening(
        _ cluster: Cluster, on node: Node, token: String, device: DeviceID
    ) async -> (client: HTTPSyncClient, hints: PushRecorder) {
        let client = cluster.client(on: node, token: token, device: device)
        let hints = PushRecorder()
        hints.record(client.database().pushHints())
        await client.waitForPushChannels()
        return (client, hints)
    }

    /// Saves a note through `database`, so that the database's listeners are hinted.
    /// Saves note `name` through `database` after a revocation: `kept`'s channel is hinted of
    /// it, and `revoked`'s is not.
    static func expectHinted(
        _ kept: PushRecorder, notRevoked revoked: PushRecorder, after name: String, savedBy database: HTTPCloudDatabase
    ) async throws {
        let revokedMark = revoked.hints.count
        let keptMark = kept.hints.count
        try await saveNote(name, database)
        try await waitUntil("the kept device's channel is hinted of the note") {
            kept.hints.dropFirst(keptMark).contains { $0.zoneID == notes }
        }
        #expect(revoked.hints.count == revokedMark, "\(revoked.hints)")
    }

    static func saveNote(_ name: String, _ database: HTTPCloudDatabase) async throws {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
        record["title"] = .string(name)
        let saved = try await database.modifyRecords(saving: [record], deleting: [])
        _ = try saved.saveResults[record.recordID]?.get()
    }

    /// Runs `statement` on the maintenance database `postgres` of the server holding `store`.
    static func onServer(_ store: String, _ statement: String) throws {
        var url = store.split(separator: "/", omittingEmptySubsequences: false)
        url[url.count - 1] = "postgres"
        var logger = Logger(label: "RevocationTests")
        logger.logLevel = .critical
        let pool = PostgresPool(url: try PostgresURL(url.joined(separator: "/")), size: 1, logger: logger)
        defer { pool.shutdown() }
        _ = try pool.withSession { session in try session.query(statement) }
    }

    @Test(
        "user revoke --token under two nodes: both refuse the token without a restart, its push channel on node 2 gets no more hints, the user's other token and other users go on"
    )
    func revokedEverywhere() async throws {
        try await Cluster.with(store: try await MultiNodeTests.freshDatabase()) { cluster in
            let phone = try await cluster.addUser("alice")
            let laptop = try await cluster.addUser("alice")
            let bob = try await cluster.addUser("bob")
            let node1 = try await cluster.startNode("node1")
            let node2 = try await cluster.startNode("node2")
            let (phoneProbes, laptopProbes, bobProbes) = (
                Self.probes(cluster, token: phone, on: [node1, node2]),
                Self.probes(cluster, token: laptop, on: [node1, node2]),
                Self.probes(cluster, token: bob, on: [node1, node2])
            )
            // Each node has seen (and keeps) every token.
            #expect(try await Self.noneRefused(phoneProbes + laptopProbes + bobProbes))
            let laptopDatabase = cluster.client(on: node1, token: laptop, device: "laptop").database()
            _ = try await laptopDatabase.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            try await MultiNodeTests.subscribe(laptopDatabase)

            // The phone and the laptop each listen on node 2.
            let (phoneClient, phoneHints) = await Self.listening(cluster, on: node2, token: phone, device: "phone")
            let (_, laptopHints) = await Self.listening(cluster, on: node2, token: laptop, device: "laptop-push")

            let revoked = try await ChildProcess.run(
                ["user", "revoke", "--token", phone, "--store", cluster.store], directory: cluster.directory)
            #expect(revoked.status == 0 && revoked.output == "1 token revoked\n", "\(revoked)")
            try await waitUntil("both nodes refuse the revoked token", limit: .seconds(60)) {
                try await Self.allRefused(phoneProbes)
            }

            // A note saved after: the laptop's channel on node 2 is hinted, the phone's is gone.
            try await Self.expectHinted(laptopHints, notRevoked: phoneHints, after: "after", savedBy: laptopDatabase)
            #expect(phoneClient.pushConnectionCount == 1, "the revoked phone's channel connected again")
            #expect(try await Self.noneRefused(laptopProbes + bobProbes))
        }
    }

    @Test(
        "nodes that cannot hear revocations refuse a token revoked meanwhile, and once they hear again close its push channel before they tell devices to fetch"
    )
    func revokedWhileNotListening() async throws {
        let store = try await MultiNodeTests.freshDatabase()
        let name = String(store.split(separator: "/").last!)
        defer { try? Self.onServer(store, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS true") }
        try await Cluster.with(store: store) { cluster in
            let alice = try await cluster.addUser("alice")
            let bob = try await cluster.addUser("bob")
            let node1 = try await cluster.startNode("node1")
            let node2 = try await cluster.startNode("node2")
            let aliceProbes = Self.probes(cluster, token: alice, on: [node1, node2])
            let bobProbes = Self.probes(cluster, token: bob, on: [node1, node2])
            #expect(try await Self.noneRefused(aliceProbes + bobProbes))
            let (aliceClient, aliceHints) = await Self.listening(cluster, on: node2, token: alice, device: "phone")
            let (_, bobHints) = await Self.listening(cluster, on: node2, token: bob, device: "bob-phone")
            // The connection the revocation is made on, open before new ones are refused.
            var quiet = Logger(label: "RevocationTests")
            quiet.logLevel = .critical
            let admin = try await PostgresStorage.open(url: store, connections: 1, logger: quiet)
            defer { admin.shutdown() }

            // No new connection to the database, and the nodes' listening connections ended:
            // they cannot hear anything until connections are allowed again.
            try Self.onServer(store, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS false")
            try Self.onServer(
                store,
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND query LIKE 'LISTEN%'
                """)
            for node in [node1, node2] {
                try await node.process.waitForErrorLine(containing: "token revocations cannot be heard")
            }

            #expect(try await admin.perform { try admin.tokens!.revoke(.user("alice")) } == 1)
            try await waitUntil("both nodes refuse alice's token, asking PostgreSQL", limit: .seconds(60)) {
                try await Self.allRefused(aliceProbes)
            }
            let aliceMark = aliceHints.hints.count
            let bobMark = bobHints.hints.count

            // Connections again: node 2 listens again, checks its channels' tokens, then tells
            // its devices to fetch (hints may have been missed): bob is told, alice is gone.
            try Self.onServer(store, "ALTER DATABASE \"\(name)\" ALLOW_CONNECTIONS true")
            try await waitUntil("bob's channel on node 2 is told to fetch after the reconnection") {
                bobHints.hints.dropFirst(bobMark).contains { $0.zoneID == nil }
            }
            #expect(aliceHints.hints.count == aliceMark, "\(aliceHints.hints)")
            #expect(aliceClient.pushConnectionCount == 1, "alice's revoked channel connected again")
            #expect(try await Self.allRefused(aliceProbes))
            #expect(try await Self.noneRefused(bobProbes))
        }
    }
}
