import Foundation
import GRDB
import LogSync
import LogSyncSQLite
import LogSyncServer
import SyncTestKit
import Testing

/// A folder shared with its notes (a hierarchy share rooted at a row), accepted into the other
/// user's tables; encrypted columns; a zone per row.
@Suite("SQLite: sharing a row and its children")
struct SharingScenarios {
    /// Alice's folder Home, shared with bob (`permission`) once alice has synced what `seed`
    /// wrote, and bob's store having accepted it.
    func withHomeShared(
        _ permission: Share.Participant.Permission, seed: (SQLiteDevice) throws -> Void,
        _ body: (_ server: SyncServer, _ alice: SQLiteDevice, _ bob: SQLiteDevice) async throws -> Void
    ) async throws {
        try await withServer { directory, server in
            try server.registerUser("bob", emailAddress: "bob@example.com")
            let alice = try SQLiteDevice("alice-phone", server: server, user: "alice", directory: directory)
            let bob = try SQLiteDevice("bob-phone", server: server, user: "bob", directory: directory)
            try alice.addFolder("home", "Home")
            try seed(alice)
            try await alice.sync()
            try alice.store.share(
                table: "folders", primaryKey: "home",
                with: [Share.Participant(emailAddress: "bob@example.com", permission: permission)])
            try await alice.sync()
            let url = try #require(try alice.store.share(table: "folders", primaryKey: "home")?.url)
            try await bob.store.acceptShare(url: url)
            try await body(server, alice, bob)
        }
    }

    // F119, F120, F123: a hierarchy share rooted at a row; the participant's edits and new rows
    // below it go to the owner's zone.
    @Test(
        "alice shares a folder with its notes; bob accepts, edits, adds and deletes notes in it; nothing else is shared"
    )
    func shareFolder() async throws {
        // 09:00 alice shares Home with bob, read-write; 09:05 bob accepts: Home and its notes
        // land in his tables, Work does not.
        try await withHomeShared(.readWrite) { alice in
            try alice.addNote("groceries", in: "home", title: "Groceries")
            try alice.addNote("chores", in: "home", title: "Chores")
            try alice.addFolder("work", "Work")
            try alice.addNote("report", in: "work", title: "Report")
        } _: { _, alice, bob in
            #expect(try bob.title("groceries") == "Groceries")
            #expect(try bob.title("chores") == "Chores")
            #expect(try bob.title("report") == nil)
            #expect(try bob.count("folders") == 1)

            // 09:10 bob edits a note, adds one to Home, deletes another.
            try bob.execute("UPDATE notes SET body = 'milk' WHERE id = 'groceries'")
            try bob.addNote("ideas", in: "home", title: "Ideas")
            try bob.execute("DELETE FROM notes WHERE id = 'chores'")
            try await bob.sync()
            #expect(try bob.store.refusals().isEmpty)
            #expect(try bob.store.sharedEngine?.state.pendingRecordZoneChanges.isEmpty == true)
            try await alice.sync()
            #expect(try alice.column("body", of: "groceries") == "milk".databaseValue)
            #expect(try alice.title("ideas") == "Ideas")
            #expect(try alice.title("chores") == nil)

            // 09:15 alice adds a note to Home: bob gets it; her Work notes stay hers.
            try alice.addNote("trip", in: "home", title: "Trip")
            try alice.addNote("budget", in: "work", title: "Budget")
            try await alice.sync()
            try await bob.sync()
            #expect(try bob.title("trip") == "Trip")
            #expect(try bob.title("budget") == nil)
        }
    }

    // F121: a read-only participant's edit is refused and undone.
    @Test("a read-only participant's edit is refused, reported with its table and key, and the row goes back")
    func readOnly() async throws {
        try await withHomeShared(.readOnly) { alice in
            try alice.addNote("groceries", in: "home", title: "Groceries")
        } _: { _, _, bob in
            try bob.execute("UPDATE notes SET title = 'Mine now' WHERE id = 'groceries'")
            try await bob.sync()
            #expect(try bob.title("groceries") == "Groceries")
            let refusals = try bob.store.refusals()
            #expect(refusals.map(\.primaryKey) == ["groceries"])
            #expect(refusals.map(\.code) == [.permissionFailure])
        }
    }

    // F129: an encrypted column is sealed on the server; the other columns are not.
    @Test("an encrypted column reaches the server sealed")
    func encryptedColumn() async throws {
        try await withServer { directory, server in
            let tables = [
                SyncedTable("folders", zone: .named("Notes")),
                SyncedTable("notes", zone: .named("Notes"), parent: "folderID").column("body", encrypted: true),
            ]
            let phone = try SQLiteDevice("phone", server: server, directory: directory, tables: tables)
            try phone.addNote("n1", in: nil, title: "Check-up", body: "a diagnosis")
            try await phone.sync()
            let stored = try #require(
                try await server.database(for: "alice", device: "admin").fetchZoneChanges(
                    zoneID: RecordZone.ID(zoneName: "Notes"), since: nil
                ).modifications.first { $0.record.recordID.recordName == "n1:notes" }?.record)
            guard case .encrypted(.sealed)? = stored["body"] else {
                Issue.record("the server's body is \(String(describing: stored["body"]))")
                return
            }
            #expect(stored["title"] == .string("Check-up"))
        }
    }

    @Test("a zone per row: each folder's notes in the zone its column names")
    func zonePerColumn() async throws {
        try await withServer { directory, server in
            let tables = [
                SyncedTable("folders", zone: .column("name")),
                SyncedTable("notes", zone: .named("Loose"), parent: "folderID"),
            ]
            let phone = try SQLiteDevice("phone", server: server, directory: directory, tables: tables)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory, tables: tables)
            try phone.addFolder("f1", "Home")
            try phone.addFolder("f2", "Work")
            try phone.addNote("n1", in: "f1", title: "Groceries")
            try phone.addNote("n2", in: "f2", title: "Report")
            try phone.addNote("n3", in: nil, title: "Loose")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.contents() == phone.contents())
            #expect(try phone.store.recordID(table: "notes", primaryKey: "n1").zoneID.zoneName == "Home")
            #expect(try phone.store.recordID(table: "notes", primaryKey: "n2").zoneID.zoneName == "Work")
            #expect(try phone.store.recordID(table: "notes", primaryKey: "n3").zoneID.zoneName == "Loose")
        }
    }
}
