import Foundation
import GRDB
import LogSync
import LogSyncSQLite
import LogSyncServer
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

/// Device timelines of the store itself: a kill before the engine's append, three devices,
/// schema versions, records the device does not know, pages out of order, refusals, damage.
@Suite("SQLite: the store's timelines")
struct StoreScenarios {
    // F16, F18: the write is in SQLite; the process dies before the engine appended it.
    @Test("a kill between the SQLite commit and the engine's append loses nothing: the next open hands it off")
    func killBeforeHandOff() async throws {
        try await withServer { directory, server in
            do {
                let phone = try SQLiteDevice("phone", server: server, directory: directory, handsOffOnCommit: false)
                try phone.addFolder("f1", "Home")
                try phone.addNote("n1", in: "f1", title: "Written, then killed")
                #expect(try phone.store.privateEngine.state.pendingRecordZoneChanges.isEmpty)
            }  // the process ends here: nothing handed off, the engine never saw the write
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            #expect(try phone.store.privateEngine.state.pendingRecordZoneChanges.count == 2)
            try await phone.sync()
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            try await laptop.sync()
            #expect(try laptop.title("n1") == "Written, then killed")
        }
    }

    @Test("three devices: edits, a conflict merged field by field, a cascading delete; all converge")
    func threeDevices() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            let tablet = try SQLiteDevice("tablet", server: server, directory: directory)
            try phone.addFolder("home", "Home")
            try phone.addFolder("work", "Work")
            try phone.addNote("groceries", in: "home", title: "Groceries", body: "milk")
            try phone.addNote("report", in: "work", title: "Report")
            try await phone.sync()
            try await laptop.sync()
            try await tablet.sync()

            // Each device edits; the laptop and the tablet edit the same note's two fields.
            try laptop.execute("UPDATE notes SET title = 'Shopping' WHERE id = 'groceries'")
            try tablet.execute("UPDATE notes SET body = 'milk, bread' WHERE id = 'groceries'")
            try tablet.addNote("ideas", in: "home", title: "Ideas")
            try phone.execute("DELETE FROM folders WHERE id = 'work'")
            for device in [laptop, tablet, phone, laptop, tablet, phone] { try await device.sync() }
            try await laptop.sync()

