import ChildProcesses
import Foundation
import LogStore
import LogSyncHTTPServer
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Testing

import func LogSyncTesting.patternedBytes

/// `logsync-server migrate`: an LMDB store moved into PostgreSQL serves the same devices on.
@Suite("Moving a server from LMDB to PostgreSQL", .timeLimit(.minutes(5)))
struct StoreMigrationTests {
    /// Everything a device relies on survives the move: records, its change tokens, request-ID
    /// replays, user numbers, shares, subscriptions and bearer tokens.
    @Test("a migrated server answers as the LMDB one did")
    func migratedServerAnswersAlike() async throws {
        try await withSourceDirectory { directory, source in
            let notes = RecordZone.ID(zoneName: "Notes")
            /// A new note `name` of zone Notes titled `title`.
            func record(_ name: String, _ title: String) -> Record {
                var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
                record["title"] = .string(title)
                return record
            }

            // The LMDB server's history: zones, records, a request ID, a subscription, a share bob
            // accepted, then a token, then a save and a deletion after it.
            let lmdb = try SyncServer(SyncServer.Configuration(directory: source))
            let alice = lmdb.database(for: "alice", device: "phone")
            _ = try await alice.modifyZones(
                saving: [RecordZone(zoneID: notes), RecordZone(zoneName: "Other")], deleting: [])
            let request = ModifyRecordsRequest(
                recordsToSave: [record("n1", "Groceries"), record("n2", "Books")], requestID: "phone-1")
            let firstOutcome = try await alice.modifyRecords(request)
            _ = try await alice.modifySubscriptions(
                saving: [Subscription(subscriptionID: Subscription.ID(rawValue: "all"))], deleting: [])
            try lmdb.admin.registerUser("bob", emailAddress: "bob@example.com")
            var share = Share(recordZoneID: notes)
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let savedShare = try Share(
                record: try #require(
                    try await alice.modifyRecords(saving: [share.record], deleting: [])
                        .saveResults[share.record.recordID]?.get()))
            let shareURL = try #require(savedShare.url)
            let bob = lmdb.database(for: "bob", scope: .shared, device: "bob-phone")
            _ = try #require(
                try await bob.acceptShares(AcceptSharesRequest(shareURLs: [shareURL])).results[shareURL]?.get())
            let databaseToken = try lmdb.admin.currentToken(of: "alice")
            let zoneToken = try await alice.fetchZoneChanges(zoneID: notes, since: nil).changeToken
            _ = try await alice.modifyRecords(
                saving: [record("n3", "Films")], deleting: [Record.ID(recordName: "n2", zoneID: notes)])

            let expected = try await Observed(
                server: lmdb, notes: notes, databaseToken: databaseToken, zoneToken: zoneToken)
            #expect(expected.zoneChangesAfterToken.modifications.map(\.record.recordID.recordName) == ["n3"])
            #expect(expected.zoneChangesAfterToken.deletions.map(\.recordID.recordName) == ["n2"])
            let lastOffset = try lmdb.admin.currentToken(of: "alice")
            // Alice's phone signed in: its session moves too, and it stays signed in.
            let signedIn = try SessionStore(server: lmdb).create(user: "alice", device: "phone", name: "Alice's phone")
            lmdb.shutdown()

