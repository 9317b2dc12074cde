import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess

/// A `SyncServer` on a new database of the test's PostgreSQL, its local directory a temporary
/// one of its own named after `name` (for `body`'s files too), shut down and removed after
/// `body`, which gets the database's URL as well.
func withServerOnPostgres(
    _ name: String,
    _ body: (_ server: SyncServer, _ storage: PostgresStorage, _ directory: URL, _ url: String) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "logsync-pg-\(name)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let url = try await PostgresTestServer.shared().createDatabase()
    let storage = try await PostgresStorage.open(url: url, connections: 1)
    let server = try await onOwnThread {
        try SyncServer(
            SyncServer.Configuration(directory: directory.appendingPathComponent("server"), durability: .fast),
            storage: storage)
    }
    defer { server.shutdown() }
    try await body(server, storage, directory, url)
}
