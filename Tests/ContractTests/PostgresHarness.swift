import Foundation
import LogSyncHTTPServer
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel

/// The server in this process on the PostgreSQL store: a fresh database of the test process's
/// PostgreSQL server (started on first use) for each server the suite starts.
struct InProcessPostgresHarness: ContractHarness {
    var description: String { "in-process on PostgreSQL" }

    func start(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> any ContractServer {
        InProcessServer(server: try await PostgresHarnessSupport.server(in: directory, now: now))
    }
}

/// The HTTP server on the PostgreSQL store.
struct HTTPPostgresHarness: ContractHarness {
    var description: String { "HTTP on PostgreSQL" }

    func start(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> any ContractServer {
        try await HTTPHarness.start(try await PostgresHarnessSupport.server(in: directory, now: now))
    }
}

enum PostgresHarnessSupport {
    /// A `SyncServer` on a new, empty database.
    static func server(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> SyncServer {
        let url = try await PostgresTestServer.shared().createDatabase()
        let storage = try PostgresStorage(url: url, connections: 1)
        return try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast, now: now), storage: storage)
    }
}
