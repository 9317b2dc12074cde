import ChildProcesses
import Foundation
import LogSyncHTTP
import SyncModel
import TemporaryDirectory
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A `logsync-server` process killed in the middle of an asset upload (F134): everything it
/// acknowledged is there after the restart, the cut upload left only a partial copy, and
/// `collect-assets` removes that, leaving no orphan.
@Suite("An asset upload cut by SIGKILL", .timeLimit(.minutes(3)))
struct AssetServerKillTests {
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    /// The files under `directory/users/*/assets`, as `u<N>/<name>` and `u<N>/partial/<name>`.
    static func assetFiles(in data: URL) -> [String] {
        let users = data.appendingPathComponent("users")
        var files: [String] = []
        for user in (try? FileManager.default.contentsOfDirectory(atPath: users.path)) ?? [] {
            let assets = users.appendingPathComponent(user).appendingPathComponent("assets")
            for name in (try? FileManager.default.contentsOfDirectory(atPath: assets.path)) ?? []
            where name != "partial" {
                files.append("\(user)/\(name)")
            }
            let partial = assets.appendingPathComponent("partial")
            for name in (try? FileManager.default.contentsOfDirectory(atPath: partial.path)) ?? [] {
                files.append("\(user)/partial/\(name)")
            }
        }
        return files.sorted()
    }

    /// The path of a file ``assetFiles(in:)`` names (`u<N>/partial/<name>` is in `users/u<N>/assets/partial`).
    static func path(of file: String, in data: URL) -> String {
        let parts = file.split(separator: "/", maxSplits: 1)
        return data.appendingPathComponent("users").appendingPathComponent(String(parts[0]))
            .appendingPathComponent("assets").appendingPathComponent(String(parts[1])).path
    }

    static func size(of path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    @Test("F134 a server killed during an upload loses nothing acknowledged and leaves no orphan after collect-assets")
    func killedDuringUpload() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("server")
            let added = try await ChildProcess.run(["user", "add", "alice", "--data", data.path])
            let token = added.output.trimmingCharacters(in: .whitespacesAndNewlines)
            func makeClient(port: Int) -> HTTPSyncClient {
                // No stall gives an upload up while the test holds it (only the kill ends it).
                HTTPSyncClient(
                    .init(
                        serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(token),
                        device: DeviceID("phone"),
                        reconnect: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(100)),
                        assetStallTimeout: .seconds(3600)))
            }
            func serve() async throws -> (ChildProcess, HTTPSyncClient, port: Int) {
                // Nor does the server cut a body held back: the upload stays open until the kill.
                let server = try ChildProcess.start([
                    "--data", data.path, "--port", "0", "--request-body-timeout", "3600", "--request-body-min-rate",
                    "0",
                ])
                let port = try await server.waitForPort()
                return (server, makeClient(port: port), port)
            }
            let zone = RecordZone.ID(zoneName: "Photos")
            let files = directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)

            // The phone uploads a photo and saves a record with it: both acknowledged.
            let (server, client, port) = try await serve()
            let database = client.database(.private)
            _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            let photo = Self.bytes(2_000_000, seed: 1)
            let photoFile = files.appendingPathComponent("photo")
            try Data(photo).write(to: photoFile)
            let photoDigest = AssetHasher.digest(of: photo)
            _ = try await database.uploadAsset(
                AssetUploadRequest(
                    zoneID: zone, digest: photoDigest, size: Int64(photo.count), fileURL: photoFile))
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "beach", zoneID: zone))
            note["photo"] = .asset(Asset(digest: photoDigest, size: Int64(photo.count)))
            let saved = try await database.modifyRecords(saving: [note], deleting: [])
            _ = try #require(saved.saveResults[note.recordID]).get()

            // A 60 MB video is on its way when the server is killed: it goes through a proxy
            // that lets its first 30 MB through and holds back the rest, so that the server is
            // killed with the upload cut midway, however fast or slow the machine.
            let video = Self.bytes(60_000_000, seed: 2)
            let videoFile = files.appendingPathComponent("video")
            try Data(video).write(to: videoFile)
            let videoDigest = AssetHasher.digest(of: video)
            let proxy = try CuttingProxy(upstreamPort: port, direction: .toServer, after: 30_000_000, cut: .stall)
            defer { proxy.close() }
            let uploader = makeClient(port: proxy.port)
            let upload = Task {
                try await uploader.database(.private).uploadAsset(
                    AssetUploadRequest(
                        zoneID: zone, digest: videoDigest, size: Int64(video.count), fileURL: videoFile))
            }
            // The partial of the content for the zone (`<digest>.<zone incarnation>`), once the
            // server has written most of what came through.
            func partialSize() -> Int64? {
                Self.assetFiles(in: data).first { $0.contains("partial/\(videoDigest.hex).") }
                    .map { Self.size(of: Self.path(of: $0, in: data)) }
            }
            let deadline = ContinuousClock.now + .seconds(120)  // a bound for a broken test only
            var held = false
            while !held, ContinuousClock.now < deadline {
                held = proxy.cuts == 1 && (partialSize() ?? 0) >= 20_000_000
                if !held { try await Task.sleep(for: .milliseconds(5)) }
            }
            #expect(
                held,
                "30 MB of the video reached the server, the rest held back: \(proxy.cuts) cuts, \(Self.assetFiles(in: data))"
            )
            server.send(SIGKILL)
            let killed = await server.finish()
            #expect(killed.status == 128 + SIGKILL, "\(killed)")
            let cutAt = try #require(partialSize())
            #expect(cutAt < Int64(video.count), "the server was killed with \(cutAt) bytes of the video")
            await #expect(throws: (any Error).self) { _ = try await upload.value }
            uploader.close()
            client.close()

            // Restarted on the same data: the record and its photo are there, the video is not.
            let (again, relaunched, _) = try await serve()
            let after = relaunched.database(.private)
            let fetched = try await after.fetchZoneChanges(zoneID: zone, since: nil)
            let record = try #require(fetched.modifications.first { $0.record.recordID == note.recordID }?.record)
            #expect(record["photo"] == .asset(Asset(digest: photoDigest, size: Int64(photo.count))))
            let destination = files.appendingPathComponent("photo-again")
            _ = try await after.downloadAsset(
                AssetDownloadRequest(
                    zoneID: zone, digest: photoDigest, size: Int64(photo.count), destination: destination))
            #expect(Array(try Data(contentsOf: destination)) == photo)
            let missing = await #expect(throws: SyncError.self) {
                _ = try await after.downloadAsset(
                    AssetDownloadRequest(
                        zoneID: zone, digest: videoDigest, size: Int64(video.count),
                        destination: files.appendingPathComponent("video-again")))
            }
            #expect(missing?.code == .assetNotAvailable)
            relaunched.close()
            #expect(try await again.terminate().status == 0)

            // The cleanup removes the cut upload's partial copy and nothing else.
            let collected = try await ChildProcess.run(["collect-assets", "--data", data.path, "--horizon", "0"])
            #expect(collected.status == 0, "\(collected)")
            #expect(collected.output.contains("alice: deleted 0, unlogged 0, partial 1"), "\(collected)")
            let left = Self.assetFiles(in: data)
            #expect(left.count == 1 && left.first?.hasSuffix("/\(photoDigest.hex)") == true, "\(left)")
        }
    }
}
