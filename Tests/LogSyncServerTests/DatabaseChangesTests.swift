import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

/// The admin change stream's source on the server: every database's commits, coalesced per
/// database, and the catalogue of what the databases hold (Docs/Protocol.md, "Admin change
/// stream").
@Suite("Every database's changes, for the app's backend")
struct DatabaseChangesTests {
    static let zone = RecordZone.ID(zoneName: "Notes")

    static func save(_ names: [String], in database: InProcessDatabase) async throws -> DatabaseChangeToken {
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        let records = names.map { Record(recordType: "Note", recordID: Record.ID(recordName: $0, zoneID: zone)) }
        let response = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: records))
        for result in response.saveResults.values { _ = try result.get() }
        return try await database.fetchDatabaseChanges(since: nil).changeToken
    }

    @Test(
        "commits no subscription covers are told, each database once with its newest token while the reader is busy, in the order they first changed"
    )
    func coalescedPerDatabase() async throws {
        try await withServer { server, _ in
            let changes = server.databaseChanges()
            let alice = server.database(for: "alice", device: "phone")
            let bob = server.database(for: "bob", device: "laptop")
            _ = try await Self.save(["a1"], in: alice)
            let bobToken = try await Self.save(["b1"], in: bob)
            let aliceToken = try await Self.save(["a2", "a3"], in: alice)
            var iterator = changes.makeAsyncIterator()
            let event = await iterator.next()
            #expect(
                event
                    == .changed([
                        ChangedDatabase(user: "alice", scope: .private, token: aliceToken),
                        ChangedDatabase(user: "bob", scope: .private, token: bobToken),
                    ]))
            #expect(try server.admin.currentToken(of: "alice") == aliceToken)
            // The next commit wakes a waiting reader.
            async let next = changes.next()
            let later = try await Self.save(["b2"], in: bob)
            #expect(await next == .changed([ChangedDatabase(user: "bob", scope: .private, token: later)]))
            server.shutdown()
            #expect(await iterator.next() == nil)
        }
    }

    @Test(
        "the catalogue names every registered user's databases that hold anything, with their current tokens, and creates none"
    )
    func catalogue() async throws {
        try await withServer { server, _ in
            let aliceToken = try await Self.save(["a1"], in: server.database(for: "alice"))
            try server.registerUser("carol")
            let bobToken = try await Self.save(["b1"], in: server.database(for: "bob"))
            #expect(
                try server.databaseCatalogue() == [
                    ChangedDatabase(user: "alice", scope: .private, token: aliceToken),
                    ChangedDatabase(user: "bob", scope: .private, token: bobToken),
                ])
            // Read without creating a database: alice's environment still holds her private log only.
            let alice = LMDBStorage.userDirectory(
                in: try #require(server.storage as? LMDBStorage).directory, number: try server.users.number(of: "alice")
            )
            #expect(try LogEnvironment.open(at: alice, options: .init(durability: .fast)).logNames() == ["private"])
            #expect(try server.isRegistered("carol"))
            #expect(try !server.isRegistered("dave"))
            #expect(try !server.isRegistered("dave"), "asking registers nobody")
        }
    }

    @Test("a listener that stops is forgotten; a cancelled wait ends")
    func cancellation() async throws {
        try await withServer { server, _ in
            let changes = server.databaseChanges()
            let waiting = Task { await changes.next() }
            waiting.cancel()
            #expect(await waiting.value == nil)
            #expect(server.pushHub.everyDatabaseListenerCount == 0)
            do {
                let dropped = server.databaseChanges()
                #expect(server.pushHub.everyDatabaseListenerCount == 1)
                dropped.wake()
            }
            #expect(server.pushHub.everyDatabaseListenerCount == 0)
        }
    }
}
