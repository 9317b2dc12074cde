import Foundation
import LogStore
import SyncModel
import Synchronization
import Testing

@testable import LogSyncServer

/// The server's side of assets (F134): uploads that resume, pieces in order, one upload per
/// content at a time, the index's counts of references rebuilt from the log, and the cleanup of
/// what a cut upload or a crash leaves.
@Suite("Server assets")
struct ServerAssetTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let privateZone = RecordZone.ID(zoneName: "Private")

    static func content(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &* 7 &+ ($0 >> 9)) }
    }

    static func file(_ bytes: [UInt8], in directory: URL) throws -> URL {
        let url = directory.appendingPathComponent(UUID().uuidString)
        try Data(bytes).write(to: url)
        return url
    }

    static func prepare(_ server: SyncServer) async throws -> InProcessDatabase {
        let database = server.database(for: "alice", device: "phone")
        _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: notes)]))
        return database
    }

    /// Alice's phone with her zones Notes and Private, and her asset store and registry number.
    static func prepareTwoZones(_ server: SyncServer) async throws -> (InProcessDatabase, LMDBAssetStore, UInt64) {
        let database = try await prepare(server)
        _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: privateZone)]))
        return (database, try #require(server.storage.assets as? LMDBAssetStore), try server.users.number(of: "alice"))
    }

    /// The partial upload of `digest` for alice's zone `zoneID`.
    static func partial(
        _ server: SyncServer, _ digest: AssetDigest, zone zoneID: RecordZone.ID = notes
    ) async throws -> AssetPartial {
        let zone = try await server.storage.perform {
            try server.assetZone(user: "alice", scope: .private, zoneID: zoneID, writing: false)
        }
        return AssetPartial(owner: zone.database.userNumber, digest: digest, zone: zone.incarnation)
    }

    // F134: an upload cut after two pieces keeps them; the next upload of the same content
    // sends only the rest, and the stored content is whole.
    @Test("F134 a cut upload resumes where the server's copy ends")
    func resumes() async throws {
        try await withServer { server, directory in
            let database = try await Self.prepare(server)
            let bytes = Self.content(3 * AssetTransfer.chunkSize + 5, seed: 1)
            let digest = AssetHasher.digest(of: bytes)
            let cut = try await server.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.notes, digest: digest, size: Int64(bytes.count))
            try await cut.write(Array(bytes[0..<AssetTransfer.chunkSize]), at: 0)
            try await cut.write(
                Array(bytes[AssetTransfer.chunkSize..<2 * AssetTransfer.chunkSize]), at: Int64(AssetTransfer.chunkSize))
            cut.close()

            let response = try await database.uploadAsset(
                AssetUploadRequest(
                    zoneID: Self.notes, digest: digest, size: Int64(bytes.count),
                    fileURL: try Self.file(bytes, in: directory)))
            #expect(response.bytesSent == Int64(bytes.count - 2 * AssetTransfer.chunkSize))
            let destination = directory.appendingPathComponent("down")
            _ = try await database.downloadAsset(
                AssetDownloadRequest(
                    zoneID: Self.notes, digest: digest, size: Int64(bytes.count), destination: destination))
            #expect(Array(try Data(contentsOf: destination)) == bytes)
        }
    }

    // A piece that does not start where the server's copy ends is refused, naming the asset
    // and both offsets; a second upload of a content being uploaded waits (zoneBusy).
    @Test("pieces come in order, one upload per content at a time")
    func piecesInOrder() async throws {
        try await withServer { server, _ in
            _ = try await Self.prepare(server)
            let bytes = Self.content(1000, seed: 2)
            let digest = AssetHasher.digest(of: bytes)
            let upload = try await server.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.notes, digest: digest, size: 1000)
            try await upload.write(Array(bytes[0..<100]), at: 0)
            let skipped = await #expect(throws: SyncError.self) {
                try await upload.write(Array(bytes[300..<400]), at: 300)
            }
            #expect(skipped?.code == .invalidArguments)
            #expect(skipped?.message.contains(digest.description) == true)
            #expect(skipped?.message.contains("300") == true && skipped?.message.contains("100") == true)
            let tooLong = await #expect(throws: SyncError.self) {
                try await upload.write([UInt8](repeating: 0, count: 1000), at: 100)
            }
            #expect(tooLong?.code == .invalidArguments)
            let early = await #expect(throws: SyncError.self) { _ = try await upload.finish() }
            #expect(early?.code == .invalidArguments)

            let busy = await #expect(throws: SyncError.self) {
                _ = try await server.beginAssetUpload(
                    user: "alice", scope: .private, zoneID: Self.notes, digest: digest, size: 1000)
            }
            #expect(busy?.code == .zoneBusy)
            #expect(busy?.retryAfter != nil)
            try await upload.write(Array(bytes[100...]), at: 100)
            #expect(try await upload.finish() == Asset(digest: digest, size: 1000))
            upload.close()
            let again = try await server.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.notes, digest: digest, size: 1000)
            #expect(again.isStored)
            again.close()
        }
    }

    // F134: the index's asset table (sizes, reference counts, since when unreferenced) is a
    // projection of the log like every other table: rebuilt from the entries, and applied run
    // by run or entry by entry, it is the same.
    @Test("F134 asset references are a projection of the log")
    func referencesAreAProjection() async throws {
        try await withServer { server, directory in
            let database = try await Self.prepare(server)
            var assets: [Asset] = []
            for seed in 0..<4 {
                let bytes = Self.content(500 + seed, seed: UInt8(seed))
                let digest = AssetHasher.digest(of: bytes)
                _ = try await database.uploadAsset(
                    AssetUploadRequest(
                        zoneID: Self.notes, digest: digest, size: Int64(bytes.count),
                        fileURL: try Self.file(bytes, in: directory)))
                assets.append(Asset(digest: digest, size: Int64(bytes.count)))
            }
            var tags: [String: String] = [:]
            var random = SeededRandom(seed: 7)
            for step in 0..<120 {
                let name = "r\(Int.random(in: 0..<8, using: &random))"
                let id = Record.ID(recordName: name, zoneID: Self.notes)
                if Int.random(in: 0..<5, using: &random) == 0 {
                    _ = try await database.modifyRecords(ModifyRecordsRequest(recordIDsToDelete: [id]))
                    tags[name] = nil
                    continue
                }
                var record = Record(recordType: "Note", recordID: id)
                if let tag = tags[name] { record.applySystemFields(Record.SystemFields(recordChangeTag: tag)) }
                record["photo"] = .asset(assets.randomElement(using: &random)!)
                if step.isMultiple(of: 3) { record["more"] = .list([.asset(assets[0]), .asset(assets[1])]) }
                let response = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [record]))
                tags[name] = try response.saveResults[id]!.get().recordChangeTag
            }
            _ = try await database.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [Self.notes]))
            _ = try await server.collectAssets(of: "alice", unreferencedBefore: Date().addingTimeInterval(60))
            let log = try server.admin.log(of: "alice")
            try ServerLogTests.expectProjectionsHold(log)
        }
    }

    // F134: what a crash leaves is cleaned up: a content stored but never logged (the process
    // died between the rename and the entry) and a partial upload older than the horizon;
    // a recent partial stays for its upload to resume.
    @Test("F134 the cleanup removes what no entry accounts for")
    func cleanupOfOrphans() async throws {
        try await withServer { server, _ in
            _ = try await Self.prepare(server)
            let store = try #require(server.storage.assets as? LMDBAssetStore)
            let number = try server.users.number(of: "alice")
            // A stored content no entry names.
            let orphanBytes = Self.content(300, seed: 9)
            let orphan = AssetHasher.digest(of: orphanBytes)
            let orphanPartial = AssetPartial(owner: number, digest: orphan, zone: 0)
            try orphanBytes.withUnsafeBytes { try store.appendPartial(orphanPartial, at: 0, $0) }
            try store.storePartial(orphanPartial)
            // A partial upload left by a cut connection.
            let partialBytes = Self.content(2000, seed: 10)
            let partial = AssetHasher.digest(of: partialBytes)
            let upload = try await server.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.notes, digest: partial, size: 2000)
            try await upload.write(Array(partialBytes[0..<700]), at: 0)
            upload.close()

            let early = try await server.collectAssets(
                of: "alice", unreferencedBefore: Date().addingTimeInterval(-3600))
            #expect(early.orphansRemoved == [orphan])
            #expect(early.partialsRemoved.isEmpty)
            #expect(try store.storedDigests(owner: number).isEmpty)
            #expect(try store.partialLength(try await Self.partial(server, partial)) == 700)

            let late = try await server.collectAssets(of: "alice", unreferencedBefore: Date().addingTimeInterval(3600))
            #expect(late.partialsRemoved == [partial])
            #expect(try store.partials(owner: number).isEmpty)
            let leftovers = try FileManager.default.contentsOfDirectory(
                atPath: store.assetsDirectory(owner: number).path)
            #expect(leftovers == ["partial"])
        }
    }

    // A partial file longer than the content (a damaged disk, another build of the server)
    // is not trusted: the upload starts over and stores the right bytes.
    @Test("a partial longer than its content starts over")
    func overlongPartial() async throws {
        try await withServer { server, directory in
            let database = try await Self.prepare(server)
            let store = try #require(server.storage.assets as? LMDBAssetStore)
            let number = try server.users.number(of: "alice")
            let bytes = Self.content(800, seed: 11)
            let digest = AssetHasher.digest(of: bytes)
            let junk = [UInt8](repeating: 0xEE, count: 900)
            let partial = try await Self.partial(server, digest)
            try junk.withUnsafeBytes { try store.appendPartial(partial, at: 0, $0) }
            let response = try await database.uploadAsset(
                AssetUploadRequest(
                    zoneID: Self.notes, digest: digest, size: 800, fileURL: try Self.file(bytes, in: directory)))
            #expect(response.bytesSent == 800)
            var read: [UInt8] = []
            try store.read(owner: number, digest: digest, from: 0, maxLength: 10_000) { read.append(contentsOf: $0) }
            #expect(read == bytes)
        }
    }

    // F134: a content kept for one zone is uploaded whole for another, which gains it: one
    // file, the usage unchanged, one entry per zone. Collected, it is no zone's any more.
    @Test("F134 a content uploaded for a second zone is kept once and counted once")
    func secondZoneKeepsOneCopy() async throws {
        try await withServer { server, directory in
            let (database, store, number) = try await Self.prepareTwoZones(server)
            let bytes = Self.content(2 * AssetTransfer.chunkSize + 3, seed: 12)
            let digest = AssetHasher.digest(of: bytes)
            func upload(for zoneID: RecordZone.ID) async throws -> Int64 {
                try await database.uploadAsset(
                    AssetUploadRequest(
                        zoneID: zoneID, digest: digest, size: Int64(bytes.count),
                        fileURL: try Self.file(bytes, in: directory))
                ).bytesSent
            }
            func usage() throws -> UInt64 { try server.store("alice", .private).read { try $0.state(IndexKey.usage) } }

            #expect(try await upload(for: Self.privateZone) == Int64(bytes.count))
            let usageOnce = try usage()
            #expect(try await upload(for: Self.notes) == Int64(bytes.count), "the whole content, again")
            #expect(try await upload(for: Self.notes) == 0)
            #expect(try usage() == usageOnce)
            let files = try FileManager.default.contentsOfDirectory(atPath: store.assetsDirectory(owner: number).path)
                .sorted()
            #expect(files == [digest.hex, "partial"])
            #expect(try store.partials(owner: number).isEmpty)
            let log = try server.admin.log(of: "alice")
            var stored: [RecordZone.ID?] = []
            var cursor = try log.entries()
            while let entry = try cursor.next() {
                if case .assetStored(digest, _, let zone) = try ServerEntry(entry) { stored.append(zone) }
            }
            #expect(stored == [Self.privateZone, Self.notes])
            try ServerLogTests.expectProjectionsHold(log)

            // Collected (nothing references it), it is no zone's: each uploads it anew.
            let collected = try await server.collectAssets(
                of: "alice", unreferencedBefore: Date().addingTimeInterval(3600))
            #expect(collected.deleted == [digest])
            #expect(try await upload(for: Self.notes) == Int64(bytes.count))
            #expect(try await upload(for: Self.privateZone) == Int64(bytes.count))
            #expect(try log.verifyProjections() == nil)
        }
    }

    // F134: entries written before contents were granted per zone name no zone. Replayed, they
    // grant nothing: the zone whose live records reference the content keeps it (its records
    // may reference it again, its readers download it) while they do; no other zone gains it.
    @Test(
        "F134 a log from before grants per zone: the zone whose records reference a content keeps it, no other gains it"
    )
    func entriesWithoutZone() async throws {
        try await withServer { server, _ in
            let (database, store, number) = try await Self.prepareTwoZones(server)
            let bytes = Self.content(3000, seed: 13)
            let digest = AssetHasher.digest(of: bytes)
            let asset = Asset(digest: digest, size: 3000)
            // What an older server wrote: the content, its entry, and a record of Notes with it.
            let partial = AssetPartial(owner: number, digest: digest, zone: 0)
            try bytes.withUnsafeBytes { try store.appendPartial(partial, at: 0, $0) }
            try store.storePartial(partial)
            let log = try server.admin.log(of: "alice")
            _ = try log.append(ServerEntry.assetStored(digest, size: 3000, zone: nil).newEntry)
            var old = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.notes))
            old["photo"] = .asset(asset)
            _ = try log.append(ServerEntry.recordSaved(old).newEntry)

            func save(_ name: String, in zoneID: RecordZone.ID) async throws -> SyncError? {
                var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zoneID))
                record["photo"] = .asset(asset)
                let response = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [record]))
                if case .failure(let error) = response.saveResults[record.recordID] { return error }
                return nil
            }
            func readable(in zoneID: RecordZone.ID) async throws -> Bool {
                do {
                    _ = try await server.openAssetDownload(
                        user: "alice", scope: .private, zoneID: zoneID, digest: digest)
                    return true
                } catch let error as SyncError where error.code == .assetNotAvailable {
                    return false
                }
            }
            #expect(try await readable(in: Self.notes))
            #expect(try await !readable(in: Self.privateZone))
            #expect(try await save("n2", in: Self.notes) == nil)
            #expect(try await save("p1", in: Self.privateZone)?.code == .assetNotAvailable)
            let status = try await server.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.privateZone, digest: digest, size: 3000)
            #expect(!status.isStored && status.received == 0)
            status.close()
            #expect(try log.verifyProjections() == nil)

            // Its records gone, Notes has it no more: nothing granted it.
            _ = try await database.modifyRecords(
                ModifyRecordsRequest(recordIDsToDelete: [
                    Record.ID(recordName: "n1", zoneID: Self.notes), Record.ID(recordName: "n2", zoneID: Self.notes),
                ]))
            #expect(try await save("n3", in: Self.notes)?.code == .assetNotAvailable)
            #expect(try await !readable(in: Self.notes))
            try ServerLogTests.expectProjectionsHold(log)
        }
    }

    // A client whose connection dropped retries before the server noticed: its new upload
    // takes the old one over, after the piece the old one is writing (held in flight here
    // until the new upload waits for it), and resumes from every byte written; the old one's
    // later writes fail. Another device, and a request naming none, still get zoneBusy.
    @Test("an upload from the same device takes over one still held, once its piece in flight is written")
    func takeover() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("takeover-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try HeldStorage(directory: directory)
        let server = try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast), storage: storage)
        defer { server.shutdown() }
        _ = try await Self.prepare(server)
        let chunk = AssetTransfer.chunkSize
        let bytes = Self.content(3 * chunk, seed: 14)
        let digest = AssetHasher.digest(of: bytes)
        func begin(_ device: DeviceID?) async throws -> AssetUpload {
            try await server.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.notes, digest: digest, size: Int64(bytes.count),
                device: device)
        }
        let abandoned = try await begin("phone")
        try await abandoned.write(Array(bytes[0..<chunk]), at: 0)
        storage.holdNextPerform()
        async let inFlight: Void = abandoned.write(Array(bytes[chunk..<2 * chunk]), at: Int64(chunk))
        await storage.held()
        async let retried = begin("phone")
        while abandoned.hold.takeoversWaiting == 0 { await Task.yield() }
        storage.letGo()
        try await inFlight
        let upload = try await retried
        #expect(upload.received == Int64(2 * chunk), "the piece in flight was written before the new upload began")

        let late = await #expect(throws: SyncError.self) {
            try await abandoned.write(Array(bytes[(2 * chunk)...]), at: Int64(2 * chunk))
        }
        #expect(late?.code == .zoneBusy)
        abandoned.close()
        for device in ["laptop", nil] as [DeviceID?] {
            let other = await #expect(throws: SyncError.self) { _ = try await begin(device) }
            #expect(other?.code == .zoneBusy, "\(String(describing: device))")
        }
        try await upload.write(Array(bytes[(2 * chunk)...]), at: Int64(2 * chunk))
        #expect(try await upload.finish() == Asset(digest: digest, size: Int64(bytes.count)))
        upload.close()
        let download = try await server.openAssetDownload(
            user: "alice", scope: .private, zoneID: Self.notes, digest: digest)
        var read: [UInt8] = []
        while read.count < bytes.count { read += try await download.read(from: Int64(read.count)) }
        #expect(read == bytes)
    }

    // F134: log entries of assets decode to what was written, and damaged ones are typed
    // errors naming the entry.
    @Test("F134 asset entries round-trip; a damaged digest is refused")
    func entries() throws {
        let digest = AssetHasher.digest(of: [1, 2, 3])
        let entries: [ServerEntry] = [
            .assetStored(digest, size: 3, zone: nil), .assetStored(digest, size: 3, zone: Self.notes),
            .assetsDeleted([digest, AssetHasher.digest(of: [4])]),
        ]
        for entry in entries {
            let encoded = entry.newEntry
            #expect(
                try ServerEntry(
                    LogEntry(
                        offset: 5, kind: encoded.kind, time: EntryTime(microsecondsSince1970: 1),
                        payload: encoded.payload)) == entry)
        }
        var payload = ServerEntry.assetStored(digest, size: 3, zone: nil).newEntry.payload
        payload[1] = 31  // the digest's length: 31 bytes instead of 32
        payload.remove(at: 2)
        #expect(throws: (any Error).self) {
            try ServerEntry(
                LogEntry(
                    offset: 9, kind: ServerEntry.Kind.assetStored, time: EntryTime(microsecondsSince1970: 1),
                    payload: payload))
        }
    }
}

