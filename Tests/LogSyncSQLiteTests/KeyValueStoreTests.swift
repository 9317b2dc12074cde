import Foundation
import GRDB
import LogSync
import LogSyncSQLite
import LogSyncServer
import LogSyncTesting
import SyncTestKit
import Synchronization
import Testing

/// One device of an app whose settings are a synced key-value store: its own SQLite file and
/// device logs in `directory/name`, syncing by hand, every change it is told of recorded.
final class KeyValueDevice: Sendable {
    let store: SyncedDatabase
    let values: SyncedKeyValueStore
    let path: String
    private let told = Mutex<[SyncedKeyValueStore.Change]>([])

    init(
        _ name: String, database: any CloudDatabase, sharedDatabase: (any CloudDatabase)? = nil, directory: URL,
        handsOffOnCommit: Bool = true, now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        path = SQLiteDevice.file(name, in: directory)
        store = try SQLiteDevice.openStore(
            name, in: directory, tables: [SyncedKeyValueStore.table], privateDatabase: database,
            sharedDatabase: sharedDatabase, handsOffOnCommit: handsOffOnCommit, migrate: SyncedKeyValueStore.createTable
        )
        values = try SyncedKeyValueStore(database: store, now: now)
        values.addObserver { [weak self] change in self?.told.withLock { $0.append(change) } }
    }

    convenience init(
        _ name: String, server: SyncServer, user: UserID = "alice", directory: URL, handsOffOnCommit: Bool = true,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        try self.init(
            name, database: server.database(for: user, scope: .private, device: DeviceID(name)), directory: directory,
            handsOffOnCommit: handsOffOnCommit, now: now)
    }

    func sync() async throws { try await store.sync() }

    /// The changes told since the last call.
    func changes() -> [SyncedKeyValueStore.Change] {
        told.withLock { changes in
            defer { changes = [] }
            return changes
        }
    }

    var all: [String: KeyValue] { get throws { try values.dictionaryRepresentation } }

    func execute(_ sql: String, _ arguments: StatementArguments = []) throws {
        try store.writer.write { try $0.execute(sql: sql, arguments: arguments) }
    }

