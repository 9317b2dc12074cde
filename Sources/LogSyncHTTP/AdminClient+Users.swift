import Foundation
import LogSyncWire
import SyncModel

/// User management (Docs/Protocol.md, "Admin API", "Users"): what `logsync-server user …` does,
/// over HTTP, for the app's own backend.
///
/// ```swift
/// let admin = AdminClient(serverURL: server, adminToken: adminToken)
/// try await admin.createUser("alice", email: "alice@example.com")
/// let tokens = try await admin.mintSession(for: "alice", device: "phone")   // as a sign-in gives
/// try await admin.deleteUser("alice")
/// ```
extension AdminClient {
    /// A page of up to `limit` users (1 to 1000; the server's default of 100 without it) whose
    /// IDs come after `after`, in the order of their IDs' UTF-8 bytes. The page's `next` is the
    /// `after` of the next page, absent on the last.
    ///
    /// - Throws: `SyncError`: `notAuthenticated` for a token that is not an admin token,
    ///   `invalidArguments` for a limit out of range, or a transport failure.
    public func users(after: String? = nil, limit: Int? = nil) async throws(SyncError) -> WireAdmin.Users {
        try requests.decoded(
            try await send(.GET, WireAdmin.usersPath(after: after, limit: limit), body: nil, doing: "list users"))
    }

    /// Registers `user`, with `email` if given; the same call again changes nothing.
    ///
    /// - Throws: `SyncError`: `invalidArguments` naming an invalid user ID or address, or an
    ///   address another user has; `notAuthenticated`; a transport failure.
    @discardableResult
    public func createUser(_ user: String, email: String? = nil) async throws(SyncError) -> WireAdmin.User {
        try requests.decoded(
            try await send(
                .POST, WireAdmin.usersPath, body: WireSessions.encode(WireAdmin.CreateUser(user: user, email: email)),
                doing: "create user"))
    }

    /// A new session for `device` of the registered `user`, the tokens a sign-in gives, for an
    /// app with its own login to hand to the device.
    ///
    /// - Throws: `SyncError`: `unknownItem` for a user not registered, `serverRejectedRequest`
    ///   for a server without sessions, `invalidArguments` naming a bad device ID or name;
    ///   `notAuthenticated`; a transport failure.
    public func mintSession(
        for user: String, device: String, name: String? = nil
    ) async throws(SyncError) -> WireSessions.Tokens {
        try requests.decoded(
            try await send(
                .POST, WireAdmin.sessionsPath(user),
                body: WireSessions.encode(WireAdmin.MintSession(device: device, name: name)), doing: "mint session"))
    }

    /// Ends every session of `user` and revokes their bearer tokens; their push channels close.
    /// Returns how many of each.
    @discardableResult
    public func revokeSessions(of user: String) async throws(SyncError) -> WireAdmin.Revoked {
        try requests.decoded(
            try await send(.DELETE, WireAdmin.sessionsPath(user), body: nil, doing: "revoke sessions"))
    }

    /// Deletes `user` and all their data; the shares they own end for their participants. The
    /// same answer whether or not the user existed.
    public func deleteUser(_ user: String) async throws(SyncError) {
        _ = try await send(.DELETE, WireAdmin.userPath(user), body: nil, doing: "delete user")
    }
}