            let aliceToken = TokenStore.generateToken()
            let bobToken = TokenStore.generateToken()
            let tokenFile = source.appendingPathComponent("tokens")
            try TokenStore.append(token: aliceToken, user: "alice", to: tokenFile)
            // A line of the older form, the token in the clear: it arrives hashed.
            let handle = try FileHandle(forWritingTo: tokenFile)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("\(bobToken) bob\n".utf8))
            try handle.close()
            let before = try snapshot(of: source)

            let url = try await PostgresTestServer.shared().createDatabase()
            let migrated = try await ChildProcess.run(["migrate", "--from", "lmdb:\(source.path)", "--to", url])
            #expect(migrated.status == 0, "\(migrated)")
            let lines = migrated.output.split(separator: "\n").map(String.init)
            // alice, bob and his address
            #expect(lines.contains { $0.hasPrefix("registry: 3 entries") }, "\(migrated)")
            #expect(lines.contains { $0.hasPrefix("u1/private: ") }, "\(migrated)")
            #expect(lines.contains { $0.hasPrefix("sessions: 1 entry") }, "\(migrated)")
            #expect(lines.contains { $0.hasPrefix("u2/shared: ") }, "\(migrated)")
            #expect(lines.last?.hasPrefix("total: ") == true, "\(migrated)")
            #expect(lines.last?.contains("2 tokens") == true, "\(migrated)")
            #expect(try snapshot(of: source) == before, "the LMDB data is left as it was")

            let storage = try PostgresStorage(url: url, connections: 1)
            let postgres = try SyncServer(
                SyncServer.Configuration(directory: directory.appendingPathComponent("unused")), storage: storage)
            defer { postgres.shutdown() }
            let observed = try await Observed(
                server: postgres, notes: notes, databaseToken: databaseToken, zoneToken: zoneToken)
            #expect(observed == expected)
            #expect(try postgres.admin.currentToken(of: "alice") == lastOffset)

            // F160: the request sent before the move is answered as a replay, writing nothing.
            let phone = postgres.database(for: "alice", device: "phone")
            #expect(try await phone.modifyRecords(request) == firstOutcome)
            #expect(try postgres.admin.currentToken(of: "alice") == lastOffset, "a replay writes nothing")

            // New writes continue the same log, and the tokens authenticate through the database.
            _ = try await phone.modifyRecords(saving: [record("n4", "Music")], deleting: [])
            let afterWrite = try await phone.fetchDatabaseChanges(since: lastOffset)
            #expect(afterWrite.modifications.map(\.zoneID) == [notes])
            let tokens = TokenStore(stored: try #require(storage.tokens))
            #expect(tokens.user(for: aliceToken) == "alice")
            #expect(tokens.user(for: bobToken) == "bob")
            #expect(tokens.user(for: TokenStore.generateToken()) == nil)
            let sessions = try SessionStore(server: postgres)
            let grant = try #require(
                try sessions.lookUp(accessToken: signedIn.accessToken).validGrant,
                "the phone's access token does not work after the move")
            #expect(grant.user == "alice" && grant.device == "phone")
            #expect(
                try sessions.refresh(signedIn.refreshToken).issued != nil,
                "the phone's refresh token does not work after the move")
        }
    }

    /// Every user's stored asset contents are copied piece by piece and verified, and a server
    /// on PostgreSQL serves them to the records that reference them; partial uploads stay
    /// behind (their devices upload again).
    @Test("stored asset contents are copied and verified; partial uploads are not")
    func assetsCopied() async throws {
        try await withSourceDirectory { directory, source in
            let notes = RecordZone.ID(zoneName: "Notes")
            let lmdb = try SyncServer(SyncServer.Configuration(directory: source))
            // Alice keeps a content of three pieces and a small one; Bob one of his own.
            let photo = patternedBytes(2 * AssetTransfer.chunkSize + 4321, seed: 1)
            let page = patternedBytes(100, seed: 2)
            let scan = patternedBytes(70_000, seed: 3)
            var kept: [(user: UserID, content: [UInt8], record: Record.ID)] = []
            for (user, content) in [(UserID("alice"), photo), ("alice", page), ("bob", scan)] {
                let database = lmdb.database(for: user)
                _ = try await database.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
                let file = directory.appendingPathComponent(UUID().uuidString)
                try Data(content).write(to: file)
                let digest = AssetHasher.digest(of: content)
                let uploaded = try await database.uploadAsset(
                    AssetUploadRequest(zoneID: notes, digest: digest, size: Int64(content.count), fileURL: file))
                var record = Record(recordType: "Note", recordID: Record.ID(recordName: digest.hex, zoneID: notes))
                record["file"] = .asset(uploaded.asset)
                _ = try #require(
                    try await database.modifyRecords(saving: [record], deleting: []).saveResults[record.recordID]?.get()
                )
                kept.append((user, content, record.recordID))
            }
            // An upload cut half-way leaves a partial behind.
            let cut = patternedBytes(5000, seed: 4)
            let upload = try await lmdb.beginAssetUpload(
                user: "alice", scope: .private, zoneID: notes, digest: AssetHasher.digest(of: cut), size: 5000)
            try await upload.write(Array(cut[0..<1000]), at: 0)
            upload.close()
            lmdb.shutdown()
            let before = try snapshot(of: source)

            let url = try await PostgresTestServer.shared().createDatabase()
            let migrated = try await ChildProcess.run(["migrate", "--from", "lmdb:\(source.path)", "--to", url])
            #expect(migrated.status == 0, "\(migrated)")
            let lines = migrated.output.split(separator: "\n").map(String.init)
            #expect(lines.contains("u1/assets: 2 contents, \(photo.count + page.count) bytes"), "\(migrated)")
            #expect(lines.contains("u2/assets: 1 content, \(scan.count) bytes"), "\(migrated)")
            #expect(
                lines.last?.contains("3 assets (\(photo.count + page.count + scan.count) bytes)") == true, "\(migrated)"
            )
            #expect(try snapshot(of: source) == before, "the LMDB data is left as it was")

            let storage = try PostgresStorage(url: url, connections: 1)
            let postgres = try SyncServer(
                SyncServer.Configuration(directory: directory.appendingPathComponent("unused")), storage: storage)
            defer { postgres.shutdown() }
            for (user, content, recordID) in kept {
                let database = postgres.database(for: user, device: "new-phone")
                let changes = try await database.fetchZoneChanges(zoneID: notes, since: nil)
                let fetched = try #require(changes.modifications.first { $0.record.recordID == recordID }?.record)
                guard case .asset(let asset)? = fetched["file"] else {
                    Issue.record("\(recordID) lost its asset field: \(fetched)")
                    continue
                }
                let destination = directory.appendingPathComponent("download-\(UUID().uuidString)")
                let downloaded = try await database.downloadAsset(
                    AssetDownloadRequest(
                        zoneID: notes, digest: try #require(asset.digest), size: try #require(asset.size),
                        destination: destination))
                #expect(try Data(contentsOf: downloaded.fileURL) == Data(content), "\(user)'s \(content.count) bytes")
            }
            let partials = try await storage.perform { try storage.assets.partials(owner: 1) }
            #expect(partials.isEmpty, "partial uploads are not copied")
            #expect(try await storage.perform { try storage.storedAssetCount() } == 3)
        }
    }

    /// A source content whose bytes no longer hash to its name fails the migration, naming
    /// the asset and its user; nothing of it is stored.
    @Test("a damaged asset file fails the migration, naming it")
    func damagedAssetRefused() async throws {
        try await withSourceDirectory { directory, source in
            let notes = RecordZone.ID(zoneName: "Notes")
            let lmdb = try SyncServer(SyncServer.Configuration(directory: source))
            let alice = lmdb.database(for: "alice")
            _ = try await alice.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
            let content = patternedBytes(10_000, seed: 5)
            let digest = AssetHasher.digest(of: content)
            let file = directory.appendingPathComponent("photo")
            try Data(content).write(to: file)
            _ = try await alice.uploadAsset(
                AssetUploadRequest(zoneID: notes, digest: digest, size: 10_000, fileURL: file))
            lmdb.shutdown()
            let stored = LMDBAssetStore(directory: source).assetsDirectory(owner: 1).appendingPathComponent(digest.hex)
            var damaged = try Data(contentsOf: stored)
            damaged[5000] ^= 0xFF
            try damaged.write(to: stored)

            let url = try await PostgresTestServer.shared().createDatabase()
            let refused = try await ChildProcess.run(["migrate", "--from", "lmdb:\(source.path)", "--to", url])
            #expect(refused.status != 0)
            #expect(refused.errorOutput.contains("asset \(digest) of user u1 is damaged in the source"), "\(refused)")
            let storage = try PostgresStorage(url: url, connections: 1)
            defer { storage.shutdown() }
            #expect(try await storage.perform { try storage.storedAssetCount() } == 0)
        }
    }

    /// A target with any entry is refused before anything is written, by the command and by
    /// the import itself, naming the log and its last offset.
    @Test("a non-empty target is refused and left unchanged")
    func nonEmptyTargetRefused() async throws {
        try await withSourceDirectory { directory, source in
            let lmdb = try SyncServer(SyncServer.Configuration(directory: source))
            _ = try await lmdb.database(for: "alice").modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            lmdb.shutdown()

            let url = try await PostgresTestServer.shared().createDatabase()
            let storage = try PostgresStorage(url: url, connections: 1)
            let postgres = try SyncServer(
                SyncServer.Configuration(directory: directory.appendingPathComponent("unused")), storage: storage)
            _ = try await postgres.database(for: "carol").modifyZones(
                saving: [RecordZone(zoneName: "Diary")], deleting: [])
            let before = try storage.storedLogs()
            postgres.shutdown()

            let refused = try await ChildProcess.run(["migrate", "--from", "lmdb:\(source.path)", "--to", url])
            #expect(refused.status != 0)
            #expect(refused.errorOutput.contains("not empty"), "\(refused)")
            #expect(refused.errorOutput.contains("registry ends at offset 1"), "\(refused)")
            #expect(refused.output.isEmpty, "\(refused)")

            let again = try PostgresStorage(url: url, connections: 1)
            defer { again.shutdown() }
            #expect(try again.storedLogs() == before)
            #expect(throws: LogImportError.targetNotEmpty(log: "registry", lastOffset: 1)) {
                try again.importLog(
                    .registry, projection: ServerLogName.registry.serverProjection, entries: registryEntries(["dave"]))
            }
            #expect(try again.storedLogs() == before)
        }
    }

    /// Offsets must run 1, 2, 3… without a gap or a step back; chunks commit in turn.
    @Test("the import checks offsets and writes in chunks")
    func importChecksOffsets() async throws {
        let server = try await PostgresTestServer.shared()
        let storage = try PostgresStorage(url: try await server.createDatabase(), connections: 1)
        defer { storage.shutdown() }
        var gapped = registryEntries(["a", "b", "c"])
        gapped[2] = LogEntry(offset: 4, kind: gapped[2].kind, time: gapped[2].time, payload: gapped[2].payload)
        #expect(throws: LogImportError.offsetGap(log: "registry", expected: 3, found: 4)) {
            try storage.importLog(.registry, projection: ServerLogName.registry.serverProjection, entries: gapped)
        }
        let repeated = registryEntries(["a"]) + registryEntries(["b"])
        let other = try PostgresStorage(url: try await server.createDatabase(), connections: 1)
        defer { other.shutdown() }
        #expect(throws: LogImportError.offsetOutOfOrder(log: "registry", expected: 2, found: 1)) {
            try other.importLog(.registry, projection: ServerLogName.registry.serverProjection, entries: repeated)
        }

        let chunked = try PostgresStorage(url: try await server.createDatabase(), connections: 1)
        let users = ["a", "b", "c", "d", "e"]
        #expect(
            try chunked.importLog(
                .registry, projection: ServerLogName.registry.serverProjection, chunkSize: 2,
                entries: registryEntries(users)) == 5)
        #expect(try chunked.storedLogs()["registry"] == 5)
        let unused = try temporaryDirectory()
        defer { try? FileManager.default.removeAll(unused) }
        let postgres = try SyncServer(SyncServer.Configuration(directory: unused), storage: chunked)
        defer { postgres.shutdown() }
        for (index, user) in users.enumerated() {
            #expect(
                try postgres.userRecordID(for: UserID(user)).recordName == "_user\(index + 1)", "the index was built")
        }
    }

    /// No data, or data LMDB cannot read, fails before the target is touched, naming the path.
    @Test("an absent or corrupt source fails with a clear error")
    func badSourceFails() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeAll(directory) }
        let url = try await PostgresTestServer.shared().createDatabase()

        let absent = directory.appendingPathComponent("nothing-here")
        let missing = try await ChildProcess.run(["migrate", "--from", "lmdb:\(absent.path)", "--to", url])
        #expect(missing.status != 0)
        #expect(missing.errorOutput.contains("\(absent.path) does not exist"), "\(missing)")

        let empty = directory.appendingPathComponent("empty", isDirectory: true)
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        let notServer = try await ChildProcess.run(["migrate", "--from", "lmdb:\(empty.path)", "--to", url])
        #expect(notServer.status != 0)
        #expect(notServer.errorOutput.contains("holds no logsync-server data"), "\(notServer)")

        let corrupt = directory.appendingPathComponent("corrupt", isDirectory: true)
        let registry = corrupt.appendingPathComponent("registry", isDirectory: true)
        try FileManager.default.createDirectory(at: registry, withIntermediateDirectories: true)
        try Data(repeating: 0xA5, count: 16_384).write(to: registry.appendingPathComponent("data.mdb"))
        let unreadable = try await ChildProcess.run(["migrate", "--from", "lmdb:\(corrupt.path)", "--to", url])
        #expect(unreadable.status != 0)
        #expect(unreadable.errorOutput.contains("registry"), "\(unreadable)")

        let storage = try PostgresStorage(url: url, connections: 1)
        defer { storage.shutdown() }
        #expect(try storage.storedLogs().isEmpty, "nothing was written")
    }
}

