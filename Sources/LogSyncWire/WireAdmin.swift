import Foundation

/// The bodies and paths of the admin routes (Docs/Protocol.md, "Admin API"), for the app's own
/// backend with an admin token: JSON, encoded and decoded with `WireSessions.encode(_:)` and
/// `WireSessions.decode(_:from:)` (dates as ISO 8601 strings in UTC).
public enum WireAdmin {
    /// `GET` (list) and `POST` (create) `/v1/admin/users`.
    public static var usersPath: String { "/\(WireProtocol.versionPath)/admin/users" }

    /// `GET /v1/admin/users?after=USER&limit=N`: a page of users, `after` percent-encoded.
    public static func usersPath(after: String?, limit: Int?) -> String {
        var query: [String] = []
        if let after { query.append("after=" + percentEncoded(after)) }
        if let limit { query.append("limit=\(limit)") }
        return usersPath + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
    }

    /// `DELETE /v1/admin/users/{user}`: the user's path, its ID percent-encoded.
    public static func userPath(_ user: String) -> String {
        usersPath + "/" + percentEncoded(user)
    }

    /// `POST` (mint) and `DELETE` (revoke all) `/v1/admin/users/{user}/sessions`.
    public static func sessionsPath(_ user: String) -> String {
        userPath(user) + "/sessions"
    }

    /// The most users one page lists.
    public static let maxUsersPerPage = 1000
    /// The users one page lists when the request does not say.
    public static let defaultUsersPerPage = 100

    /// `text` with every byte but letters, digits and `-._~` percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        var allowed = CharacterSet()
        allowed.insert(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// One user as the server knows them cheaply: from the registry and the sessions' index.
    public struct User: Codable, Sendable, Hashable {
        public var user: String
        /// The address by which share owners invite them, if one was registered.
        public var email: String?
        /// How many devices are signed in as sessions (bearer tokens are not counted).
        public var sessions: Int

        public init(user: String, email: String? = nil, sessions: Int = 0) {
            self.user = user
            self.email = email
            self.sessions = sessions
        }
    }

    /// The answer to `GET /v1/admin/users`.
    public struct Users: Codable, Sendable, Hashable {
        /// In the order of the IDs' UTF-8 bytes.
        public var users: [User]
        /// What the next page's `after` is; absent on the last page.
        public var next: String?

        public init(users: [User], next: String? = nil) {
            self.users = users
            self.next = next
        }
    }

    /// The body of `POST /v1/admin/users`.
    public struct CreateUser: Codable, Sendable, Hashable {
        /// The user ID: 1 to 511 bytes of UTF-8 without control characters or surrounding spaces.
        public var user: String
        /// An e-mail address by which share owners invite them.
        public var email: String?

        public init(user: String, email: String? = nil) {
            self.user = user
            self.email = email
        }
    }

    /// The body of `POST /v1/admin/users/{user}/sessions`.
    public struct MintSession: Codable, Sendable, Hashable {
        /// The device the session is for (1 to 255 bytes of UTF-8), as it sends `LogSync-Device`.
        public var device: String
        /// A name for the user to recognise the device by.
        public var name: String?

        public init(device: String, name: String? = nil) {
            self.device = device
            self.name = name
        }
    }

    /// The answer to `DELETE /v1/admin/users/{user}/sessions`.
    public struct Revoked: Codable, Sendable, Hashable {
        /// How many sessions ended.
        public var sessions: Int
        /// How many bearer tokens were revoked.
        public var tokens: Int

        public init(sessions: Int, tokens: Int) {
            self.sessions = sessions
            self.tokens = tokens
        }
    }
}
