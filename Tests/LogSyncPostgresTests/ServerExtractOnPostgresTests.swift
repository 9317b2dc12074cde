import Foundation
import LogStore
import LogSync
import LogSyncPostgres
import LogSyncServer
import LogSyncTesting
import SyncModel
import Testing

/// The server's extract (Docs/Privacy.md, "The server's extract") read from the PostgreSQL store:
/// the same entries, hashed with the device bundle's key, as from LMDB.
@Suite("Server extract on PostgreSQL")
struct ServerExtractOnPostgresTests {
    @Test(
        "a user's extract from PostgreSQL names the phone's records as its bundle does, and holds none of their values")
    func extractFromPostgres() async throws {
        try await withServerOnPostgres("extract") { server, _, directory, _ in
            let notes = RecordZone.ID(zoneName: "Zone-Pangolin-4410")
            let n1 = Record.ID(recordName: "rec-Pangolin-Note-1", zoneID: notes)
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(notes)
            try phone.write(n1, "Title-Pangolin-Secret-7781")
            try await phone.sync()
            try phone.write(n1, "Title-Pangolin-Second-9902")
            try await phone.sync()
            let bundle = directory.appendingPathComponent("report.lsb")
            try phone.engine.exportSupportBundle(to: bundle)
            phone.releaseEngine()

            let extract = directory.appendingPathComponent("server.lsb")
            let (redactor, _) = try ServerExtract.redactor(forBundleAt: bundle)
            let summary = try ServerExtract.export(server, user: "alice", redactor: redactor, to: extract)
            #expect(summary.manifest.keyID == (try SupportBundle.manifest(at: bundle)).keyID)
            let last = try #require(summary.manifest.scopes["private"]).lastOffset
            #expect(last > 0 && summary.entryCount >= last)

            let log = try LogEnvironment.open(at: extract, options: .init(readOnly: true)).openLog(named: "private")
            #expect(try log.lastOffset.rawValue == last)
            var saved: [Record] = []
            var cursor = try log.entries()
            while let entry = try cursor.next() {
                if case .recordSaved(let record) = try ServerEntry(entry) { saved.append(record) }
            }
            let hashed = redactor.recordID(n1)
            #expect(saved.count == 2 && saved.allSatisfy { $0.recordID == hashed }, "\(saved.map(\.recordID))")
            #expect(saved.last?["title"] == redactor.value(.string("Title-Pangolin-Second-9902"), field: "title"))
            let bytes = try Data(contentsOf: extract.appendingPathComponent("data.mdb"))
            for text in [
                "Title-Pangolin-Secret-7781", "Title-Pangolin-Second-9902", "rec-Pangolin-Note-1", "Zone-Pangolin-4410",
            ] {
                #expect(bytes.range(of: Data(text.utf8)) == nil, "\(text) is in the extract")
            }
        }
    }
}
