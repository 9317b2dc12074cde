import Foundation
import GRDB
import LogSync
import LogSyncSQLite
import LogSyncServer
import LogSyncTesting
import SyncTestKit
import Testing

/// The store with the engine's automatic sync: a commit is handed off by itself, and the
/// engine's scheduler sends it after its debounce, on a test clock.
@Suite("SQLite: automatic sync")
struct AutomaticSyncTests {
    // F5, F82: a local change schedules a send after the debounce.
    @Test("a committed write is handed off by itself and sent by the scheduler after the debounce")
    func commitSchedulesASend() async throws {
        try await withServer { directory, server in
            let clock = TestClock()
            let phone = try SQLiteDevice.openStore(
                "phone", in: directory, tables: SQLiteDevice.tables(.fieldByField),
                privateDatabase: server.database(for: "alice", device: "phone"), configure: { $0.clock = clock },
                migrate: SQLiteDevice.migrate(version2: false))
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)

            try await phone.writer.write { db in
                try db.execute(sql: "INSERT INTO notes(id, title) VALUES ('n1', 'Groceries')")
            }
            // No call to sync: the commit's hand-off queues the save, the scheduler sends it.
            await waitUntil("the write is pending in the engine") {
                try phone.privateEngine.state.pendingRecordZoneChanges.count == 1
            }
            await waitUntil("the scheduler sleeps until the debounce ends") {
                await clock.advance(by: .seconds(1))
                return try phone.privateEngine.state.pendingRecordZoneChanges.isEmpty
            }
            try await laptop.sync()
            #expect(try laptop.title("n1") == "Groceries")
        }
    }
}
