import Foundation
import LogSyncServer
import SyncModel

/// The user management of the admin API (Docs/Protocol.md, "Admin API"): what the admin routes
/// and `logsync-server user …` both run, so that the two never differ.
///
/// ```swift
/// let admin = AdminOperations(server: server, tokens: tokens)
/// try admin.createUser("alice", email: "alice@example.com")
/// let issued = try admin.mintSession(for: "alice", device: "phone")
/// try admin.deleteUser("alice")     // shares end, data and credentials go
/// ```
public struct AdminOperations: Sendable {
    /// The server whose users these are.
    public let server: SyncServer
    /// Their bearer tokens, and their sessions (``TokenStore/sessions``) where the server has some.
    public let tokens: TokenStore

    public init(server: SyncServer, tokens: TokenStore) {
        self.server = server
        self.tokens = tokens
    }

    /// A registered user, with what the server knows of them cheaply.
    public struct UserSummary: Sendable, Hashable {
        public var user: UserID
        /// The address by which share owners invite them, if one was registered.
        public var emailAddress: String?
        /// How many devices are signed in as sessions.
        public var sessions: Int
    }

    /// What ``revokeCredentials(of:)`` took away.
    public struct Revoked: Sendable, Hashable {
        /// Sessions ended (their push channels with them).
        public var sessions: Int
        /// Bearer tokens revoked (their push channels with them).
        public var tokens: Int
    }

    /// The most users one page lists.
    public static let maxUsersPerPage = 1000

    /// Up to `limit` registered users after `after`, in the order of their IDs' UTF-8 bytes,
    /// each with their e-mail address and signed-in sessions: a read of the registry's index and
    /// one of the sessions' index (a look-up per user listed), never of their records.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for a `limit` outside 1…1000; storage errors.
    public func users(after: UserID? = nil, limit: Int = 100) throws -> [UserSummary] {
        guard (1...Self.maxUsersPerPage).contains(limit) else {
            throw SyncError(.invalidArguments, "limit must be from 1 to \(Self.maxUsersPerPage), not \(limit)")
        }
        let users = try server.users(after: after, limit: limit)
        let counts = try tokens.sessions?.sessionCounts(of: users.map(\.user)) ?? [:]
        return users.map { registered in
            UserSummary(
                user: registered.user, emailAddress: registered.emailAddress, sessions: counts[registered.user] ?? 0)
        }
    }

    /// Registers `user`, with `email` if given (replacing the address they had; without one,
    /// their address stays): the same call again changes nothing.
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming an invalid user ID or address, or an
    ///   address another user has (nothing is written then); storage errors.
    @discardableResult
    public func createUser(_ user: UserID, email: String? = nil) throws -> UserSummary {
        try user.validate()
        if let email { try UserIdentity.validate(emailAddress: email) }
        try server.registerUser(user, emailAddress: email)
        return UserSummary(
            user: user, emailAddress: try server.registeredUser(user)?.emailAddress,
            sessions: try tokens.sessions?.sessions(of: user).count ?? 0)
    }

    /// A new session for `device` of the registered `user`, as a sign-in would give (for apps
    /// with their own login). A session the device had ends.
    ///
    /// - Throws: `SyncError(.serverRejectedRequest)` when the server keeps no sessions;
    ///   `SyncError(.unknownItem)` for a user not registered; `SyncError(.invalidArguments)`
    ///   naming an invalid user ID, device ID or name (nothing is written then); storage errors.
    public func mintSession(for user: UserID, device: DeviceID, name: String = "") throws -> SessionStore.Issued {
        guard let sessions = tokens.sessions else {
            throw SyncError(.serverRejectedRequest, "this server keeps no sessions")
        }
        try user.validate()
        try device.validate()
        guard try server.isRegistered(user) else {
            throw SyncError(.unknownItem, "\(user) is not registered; create the user first")
        }
        return try sessions.create(user: user, device: device, name: name)
    }

    /// Ends every session of `user` and revokes every bearer token of theirs: their requests
    /// get 401 and their push channels close at once on this node (on every node of a
    /// PostgreSQL store; within a quarter of a second on a server process sharing an LMDB
    /// directory).
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an invalid user ID; storage errors.
    @discardableResult
    public func revokeCredentials(of user: UserID) throws -> Revoked {
        try user.validate()
        let sessions = try tokens.sessions?.revokeAll(of: user) ?? 0
        return Revoked(sessions: sessions, tokens: try revokeTokens(of: user))
    }

    /// Revokes `user`'s bearer tokens; a token file not written yet holds none.
    private func revokeTokens(of user: UserID) throws -> Int {
        if let file = tokens.file, !FileManager.default.fileExists(atPath: file.path) {
            return tokens.forget(.user(user))
        }
        return try tokens.revoke(.user(user))
    }

    /// Deletes `user` and all their data (`SyncServer.deleteUser(_:)`: their shares end for
    /// participants, they leave others' shares, their databases and asset contents go, and their
    /// registration), after revoking their sessions and tokens, so that no request of theirs
    /// runs meanwhile. Returns whether they were registered; a user who was not still loses any
    /// credential they had.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an invalid user ID; a share that could not be
    ///   ended or left; storage errors. Deleting again finishes what a failure left.
    @discardableResult
    public func deleteUser(_ user: UserID) throws -> Bool {
        try revokeCredentials(of: user)
        let existed = try server.deleteUser(user)
        // Told again, deleting nothing: every node sharing a PostgreSQL store forgets the user's
        // number and open databases as it hears it, after the deletion.
        _ = try revokeTokens(of: user)
        return existed
    }
}
