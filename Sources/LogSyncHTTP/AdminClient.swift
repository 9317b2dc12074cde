import Foundation
import LogSyncWire
import NIOHTTP1
import NIOSSL
import SyncModel

/// What the app's own backend calls on a LogSync server's admin routes (Docs/Protocol.md,
/// "Admin API"), with an admin token (`logsync-server admin-token add`), never a user's.
///
/// ```swift
/// let admin = AdminClient(serverURL: server, adminToken: adminToken)
/// ```
public struct AdminClient: Sendable {
    /// The server's base URL, as `HTTPSyncClient.Configuration.serverURL`.
    public var serverURL: URL
    /// The admin token, sent as `Authorization: Bearer <token>`.
    public var adminToken: String
    /// How long a request may take.
    public var requestTimeout: Duration
    /// The client side of TLS, for `https` servers with a private authority.
    public var tlsConfiguration: TLSConfiguration?

    public init(
        serverURL: URL, adminToken: String, requestTimeout: Duration = .seconds(60),
        tlsConfiguration: TLSConfiguration? = nil
    ) {
        self.serverURL = serverURL
        self.adminToken = adminToken
        self.requestTimeout = requestTimeout
        self.tlsConfiguration = tlsConfiguration
    }

    var requests: JSONRequests {
        JSONRequests(
            serverURL: serverURL, requestTimeout: requestTimeout, tlsConfiguration: tlsConfiguration,
            maxResponseBytes: 64 << 20)
    }

    /// Sends an admin request with the admin token and returns its answer's body.
    func send(
        _ method: HTTPMethod, _ path: String, body: [UInt8]?, doing operation: String
    ) async throws(SyncError) -> [UInt8] {
        try await requests.send(method, path, token: adminToken, body: body, doing: "admin " + operation)
    }
}
