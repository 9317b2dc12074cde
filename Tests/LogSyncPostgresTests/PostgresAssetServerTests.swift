import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Testing

import func LogSyncTesting.patternedBytes

/// Assets through the server's rules on PostgreSQL, across two nodes of one database.
@Suite("Assets on a PostgreSQL server")
struct PostgresAssetServerTests {
    /// An upload cut on one node resumes on the other; the record referencing the content is
    /// saved, its content downloads whole from either node; once the record is deleted,
    /// collecting removes the content and the abandoned partial, and a download then fails.
    @Test("upload, resume on another node, save, download, collect")
    func uploadSaveDownloadCollect() async throws {
        try await PostgresStorageTests.withTwoNodes { directory, url, node1, node2 in
            let notes = RecordZone.ID(zoneName: "Notes")
            let phone = node1.database(for: "alice", device: "phone")
            let laptop = node2.database(for: "alice", device: "laptop")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])

            let piece = AssetTransfer.chunkSize
            let bytes = patternedBytes(2 * piece + 12_345, seed: 7)
            let digest = AssetHasher.digest(of: bytes)
            let size = Int64(bytes.count)
            let file = directory.appendingPathComponent("photo")
            try Data(bytes).write(to: file)
            let request = AssetUploadRequest(zoneID: notes, digest: digest, size: size, fileURL: file)

            // The phone's upload is cut after its first piece, on node 1.
            let cut = try await node1.beginAssetUpload(
                user: "alice", scope: .private, zoneID: notes, digest: digest, size: size)
            try await cut.write(Array(bytes[0..<piece]), at: 0)
            cut.close()
            // The laptop uploads the same content through node 2: only the rest is sent.
            let uploaded = try await laptop.uploadAsset(request)
            #expect(uploaded.bytesSent == size - Int64(piece))
            #expect(uploaded.asset == Asset(digest: digest, size: size))
            #expect(try await phone.uploadAsset(request).bytesSent == 0, "a content kept already is not sent again")

            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
            note["photo"] = .asset(uploaded.asset)
            _ = try await phone.modifyRecords(saving: [note], deleting: []).saveResults[note.recordID]?.get()
            for (index, database) in [phone, laptop].enumerated() {
                let downloaded = try await database.downloadAsset(
                    AssetDownloadRequest(
                        zoneID: notes, digest: digest, size: size,
                        destination: directory.appendingPathComponent("download\(index)")))
                #expect(try Data(contentsOf: downloaded.fileURL) == Data(bytes))
                #expect(downloaded.bytesReceived == size)
            }

            // Another content's upload abandoned half-way leaves a partial behind.
            let other = patternedBytes(5000, seed: 8)
            let abandoned = try await node2.beginAssetUpload(
                user: "alice", scope: .private, zoneID: notes, digest: AssetHasher.digest(of: other), size: 5000)
            try await abandoned.write(Array(other[0..<1000]), at: 0)
            abandoned.close()

            let horizon = Date().addingTimeInterval(3600)
            let whileReferenced = try await node1.collectAssets(of: "alice", unreferencedBefore: horizon)
            #expect(whileReferenced.deleted == [])
            #expect(whileReferenced.orphansRemoved == [])
            #expect(whileReferenced.partialsRemoved == [AssetHasher.digest(of: other)])
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_assets") == 1)

            _ = try await laptop.modifyRecords(saving: [], deleting: [note.recordID])
            let collected = try await node2.collectAssets(of: "alice", unreferencedBefore: horizon)
            #expect(collected.deleted == [digest])
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_assets") == 0)
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_chunks") == 0)
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_partials") == 0)
            await #expect {
                _ = try await phone.downloadAsset(
                    AssetDownloadRequest(
                        zoneID: notes, digest: digest, size: size,
                        destination: directory.appendingPathComponent("again")))
            } throws: { error in
                (error as? SyncError)?.code == .assetNotAvailable
            }
        }
    }

    /// F134: a content kept for one zone is uploaded whole for another, through the other
    /// node: the second zone gains it, and its bytes are in the database once.
    @Test("F134 a content uploaded for a second zone is kept once")
    func secondZoneKeepsOneCopy() async throws {
        try await PostgresStorageTests.withTwoNodes { directory, url, node1, node2 in
            let (notes, diary) = (RecordZone.ID(zoneName: "Notes"), RecordZone.ID(zoneName: "Diary"))
            let phone = node1.database(for: "alice", device: "phone")
            let laptop = node2.database(for: "alice", device: "laptop")
            _ = try await phone.modifyZones(
                saving: [RecordZone(zoneID: notes), RecordZone(zoneID: diary)], deleting: [])
            let bytes = patternedBytes(2 * AssetTransfer.chunkSize + 7, seed: 10)
            let digest = AssetHasher.digest(of: bytes)
            let size = Int64(bytes.count)
            let file = directory.appendingPathComponent("photo")
            try Data(bytes).write(to: file)

            #expect(
                try await phone.uploadAsset(
                    AssetUploadRequest(zoneID: diary, digest: digest, size: size, fileURL: file)
                ).bytesSent == size)
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
            note["photo"] = .asset(Asset(digest: digest, size: size))
            let refused = try await laptop.modifyRecords(saving: [note], deleting: []).saveResults[note.recordID]
            guard case .failure(let error)? = refused else {
                Issue.record(
                    "a record of Notes referencing a content kept for Diary only was saved: \(String(describing: refused))"
                )
                return
            }
            #expect(error.code == .assetNotAvailable)
            #expect(
                try await laptop.uploadAsset(
                    AssetUploadRequest(zoneID: notes, digest: digest, size: size, fileURL: file)
                ).bytesSent == size)
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_assets") == 1)
            #expect(
                try await sqlValue(
                    url, "SELECT coalesce(sum(octet_length(bytes)), 0)::bigint FROM logsync_asset_chunks") == size)
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_asset_partials") == 0)
            _ = try await laptop.modifyRecords(saving: [note], deleting: []).saveResults[note.recordID]?.get()
            let downloaded = try await phone.downloadAsset(
                AssetDownloadRequest(
                    zoneID: notes, digest: digest, size: size, destination: directory.appendingPathComponent("download")
                ))
            #expect(try Data(contentsOf: downloaded.fileURL) == Data(bytes))
        }
    }

    /// A file of no bytes is a content like any other: it has no rows, and is stored, saved
    /// and downloaded as empty.
    @Test("an empty file uploads and downloads")
    func emptyContent() async throws {
        try await PostgresStorageTests.withNode { directory, url, node in
            let notes = RecordZone.ID(zoneName: "Notes")
            let phone = node.database(for: "alice", device: "phone")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
            let file = directory.appendingPathComponent("empty")
            try Data().write(to: file)
            let digest = AssetHasher.digest(of: [UInt8]())
            let uploaded = try await phone.uploadAsset(
                AssetUploadRequest(zoneID: notes, digest: digest, size: 0, fileURL: file))
            #expect(uploaded.asset == Asset(digest: digest, size: 0))
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
            note["file"] = .asset(uploaded.asset)
            let saved = try await phone.modifyRecords(saving: [note], deleting: []).saveResults[note.recordID]
            #expect((try saved?.get()) != nil)
            let downloaded = try await phone.downloadAsset(
                AssetDownloadRequest(
                    zoneID: notes, digest: digest, size: 0, destination: directory.appendingPathComponent("download")))
            #expect(try Data(contentsOf: downloaded.fileURL).isEmpty)
            #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_assets WHERE size = 0") == 1)
        }
    }
}
