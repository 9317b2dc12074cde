import Foundation
import LogSync
import LogSyncPostgres
import LogSyncServer
import LogSyncTesting
import PostgresProcess
import SyncModel
import Synchronization
import Testing

/// Support bundles in the PostgreSQL store (Docs/Protocol.md, "Support bundles"): stored after
/// verification, removed past the retention period, rows and all.
@Suite("Support bundles in the PostgreSQL store")
struct PostgresBundleTests {
    @Test(
        "a bundle past the retention period is removed by the sweep on the server's clock, an abandoned partial upload with it, and no row is left"
    )
    func retentionSweep() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The phone's bundle, from a device synced with a server of its own.
        let phoneServer = try SyncServer(.init(directory: directory.appendingPathComponent("phone-server")))
        defer { phoneServer.shutdown() }
        let phone = try TestDevice("phone", server: phoneServer, directory: directory)
        let zone = RecordZone.ID(zoneName: "Notes")
        try phone.createZone(zone)
        try phone.edit(Record.ID(recordName: "groceries", zoneID: zone), ["title": "Groceries"])
        try await phone.sync()
        let bundle = directory.appendingPathComponent("report.lsb")
        try phone.engine.exportSupportBundle(to: bundle)
        let bytes = [UInt8](try Data(contentsOf: bundle.appendingPathComponent("data.mdb")))

        // A server on PostgreSQL whose clock starts now (a partial's age is the database's
        // clock), in whole seconds as the stored description keeps them.
        let url = try await PostgresTestServer.shared().createDatabase()
        let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let clock = Mutex(start)
        var configuration = SyncServer.Configuration(
            directory: directory.appendingPathComponent("unused"), durability: .fast, now: { clock.withLock { $0 } })
        configuration.supportBundleRetention = 30 * 86_400
        let server = try SyncServer(
            configuration, storage: PostgresStorage(url: url, connections: 2, logger: quietLogger))
        defer { server.shutdown() }
        let pool = PostgresPool(url: try PostgresURL(url), size: 1, logger: quietLogger)
        defer { pool.shutdown() }
        func rows() async throws -> [Int64] {
            try await pool.run {
                try pool.withSession { session in
                    try ["logsync_bundles", "logsync_bundle_partials", "logsync_bundle_chunks"].map { table in
                        try session.query("SELECT count(*) FROM \(table)")[0].decode(Int64.self)
                    }
                }
            }
        }

        // Day 0: alice uploads the bundle; bob's upload stops half way.
        let upload = try await server.beginSupportBundleUpload(
            user: "alice", id: AssetHasher.digest(of: bytes), size: Int64(bytes.count))
        try await upload.write(bytes, at: 0)
        let stored = try await upload.finish()
        upload.close()
        #expect(stored.uploaded == start && stored.user == "alice" && stored.size == Int64(bytes.count))
        var copy = [UInt8]()
        var offset: Int64 = 0
        while true {
            let piece = try await server.readSupportBundle(stored, from: offset, maxLength: 1 << 20)
            if piece.isEmpty { break }
            copy += piece
            offset += Int64(piece.count)
        }
        #expect(copy == bytes, "the stored bundle reads back byte for byte")
        var other = bytes
        other[0] ^= 1
        let abandoned = try await server.beginSupportBundleUpload(
            user: "bob", id: AssetHasher.digest(of: other), size: Int64(bytes.count))
        try await abandoned.write(Array(other[..<(bytes.count / 2)]), at: 0)
        abandoned.close()
        let before = try await rows()
        #expect(before[0] == 1 && before[1] == 1 && before[2] >= 2, "\(before)")

        // Day 29: kept. Day 31: removed, with the partial.
        clock.withLock { $0 = $0.addingTimeInterval(29 * 86_400) }
        #expect(try await server.removeExpiredSupportBundles().isEmpty)
        #expect(try await rows() == before)
        clock.withLock { $0 = $0.addingTimeInterval(2 * 86_400) }
        #expect(try await server.removeExpiredSupportBundles().map(\.id) == [stored.id])
        #expect(try await server.supportBundles().isEmpty)
        #expect(try await rows() == [0, 0, 0])
    }
}
