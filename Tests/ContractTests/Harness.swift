import Foundation
import LogSyncServer
import SyncModel

/// A way of reaching a LogSync server: in process, or over HTTP on loopback, each on the LMDB
/// store and on the PostgreSQL store.
///
/// The contract suite is written once against ``ContractServer`` and `CloudDatabase`, and every
/// test runs once per harness in ``Harnesses/all``, so each transport must pass it unchanged.
protocol ContractHarness: Sendable, CustomStringConvertible {
    /// Starts a fresh server storing its data in `directory`, with the given clock.
    func start(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> any ContractServer
}

/// A running server as the contract suite sees it.
protocol ContractServer: Sendable {
    /// A device's view of `user`'s database of `scope`.
    func database(user: UserID, scope: DatabaseScope, device: DeviceID) async throws -> any CloudDatabase
    /// Server-side hooks, always the in-process `ServerAdmin` of the server behind the transport.
    var admin: ServerAdmin { get }
    /// Stops the server (and for a transport, its listener).
    func stop() async throws
    /// Returns once every push stream opened on `database` reaches the server, so that every
    /// later commit is hinted to it. In process a stream is registered when it is made.
    func pushChannelsReady(_ database: any CloudDatabase) async
    /// The server behind the transport, in this process (for setting up what no device could,
    /// such as an upload left open).
    var syncServer: SyncServer { get }
    /// What the transport answers to `probe`, exactly (`AssetProbes.swift`).
    func assetAnswer(_ probe: AssetProbe) async throws -> AssetAnswer
}

extension ContractHarness {
    /// Whether devices reach the server over HTTP (where a bad user ID never gets a token).
    var isHTTP: Bool { self is HTTPHarness || self is HTTPPostgresHarness }
}

extension ContractServer {
    func pushChannelsReady(_ database: any CloudDatabase) async {}
}

/// Every harness the contract suite runs against.
enum Harnesses {
    static let all: [any ContractHarness] = [
        InProcessHarness(), HTTPHarness(), InProcessPostgresHarness(), HTTPPostgresHarness(),
    ]

    /// The server in this process on each store: for the server's own rules where the transport
    /// adds nothing, shown at volumes that would only time the HTTP stack.
    static let inProcess: [any ContractHarness] = [InProcessHarness(), InProcessPostgresHarness()]
}

/// The server in this process: `InProcessDatabase` values straight on a `SyncServer`.
struct InProcessHarness: ContractHarness {
    var description: String { "in-process" }

    func start(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> any ContractServer {
        InProcessServer(
            server: try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast, now: now)))
    }
}

/// A `SyncServer` seen through ``ContractServer``.
struct InProcessServer: ContractServer {
    let server: SyncServer

    func database(user: UserID, scope: DatabaseScope, device: DeviceID) async throws -> any CloudDatabase {
        server.database(for: user, scope: scope, device: device)
    }

    var admin: ServerAdmin { server.admin }

    var syncServer: SyncServer { server }

    func assetAnswer(_ probe: AssetProbe) async throws -> AssetAnswer { await server.assetAnswer(probe) }

    /// Ends every push stream; the data is already committed.
    func stop() async throws {
        server.shutdown()
    }
}
