import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

/// A database that passes everything to the server, and notes each asset transfer; a test may
/// make the next uploads fail, or change the file while an upload reads it.
final class AssetTrackingDatabase: ForwardingDatabase {
    let base: InProcessDatabase
    private let state = Mutex(State())

    private struct State {
        var uploads: [AssetUploadResponse] = []
        var downloads: [AssetDownloadRequest] = []
        var failingUploads: [SyncError] = []
        var duringUpload: (@Sendable (AssetUploadRequest) -> Void)?
    }

    init(_ base: InProcessDatabase) { self.base = base }

    /// The answers of the uploads that succeeded, in order.
    var uploads: [AssetUploadResponse] { state.withLock { $0.uploads } }
    /// The downloads asked for, in order.
    var downloads: [AssetDownloadRequest] { state.withLock { $0.downloads } }

    /// The next uploads fail with these errors, one each, before reaching the server.
    func failNextUploads(_ errors: [SyncError]) { state.withLock { $0.failingUploads = errors } }

    /// Runs `body` at the start of each upload, before the server reads the file: the user
    /// edits the photo while the app uploads it.
    func duringUpload(_ body: (@Sendable (AssetUploadRequest) -> Void)?) { state.withLock { $0.duringUpload = body } }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await base.modifyRecords(request)
    }

    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        let (failure, hook) = state.withLock { state in
            (state.failingUploads.isEmpty ? nil : state.failingUploads.removeFirst(), state.duringUpload)
        }
        if let failure { throw failure }
        hook?(request)
        let response = try await base.uploadAsset(request)
        state.withLock { $0.uploads.append(response) }
        return response
    }

    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        state.withLock { $0.downloads.append(request) }
        return try await base.downloadAsset(request)
    }
}

/// Assets as device timelines (F129, F134, F72): a phone attaches photos to notes, the engine
/// uploads their contents before the records, and a laptop fetches the notes with the photos'
/// contents in its asset cache, or without them until it asks.
@Suite("Scenario: assets")
struct AssetScenarios: NoteIDs {
    static let albums = RecordZone.ID(zoneName: "Albums")

    /// `count` bytes of a seeded sequence: contents no other test file repeats.
    static func content(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SeededRandom(seed: seed)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count { withUnsafeBytes(of: random.next()) { bytes.append(contentsOf: $0) } }
        return Array(bytes.prefix(count))
    }

    /// Writes `bytes` to `name` in the test's `files` directory (the user's photos).
    static func file(_ name: String, _ bytes: [UInt8], in directory: URL) throws -> URL {
        let folder = directory.appendingPathComponent("files", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return url
    }

    /// The note `name` on `device`, in the zone Notes (created first), with a photo of `size`
    /// seeded bytes in the file `file`, and a title when one is given: the user takes a photo.
    static func photoNote(
        _ name: String, title: String? = nil, on device: TestDevice, file: String, size: Int, seed: UInt64,
        in directory: URL
    ) throws -> (id: Record.ID, bytes: [UInt8], photo: URL) {
        let bytes = content(size, seed: seed)
        let photo = try Self.file(file, bytes, in: directory)
        let id = note(name)
        try device.createZone(notes)
        if let title { try device.write(id, title) }
        try device.attach(id, "photo", .asset(Asset(fileURL: photo)))
        return (id, bytes, photo)
    }

    /// A device of alice's whose asset transfers are tracked.
    static func device(
        _ name: String, _ server: SyncServer, _ directory: URL
    ) throws -> (TestDevice, AssetTrackingDatabase) {
        let database = AssetTrackingDatabase(server.database(for: "alice", device: DeviceID(name)))
        return (try TestDevice(name, database: database, directory: directory.appendingPathComponent(name)), database)
    }

    /// Alice's phone and laptop, each with its tracked database (see ``device(_:_:_:)``), on a
    /// server of their own in `directory`, a fresh temporary directory removed when `body` returns.
    static func withPhoneAndLaptop(
        _ body: (
            _ directory: URL, _ phone: TestDevice, _ phoneDatabase: AssetTrackingDatabase, _ laptop: TestDevice,
            _ laptopDatabase: AssetTrackingDatabase
        ) async throws -> Void
    ) async throws {
        try await withServer { directory, server in
            let (phone, phoneDatabase) = try device("phone", server, directory)
            let (laptop, laptopDatabase) = try device("laptop", server, directory)
            try await body(directory, phone, phoneDatabase, laptop, laptopDatabase)
        }
    }

    /// Sends `device`'s changes; a send that fails records each item's error, to tell why.
    static func send(_ device: TestDevice) async throws {
        do {
            try await device.engine.sendChanges()
        } catch let error as SyncError {
            Issue.record(
                "\(device.name)'s send failed: \(error); items: \(error.partialErrors.values.map(String.init(describing:)))"
            )
            throw error
        }
    }

    /// The bytes of the file an asset points at.
    static func bytes(of asset: Asset?) throws -> [UInt8] {
        let url = try #require(
            asset?.fileURL, "the asset has no file: \(asset.map(String.init(describing:)) ?? "none")")
        return Array(try Data(contentsOf: url))
    }

