import Foundation
import LogSyncServer
import SyncModel
import Testing

import func LogSyncTesting.patternedBytes

/// Assets (F129, F134): contents uploaded apart from records, kept once per content, fetched by
/// digest; records that reference a content the server does not keep fail alone; bad uploads
/// store nothing; unreferenced contents go after the horizon.
@Suite("Assets", .timeLimit(.minutes(10)))
struct AssetTests {
    // F134: a 3 MB content (several pieces) travels apart from its record: the phone uploads
    // it and saves a note; the laptop fetches the note with the asset's digest and size only,
    // then downloads identical bytes. The same content uploaded again is not sent again.
    @Test("F134 an asset's content round-trips apart from its record", arguments: Harnesses.all)
    func assetRoundTrip(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let bytes = patternedBytes(3_000_000 + 17)
            let photo = try await phone.uploadAsset(bytes)
            let saved = try await phone.save(newRecord("n1", ["title": "Beach", "photo": .asset(photo)]))
            guard case .asset(let kept)? = saved["photo"] else {
                Issue.record("saved photo is \(String(describing: saved["photo"]))")
                return
            }
            #expect(kept.digest == photo.digest)
            #expect(kept.size == Int64(bytes.count))
            #expect(kept.fileURL == nil, "the server keeps no device's file")

            let fetched = try #require(try await laptop.fetchRecord(recordID("n1")))
            guard case .asset(let remote)? = fetched["photo"] else {
                Issue.record("fetched photo is \(String(describing: fetched["photo"]))")
                return
            }
            #expect(remote == photo.withoutFile)
            #expect(try await laptop.downloadAsset(remote) == bytes)

            let file = try AssetFiles.write(bytes)
            let again = try await laptop.database.uploadAsset(
                AssetUploadRequest(
                    zoneID: zoneID("Notes"), digest: try #require(photo.digest), size: Int64(bytes.count), fileURL: file
                ))
            #expect(again.bytesSent == 0, "the server keeps one copy per content")
        }
    }

    // F134: an empty file is an asset like any other.
    @Test("F134 an empty file uploads, saves and downloads", arguments: Harnesses.all)
    func emptyAsset(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let empty = try await phone.uploadAsset([])
            #expect(empty.digest == AssetHasher.digest(of: [UInt8]()))
            try await phone.save(newRecord("n1", ["nothing": .asset(empty.withoutFile)]))
            #expect(try await laptop.downloadAsset(empty.withoutFile) == [])
        }
    }

    // F134: a record's 1 MB counts its fields, not its assets' contents.
    @Test("F134 asset contents do not count against the record's 1 MB", arguments: Harnesses.all)
    func contentsDoNotCount(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, _ in
            let big = try await phone.uploadAsset(patternedBytes(2_500_000, seed: 2))
            var record = sizedRecord("n1", size: Limits.maxRecordBytes - 60)
            record["scan"] = .asset(big.withoutFile)
            #expect(record.estimatedSize <= Limits.maxRecordBytes)
            try await phone.save(record)
        }
    }

    // F134: a record referencing a content never uploaded fails alone with assetNotAvailable
    // naming the asset and the record; nothing of it is committed; its sibling is saved.
    @Test("F134 a record whose asset was never uploaded fails alone", arguments: Harnesses.all)
    func neverUploaded(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let missing = Asset(digest: AssetHasher.digest(of: patternedBytes(100, seed: 3)), size: 100)
            let orphan = newRecord("n1", ["photo": .asset(missing)])
            let sibling = newRecord("n2", ["title": "fine"])
            let response = try await phone.database.modifyRecords(
                saving: [orphan, sibling], deleting: [], atomically: false)
            let error = try #require(response.saveResults[orphan.recordID]?.failure)
            #expect(error.code == .assetNotAvailable)
            #expect(error.item == .record(orphan.recordID))
            #expect(error.message.contains(missing.digest!.description))
            #expect(error.message.contains("n1"))
            #expect(response.saveResults[sibling.recordID]?.success != nil)
            #expect(try await laptop.fetchRecord(orphan.recordID) == nil)
        }
    }

    // F134: bytes that hash to another digest than announced store nothing
    // (assetFileModified naming the asset); a size over the limit is limitExceeded; a digest
    // nobody uploaded cannot be downloaded.
    @Test("F134 bad uploads store nothing", arguments: Harnesses.all)
    func badUploads(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let announced = patternedBytes(1_500_000, seed: 4)
            let digest = AssetHasher.digest(of: announced)
            var other = announced
            other[1_234_567] ^= 0x40
            let file = try AssetFiles.write(other)
            let mismatch = await #expect(throws: SyncError.self) {
                try await phone.database.uploadAsset(
                    AssetUploadRequest(
                        zoneID: zoneID("Notes"), digest: digest, size: Int64(announced.count), fileURL: file))
            }
            #expect(mismatch?.code == .assetFileModified)
            #expect(mismatch?.message.contains(digest.description) == true)
            let download = await #expect(throws: SyncError.self) {
                try await laptop.downloadAsset(Asset(digest: digest, size: Int64(announced.count)))
            }
            #expect(download?.code == .assetNotAvailable)
            let record = newRecord("n1", ["photo": .asset(Asset(digest: digest, size: Int64(announced.count)))])
            #expect(try await phone.attemptSave(record)?.failure?.code == .assetNotAvailable)

            let tooBig = await #expect(throws: SyncError.self) {
                try await phone.database.uploadAsset(
                    AssetUploadRequest(
                        zoneID: zoneID("Notes"), digest: digest, size: Limits.maxAssetBytes + 1, fileURL: file))
            }
            #expect(tooBig?.code == .limitExceeded)
        }
    }

    // F134, F153: an asset's content counts against its owner's quota.
    @Test("F153 asset contents count against the quota", arguments: Harnesses.all)
    func quota(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, _ in
            server.admin.setQuota(1_000_000, for: "alice")
            _ = try await phone.uploadAsset(patternedBytes(600_000, seed: 5))
            let error = await #expect(throws: SyncError.self) {
                _ = try await phone.uploadAsset(patternedBytes(600_000, seed: 6))
            }
            #expect(error?.code == .quotaExceeded)
        }
    }

    // F134: a content no live record references goes after the horizon: deleting the note and
    // collecting removes it, and a record can no longer reference it until it is uploaded again.
    @Test("F134 unreferenced contents are deleted after the horizon", arguments: Harnesses.all)
    func collection(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            let bytes = patternedBytes(200_000, seed: 7)
            let photo = try await phone.uploadAsset(bytes)
            let kept = try await phone.uploadAsset(patternedBytes(1000, seed: 8))
            try await phone.save(newRecord("n1", ["photo": .asset(photo.withoutFile)]))
            try await phone.save(newRecord("n2", ["photo": .asset(kept.withoutFile)]))

            // Referenced: a collection with any horizon keeps both.
            let first = try await server.admin.collectAssets(
                of: "alice", unreferencedBefore: Date().addingTimeInterval(3600))
            #expect(first.deleted.isEmpty)
            #expect(try await laptop.downloadAsset(photo.withoutFile) == bytes)

            let deletion = try await phone.database.modifyRecords(saving: [], deleting: [recordID("n1")])
            #expect(deletion.deleteResults[recordID("n1")]?.success != nil)
            // Before the horizon: still there for a device that fetched n1 just before.
            let early = try await server.admin.collectAssets(
                of: "alice", unreferencedBefore: Date().addingTimeInterval(-3600))
            #expect(early.deleted.isEmpty)
            #expect(try await laptop.downloadAsset(photo.withoutFile) == bytes)

            let late = try await server.admin.collectAssets(
                of: "alice", unreferencedBefore: Date().addingTimeInterval(3600))
            #expect(late.deleted == [try #require(photo.digest)])
            let gone = await #expect(throws: SyncError.self) { try await laptop.downloadAsset(photo.withoutFile) }
            #expect(gone?.code == .assetNotAvailable)
            #expect(
                try await phone.attemptSave(newRecord("n3", ["photo": .asset(photo.withoutFile)]))?.failure?.code
                    == .assetNotAvailable)
            #expect(try await laptop.downloadAsset(kept.withoutFile) == patternedBytes(1000, seed: 8))

            // Uploaded again, it is kept again.
            _ = try await phone.uploadAsset(bytes)
            try await phone.save(newRecord("n3", ["photo": .asset(photo.withoutFile)]))
        }
    }

    // F134: deleting a zone drops its records' references, so their contents can go.
    @Test("F134 a deleted zone's assets are collected", arguments: Harnesses.all)
    func zoneDeletion(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, _ in
            let photo = try await phone.uploadAsset(patternedBytes(5000, seed: 9))
            try await phone.save(
                newRecord("n1", ["photos": .list([.asset(photo.withoutFile), .asset(photo.withoutFile)])]))
            try await phone.save(newRecord("n2", ["photo": .asset(photo.withoutFile)]))
            try await phone.deleteZone("Notes")
            let collected = try await server.admin.collectAssets(
                of: "alice", unreferencedBefore: Date().addingTimeInterval(3600))
            #expect(collected.deleted == [try #require(photo.digest)])
        }
    }

    // F121, F134: a participant with read-write permission uploads an asset into the owner's
    // shared zone and saves a record with it; the owner downloads the content; a participant
    // reads only the contents the shared zone's records reference.
    @Test("F121 F134 a participant's asset in a shared zone", arguments: Harnesses.all)
    func sharedZoneAsset(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite), ("carol", .readOnly)]) { shared in
            let bob = try #require(shared.participants["bob"])
            let carol = try #require(shared.participants["carol"])
            let bytes = patternedBytes(70_000, seed: 10)
            let drawing = try await bob.uploadAsset(bytes, zone: shared.zoneID)
            try await bob.save(newRecord(shared.recordID("d1"), ["drawing": .asset(drawing.withoutFile)]))

            let record = try #require(try await shared.alice.fetchRecord(recordID("d1")))
            guard case .asset(let asset)? = record["drawing"] else {
                Issue.record("no drawing in \(record)")
                return
            }
            #expect(try await shared.alice.downloadAsset(asset) == bytes)
            #expect(try await carol.downloadAsset(asset, zone: shared.zoneID) == bytes)

            let readOnly = await #expect(throws: SyncError.self) {
                _ = try await carol.uploadAsset(patternedBytes(10, seed: 11), zone: shared.zoneID)
            }
            #expect(readOnly?.code == .permissionFailure)
            // A content alice keeps for a zone she does not share stays hers: carol, who knows
            // its digest, cannot read it through the zone shared with her.
            try await shared.alice.createZone("Diary")
            let secretBytes = patternedBytes(900, seed: 12)
            let secret = try await shared.alice.uploadAsset(secretBytes, zone: zoneID("Diary"))
            try await shared.alice.save(newRecord(recordID("d1", in: "Diary"), ["page": .asset(secret.withoutFile)]))
            #expect(try await shared.alice.downloadAsset(secret.withoutFile, zone: zoneID("Diary")) == secretBytes)
            let hidden = await #expect(throws: SyncError.self) {
                try await carol.downloadAsset(secret.withoutFile, zone: shared.zoneID)
            }
            #expect(hidden?.code == .assetNotAvailable)
            let stranger = try await shared.server.device("dave", "phone", scope: .shared)
            let refused = await #expect(throws: SyncError.self) {
                try await stranger.downloadAsset(asset, zone: shared.zoneID)
            }
            #expect(refused?.code == .zoneNotFound)
        }
    }
}

extension Result {
    /// The success value, or `nil` for a failure.
    var success: Success? {
        if case .success(let value) = self { value } else { nil }
    }
}
