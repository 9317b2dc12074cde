import Foundation
import LogSyncServer
import SyncModel
import Testing

import func LogSyncTesting.patternedBytes

/// Asset contents do not cross zone boundaries (F134, Docs/Protocol.md "Assets"): a zone's
/// records reference, and its readers download, only the contents uploaded for that zone (or
/// referenced by its live records); for a digest the owner keeps for other zones only, every
/// answer is the one for a digest that does not exist. Tried as a share participant would:
/// alice keeps zones `Private` and `Notes`, `Notes` shared read-write with bob and read-only
/// with carol.
@Suite("Assets per zone", .timeLimit(.minutes(10)))
struct AssetZoneTests {
    static let privateZone = zoneID("Private")

    /// A digest nobody uploaded, of a content of `size` bytes.
    static func unknownDigest(_ size: Int, seed: UInt32) -> AssetDigest {
        AssetHasher.digest(of: patternedBytes(size, seed: seed) + [0xA5])
    }

    /// Expects `probe` to get the same answer for `hidden` as for `missing` (each digest masked),
    /// and returns the answer for `hidden`.
    @discardableResult
    static func expectSameAnswer(
        _ server: TestServer, _ probe: AssetProbe, hidden: AssetDigest, missing: AssetDigest, _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> AssetAnswer {
        var asked = probe
        asked.digest = hidden
        let answer = try await server.server.assetAnswer(asked)
        asked.digest = missing
        let reference = try await server.server.assetAnswer(asked)
        #expect(
            answer.masking(hidden) == reference.masking(missing),
            "\(what): a digest kept for another zone is answered\n  \(answer)\nand one that does not exist\n  \(reference)",
            sourceLocation: sourceLocation)
        return answer
    }

    // F121 F134 F153: bob and carol ask about contents alice keeps for Private only (stored, left
    // partial by a cut upload, being uploaded right now) through the zone shared with them, with
    // the right size and a wrong one, under a quota, and try to save a record referencing one:
    // every answer is the one for a digest nobody uploaded, and nothing is written. Then bob
    // uploads the whole content for Notes: it is kept once, counted once, and from then on
    // Notes's records reference it and its readers download it.
    @Test(
        "F121 F134 a participant learns nothing of the contents the owner keeps for other zones",
        arguments: Harnesses.all)
    func participantLearnsNothing(harness: any ContractHarness) async throws {
        try await withSharedNotes(harness, [("bob", .readWrite), ("carol", .readOnly)]) { shared in
            let bob = try #require(shared.participants["bob"])
            let carol = try #require(shared.participants["carol"])
            let alice = shared.alice
            let server = shared.server
            try await alice.createZone("Private")

            // Stored for Private.
            let secret = patternedBytes(50_000, seed: 40)
            let stored = try #require(try await alice.uploadAsset(secret, zone: Self.privateZone).digest)
            // Left partial by an upload for Private cut after 10,000 bytes.
            let halfBytes = patternedBytes(30_000, seed: 41)
            let half = AssetHasher.digest(of: halfBytes)
            let cut = try await server.server.syncServer.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.privateZone, digest: half, size: 30_000, device: "phone")
            try await cut.write(Array(halfBytes[..<10_000]), at: 0)
            cut.close()
            // Being uploaded for Private while bob asks.
            let busyBytes = patternedBytes(20_000, seed: 42)
            let busy = AssetHasher.digest(of: busyBytes)
            let held = try await server.server.syncServer.beginAssetUpload(
                user: "alice", scope: .private, zoneID: Self.privateZone, digest: busy, size: 20_000, device: "phone")
            defer { held.close() }
            try await held.write(Array(busyBytes[..<5_000]), at: 0)

            let asBob = AssetProbe(
                kind: .uploadStatus(size: 50_000), user: "bob", device: bob.id, scope: .shared, zoneID: shared.zoneID,
                digest: stored)
            let status = try await Self.expectSameAnswer(
                server, asBob, hidden: stored, missing: Self.unknownDigest(50_000, seed: 40), "the upload status")
            #expect(status.code == nil, "a digest nobody uploaded may be uploaded: \(status)")
            var wrongSize = asBob
            wrongSize.kind = .uploadStatus(size: 50_001)
            try await Self.expectSameAnswer(
                server, wrongSize, hidden: stored, missing: Self.unknownDigest(50_000, seed: 40),
                "the status with a wrong size")
            var partial = asBob
            partial.kind = .uploadStatus(size: 30_000)
            try await Self.expectSameAnswer(
                server, partial, hidden: half, missing: Self.unknownDigest(30_000, seed: 41),
                "the status of a partial upload")
            var uploading = asBob
            uploading.kind = .uploadStatus(size: 20_000)
            let whileBusy = try await Self.expectSameAnswer(
                server, uploading, hidden: busy, missing: Self.unknownDigest(20_000, seed: 42),
                "the status during an upload")
            #expect(whileBusy.code != .zoneBusy)
            var download = asBob
            download.kind = .download
            let refused = try await Self.expectSameAnswer(
                server, download, hidden: stored, missing: Self.unknownDigest(50_000, seed: 40), "a download by bob")
            #expect(refused.code == .assetNotAvailable)
            var carolDownload = download
            carolDownload.user = "carol"
            carolDownload.device = carol.id
            try await Self.expectSameAnswer(
                server, carolDownload, hidden: stored, missing: Self.unknownDigest(50_000, seed: 40),
                "a download by carol")
            // The owner's own requests through Notes get the same answers: per zone is for everyone.
            let asAlice = AssetProbe(
                kind: .uploadStatus(size: 50_000), user: "alice", device: alice.id, scope: .private,
                zoneID: zoneID("Notes"),
                digest: stored)
            try await Self.expectSameAnswer(
                server, asAlice, hidden: stored, missing: Self.unknownDigest(50_000, seed: 40),
                "alice's status through Notes")

            // Over quota, a content new to the zone is refused alike, kept elsewhere or not.
            server.admin.setQuota(60_000, for: "alice")
            let overQuota = try await Self.expectSameAnswer(
                server, asBob, hidden: stored, missing: Self.unknownDigest(50_000, seed: 40), "the status over quota")
            #expect(overQuota.code == .quotaExceeded)
            server.admin.setQuota(nil, for: "alice")

            // A record of Notes referencing it is refused as one referencing nothing, and
            // writes nothing to alice's log.
            let before = try server.currentToken(of: "alice")
            let hiddenRecord = newRecord(
                shared.recordID("leak"), ["photo": .asset(Asset(digest: stored, size: 50_000))])
            let hiddenFailure = try #require(try await bob.attemptSave(hiddenRecord)?.failure)
            let missing = Self.unknownDigest(50_000, seed: 40)
            let missingRecord = newRecord(
                shared.recordID("leak"), ["photo": .asset(Asset(digest: missing, size: 50_000))])
            let missingFailure = try #require(try await bob.attemptSave(missingRecord)?.failure)
            #expect(
                AssetAnswer.error(hiddenFailure).masking(stored) == AssetAnswer.error(missingFailure).masking(missing))
            #expect(hiddenFailure.code == .assetNotAvailable)
            let ownRecord = newRecord(recordID("own"), ["photo": .asset(Asset(digest: stored, size: 50_000))])
            #expect(try await alice.attemptSave(ownRecord)?.failure?.code == .assetNotAvailable)
            #expect(try server.currentToken(of: "alice") == before, "a refused save writes nothing")
            #expect(try await alice.fetchRecord(recordID("leak")) == nil)

