import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import SyncModel
import Synchronization

/// The server behind a real loopback socket: `HTTPSyncServer` on port 0, and each device an
/// `HTTPSyncClient` with a bearer token of its user.
struct HTTPHarness: ContractHarness {
    var description: String { "HTTP" }

    func start(in directory: URL, now: @escaping @Sendable () -> Date) async throws -> any ContractServer {
        try await Self.start(
            try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast, now: now)))
    }

    /// `server` behind a loopback HTTP listener on a free port.
    static func start(_ server: SyncServer) async throws -> any ContractServer {
        let tokens = TokenStore()
        // The contract is the database's: per-client request limits are the transport's, shown
        // by ClientLimitTests, and would refuse the suite's floods of requests from one address.
        var configuration = HTTPSyncServer.Configuration(port: 0)
        configuration.userLimits = .unlimited
        configuration.addressLimits = .unlimited
        let running = try await RunningHTTPSyncServer.start(
            HTTPSyncServer(server: server, tokens: tokens, configuration: configuration))
        return HTTPContractServer(server: server, tokens: tokens, running: running)
    }
}

/// A running HTTP server as the contract suite sees it: one token per user, one client per
/// device database.
final class HTTPContractServer: ContractServer {
    let server: SyncServer
    let tokens: TokenStore
    let running: RunningHTTPSyncServer
    private let state = Mutex<(tokens: [UserID: String], clients: [HTTPSyncClient])>(([:], []))

    init(server: SyncServer, tokens: TokenStore, running: RunningHTTPSyncServer) {
        self.server = server
        self.tokens = tokens
        self.running = running
    }

    /// The bearer token of `user`, made the first time it is asked for.
    func token(of user: UserID) throws -> String {
        try state.withLock { state in
            if let token = state.tokens[user] { return token }
            let token = TokenStore.generateToken()
            try tokens.add(token: token, for: user)
            state.tokens[user] = token
            return token
        }
    }

    func database(user: UserID, scope: DatabaseScope, device: DeviceID) async throws -> any CloudDatabase {
        let client = HTTPSyncClient(
            .init(
                serverURL: URL(string: "http://127.0.0.1:\(running.port)")!, credentials: .token(try token(of: user)),
                device: device)
        )
        state.withLock { $0.clients.append(client) }
        return client.database(scope)
    }

    var admin: ServerAdmin { server.admin }

    var syncServer: SyncServer { server }

    func pushChannelsReady(_ database: any CloudDatabase) async {
        await (database as? HTTPCloudDatabase)?.client.waitForPushChannels()
    }

    /// Closes every client's push streams, then stops the server gracefully.
    func stop() async throws {
        for client in state.withLock({ $0.clients }) { client.close() }
        try await running.stop()
        server.shutdown()
    }
}