/// What devices see of a server: the answers compared before and after the move.
struct Observed: Equatable {
    /// Alice's user record ID, which holds her registry number.
    var aliceNumber: Record.ID
    /// Bob's.
    var bobNumber: Record.ID
    /// Alice's zones.
    var zones: Set<RecordZone.ID>
    /// Every record of her zone Notes.
    var allRecords: FetchZoneChangesResponse
    /// The zone's changes after the zone token taken before the last save and deletion.
    var zoneChangesAfterToken: FetchZoneChangesResponse
    /// The database's changes after the database token taken then.
    var databaseChangesAfterToken: FetchDatabaseChangesResponse
    /// Alice's subscriptions.
    var subscriptions: [Subscription]
    /// Bob's shared database from scratch.
    var bobShared: FetchDatabaseChangesResponse
    /// The records bob sees in the zone alice shares with him.
    var bobSharedRecords: [String]

    /// Asks `server` what alice's and bob's devices would.
    init(
        server: SyncServer, notes: RecordZone.ID, databaseToken: DatabaseChangeToken, zoneToken: ZoneChangeToken
    ) async throws {
        let alice = server.database(for: "alice", device: "laptop")
        aliceNumber = try server.userRecordID(for: "alice")
        bobNumber = try server.userRecordID(for: "bob")
        zones = Set(try await alice.fetchAllZones().map(\.zoneID))
        allRecords = try await alice.fetchZoneChanges(zoneID: notes, since: nil)
        zoneChangesAfterToken = try await alice.fetchZoneChanges(zoneID: notes, since: zoneToken)
        databaseChangesAfterToken = try await alice.fetchDatabaseChanges(since: databaseToken)
        subscriptions = try await alice.allSubscriptions()
        let bob = server.database(for: "bob", scope: .shared, device: "bob-laptop")
        bobShared = try await bob.fetchDatabaseChanges(since: nil)
        let sharedZone = RecordZone.ID(zoneName: notes.zoneName, ownerName: aliceNumber.recordName)
        bobSharedRecords = try await bob.fetchZoneChanges(zoneID: sharedZone, since: nil).modifications
            .map(\.record.recordID.recordName).sorted()
    }
}

