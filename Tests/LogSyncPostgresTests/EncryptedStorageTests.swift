import Foundation
import LogSync
import LogSyncPostgres
import LogSyncServer
import LogSyncTesting
import PostgresProcess
import SyncModel
import Testing

/// The PostgreSQL store holds only ciphertext of encrypted fields (F129, Docs/Encryption.md): a
/// phone saves a note with an encrypted field through a server on PostgreSQL, every row of every
/// table is read back as text, and neither the plaintext nor its hex (how PostgreSQL shows
/// `bytea`) is there; the user's laptop still reads it.
@Suite("F129 encrypted fields in the PostgreSQL store")
struct EncryptedStorageTests {
    @Test("F129 no table of the PostgreSQL store holds the plaintext of an encrypted field; a second device reads it")
    func noPlaintextInTables() async throws {
        try await withServerOnPostgres("enc") { server, storage, directory, url in

            let secret = "PG-PLAINTEXT-SENTINEL-91c2"
            let notes = RecordZone.ID(zoneName: "Notes")
            let n1 = Record.ID(recordName: "n1", zoneID: notes)
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(notes)
            try phone.write(n1, "Visible title")
            try phone.encrypt(n1, "diagnosis", .string(secret))
            try await phone.sync()
            #expect(phone.unacknowledgedEdits.isEmpty)

            let pool = PostgresPool(url: try PostgresURL(url), size: 1, logger: quietLogger)
            let tables = try await pool.run {
                try pool.withSession { session in
                    try session.query(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"
                    )
                    .map { try $0.decode(String.self) }
                }
            }
            #expect(tables.contains("logsync_entries") && tables.contains("logsync_index"), "\(tables)")
            var dump = ""
            for table in tables {
                let rows = try await pool.run {
                    try pool.withSession { session in
                        try session.query("SELECT t::text FROM \"\(table)\" t").map { try $0.decode(String.self) }
                    }
                }
                dump += rows.joined(separator: "\n")
            }
            let hex = Array(secret.utf8).map { String(format: "%02x", $0) }.joined()
            #expect(!dump.contains(secret))
            #expect(!dump.contains(hex))
            // The plain title is there, in the same rows: the check reads what the store holds.
            let titleHex = Array("Visible title".utf8).map { String(format: "%02x", $0) }.joined()
            #expect(dump.contains("Visible title") || dump.contains(titleHex))

            let laptop = try TestDevice("laptop", server: server, directory: directory)
            // The laptop registers its key; the zone waits for it.
            await #expect(throws: SyncError.self) { try await laptop.sync() }
            try await phone.sync()  // wraps the zone's key for it
            try await laptop.sync()
            #expect(laptop.decrypted(n1, "diagnosis") == .string(secret))
        }
    }
}
