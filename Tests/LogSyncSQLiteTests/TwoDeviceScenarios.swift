import Foundation
import GRDB
import LogSync
import LogSyncSQLite
import LogSyncServer
import SyncTestKit
import Testing

/// Two devices of one user, each with its own SQLite file, syncing through one server.
@Suite("SQLite: two devices")
struct TwoDeviceScenarios {
    @Test("a folder and its notes written on the phone arrive in the laptop's tables; edits go back")
    func editsSync() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            try phone.addFolder("f1", "Home")
            try phone.addNote("n1", in: "f1", title: "Groceries", body: "milk")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.title("n1") == "Groceries")
            #expect(try laptop.contents() == phone.contents())

            try laptop.execute("UPDATE notes SET body = 'milk, eggs' WHERE id = 'n1'")
            try await laptop.sync()
            try await phone.sync()
            #expect(try phone.column("body", of: "n1") == "milk, eggs".databaseValue)
            #expect(try laptop.contents() == phone.contents())
        }
    }

    @Test("deleting a folder deletes its notes on both devices (ON DELETE CASCADE)")
    func cascade() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            try phone.addFolder("f1", "Home")
            try phone.addNote("n1", in: "f1", title: "Groceries")
            try phone.addNote("n2", in: "f1", title: "Chores")
            try phone.addNote("loose", in: nil, title: "Loose")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.count("notes") == 3)

            try laptop.execute("DELETE FROM folders WHERE id = 'f1'")
            #expect(try laptop.count("notes") == 1)
            try await laptop.sync()
            try await phone.sync()
            #expect(try phone.count("folders") == 0)
            #expect(try phone.count("notes") == 1)
            #expect(try phone.title("loose") == "Loose")
            #expect(try laptop.contents() == phone.contents())
        }
    }

    @Test("the app's own upserts and replaces on a synced table are captured like any write")
    func upserts() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            let upsert = """
                INSERT INTO notes(id, title, body) VALUES ('n1', ?, ?)
                ON CONFLICT(id) DO UPDATE SET title = excluded.title, body = excluded.body
                """
            try phone.execute(upsert, ["Groceries", "milk"])
            try phone.execute(upsert, ["Shopping", "milk, eggs"])  // the same columns unsaved again
            try phone.execute("INSERT OR REPLACE INTO notes(id, title) VALUES ('n2', 'Chores')")
            try phone.execute("INSERT OR REPLACE INTO notes(id, title) VALUES ('n2', 'Chores, done')")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.title("n1") == "Shopping")
            #expect(try laptop.column("body", of: "n1") == "milk, eggs".databaseValue)
            #expect(try laptop.title("n2") == "Chores, done")
            #expect(try laptop.contents() == phone.contents())
        }
    }
}