    var rowCount: Int {
        get throws { try store.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM logsync_kv") ?? 0 } }
    }
}

/// A fixed modification clock.
private func at(_ seconds: Double) -> @Sendable () -> Date { { Date(timeIntervalSince1970: seconds) } }

@Suite("SQLite: synced key-value store")
struct KeyValueStoreTests {
    // F141: the laptop's first fetch of the store's zone reads it from the start, told as the
    // initial sync; later pages are server changes.
    @Test("two devices set and remove keys and converge; the laptop is told the keys, first as its initial sync")
    func twoDevicesConverge() async throws {
        try await withServer { directory, server in
            let phone = try KeyValueDevice("phone", server: server, directory: directory)
            let laptop = try KeyValueDevice("laptop", server: server, directory: directory)
            try phone.values.set("dark", forKey: "theme")
            try phone.values.set(14, forKey: "fontSize")
            try phone.values.set(["recent": ["a.txt", "b.txt"], "pinned": true], forKey: "sidebar")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.values.string(forKey: "theme") == "dark")
            #expect(try laptop.values.int(forKey: "fontSize") == 14)
            #expect(try laptop.values.dictionary(forKey: "sidebar")?["pinned"] == true)
            #expect(try laptop.all == phone.all)
            #expect(laptop.changes() == [.init(reason: .initialSyncChange, keys: ["fontSize", "sidebar", "theme"])])

            // The laptop removes one key and changes another; the phone is told both.
            _ = phone.changes()
            try laptop.values.removeValue(forKey: "theme")
            try laptop.values.set(16, forKey: "fontSize")
            try await laptop.sync()
            try await phone.sync()
            #expect(try phone.values.value(forKey: "theme") == nil)
            #expect(try phone.values.int(forKey: "fontSize") == 16)
            #expect(try phone.all == laptop.all)
            #expect(phone.changes() == [.init(reason: .serverChange, keys: ["fontSize", "theme"])])
            #expect(laptop.changes().isEmpty, "a device is not told of its own writes")

            // Setting nil removes too.
            try phone.values.set(nil, forKey: "sidebar")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.all == ["fontSize": 16])
        }
    }

    @Test("the change stream names the keys and the reason")
    func changeStream() async throws {
        try await withServer { directory, server in
            let phone = try KeyValueDevice("phone", server: server, directory: directory)
            let laptop = try KeyValueDevice("laptop", server: server, directory: directory)
            let stream = laptop.values.changes()
            try phone.values.set(true, forKey: "sounds")
            try await phone.sync()
            try await laptop.sync()
            var iterator = stream.makeAsyncIterator()
            #expect(await iterator.next() == .init(reason: .initialSyncChange, keys: ["sounds"]))
        }
    }

    // F97: a conflict between two devices' sets of one key goes to the later edit on both.
    @Test("two devices set one key offline: the later edit wins on both, whichever sends first")
    func lastEditWins() async throws {
        try await withServer { directory, server in
            let phone = try KeyValueDevice("phone", server: server, directory: directory, now: at(200))
            let laptop = try KeyValueDevice("laptop", server: server, directory: directory, now: at(100))
            try phone.values.set("phone's", forKey: "theme")
            try laptop.values.set("laptop's", forKey: "theme")
            try laptop.values.set("laptop's", forKey: "wallpaper")
            // The earlier edit is sent first; the later one meets it on the server: the store
            // settles the conflict (F92), keeps the later edit and sends it again.
            try await laptop.sync()
            try await phone.sync()
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.values.string(forKey: "theme") == "phone's")
            #expect(try phone.all == laptop.all)
            #expect(try phone.all == ["theme": "phone's", "wallpaper": "laptop's"])

            // The later edit is sent first; the earlier one loses to it.
            let laterLaptop = try KeyValueDevice("laptop2", server: server, directory: directory, now: at(300))
            try await laterLaptop.sync()
            try laterLaptop.values.set("late", forKey: "wallpaper")
            try phone.values.set("early", forKey: "wallpaper")
            try await laterLaptop.sync()
            try await phone.sync()
            try await phone.sync()
            try await laterLaptop.sync()
            #expect(try phone.values.string(forKey: "wallpaper") == "late")
            #expect(try phone.all == laterLaptop.all)
        }
    }

    @Test("each limit is refused with a typed error naming the key and the limit, and nothing is written")
    func limits() async throws {
        try await withServer { directory, server in
            let phone = try KeyValueDevice("phone", server: server, directory: directory)
            let values = phone.values
            // A key of 64 bytes of UTF-8 is taken; 65 bytes are not, however few characters.
            try values.set(1, forKey: String(repeating: "k", count: 64))
            let long = String(repeating: "é", count: 33)  // 66 bytes
            #expect(throws: KeyValueStoreError.keyTooLong(key: long, bytes: 66, limit: 64)) {
                try values.set(1, forKey: long)
            }
            #expect(throws: KeyValueStoreError.emptyKey) { try values.set(1, forKey: "") }
            #expect(try phone.rowCount == 1)

            // One value larger than a record holds.
            let huge = KeyValue.data(Data(count: 760_000))  // 1,013,347 bytes of JSON
            #expect(throws: KeyValueStoreError.valueTooLarge(key: "huge", bytes: 1_013_347, limit: 999_979)) {
                try values.set(huge, forKey: "huge")
            }
            #expect(SyncedKeyValueStore.maximumValueBytes == 999_979)

            // 1 MB of keys and values: 600 KB fits, 600 KB more does not; replacing the first
            // value with one as large does.
            let big = KeyValue.string(String(repeating: "x", count: 600_000))
            try values.set(big, forKey: "a")
            // 600,014 for "a" and for "b" each, 73 for the 64-byte key's.
            #expect(throws: KeyValueStoreError.storeFull(key: "b", bytes: 1_200_101, limit: 1_000_000)) {
                try values.set(big, forKey: "b")
            }
            #expect(try values.value(forKey: "b") == nil)
            try values.set(.string(String(repeating: "y", count: 600_000)), forKey: "a")
            try values.removeValue(forKey: "a")

            // 1,024 keys: the 1,025th is refused; an existing key still changes.
            try phone.store.writer.write { db in
                for index in 1..<1_024 {
                    try db.execute(
                        sql: "INSERT INTO logsync_kv(key, value, modified) VALUES (?, ?, 0)",
                        arguments: ["key\(index)", #"{"int":1}"#])
                }
            }
            #expect(try phone.rowCount == 1_024)
            #expect(throws: KeyValueStoreError.tooManyKeys(key: "one too many", limit: 1_024)) {
                try values.set(true, forKey: "one too many")
            }
            #expect(try phone.rowCount == 1_024)
            #expect(try values.value(forKey: "one too many") == nil)
            try values.set(2, forKey: "key1")
            #expect(try values.int(forKey: "key1") == 2)
        }
    }

    @Test("a corrupt stored value is a typed error naming its key, never a crash; the other keys still read")
    func corruptValue() async throws {
        try await withServer { directory, server in
            let phone = try KeyValueDevice("phone", server: server, directory: directory)
            try phone.values.set("dark", forKey: "theme")
            try phone.values.set("fine", forKey: "other")
            let garbage: [any DatabaseValueConvertible] = [
                "not json", #"{"color":1}"#, #"{"int":"one"}"#, #"{"data":"%%%"}"#, #"{"int":1,"bool":true}"#,
                Data([0xFF, 0x00]), 42,
            ]
            for garbage in garbage {
                try phone.execute("UPDATE logsync_kv SET value = ? WHERE key = 'theme'", [garbage])
                #expect(throws: KeyValueStoreError.self) { try phone.values.string(forKey: "theme") }
                do {
                    _ = try phone.values.dictionaryRepresentation
                    Issue.record("a corrupt value was read")
                } catch let KeyValueStoreError.corruptValue(key, _) {
                    #expect(key == "theme")
                }
                #expect(try phone.values.string(forKey: "other") == "fine")
            }
            // Setting the key again repairs it.
            try phone.values.set("light", forKey: "theme")
            #expect(try phone.values.string(forKey: "theme") == "light")
        }
    }

    @Test("every kind of value round-trips through the server exactly; keys of any text are record names")
    func valuesRoundTrip() async throws {
        try await withServer { directory, server in
            let phone = try KeyValueDevice("phone", server: server, directory: directory)
            let laptop = try KeyValueDevice("laptop", server: server, directory: directory)
            let values: [String: KeyValue] = [
                "string": "text with \"quotes\" and / slashes", "int": .int(Int64.min), "double": 0.1,
                "nan": .double(.nan), "infinity": .double(-.infinity), "bool": false,
                "data": .data(Data([0, 1, 2, 255])), "date": .date(Date(timeIntervalSinceReferenceDate: 1.000_000_1)),
                "array": [1, "two", [3.5]], "dictionary": ["b": 1, "a": ["nested": .data(Data())]],
                "_leading underscore": "u", "100%": "percent", "ключ:é/🙂": "unicode",
            ]
            for (key, value) in values { try phone.values.set(value, forKey: key) }
            try await phone.sync()
            try await laptop.sync()
            let fetched = try laptop.all
            #expect(Set(fetched.keys) == Set(values.keys))
            for (key, value) in values where key != "nan" { #expect(fetched[key] == value, "\(key)") }
            if case .double(let nan)? = fetched["nan"] { #expect(nan.isNaN) } else { Issue.record("nan") }
            #expect(try laptop.values.date(forKey: "date") == Date(timeIntervalSinceReferenceDate: 1.000_000_1))
            #expect(try laptop.values.double(forKey: "int") == Double(Int64.min))
            #expect(try laptop.values.bool(forKey: "string") == nil, "another kind of value")
            // Encoded deterministically: the same value is the same bytes on both devices.
            let stored = { (device: KeyValueDevice) in
                try device.store.writer.read {
                    try String.fetchAll($0, sql: "SELECT value FROM logsync_kv ORDER BY key")
                }
            }
            #expect(try stored(phone) == stored(laptop))

            // A value is a record of the store's zone like any row's, in the device logs that
            // logtool reads: the laptop's log holds the server's copy, its JSON readable.
            let id = try laptop.store.recordID(
                table: SyncedKeyValueStore.tableName, primaryKey: SyncedKeyValueStore.recordKey("100%"))
            #expect(id.recordName == "100%25:logsync_kv")
            #expect(id.zoneID.zoneName == SyncedKeyValueStore.zoneName)
            let record = try #require(try laptop.store.privateEngine.deviceLog.lastKnownServerRecord(for: id))
            #expect(record.recordType == SyncedKeyValueStore.recordType)
            #expect(record["value"] == .string(#"{"string":"percent"}"#))
        }
    }

    @Test("values survive reopening the store, and a write not yet handed to the engine is sent after it")
    func survivesReopening() async throws {
        try await withServer { directory, server in
            do {
                let phone = try KeyValueDevice("phone", server: server, directory: directory, handsOffOnCommit: false)
                try phone.values.set("dark", forKey: "theme")
                try await phone.sync()
                // Committed, not handed off: as a process killed before the engine's append.
                try phone.values.set(14, forKey: "fontSize")
                #expect(try phone.store.privateEngine.state.pendingRecordZoneChanges.isEmpty)
            }
            let phone = try KeyValueDevice("phone", server: server, directory: directory)
            #expect(try phone.all == ["theme": "dark", "fontSize": 14])
            try await phone.sync()
            let laptop = try KeyValueDevice("laptop", server: server, directory: directory)
            try await laptop.sync()
            #expect(try laptop.all == ["theme": "dark", "fontSize": 14])
        }
    }

    // F97, F153: over quota, the value stays on the device, the app is told, and it goes once
    // there is room.
    @Test("F97 F153 a value the server refuses for quota is told as quotaViolation, kept, and sent once there is room")
    func quotaViolation() async throws {
        try await withServer { directory, server in
            let phone = try KeyValueDevice("phone", server: server, directory: directory)
            let laptop = try KeyValueDevice("laptop", server: server, directory: directory)
            try phone.values.set("dark", forKey: "theme")
            try await phone.sync()
            server.admin.setQuota(600, for: "alice")
            _ = phone.changes()
            let long = String(repeating: "Tomatoes, ", count: 100)
            try phone.values.set(.string(long), forKey: "shopping")
            try await phone.sync()  // refused per row: reported, not thrown
            #expect(phone.changes().contains(.init(reason: .quotaViolation, keys: ["shopping"])))
            #expect(try phone.values.string(forKey: "shopping") == long)
            #expect(try phone.store.refusals().map(\.code) == [.quotaExceeded])

            server.admin.setQuota(nil, for: "alice")
            try await phone.sync()
            try await laptop.sync()
            #expect(try laptop.values.string(forKey: "shopping") == long)
            #expect(try laptop.all == phone.all)
        }
    }

    // F105, F106: a switch removes the previous account's values from the device (not from the
    // server), and the new account's arrive as its initial sync; after a sign-in, values set
    // while signed out go to the account.
    @Test(
        "F105 F106 an account switch replaces the values with the new account's; a sign-in sends the values set while signed out"
    )
    func accountChanges() async throws {
        try await withServer { directory, server in
            let account = SimulatedAccount<UserID>(signedIn: "alice") { user, scope in
                server.database(for: user, scope: scope, device: "phone")
            }
            // With a shared database too: its engine sees each account change as well, and the
            // store takes it once.
            let phone = try KeyValueDevice(
                "phone", database: account, sharedDatabase: account.database(for: .shared), directory: directory)
            let bobsLaptop = try KeyValueDevice("bobs-laptop", server: server, user: "bob", directory: directory)
            try phone.values.set("dark", forKey: "theme")
            try phone.values.set("alice", forKey: "name")
            try await phone.sync()
            try bobsLaptop.values.set("light", forKey: "theme")
            try await bobsLaptop.sync()
            _ = phone.changes()

            account.switch(to: "bob")
            try await phone.sync()
            #expect(
                phone.changes() == [
                    .init(reason: .accountChange, keys: ["name", "theme"]),
                    .init(reason: .initialSyncChange, keys: ["theme"]),
                ])
            #expect(try phone.all == ["theme": "light"])
            let alicesLaptop = try KeyValueDevice("alices-laptop", server: server, directory: directory)
            try await alicesLaptop.sync()
            #expect(try alicesLaptop.all == ["theme": "dark", "name": "alice"], "alice's values stay hers")

            // Signed out: the values go; one set now stays on the device, then goes to carol.
            account.signOut()
            await #expect(throws: SyncError.self) { try await phone.sync() }
            #expect(phone.changes() == [.init(reason: .accountChange, keys: ["theme"])])
            try phone.values.set("offline", forKey: "note")
            account.signIn("carol")
            try await phone.sync()
            #expect(phone.changes().first == .init(reason: .accountChange, keys: []))
            let carolsLaptop = try KeyValueDevice("carols-laptop", server: server, user: "carol", directory: directory)
            try await carolsLaptop.sync()
            #expect(try carolsLaptop.all == ["note": "offline"])
        }
    }

    @Test("a database opened without the key-value table is refused with a typed error")
    func tableNotSynced() async throws {
        try await withServer { directory, server in
            let device = try SQLiteDevice("phone", server: server, directory: directory)
            #expect(throws: KeyValueStoreError.tableNotSynced) { try SyncedKeyValueStore(database: device.store) }
        }
    }
}
