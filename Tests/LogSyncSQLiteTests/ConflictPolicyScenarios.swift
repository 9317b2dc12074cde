import Foundation
import GRDB
import LogSync
import LogSyncDiagnostics
import LogSyncSQLite
import LogSyncServer
import SyncTestKit
import Synchronization
import Testing

/// The WWDC23 conflict on SQLite files, under each table policy: the phone saves first, the
/// laptop sends its own edit before fetching, the server answers `serverRecordChanged` (F92),
/// and the laptop's store settles it as the notes table says.
@Suite("SQLite: conflicts under each policy")
struct ConflictPolicyScenarios {
    /// Both devices start from the note `n1` {title: "Groceries", body: "milk"}; then the phone
    /// saves `phoneEdit`, and the laptop makes `laptopEdit` and sends.
    func conflict(
        _ policy: ConflictPolicy, phoneEdit: String, laptopEdit: String,
        _ body: (_ phone: SQLiteDevice, _ laptop: SQLiteDevice) async throws -> Void
    ) async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory, conflicts: policy)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory, conflicts: policy)
            try phone.addFolder("f1", "Home")
            try phone.addNote("n1", in: "f1", title: "Groceries", body: "milk", modified: 1)
            try await phone.sync()
            try await laptop.sync()

            try phone.execute(phoneEdit)
            try await phone.sync()
            try laptop.execute(laptopEdit)
            try await laptop.store.sendChanges()  // refused: serverRecordChanged, settled by the policy
            try await laptop.sync()  // sends what the policy kept of the laptop's edit, fetches
            try await phone.sync()
            #expect(try phone.contents() == laptop.contents())
            #expect(try laptop.store.privateEngine.state.pendingRecordZoneChanges.isEmpty)
            try await body(phone, laptop)
        }
    }

    // F92, F53
    @Test("field by field: the phone's title and the laptop's body both survive")
    func fieldByField() async throws {
        try await conflict(
            .fieldByField, phoneEdit: "UPDATE notes SET title = 'Shopping' WHERE id = 'n1'",
            laptopEdit: "UPDATE notes SET body = 'milk, eggs' WHERE id = 'n1'"
        ) { phone, _ async throws in
            #expect(try phone.title("n1") == "Shopping")
            #expect(try phone.column("body", of: "n1") == "milk, eggs".databaseValue)
        }
    }

    // F92: the store's history is the engine's: blame tells the conflict from the device logs.
    @Test("blame (logtool blame's RecordBlame) tells a row's conflict from the laptop's and phone's device logs")
    func blameTellsTheConflict() async throws {
        try await conflict(
            .fieldByField, phoneEdit: "UPDATE notes SET title = 'Shopping' WHERE id = 'n1'",
            laptopEdit: "UPDATE notes SET body = 'milk, eggs' WHERE id = 'n1'"
        ) { phone, laptop async throws in
            let sources = [phone, laptop].map {
                Timeline.Source(name: $0.name, log: $0.store.privateEngine.deviceLog.log)
            }
            let blame = try RecordBlame.build(
                record: "n1:notes", zone: "Notes", device: sources[1], otherDevices: [sources[0]], server: nil)
            let kinds = blame.events.map(\.kind)
            #expect(kinds.contains(.conflict), "\(blame.text)")
            #expect(kinds.filter { $0 == .saved }.count >= 1, "\(blame.text)")
            #expect(blame.current?["body"] == .string("milk, eggs"))
            #expect(blame.current?["title"] == .string("Shopping"))
        }
    }

    // F92
    @Test("server wins: the laptop's edit of the same note is dropped for the phone's")
    func serverWins() async throws {
        try await conflict(
            .serverWins, phoneEdit: "UPDATE notes SET title = 'A' WHERE id = 'n1'",
            laptopEdit: "UPDATE notes SET title = 'B', body = 'bread' WHERE id = 'n1'"
        ) { phone, laptop async throws in
            #expect(try laptop.title("n1") == "A")
            #expect(try laptop.column("body", of: "n1") == "milk".databaseValue)
        }
    }

    // F92
    @Test("last edit wins: the laptop's later edit (by the modified column) replaces the phone's whole row")
    func lastEditWinsLocal() async throws {
        try await conflict(
            .lastEditWins(by: "modified"), phoneEdit: "UPDATE notes SET title = 'A', modified = 10 WHERE id = 'n1'",
            laptopEdit: "UPDATE notes SET title = 'B', modified = 20 WHERE id = 'n1'"
        ) { phone, _ async throws in
            #expect(try phone.title("n1") == "B")
            #expect(try phone.column("modified", of: "n1") == 20.0.databaseValue)
        }
    }

    // F92
    @Test("last edit wins: the laptop's older edit loses to the phone's later one")
    func lastEditWinsServer() async throws {
        try await conflict(
            .lastEditWins(by: "modified"), phoneEdit: "UPDATE notes SET title = 'A', modified = 30 WHERE id = 'n1'",
            laptopEdit: "UPDATE notes SET title = 'B', body = 'bread', modified = 20 WHERE id = 'n1'"
        ) { phone, laptop async throws in
            #expect(try laptop.title("n1") == "A")
            #expect(try laptop.column("body", of: "n1") == "milk".databaseValue)
        }
    }

    // F92, F53: the app's own merge sees both rows and the columns edited here.
    @Test("the app's merge: both titles kept, joined")
    func customMerge() async throws {
        let seen = Mutex<[Set<String>]>([])
        let join = ConflictPolicy.custom("join titles") { conflict in
            seen.withLock { $0.append(conflict.unsavedColumns) }
            guard case .text(let mine) = conflict.local["title"], case .text(let theirs) = conflict.server["title"]
            else {
                return conflict.server
            }
            return ["title": .text("\(theirs) + \(mine)")]
        }
        try await conflict(
            join, phoneEdit: "UPDATE notes SET title = 'A' WHERE id = 'n1'",
            laptopEdit: "UPDATE notes SET title = 'B' WHERE id = 'n1'"
        ) { phone, _ async throws in
            #expect(try phone.title("n1") == "A + B")
        }
        #expect(seen.withLock { $0 } == [["title"]])
    }
}