    // MARK: Send and fetch

    // F129 (asset values), F134 (the content stored apart, beyond one 1 MiB piece)
    @Test(
        "F129 F134 the phone saves a note with a photo; the laptop fetches it and reads the same bytes from its asset cache"
    )
    func photoTravelsToTheLaptop() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, _, laptop, laptopDatabase in
            let (id, bytes, photo) = try Self.photoNote(
                "n1", title: "Holiday", on: phone, file: "beach.jpg", size: 2_500_000, seed: 1, in: directory)
            try await phone.sync()

            // The phone's saved note has the photo's digest and size, and still its own file.
            let digest = AssetHasher.digest(of: bytes)
            let saved = try #require(
                phone.events.sentRecordZoneChanges.flatMap(\.savedRecords).first { $0.recordID == id })
            guard case .asset(let sent)? = saved["photo"] else {
                Issue.record("no photo in \(saved)")
                return
            }
            #expect(sent.digest == digest)
            #expect(sent.size == Int64(bytes.count))
            #expect(sent.fileURL?.path == photo.path)
            #expect(phone.asset(id, "photo")?.digest == digest, "the app keeps the saved asset")
            #expect(phone.unacknowledgedEdits.isEmpty)

            try await laptop.sync()
            let fetched = try #require(laptop.asset(id, "photo"))
            #expect(laptop.title(id) == "Holiday")
            #expect(fetched.digest == digest)
            #expect(fetched.size == Int64(bytes.count))
            #expect(fetched.fileURL?.path == laptop.engine.assetCacheDirectory.appendingPathComponent(digest.hex).path)
            #expect(try Self.bytes(of: fetched) == bytes)
            #expect(laptopDatabase.downloads.map(\.digest) == [digest])
            try phone.expectProjectionsHold()
            try laptop.expectProjectionsHold()
        }
    }

    // F134: a device's own save comes back in its fetch; its content is on the device already.
    @Test(
        "F134 the phone's fetch of its own note copies the photo from the user's file into its cache instead of downloading it"
    )
    func ownSaveCopiedNotDownloaded() async throws {
        try await withServer { directory, server in
            let (phone, phoneDatabase) = try Self.device("phone", server, directory)
            let (id, bytes, _) = try Self.photoNote(
                "mine", on: phone, file: "mine.jpg", size: 120_000, seed: 14, in: directory)
            try await phone.sync()  // sends, then fetches the note back

            let fetched = try #require(
                phone.events.fetchedRecordZoneChanges.flatMap(\.modifications).first { $0.record.recordID == id })
            guard case .asset(let asset)? = fetched.record["photo"] else {
                Issue.record("no photo in \(fetched)")
                return
            }
            #expect(
                asset.fileURL?.path
                    == phone.engine.assetCacheDirectory.appendingPathComponent(AssetHasher.digest(of: bytes).hex).path)
            #expect(try Self.bytes(of: asset) == bytes)
            #expect(phoneDatabase.downloads.isEmpty, "copied from the user's file")

            // Another photo, edited by the user between the send and the fetch: its file no
            // longer holds the content the note references, so that content is downloaded.
            let second = Self.content(80_000, seed: 15)
            let edited = try Self.file("edited.jpg", second, in: directory)
            try phone.attach(Self.note("edited"), "photo", .asset(Asset(fileURL: edited)))
            try await phone.engine.sendChanges()
            try Data(Self.content(80_000, seed: 16)).write(to: edited)
            try await phone.engine.fetchChanges()
            #expect(phoneDatabase.downloads.map(\.digest) == [AssetHasher.digest(of: second)])
            #expect(try Self.bytes(of: phone.asset(Self.note("edited"), "photo")) == second)
            try phone.expectProjectionsHold()
        }
    }

    // F129 (lists of assets)
    @Test("F129 a list of photos goes and comes back in order, each with its content")
    func listOfAssets() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, _, laptop, _ in
            let contents = (0..<3).map { Self.content(10_000 + $0, seed: UInt64(20 + $0)) }
            let files = try contents.enumerated().map {
                try Self.file("page\($0.offset).png", $0.element, in: directory)
            }
            let id = Self.note("scan")

            try phone.createZone(Self.notes)
            try phone.write(id, "Scanned letter")
            try phone.attach(id, "pages", .list(files.map { .asset(Asset(fileURL: $0)) }))
            try await phone.sync()
            try await laptop.sync()

            guard case .list(let pages)? = laptop.attachments(id)?["pages"] else {
                Issue.record("no list of pages on the laptop: \(String(describing: laptop.attachments(id)))")
                return
            }
            let assets = pages.compactMap { if case .asset(let asset) = $0 { asset } else { nil } }
            #expect(assets.map(\.digest) == contents.map { AssetHasher.digest(of: $0) })
            #expect(try assets.map { try Self.bytes(of: $0) } == contents)
            // The phone's saved note: each page still points at its own file.
            let record = try #require(
                phone.events.sentRecordZoneChanges.flatMap(\.savedRecords).first { $0.recordID == id })
            guard case .list(let saved)? = record["pages"] else {
                Issue.record("no list of pages in \(record)")
                return
            }
            #expect(
                saved.compactMap { if case .asset(let asset) = $0 { asset.fileURL?.path } else { nil } }
                    == files.map(\.path))
            #expect(saved.allSatisfy { if case .asset(let asset) = $0 { asset.digest != nil } else { false } })
        }
    }

    // F134: the server keeps one copy per content; so does the laptop's cache.
    @Test(
        "F134 the same photo in two notes is stored once: the second upload sends no bytes, the laptop downloads it once"
    )
    func samePhotoStoredOnce() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, phoneDatabase, laptop, laptopDatabase in
            let bytes = Self.content(300_000, seed: 2)
            let photo = try Self.file("cat.jpg", bytes, in: directory)
            let copy = try Self.file("cat copy.jpg", bytes, in: directory)

            try phone.createZone(Self.notes)
            try phone.write(Self.note("n1"), "Cat")
            try phone.attach(Self.note("n1"), "photo", .asset(Asset(fileURL: photo)))
            try await phone.sync()
            try phone.write(Self.note("n2"), "Cat again")
            try phone.attach(Self.note("n2"), "photo", .asset(Asset(fileURL: copy)))
            try await phone.sync()

            #expect(phoneDatabase.uploads.map(\.bytesSent) == [Int64(bytes.count), 0])
            #expect(Set(phoneDatabase.uploads.map(\.asset.digest)) == [AssetHasher.digest(of: bytes)])

            try await laptop.sync()
            let first = try #require(laptop.asset(Self.note("n1"), "photo"))
            let second = try #require(laptop.asset(Self.note("n2"), "photo"))
            #expect(first.fileURL != nil && first.fileURL == second.fileURL, "one cached file for both notes")
            #expect(laptopDatabase.downloads.count == 1)
            #expect(try Self.bytes(of: second) == bytes)
        }
    }

    // F134: a 10 MB asset is accepted; its content is not part of the record's 1 MB.
    @Test("F134 a 10 MB photo is accepted beside a record of almost 1 MB of text, and arrives whole")
    func tenMegabyteAsset() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, _, laptop, _ in
            let bytes = Self.content(10_000_000, seed: 3)
            let photo = try Self.file("panorama.jpg", bytes, in: directory)
            let id = Self.note("big")

            try phone.createZone(Self.notes)
            try phone.edit(id, ["title": "Panorama", "body": String(repeating: "a", count: 990_000)])
            try phone.attach(id, "photo", .asset(Asset(fileURL: photo)))
            try await phone.sync()
            #expect(phone.unacknowledgedEdits.isEmpty)

            try await laptop.sync()
            #expect(laptop.asset(id, "photo")?.size == 10_000_000)
            #expect(try Self.bytes(of: laptop.asset(id, "photo")) == bytes)
        }
    }

    // MARK: Failures before the request

    // F134, F91: a per-item failure, the rest of the batch still goes.
    @Test(
        "F134 a photo deleted before the send fails its note alone with assetFileNotFound, naming the record, field and file"
    )
    func fileGoneBeforeSend() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, phoneDatabase, laptop, _ in
            let gone = try Self.file("gone.jpg", Self.content(1000, seed: 4), in: directory)
            let kept = try Self.file("kept.jpg", Self.content(1000, seed: 5), in: directory)
            let (lost, withPhoto, plain) = (Self.note("lost"), Self.note("with-photo"), Self.note("plain"))

            try phone.createZone(Self.notes)
            try phone.attach(lost, "photo", .asset(Asset(fileURL: gone)))
            try phone.attach(withPhoto, "photo", .asset(Asset(fileURL: kept)))
            try phone.write(plain, "No photo")
            try FileManager.default.removeItem(at: gone)  // the user deletes the photo
            let error = await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }

            #expect(error?.code == .partialFailure)
            let failure = try #require(error?.partialErrors[.record(lost)])
            #expect(error?.partialErrors.count == 1)
            #expect(failure.code == .assetFileNotFound)
            #expect(failure.item == .record(lost))
            #expect(
                failure.message.contains("\"photo\"") && failure.message.contains(gone.path)
                    && failure.message.contains("lost"))
            let sent = phone.events.sentRecordZoneChanges
            #expect(sent.count == 1, "one batch: the failure is reported with the server's answer")
            #expect(sent.flatMap(\.failedRecordSaves).map(\.record.recordID) == [lost])
            #expect(Set(sent.flatMap(\.savedRecords).map(\.recordID)) == [withPhoto, plain])
            #expect(phoneDatabase.uploads.count == 1)
            #expect(
                try phone.engine.state.pendingRecordZoneChanges == [],
                "a failure that is not transient takes the change off the list (F21)")

            try await laptop.sync()
            #expect(Set(laptop.notes.keys) == [withPhoto, plain])
            try phone.expectProjectionsHold()
        }
    }

    // F134: the file changes between its hashing and its upload.
    @Test(
        "F134 a photo modified while it is uploaded fails its note with assetFileModified; the batch's other notes go")
    func fileModifiedDuringUpload() async throws {
        try await withServer { directory, server in
            let (phone, phoneDatabase) = try Self.device("phone", server, directory)
            let grown = try Self.file("grown.jpg", Self.content(5000, seed: 6), in: directory)
            let rewritten = try Self.file("rewritten.jpg", Self.content(5000, seed: 7), in: directory)
            let (a, b, plain) = (Self.note("a"), Self.note("b"), Self.note("plain"))
            // While the upload starts, the user's editor saves the photo: one grows, the other
            // is rewritten with as many bytes (only its digest tells).
            phoneDatabase.duringUpload { request in
                if request.fileURL.path == grown.path {
                    let handle = try! FileHandle(forWritingTo: grown)
                    _ = try! handle.seekToEnd()
                    try! handle.write(contentsOf: Data([1, 2, 3]))
                    try! handle.close()
                } else if request.fileURL.path == rewritten.path {
                    try! Data(Self.content(5000, seed: 8)).write(to: rewritten)
                }
            }

            try phone.createZone(Self.notes)
            try phone.attach(a, "photo", .asset(Asset(fileURL: grown)))
            try phone.attach(b, "photo", .asset(Asset(fileURL: rewritten)))
            try phone.write(plain, "No photo")
            let error = await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }

            #expect(error?.partialErrors.keys.sorted { $0.description < $1.description } == [.record(a), .record(b)])
            for (id, url) in [(a, grown), (b, rewritten)] {
                let failure = try #require(error?.partialErrors[.record(id)])
                #expect(failure.code == .assetFileModified, "\(failure)")
                #expect(failure.message.contains("\"photo\"") && failure.message.contains(url.path), "\(failure)")
            }
            #expect(phone.events.sentRecordZoneChanges.flatMap(\.savedRecords).map(\.recordID) == [plain])
            #expect(try phone.engine.state.pendingRecordZoneChanges == [])

            // The user saves the note again: its new content goes.
            phoneDatabase.duringUpload(nil)
            try phone.attach(a, "photo", .asset(Asset(fileURL: grown)))
            try await phone.engine.sendChanges()
            #expect(phone.asset(a, "photo")?.digest == AssetHasher.digest(of: try Data(contentsOf: grown)))
            try phone.expectProjectionsHold()
        }
    }

    // F134: over 250 MB an asset fails its note, and the file is not read.
    @Test("F134 a photo over 250 MB fails its note with limitExceeded before anything is read or uploaded")
    func assetOverTheLimit() async throws {
        try await withServer { directory, server in
            let (phone, phoneDatabase) = try Self.device("phone", server, directory)
            let huge = try Self.file("huge.mov", [], in: directory)
            let handle = try FileHandle(forWritingTo: huge)
            try handle.truncate(atOffset: UInt64(Limits.maxAssetBytes + 1))  // sparse: nothing written
            try handle.close()
            let id = Self.note("movie")

            try phone.createZone(Self.notes)
            try phone.attach(id, "movie", .asset(Asset(fileURL: huge)))
            let error = await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            let failure = try #require(error?.partialErrors[.record(id)])
            #expect(failure.code == .limitExceeded)
            #expect(
                failure.message.contains("\"movie\"") && failure.message.contains("\(Limits.maxAssetBytes + 1) bytes"))
            #expect(phoneDatabase.uploads.isEmpty)
            #expect(phone.events.sentRecordZoneChanges.flatMap(\.failedRecordSaves).map(\.record.recordID) == [id])
            try phone.expectProjectionsHold()
        }
    }

    // F89, F90: a transient upload failure is a transient send failure.
    @Test(
        "F89 an upload refused with serviceUnavailable keeps its note pending, skips the batch's other uploads and ends the send; the next send uploads them"
    )
    func transientUploadFailure() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, phoneDatabase, laptop, _ in
            let bytes = Self.content(4000, seed: 9)
            let photo = try Self.file("dog.jpg", bytes, in: directory)
            let other = try Self.file("puppy.jpg", Self.content(3000, seed: 17), in: directory)
            let (dog, puppy, plain) = (Self.note("dog"), Self.note("puppy"), Self.note("plain"))

            try phone.createZone(Self.notes)
            try phone.write(dog, "Dog")
            try phone.attach(dog, "photo", .asset(Asset(fileURL: photo)))
            try phone.attach(puppy, "photo", .asset(Asset(fileURL: other)))
            try phone.write(plain, "No photo")
            phoneDatabase.failNextUploads([
                SyncError(.serviceUnavailable, "down for maintenance", retryAfter: .seconds(30))
            ])
            let error = await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }

            #expect(error?.code == .serviceUnavailable, "the transient failure ends the send")
            #expect(error?.retryAfter == .seconds(30))
            #expect(error?.item == .record(dog))
            #expect(phoneDatabase.uploads.isEmpty, "no upload tried after the refused one")
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(dog), .saveRecord(puppy)])
            let sent = phone.events.sentRecordZoneChanges
            #expect(sent.flatMap(\.failedRecordSaves).map(\.record.recordID) == [dog, puppy])
            #expect(
                sent.flatMap(\.failedRecordSaves).allSatisfy {
                    $0.error.code == .serviceUnavailable && $0.error.retryAfter == .seconds(30)
                })
            #expect(sent.flatMap(\.savedRecords).map(\.recordID) == [plain], "a note without an upload still goes")

            try await phone.engine.sendChanges()
            #expect(try phone.engine.state.pendingRecordZoneChanges == [])
            #expect(phoneDatabase.uploads.count == 2)
            try await laptop.sync()
            #expect(try Self.bytes(of: laptop.asset(dog, "photo")) == bytes)
            #expect(laptop.asset(puppy, "photo")?.fileURL != nil)
            try phone.expectProjectionsHold()
        }
    }

    // F55: atomicByZone holds back the zone of an item that failed before the request.
    @Test(
        "F55 F134 in an atomic batch, a note whose photo is gone holds back its zone's other notes, not another zone's")
    func atomicZoneWithMissingFile() async throws {
        try await withScriptedEngine("phone") { engine, delegate, server, directory in
            let gone = directory.appendingPathComponent("never-there.jpg")
            var withPhoto = newNote(Self.note("a"), "A")
            withPhoto["photo"] = .asset(Asset(fileURL: gone))
            let mate = newNote(Self.note("b"), "B")
            let elsewhere = newNote(Self.note("c", Self.albums), "C")
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: Self.notes)), .saveZone(RecordZone(zoneID: Self.albums)),
            ])
            try engine.state.add(
                pendingRecordZoneChanges: [withPhoto, mate, elsewhere].map { .saveRecord($0.recordID) })
            delegate.queue([
                SyncEngine.RecordZoneChangeBatch(recordsToSave: [withPhoto, mate, elsewhere], atomicByZone: true)
            ])

            let error = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(error?.partialErrors[.record(withPhoto.recordID)]?.code == .assetFileNotFound)
            #expect(error?.partialErrors[.record(mate.recordID)]?.code == .batchRequestFailed)
            #expect(error?.partialErrors.count == 2)
            #expect(
                delegate.events.sentRecordZoneChanges.flatMap(\.savedRecords).map(\.recordID) == [elsewhere.recordID])
            try expectProjectionsHold(engine)
        }
    }

    // F103: the items that failed before the request say nothing of a lost answer.
    @Test(
        "F103 F134 a batch whose every note failed before the request leaves a lost answer's batch unanswered; the next send reuses its ID"
    )
    func localFailuresKeepTheUnansweredBatch() async throws {
        try await withServer { directory, server in
            let database = LosingDatabase(server.database(for: "alice", device: "phone"))
            let phone = try TestDevice(
                "phone", database: database, directory: directory.appendingPathComponent("phone"))
            let (note, broken) = (Self.note("n"), Self.note("broken"))
            try phone.createZone(Self.notes)
            try phone.write(note, "first")
            try await Self.send(phone)

            // The server applies "second", the connection drops.
            try phone.write(note, "second")
            database.dropNextConnections(1)
            await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            let unanswered = try #require(try phone.engine.deviceLog.read { try $0.unansweredBatch() })

            // A send of the broken note alone: it fails before any request.
            try phone.attach(broken, "photo", .asset(Asset(fileURL: directory.appendingPathComponent("missing.jpg"))))
            let error = await #expect(throws: SyncError.self) {
                try await phone.engine.sendChanges(SyncEngine.SendChangesOptions(scope: .recordIDs([broken])))
            }
            #expect(error?.partialErrors[.record(broken)]?.code == .assetFileNotFound)
            #expect(database.modifyRequestIDs.count == 2, "no request for a batch that failed before it")
            #expect(try phone.engine.deviceLog.read { try $0.unansweredBatch() } == unanswered)

            try await Self.send(phone)
            #expect(
                database.modifyRequestIDs.last == unanswered.requestID,
                "the equal batch goes out under the dropped one's ID")
            #expect(try phone.engine.deviceLog.read { try $0.unansweredBatch() } == nil)
            #expect(phone.unacknowledgedEdits.keys.sorted { $0.recordName < $1.recordName } == [broken])
            try phone.expectProjectionsHold()
        }
    }

    // MARK: Fetch configuration (F72)

    // F72: shouldFetchAssetContents false, then the content on demand.
    @Test(
        "F72 with shouldFetchAssetContents false the laptop gets the photo's digest and size only; fetchAssetContents brings its bytes"
    )
    func assetContentsOnDemand() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, _, laptop, laptopDatabase in
            let (id, bytes, photo) = try Self.photoNote(
                "tree", title: "Tree", on: phone, file: "tree.jpg", size: 70_000, seed: 10, in: directory)
            try await phone.sync()

            laptop.provideFetchOptions { context, _ in
                var options = context.options
                options.zoneConfigurations[Self.notes] = .init(shouldFetchAssetContents: false)
                return options
            }
            try await laptop.sync()
            let remote = try #require(laptop.asset(id, "photo"))
            #expect(remote.fileURL == nil)
            #expect(remote.digest == AssetHasher.digest(of: bytes))
            #expect(remote.size == Int64(bytes.count))
            #expect(laptopDatabase.downloads.isEmpty)
            #expect(
                !FileManager.default.fileExists(
                    atPath: laptop.engine.assetCacheDirectory.appendingPathComponent(remote.digest!.hex).path))

            let local = try await laptop.engine.fetchAssetContents(remote, in: Self.notes)
            #expect(local.digest == remote.digest && local.size == remote.size)
            #expect(try Self.bytes(of: local) == bytes)
            #expect(laptopDatabase.downloads.count == 1)
            // Asked again, the cached file answers.
            #expect(try await laptop.engine.fetchAssetContents(remote, in: Self.notes) == local)
            #expect(laptopDatabase.downloads.count == 1)
            // An asset never sent has no content to fetch.
            await #expect(throws: SyncError.self) {
                _ = try await laptop.engine.fetchAssetContents(Asset(fileURL: photo), in: Self.notes)
            }
        }
    }

    // F72: resultsLimit per zone.
    @Test(
        "F72 a zone configuration's resultsLimit pages that zone alone; the default configuration's holds for the others"
    )
    func resultsLimitPerZone() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, _, laptop, _ in
            try phone.createZone(Self.notes)
            try phone.createZone(Self.albums)
            try phone.write(
                (0..<5).map { (Self.note("n\($0)"), "Note \($0)") }
                    + (0..<5).map { (Self.note("a\($0)", Self.albums), "Album \($0)") })
            try await phone.sync()

            laptop.provideFetchOptions { context, _ in
                var options = context.options
                options.defaultZoneConfiguration.resultsLimit = 3
                options.zoneConfigurations[Self.notes] = .init(resultsLimit: 2)
                return options
            }
            try await laptop.sync()
            var pages: [RecordZone.ID: [Int]] = [:]
            var zone: RecordZone.ID?
            for event in laptop.events {
                switch event {
                case .willFetchRecordZoneChanges(let will): zone = will.zoneID
                case .fetchedRecordZoneChanges(let fetched):
                    pages[zone!, default: []].append(fetched.modifications.count)
                default: break
                }
            }
            #expect(pages[Self.notes] == [2, 2, 1])
            #expect(pages[Self.albums] == [3, 2])
            #expect(laptop.notes.count == 10)
        }
    }

    @Test("F72 zone configurations: defaults, lookup, equality and description")
    func zoneConfigurationValues() {
        var options = SyncEngine.FetchChangesOptions()
        #expect(options.defaultZoneConfiguration.shouldFetchAssetContents)
        #expect(options.defaultZoneConfiguration.resultsLimit == nil)
        #expect(options.zoneConfigurations.isEmpty)
        #expect(options.description == "FetchChangesOptions(scope all)")
        options.zoneConfigurations[Self.albums] = .init(shouldFetchAssetContents: false, resultsLimit: 10)
        #expect(options.zoneConfiguration(for: Self.albums) == .init(shouldFetchAssetContents: false, resultsLimit: 10))
        #expect(options.zoneConfiguration(for: Self.notes) == options.defaultZoneConfiguration)
        #expect(options != SyncEngine.FetchChangesOptions())
        #expect(options.description.contains("ZoneConfiguration(no asset contents, resultsLimit 10)"))
    }

    // F134, F72: a download that fails is a failed zone fetch; the token does not pass the page.
    @Test(
        "F72 F89 a photo whose download fails leaves its zone unfetched and its page undelivered; the next fetch delivers it with the file"
    )
    func downloadFailureFailsTheZone() async throws {
        try await withServer { directory, server in
            let (phone, _) = try Self.device("phone", server, directory)
            let database = LosingDownloads(server.database(for: "alice", device: "laptop"))
            let laptop = try TestDevice(
                "laptop", database: database, directory: directory.appendingPathComponent("laptop"))
            let bytes = Self.content(9000, seed: 11)
            let id = Self.note("sunset")
            try phone.createZone(Self.notes)
            try phone.write(id, "Sunset")
            try phone.attach(id, "photo", .asset(Asset(fileURL: try Self.file("sunset.jpg", bytes, in: directory))))
            try await phone.sync()

            database.failNextDownloads(1)
            let error = await #expect(throws: SyncError.self) { try await laptop.engine.fetchChanges() }
            #expect(error?.partialErrors[.zone(Self.notes)]?.code == .networkFailure)
            #expect(laptop.notes[id] == nil, "nothing delivered before its photo")
            #expect(laptop.events.fetchedRecordZoneChanges.isEmpty)
            #expect(try laptop.engine.state.zoneIDsWithUnfetchedServerChanges == [Self.notes])
            #expect(
                try laptop.engine.deviceLog.read { try $0.zoneChangeToken(for: Self.notes) } == nil,
                "the token did not move")

            try await laptop.engine.fetchChanges()
            #expect(laptop.title(id) == "Sunset")
            #expect(try Self.bytes(of: laptop.asset(id, "photo")) == bytes)
            try laptop.expectProjectionsHold()
        }
    }

    // MARK: The device log and relaunches

    // F134: the log records references and hashes, never contents.
    @Test("F134 the device logs hold each photo's digest, size and path, never its bytes")
    func deviceLogHoldsNoAssetBytes() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, _, laptop, _ in
            let (_, bytes, photo) = try Self.photoNote(
                "secret", on: phone, file: "secret.jpg", size: 200_000, seed: 12, in: directory)
            try await phone.sync()
            try await laptop.sync()

            let digest = AssetHasher.digest(of: bytes)
            for device in [phone, laptop] {
                // What the entries say: the asset by digest, size and local path — the user's
                // file where it was sent, the cached copy where it was fetched (the phone fetches
                // its own note back too).
                var sent: [Asset] = []
                var fetched: [Asset] = []
                try device.engine.deviceLog.log.forEachEntry { entry in
                    switch try DeviceEntry(entry, in: device.engine.deviceLog.log) {
                    case .batchPrepared(let records, _, _, _), .batchResult(let records, _, _, _):
                        sent += records.flatMap(\.assets).map(\.asset)
                    case .zoneChangesFetched(_, let records, _, _, _):
                        fetched += records.flatMap(\.assets).map(\.asset)
                    default: break
                    }
                }
                let cached = device.engine.assetCacheDirectory.appendingPathComponent(digest.hex).path
                #expect(sent.count == (device === phone ? 2 : 0), "device \(device.name): \(sent)")
                #expect(
                    sent.allSatisfy {
                        $0 == Asset(digest: digest, size: Int64(bytes.count), fileURL: URL(fileURLWithPath: photo.path))
                    }, "\(sent)")
                #expect(fetched.count == 1, "device \(device.name): \(fetched)")
                #expect(
                    fetched.allSatisfy {
                        $0 == Asset(digest: digest, size: Int64(bytes.count), fileURL: URL(fileURLWithPath: cached))
                    }, "\(fetched)")
                // What the log's file holds: no piece of the content, anywhere.
                let file = try Data(
                    contentsOf: URL(fileURLWithPath: device.engine.deviceLog.log.environment.path)
                        .appendingPathComponent("data.mdb"))
                for start in stride(from: 0, to: bytes.count - 64, by: 20_000) {
                    #expect(
                        file.range(of: Data(bytes[start..<(start + 64)])) == nil,
                        "device \(device.name): bytes from \(start) are in the log")
                }
                #expect(file.range(of: Data(digest.bytes)) != nil, "device \(device.name): the digest is in the log")
            }
        }
    }

    // The cache outlives the engine: a relaunched laptop finds its files.
    @Test(
        "F134 after a relaunch the laptop's asset cache still serves fetched photos; a deleted cache file is downloaded again"
    )
    func cacheSurvivesRelaunch() async throws {
        try await Self.withPhoneAndLaptop { directory, phone, _, laptop, laptopDatabase in
            let bytes = Self.content(50_000, seed: 13)
            let photo = try Self.file("lake.jpg", bytes, in: directory)
            try phone.createZone(Self.notes)
            try phone.attach(Self.note("n1"), "photo", .asset(Asset(fileURL: photo)))
            try await phone.sync()
            try await laptop.sync()
            #expect(laptopDatabase.downloads.count == 1)

            // The laptop's app quits and launches again; the phone saves the photo in a new note.
            try laptop.startEngine()
            try phone.attach(Self.note("n2"), "photo", .asset(Asset(fileURL: photo)))
            try await phone.sync()
            try await laptop.sync()
            let second = try #require(laptop.asset(Self.note("n2"), "photo"))
            #expect(second.fileURL == laptop.asset(Self.note("n1"), "photo")?.fileURL)
            #expect(try Self.bytes(of: second) == bytes)
            #expect(laptopDatabase.downloads.count == 1, "the relaunched engine found the cached file")

            // The user clears the cache: the content is downloaded again when asked for.
            try FileManager.default.removeItem(at: laptop.engine.assetCacheDirectory)
            let again = try await laptop.engine.fetchAssetContents(second, in: Self.notes)
            #expect(try Self.bytes(of: again) == bytes)
            #expect(laptopDatabase.downloads.count == 2)

            // The laptop edits the note's title: the fetched photo goes back unchanged.
            try laptop.write(Self.note("n2"), "Lake")
            try await laptop.sync()
            #expect(laptop.unacknowledgedEdits.isEmpty)
            try await phone.sync()
            #expect(phone.title(Self.note("n2")) == "Lake")
            #expect(phone.asset(Self.note("n2"), "photo")?.digest == AssetHasher.digest(of: bytes))
            try laptop.expectProjectionsHold()
        }
    }
}

/// A database whose next downloads fail as a dropped connection, before reaching the server.
final class LosingDownloads: ForwardingDatabase {
    let base: InProcessDatabase
    private let failing = Mutex(0)

    init(_ base: InProcessDatabase) { self.base = base }

    func failNextDownloads(_ count: Int) { failing.withLock { $0 = count } }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await base.modifyRecords(request)
    }

    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        let fail = failing.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if fail { throw SyncError(.networkFailure, "the connection dropped during the download") }
        return try await base.downloadAsset(request)
    }
}
