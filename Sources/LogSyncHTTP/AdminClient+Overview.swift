import Foundation
import LogSyncWire
import SyncModel

/// The server's state for operators (Docs/Protocol.md, "Admin API", "Overview"), and links into
/// its console.
///
/// ```swift
/// let admin = AdminClient(serverURL: server, adminToken: adminToken)
/// let page = try await admin.overview(limit: 50)
/// for user in page.users { print(user.user, user.databases.map(\.entries)) }
/// ```
extension AdminClient {
    /// A page of up to `limit` users (1 to 200; 50 without it) after `after`, with their
    /// databases' figures and connected devices (`ServerOverview`).
    ///
    /// - Throws: `SyncError`: `notAuthenticated` for a token that is not an admin token,
    ///   `invalidArguments` for a limit out of range, or a transport failure.
    public func overview(after: String? = nil, limit: Int? = nil) async throws(SyncError) -> ServerOverview {
        try requests.decoded(
            try await send(.GET, ServerOverview.path(after: after, limit: limit), body: nil, doing: "overview"))
    }

    /// A one-time link into the server's console, to `next` (a path under `/console`), which a
    /// browser opens within a minute: its path, to put after the server's base URL.
    ///
    /// - Throws: `SyncError`: `notAuthenticated`; `invalidArguments` for a `next` outside the
    ///   console; `serverRejectedRequest` (404) when the server has no console; a transport failure.
    public func consoleLink(next: String? = nil) async throws(SyncError) -> WireConsole.Link {
        try requests.decoded(
            try await send(
                .POST, WireConsole.linksPath, body: WireSessions.encode(WireConsole.LinkRequest(next: next)),
                doing: "console link"))
    }
}