            #expect(try phone.title("groceries") == "Shopping")
            #expect(try phone.column("body", of: "groceries") == "milk, bread".databaseValue)
            #expect(try phone.title("ideas") == "Ideas")
            #expect(try phone.title("report") == nil)
            #expect(try phone.contents() == laptop.contents())
            #expect(try tablet.contents() == laptop.contents())
        }
    }

    // F132: a save sends the changed keys only; the server keeps the others.
    @Test("a column added by a later version syncs; the older version keeps it on the server; upgrading fills it")
    func schemaVersions() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory, version2: true)
            do {
                let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
                try phone.addFolder("f1", "Home")
                try phone.addNote("n1", in: "f1", title: "Groceries")
                try phone.execute("UPDATE notes SET color = 'red' WHERE id = 'n1'")
                try phone.execute("INSERT INTO tags(id, noteID, label) VALUES ('t1', 'n1', 'urgent')")
                try await phone.sync()

                // The old version: no color column, no tags table. The tag is kept, not lost.
                try await laptop.sync()
                #expect(try laptop.title("n1") == "Groceries")
                #expect(try laptop.store.keptRecords().map(\.recordType) == ["tags"])
                try laptop.execute("UPDATE notes SET title = 'Shopping' WHERE id = 'n1'")
                try await laptop.sync()
                try await phone.sync()
                #expect(try phone.title("n1") == "Shopping")
                #expect(try phone.column("color", of: "n1") == "red".databaseValue)
            }
            // The laptop upgrades: the new column fills from what the server held, the kept tag
            // lands in the new table.
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory, version2: true)
            #expect(try laptop.column("color", of: "n1") == "red".databaseValue)
            #expect(try laptop.store.keptRecords().isEmpty)
            #expect(try laptop.contents() == phone.contents())
        }
    }

    // F141, F157: pages of one record; a note arrives before its folder.
    @Test("a note fetched before its folder waits for it, then lands with its foreign key valid")
    func childBeforeParent() async throws {
        try await withServer(maxChangesPerPage: 1) { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            // One transaction, the note first: the outbox, and so the server, hold it first.
            try await phone.store.writer.write { db in
                try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
                try db.execute(sql: "INSERT INTO notes(id, folderID, title) VALUES ('n1', 'f1', 'Groceries')")
                try db.execute(sql: "INSERT INTO folders(id, name) VALUES ('f1', 'Home')")
            }
            try await phone.sync()
            let pages = Mutex<[Set<String>]>([])
            laptop.store.addObserver { changes in pages.withLock { $0.append(Set(changes.rows.keys)) } }
            try await laptop.sync()
            #expect(try laptop.title("n1") == "Groceries")
            #expect(try laptop.contents() == phone.contents())
            #expect(try laptop.store.keptRecords().isEmpty)
            // The folder's page brought the note with it.
            #expect(pages.withLock { $0 }.contains(["folders", "notes"]))
        }
    }

    @Test("a fetched change reaches a GRDB ValueObservation like any other change")
    func valueObservation() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            let titles = ValueObservation.tracking { db in
                try String.fetchAll(db, sql: "SELECT title FROM notes ORDER BY id")
            }.values(in: laptop.store.writer)
            var iterator = titles.makeAsyncIterator()
            #expect(try await iterator.next() == [])
            try phone.addNote("n1", in: nil, title: "Groceries")
            try await phone.sync()
            try await laptop.sync()
            #expect(try await iterator.next() == ["Groceries"])
        }
    }

    // F129: a blob above the column's threshold travels as an asset and comes back as bytes.
    @Test("an attachment above its threshold is sent as an asset and lands in the other device's blob column")
    func blobAsAsset() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            let photo = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try phone.addNote("n1", in: nil, title: "Trip")
            try phone.execute("UPDATE notes SET attachment = ? WHERE id = 'n1'", [photo])
            try await phone.sync()
            let sent = try phone.store.privateEngine.deviceLog.lastKnownServerRecord(
                for: Record.ID(recordName: "n1:notes", zoneID: RecordZone.ID(zoneName: "Notes")))
            guard case .asset? = sent?["attachment"] else {
                Issue.record("the attachment was not sent as an asset: \(String(describing: sent?["attachment"]))")
                return
            }
            try await laptop.sync()
            #expect(try laptop.column("attachment", of: "n1") == photo.databaseValue)
        }
    }

    // F97: sqlite-data lost rows on quotaExceeded; here the row stays, reported, and goes later.
    @Test("a row refused for quota is kept and reported with its table and key, and sent once there is room")
    func quotaKeepsTheRow() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            try phone.addNote("small", in: nil, title: "Milk")
            try await phone.sync()
            server.admin.setQuota(600, for: "alice")
            let reasons = Mutex<[SyncedDatabase.AppliedChanges.Reason]>([])
            phone.store.addObserver { changes in reasons.withLock { $0.append(changes.reason) } }
            let long = String(repeating: "Tomatoes, ", count: 100)
            try phone.addNote("big", in: nil, title: long)
            try await phone.sync()

            #expect(try phone.title("big") == long)
            let refusals = try phone.store.refusals()
            #expect(refusals.map(\.table) == ["notes"])
            #expect(refusals.map(\.primaryKey) == ["big"])
            #expect(refusals.map(\.code) == [.quotaExceeded])
            #expect(reasons.withLock { $0 }.contains(.quotaViolation))
            try await laptop.sync()
            #expect(try laptop.title("big") == nil)

            server.admin.setQuota(nil, for: "alice")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.title("big") == long)
        }
    }

    // F134: a record over the server's size limit.
    @Test("a row too large for a record is refused with its table and key; the row stays on the device")
    func tooLargeKeepsTheRow() async throws {
        try await withServer { directory, server in
            let phone = try SQLiteDevice("phone", server: server, directory: directory)
            let huge = String(repeating: "x", count: Limits.maxRecordBytes + 10)
            try phone.addNote("huge", in: nil, title: "Huge", body: huge)
            try phone.addNote("fine", in: nil, title: "Fine")
            try await phone.sync()
            let refusals = try phone.store.refusals()
            #expect(refusals.map(\.primaryKey) == ["huge"])
            #expect(refusals.first?.table == "notes")
            #expect(refusals.first?.description.contains("notes row \"huge\"") == true)
            #expect(try phone.column("body", of: "huge") == huge.databaseValue)
            let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
            try await laptop.sync()
            #expect(try laptop.title("fine") == "Fine")
            #expect(try laptop.title("huge") == nil)
        }
    }

    @Test("a SQLite file that is not a database, or damaged inside, is an error, never a crash")
    func corruptFile() async throws {
        try await withServer { directory, server in
            let folder = directory.appendingPathComponent("phone", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(repeating: 0x5A, count: 8192).write(to: folder.appendingPathComponent("app.sqlite"))
            #expect {
                _ = try SQLiteDevice("phone", server: server, directory: directory)
            } throws: { error in
                guard case SyncedDatabaseError.corruptDatabase(let path, _) = error else { return false }
                return path.hasSuffix("phone/app.sqlite")
            }

            // A good database with rows, closed (its write-ahead log checkpointed into the
            // file), then its pages after the schema's overwritten.
            let laptopFile: String
            do {
                let laptop = try SQLiteDevice("laptop", server: server, directory: directory, handsOffOnCommit: false)
                for index in 0..<200 {
                    try laptop.addNote("n\(index)", in: nil, title: String(repeating: "t", count: 100))
                }
                laptopFile = laptop.path
            }
            #expect(!FileManager.default.fileExists(atPath: laptopFile + "-wal"), "the store was not closed")
            let size = try #require(try FileManager.default.attributesOfItem(atPath: laptopFile)[.size] as? Int)
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: laptopFile))
            try handle.seek(toOffset: 4096 * 3)
            handle.write(Data(repeating: 0xFF, count: size - 4096 * 3))
            try handle.close()
            await #expect {
                let laptop = try SQLiteDevice("laptop", server: server, directory: directory)
                _ = try laptop.contents()
                try await laptop.sync()
            } throws: { error in
                if case SyncedDatabaseError.corruptDatabase = error { return true }
                return (error as? DatabaseError)?.resultCode == .SQLITE_CORRUPT
            }
        }
    }
}