/// Registry entries registering `users` at offsets 1, 2, …
func registryEntries(_ users: [String]) -> [LogEntry] {
    users.enumerated().map { index, user in
        LogEntry(
            offset: LogOffset(UInt64(index + 1)), kind: UserRegistry.userRegisteredKind, time: EntryTime(Date()),
            payload: Array(user.utf8))
    }
}

/// A new directory of its own for one test.
/// Runs `body` with a fresh temporary directory and, in it, the path `lmdb` for a source
/// server's data (not made yet); removes the directory afterwards.
func withSourceDirectory(_ body: (_ directory: URL, _ source: URL) async throws -> Void) async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeAll(directory) }
    try await body(directory, directory.appendingPathComponent("lmdb", isDirectory: true))
}

func temporaryDirectory() throws -> URL {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("StoreMigrationTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

/// Every file under `directory` with its contents, to show a directory was not written.
func snapshot(of directory: URL) throws -> [String: Data] {
    var files: [String: Data] = [:]
    let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
    while let url = enumerator?.nextObject() as? URL {
        // lock.mdb is LMDB's reader table, rewritten by any reader; the data is data.mdb.
        guard (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true,
            url.lastPathComponent != "lock.mdb"
        else { continue }
        files[url.path] = try Data(contentsOf: url)
    }
    return files
}

extension FileManager {
    /// Removes `directory` and everything under it.
    func removeAll(_ directory: URL) throws { try removeItem(at: directory) }
}