/// LMDB storage whose next `perform`, once armed, waits until the test lets it go: a step of an
/// upload held in flight, with no sleep.
final class HeldStorage: ServerStorage {
    let inner: LMDBStorage
    private let armed = Mutex(false)
    private let entered = AsyncStream<Void>.makeStream()
    private let release = AsyncStream<Void>.makeStream()

    init(directory: URL) throws {
        inner = try LMDBStorage(directory: directory, durability: .fast)
    }

    /// Holds the next `perform` before it runs its body.
    func holdNextPerform() { armed.withLock { $0 = true } }

    /// Returns once the armed `perform` is held.
    func held() async {
        for await _ in entered.stream { return }
    }

    /// Lets the held `perform` run.
    func letGo() { release.continuation.yield() }

    func perform<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        if armed.withLock({ armed in
            defer { armed = false }
            return armed
        }) {
            entered.continuation.yield()
            for await _ in release.stream { break }
        }
        return try await inner.perform(body)
    }

    func deleteLogs(ofUser number: UInt64) throws {
        try inner.deleteLogs(ofUser: number)
    }

    func openLog(_ name: ServerLogName, projection: any Projection) throws -> any ServerLog {
        try inner.openLog(name, projection: projection)
    }

    func withExclusiveLock<R>(_ name: String, _ body: () throws -> R) throws -> R {
        try inner.withExclusiveLock(name, body)
    }
    func publish(_ notice: PushNotice) { inner.publish(notice) }
    func startNotifications(_ deliver: @escaping @Sendable (PushNotice) -> Void, missed: @escaping @Sendable () -> Void)
    {
        inner.startNotifications(deliver, missed: missed)
    }
    func shutdown() { inner.shutdown() }
    var assets: any ServerAssetStore { inner.assets }
}