            // Bob holds the content: he uploads all of it for Notes, which gains it without a
            // second copy (and alice's usage does not grow).
            let storage = server.server.syncServer.storage
            let owner = try #require(UInt64(shared.ownerName.dropFirst("_user".count)), "alice's registry number")
            let uploaded = try await bob.database.uploadAsset(
                AssetUploadRequest(
                    zoneID: shared.zoneID, digest: stored, size: 50_000, fileURL: try AssetFiles.write(secret)))
            #expect(uploaded.bytesSent == 50_000, "the whole content was sent")
            let kept = try await storage.perform { try storage.assets.storedDigests(owner: owner) }
            #expect(kept.filter { $0 == stored }.count == 1)
            let partials = try await storage.perform { try storage.assets.partials(owner: owner) }
            #expect(!partials.contains { $0.partial.digest == stored }, "no partial copy stays")
            #expect(
                try await bob.database.uploadAsset(
                    AssetUploadRequest(
                        zoneID: shared.zoneID, digest: stored, size: 50_000, fileURL: try AssetFiles.write(secret))
                ).bytesSent == 0)
            // Counted once: 40,000 bytes more fit under 99,000, which a second count would fill.
            server.admin.setQuota(99_000, for: "alice")
            _ = try await bob.uploadAsset(patternedBytes(40_000, seed: 45), zone: shared.zoneID)
            server.admin.setQuota(nil, for: "alice")

            try await bob.save(hiddenRecord)
            #expect(try await carol.downloadAsset(Asset(digest: stored, size: 50_000), zone: shared.zoneID) == secret)
            #expect(try await alice.downloadAsset(Asset(digest: stored, size: 50_000), zone: zoneID("Notes")) == secret)
            #expect(
                try await alice.downloadAsset(Asset(digest: stored, size: 50_000), zone: Self.privateZone) == secret)
            // The partial left for Private is still Private's: uploaded there, it resumes.
            let resumed = try await alice.database.uploadAsset(
                AssetUploadRequest(
                    zoneID: Self.privateZone, digest: half, size: 30_000, fileURL: try AssetFiles.write(halfBytes)))
            #expect(resumed.bytesSent == 20_000)
        }
    }

    // F134: the owner's records of one zone cannot reference a content uploaded for another
    // either, until it is uploaded for theirs; once one of the zone's records references it, the
    // zone's other records may too.
    @Test("F134 a record references only the contents uploaded for its zone, the owner's too", arguments: Harnesses.all)
    func ownerRecordsPerZone(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            try await phone.createZone("Private")
            let bytes = patternedBytes(4000, seed: 44)
            let photo = try await phone.uploadAsset(bytes, zone: Self.privateZone)
            let before = try server.currentToken(of: "alice")
            let refused = try await phone.attemptSave(newRecord("n1", ["photo": .asset(photo.withoutFile)]))
            #expect(refused?.failure?.code == .assetNotAvailable)
            #expect(try server.currentToken(of: "alice") == before)
            let hidden = await #expect(throws: SyncError.self) {
                try await laptop.downloadAsset(photo.withoutFile, zone: zoneID("Notes"))
            }
            #expect(hidden?.code == .assetNotAvailable)
            try await phone.save(newRecord(recordID("p1", in: "Private"), ["photo": .asset(photo.withoutFile)]))

            // Uploaded for Notes (all of it again), it is Notes's too.
            let again = try await laptop.database.uploadAsset(
                AssetUploadRequest(
                    zoneID: zoneID("Notes"), digest: try #require(photo.digest), size: 4000,
                    fileURL: try AssetFiles.write(bytes)))
            #expect(again.bytesSent == 4000)
            try await phone.save(newRecord("n1", ["photo": .asset(photo.withoutFile)]))
            try await phone.save(newRecord("n2", ["photo": .asset(photo.withoutFile)]))
            #expect(try await laptop.downloadAsset(photo.withoutFile, zone: zoneID("Notes")) == bytes)
        }
    }
}
