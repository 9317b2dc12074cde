import Foundation

/// The server's state for operators (Docs/Protocol.md, "Admin API", "Overview"): a page of
/// users with their databases' figures, the devices connected to them, and totals. What
/// `GET /v1/admin/overview` answers, `logsync-server status` prints and the console draws.
///
/// Every figure is read from a log's end or a small index table (zones, shares, asset
/// contents), never from the records, so a page costs the same for a user with a million
/// records.
public struct ServerOverview: Codable, Sendable, Hashable {
    /// `GET /v1/admin/overview`.
    public static var path: String { "/\(WireProtocol.versionPath)/admin/overview" }

    /// `GET /v1/admin/overview?after=USER&limit=N`, `after` percent-encoded.
    public static func path(after: String?, limit: Int?) -> String {
        var query: [String] = []
        if let after { query.append("after=" + WireAdmin.percentEncoded(after)) }
        if let limit { query.append("limit=\(limit)") }
        return path + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
    }

    /// The most users one page shows, and the default.
    public static let maxUsersPerPage = 200
    public static let defaultUsersPerPage = 50

    /// One database of a user.
    public struct Database: Codable, Sendable, Hashable {
        /// `private` or `shared`.
        public var scope: String
        /// The log's length in entries: the offset of its last entry.
        public var entries: UInt64
        /// When the last entry was committed; absent for an empty log.
        public var lastCommit: Date?
        /// The size of the file holding the user's logs (every scope together: the LMDB
        /// environment); absent on a store that keeps logs elsewhere (PostgreSQL).
        public var storeBytes: UInt64?
        /// Live custom zones; for a shared database, the zones shared with the user.
        public var zones: Int
        /// Live shares the user owns in it.
        public var shares: Int
        /// Asset contents kept for its records and their bytes (at most 10,000 counted:
        /// `assetsCapped` then).
        public var assets: Int
        public var assetBytes: UInt64
        public var assetsCapped: Bool
        /// Bytes of record data and assets counted against the user's quota (F153).
        public var usage: UInt64

        public init(
            scope: String, entries: UInt64, lastCommit: Date?, storeBytes: UInt64?, zones: Int, shares: Int,
            assets: Int, assetBytes: UInt64, assetsCapped: Bool, usage: UInt64
        ) {
            self.scope = scope
            self.entries = entries
            self.lastCommit = lastCommit
            self.storeBytes = storeBytes
            self.zones = zones
            self.shares = shares
            self.assets = assets
            self.assetBytes = assetBytes
            self.assetsCapped = assetsCapped
            self.usage = usage
        }
    }

    /// A device with a push channel open to one of the user's databases on the node answering.
    public struct Channel: Codable, Sendable, Hashable {
        public var scope: String
        /// The device's ID; absent for a channel opened without one.
        public var device: String?

        public init(scope: String, device: String?) {
            self.scope = scope
            self.device = device
        }
    }

    /// One user.
    public struct User: Codable, Sendable, Hashable {
        public var user: String
        public var email: String?
        /// The devices signed in as sessions (their IDs), if the server keeps sessions.
        public var sessionDevices: [String]
        /// The push channels open to the user's databases on the node answering.
        public var channels: [Channel]
        /// The user's quota in bytes, if one is set.
        public var quota: Int?
        public var databases: [Database]

        public init(
            user: String, email: String?, sessionDevices: [String], channels: [Channel], quota: Int?,
            databases: [Database]
        ) {
            self.user = user
            self.email = email
            self.sessionDevices = sessionDevices
            self.channels = channels
            self.quota = quota
            self.databases = databases
        }
    }

    /// Sums over the users of the page, and the node's push channels.
    public struct Totals: Codable, Sendable, Hashable {
        public var users: Int
        public var entries: UInt64
        public var storeBytes: UInt64
        public var zones: Int
        public var shares: Int
        public var assets: Int
        public var assetBytes: UInt64
        public var sessions: Int
        /// Push channels open on the node answering, over every user (not the page's only).
        public var pushChannels: Int

        public init(
            users: Int = 0, entries: UInt64 = 0, storeBytes: UInt64 = 0, zones: Int = 0, shares: Int = 0,
            assets: Int = 0, assetBytes: UInt64 = 0, sessions: Int = 0, pushChannels: Int = 0
        ) {
            self.users = users
            self.entries = entries
            self.storeBytes = storeBytes
            self.zones = zones
            self.shares = shares
            self.assets = assets
            self.assetBytes = assetBytes
            self.sessions = sessions
            self.pushChannels = pushChannels
        }
    }

    public var users: [User]
    /// The `after` of the next page; absent on the last.
    public var next: String?
    public var totals: Totals
    /// When the overview was read.
    public var generated: Date

    public init(users: [User], next: String?, totals: Totals, generated: Date) {
        self.users = users
        self.next = next
        self.totals = totals
        self.generated = generated
    }
}

/// `POST /v1/admin/console-links`: a one-time link into the operations console for a browser.
public enum WireConsole {
    /// `POST /v1/admin/console-links`.
    public static var linksPath: String { "/\(WireProtocol.versionPath)/admin/console-links" }

    /// The request: the console page the link leads to (a path under `/console`).
    public struct LinkRequest: Codable, Sendable, Hashable {
        public var next: String?
        public init(next: String? = nil) { self.next = next }
    }

    /// The answer: the link's path (`/console/enter/<code>?next=…`), to put after the server's
    /// base URL, used once within `expiresIn` seconds.
    public struct Link: Codable, Sendable, Hashable {
        public var path: String
        public var expiresIn: Int
        public init(path: String, expiresIn: Int) {
            self.path = path
            self.expiresIn = expiresIn
        }
    }
}
