import ChildProcesses
import Foundation
import GRDB
import LogStore
import LogSync
import TemporaryDirectory
import Testing

/// `notes-device` keeps its notes in a SQLite file whose tables sync themselves (LogSyncSQLite):
/// what its processes leave on disk between two runs.
@Suite("notes-device's SQLite store between processes", .timeLimit(.minutes(3)))
struct NotesDeviceStoreProcessTests {
    typealias Device = DeviceProcessTests.Device

    /// The device's SQLite file, opened by another connection (as any SQLite client may).
    static func database(of device: Device) throws -> DatabaseQueue {
        try DatabaseQueue(path: device.directory.appendingPathComponent("notes.sqlite").path)
    }

    /// The user's record name the device learned.
    static func me(of device: Device) throws -> String {
        try #require(
            try database(of: device).read {
                try String.fetchOne($0, sql: "SELECT value FROM device WHERE key = 'me'")
            })
    }

    /// The note saves and deletions pending in a device's private engine, by its device log.
    static func pending(_ device: Device) throws -> [SyncEngine.PendingRecordZoneChange] {
        var pending: [SyncEngine.PendingRecordZoneChange] = []
        try DeviceProcessTests.inspect(device.directory.appendingPathComponent("sync/private")) { log in
            pending = try log.snapshotState().pendingRecordZoneChanges
        }
        return pending
    }

    // A `set` is one SQLite transaction: the note's row, and (by the store's triggers, in the same
    // transaction) the row in the store's outbox. A process that ends right after that commit,
    // before its engine appended the pending save to its device log, leaves exactly this file:
    // here another connection makes the same commit, and no engine runs. The next run of the
    // device hands the outbox to its engine when it opens the store (F16: a pending save, kept
    // in the device log with the data it stands for, F29), and sends the edit.
    @Test(
        "F16 F29 an edit committed to the SQLite file by a run that ended before its engine took it is sent by the next run"
    )
    func editCommittedBeforeTheEngineTookIt() async throws {
        try await DeviceProcessTests.withAlice { directory, data, token in
            let (server, url) = try await DeviceProcessTests.serve(data)
            let (phone, laptop) = DeviceProcessTests.phoneAndLaptop(in: directory, token: token)
            try await phone.run("set", "groceries", "title", "Groceries", server: url)
            #expect(try Self.pending(phone).isEmpty)

            // The run that ended after its commit.
            let me = try Self.me(of: phone)
            try await Self.database(of: phone).write { db in
                try db.execute(
                    sql: "UPDATE notes SET body = 'milk, eggs' WHERE id = ?", arguments: ["groceries.\(me)"])
            }
            #expect(try Self.pending(phone).isEmpty, "the engine knows nothing of the edit yet")
            let shown = try await phone.run("show", server: url)
            #expect(shown == "phone: groceries {body: \"milk, eggs\", title: \"Groceries\"}\n", "\(shown)")

            // `show` opened the store, which handed the edit to its engine: it is pending now,
            // in the device log, even though `show` sends nothing.
            #expect(try Self.pending(phone).count == 1)
            let sent = try await phone.run("send", server: url)
            #expect(sent.contains(#"phone: saved groceries {body: "milk, eggs", title: "Groceries"}"#), "\(sent)")
            #expect(try Self.pending(phone).isEmpty)
            let fetched = try await laptop.run("sync", server: url)
            #expect(
                fetched.contains(#"laptop: fetched groceries {body: "milk, eggs", title: "Groceries"}"#), "\(fetched)")
            #expect(try await server.terminate().status == 0)
        }
    }

    @Test(
        "a note has a title, a body and an attachment: another field, or a name that cannot name a record, is refused")
    func badNoteFields() async throws {
        try await DeviceProcessTests.withAlice { directory, data, token in
            let (phone, _) = DeviceProcessTests.phoneAndLaptop(in: directory, token: token)
            let url = URL(string: "http://127.0.0.1:9")!  // never reached
            let field = try await phone.run("set", "groceries", "colour", "red", server: url, expecting: 64)
            #expect(field.contains("a note has no field colour: set body or title"), "\(field)")
            let name = try await phone.run("set", "épicerie", "title", "x", server: url, expecting: 64)
            #expect(name.contains("a note's name is 1 to 200 ASCII characters"), "\(name)")
        }
    }
}
