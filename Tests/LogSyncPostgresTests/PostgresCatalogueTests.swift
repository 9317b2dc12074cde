import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Testing

/// The admin change stream's catalogue on PostgreSQL (Docs/Protocol.md, "Admin change stream"):
/// every user's database ends read in one query of `logsync_logs`, without opening a database,
/// the same as the catalogue made by opening each one.
@Suite("The catalogue of databases on PostgreSQL")
struct PostgresCatalogueTests {
    @Test(
        "the catalogue read from logsync_logs names the databases holding anything, with the tokens their feeds end at")
    func catalogueFromTheLogsTable() async throws {
        try await withServerOnPostgres("catalogue") { server, storage, _, _ in
            let zone = RecordZone.ID(zoneName: "Notes")
            for user in ["carol", "alice"] as [UserID] {
                let database = server.database(for: user)
                _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
                _ = try await database.modifyRecords(
                    saving: [Record(recordType: "Note", recordID: Record.ID(recordName: "n", zoneID: zone))],
                    deleting: [])
            }
            try await onOwnThread { try server.registerUser("bob") }
            let expected = [
                ChangedDatabase(
                    user: "alice", scope: .private,
                    token: try await server.database(for: "alice").fetchDatabaseChanges(since: nil).changeToken),
                ChangedDatabase(
                    user: "carol", scope: .private,
                    token: try await server.database(for: "carol").fetchDatabaseChanges(since: nil).changeToken),
            ]
            let ends = try await onOwnThread { try storage.databaseLogEnds() }
            #expect(ends?.count == 2, "\(String(describing: ends))")
            #expect(try await onOwnThread { try server.databaseCatalogue() } == expected)
        }
    }
}
