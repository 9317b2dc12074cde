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
        try await PostgresHarnessSupport.start {
            InProcessServer(server: try await PostgresHarnessSupport.server(in: directory, now: now))
        }
    }
}

/// The HTTP server on the PostgreSQL store.
struct HTTPPostgresHarness: ContractHarness {
    var description: String { "HTTP on PostgreSQL" }

    func start(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> any ContractServer {
        try await PostgresHarnessSupport.start {
            try await HTTPHarness.start(try await PostgresHarnessSupport.server(in: directory, now: now))
        }
    }
}

enum PostgresHarnessSupport {
    /// At most this many servers on PostgreSQL run at once: each has its connections (a
    /// PostgreSQL process each) and threads, and the suite runs its tests in parallel on two
    /// cores; the others wait, suspended, for a turn.
    static let turns = Turns(count: 12)

    /// Starts a server with `make` once it is this server's turn; stopping it ends the turn.
    static func start(_ make: () async throws -> any ContractServer) async throws -> any ContractServer {
        try await turns.take()
        do {
            return TurnServer(inner: try await make())
        } catch {
            await turns.give()
            throw error
        }
    }

    /// A `SyncServer` on a new, empty database, made on a thread of its own (connecting,
    /// migrating and opening the registry block).
    static func server(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> SyncServer {
        let url = try await PostgresTestServer.shared().createDatabase()
        let storage = try await PostgresStorage.open(url: url, connections: 1)
        let server = try await onOwnThread {
            try SyncServer(
                SyncServer.Configuration(directory: directory, durability: .fast, now: now), storage: storage)
        }
        // Push hints reach this server's devices through its LISTEN connection: until it
        // listens, a commit's hint would be lost, and a push test would wait for it in vain.
        let deadline = ContinuousClock.now + .seconds(30)
        while !storage.isListening {
            guard ContinuousClock.now < deadline else {
                server.shutdown()
                throw PostgresHarnessError(description: "the server's push listener did not connect within 30 s")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return server
    }
}

struct PostgresHarnessError: Error, CustomStringConvertible {
    var description: String
}

/// A counting semaphore for tasks: `take` suspends while every turn is taken. A waiting task that
/// is cancelled (a test past its time limit) stops waiting and throws, so a server that never gave
/// its turn back fails the tests after it instead of hanging the run.
actor Turns {
    private var free: Int
    private var waiting: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextID: UInt64 = 0

    init(count: Int) { free = count }

    func take() async throws {
        if free > 0 {
            free -= 1
            return
        }
        let id = nextID
        nextID += 1
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    waiting.append((id, continuation))
                }
            }
        } onCancel: {
            Task { await self.cancel(id) }
        }
    }

    func give() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().continuation.resume()
        }
    }

    private func cancel(_ id: UInt64) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        waiting.remove(at: index).continuation.resume(throwing: CancellationError())
    }
}

/// A server that gives its turn back when it stops.
struct TurnServer: ContractServer {
    let inner: any ContractServer

    func database(user: UserID, scope: DatabaseScope, device: DeviceID) async throws -> any CloudDatabase {
        try await inner.database(user: user, scope: scope, device: device)
    }

    var admin: ServerAdmin { inner.admin }

    var syncServer: SyncServer { inner.syncServer }

    func assetAnswer(_ probe: AssetProbe) async throws -> AssetAnswer { try await inner.assetAnswer(probe) }

    func stop() async throws {
        defer { Task { await PostgresHarnessSupport.turns.give() } }
        try await inner.stop()
    }

    func pushChannelsReady(_ database: any CloudDatabase) async {
        await inner.pushChannelsReady(database)
    }
}
