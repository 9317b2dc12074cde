import Crypto
import Foundation
import LogStore
import SyncModel
import Synchronization

/// Devices signed in as sessions: each session belongs to one user and one device, and holds a
/// short-lived access token (a bearer token for requests) and a long-lived refresh token (for a
/// new pair), both 256 random bits, kept only as SHA-256 digests.
///
/// Sessions are a log of the server's storage (``ServerLogName/sessions``: in the registry's
/// LMDB environment, or rows of the PostgreSQL store), so every node sharing the storage honours
/// the same ones. Its index finds a session by its access token, its refresh token, a refresh
/// token it already replaced, and its user.
///
/// ```swift
/// let sessions = try SessionStore(server: server)
/// let issued = try sessions.create(user: "apple:0012.ab", device: "phone-1")
/// sessions.lookUp(accessToken: issued.accessToken)          // .valid(grant) until it expires
/// let next = try sessions.refresh(issued.refreshToken)       // .refreshed: a new pair
/// try sessions.refresh(issued.refreshToken)                  // .reused: the session is revoked
/// ```
///
/// **Rotation and theft.** A refresh replaces both tokens; the old access token stops working at
/// once. A refresh token presented again after it was replaced means two parties hold it: the
/// session is revoked, so neither can go on (the device signs in again).
///
/// **Revocation.** Revoking a session ends it on every node: each node hears
/// `Revocation.session(id)` (``observeRevocations(_:)``), drops the session's access token from
/// memory and ends its push channels. On PostgreSQL the announcement travels on the storage's
/// revocation channel (`StoredTokens/revoke(_:)`), sent right after the session's entry commits;
/// on LMDB, one process holds the storage and hears it at once.
public final class SessionStore: Sendable {
    /// How long tokens last.
    public struct Lifetimes: Sendable, Hashable {
        /// How long an access token is accepted: 15 minutes by default.
        public var access: Duration
        /// How long a refresh token may be used, from the sign-in or the last refresh: 60 days
        /// by default. A device that does not refresh within it signs in again.
        public var refresh: Duration

        public init(access: Duration = .seconds(15 * 60), refresh: Duration = .seconds(60 * 86_400)) {
            self.access = access
            self.refresh = refresh
        }
    }

    /// A session as its user sees it (``sessions(of:)``): the device, when it signed in and last
    /// refreshed. No token.
    public struct Session: Sendable, Hashable, Codable {
        /// The session's ID: 32 hexadecimal digits, random.
        public var id: String
        public var user: UserID
        public var device: DeviceID
        /// The name the device gave itself at sign-in ("Alice's iPhone"), possibly empty.
        public var name: String
        /// When the device signed in.
        public var created: Date
        /// When the device last refreshed (its sign-in until the first refresh).
        public var refreshed: Date
        /// When the current access token stops being accepted.
        public var accessExpires: Date
        /// When the current refresh token stops being accepted.
        public var refreshExpires: Date
    }

    /// A session's new tokens, handed to the device once (sign-in, refresh).
    public struct Issued: Sendable, Hashable {
        public var session: Session
        /// `lsa_` and 43 characters of base64url.
        public var accessToken: String
        /// `lsr_` and 43 characters of base64url.
        public var refreshToken: String
    }

    /// What an access token grants: its user, session and device, until it expires.
    public struct Grant: Sendable, Hashable {
        public var user: UserID
        public var session: String
        public var device: DeviceID
        public var expires: Date
    }

    /// What ``lookUp(accessToken:)`` found.
    public enum AccessLookup: Sendable, Hashable {
        /// A session's current access token, not expired.
        case valid(Grant)
        /// A session's current access token, expired: the device refreshes.
        case expired(Grant)
        /// Not an access token of any session (never one, replaced, or its session revoked).
        case unknown

        /// The grant of a valid access token; `nil` for an expired or unknown one.
        public var validGrant: Grant? {
            if case .valid(let grant) = self { grant } else { nil }
        }
    }

    /// What ``refresh(_:)`` did.
    public enum RefreshOutcome: Sendable, Hashable {
        /// The session's tokens were replaced.
        case refreshed(Issued)
        /// The token was one the session had replaced already: the session was revoked.
        case reused(session: String, user: UserID)
        /// The session's current refresh token, past its lifetime: nothing changed.
        case expired
        /// Not a refresh token of any session.
        case unknown

        /// The new tokens of a refresh that succeeded; `nil` for a refused one.
        public var issued: Issued? {
            if case .refreshed(let issued) = self { issued } else { nil }
        }
    }

    /// What access tokens start with.
    public static let accessTokenPrefix = "lsa_"
    /// What refresh tokens start with.
    public static let refreshTokenPrefix = "lsr_"
    /// The longest device name kept, in bytes.
    public static let maxNameBytes = 256

    public let lifetimes: Lifetimes
    let storage: any ServerStorage
    let log: any ServerLog
    /// The clock expiries are measured on.
    public let now: @Sendable () -> Date
    let registerUser: @Sendable (UserID) throws -> Void
    /// The revocation handlers of a storage that has no revocation channel (LMDB: this process).
    let observers = Mutex<[@Sendable (RevocationEvent) -> Void]>([])

    /// The sessions of `server`'s storage; signing in registers the user with `server`.
    ///
    /// - Parameters:
    ///   - server: The server whose storage keeps the sessions and whose registry records the
    ///     users signing in.
    ///   - lifetimes: How long tokens last.
    ///   - now: The clock expiries are measured on (the wall clock by default; tests move one).
    public convenience init(
        server: SyncServer, lifetimes: Lifetimes = Lifetimes(), now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        try self.init(
            storage: server.storage, lifetimes: lifetimes, now: now,
            registerUser: { [weak server] user in try server?.registerUser(user) })
    }

    /// The sessions of `storage`; `registerUser` records a user at their first sign-in.
    public init(
        storage: any ServerStorage, lifetimes: Lifetimes = Lifetimes(),
        now: @escaping @Sendable () -> Date = { Date() },
        registerUser: @escaping @Sendable (UserID) throws -> Void = { _ in }
    ) throws {
        self.storage = storage
        self.lifetimes = lifetimes
        self.now = now
        self.registerUser = registerUser
        log = try storage.openLog(.sessions, projection: Index())
    }

    /// How far the sessions' log goes: it moves with every sign-in, refresh and revocation, on
    /// any node or process, so a change means the sessions may have changed.
    ///
    /// - Throws: The storage's error.
    public var changeCount: UInt64 { get throws { try log.lastOffset.rawValue } }

    /// Whether looking a token up reads this machine's disk only (no network round trip), so an
    /// event loop may do it.
    public var readsLocally: Bool { storage.tokens == nil }

    // MARK: Operations

    /// Signs `device` of `user` in: a new session and its tokens. A session the device had is
    /// revoked (a device holds one session). The user is registered if new.
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming a user ID, device ID or name that breaks
    ///   its rules (nothing is written then); the storage's error.
    public func create(user: UserID, device: DeviceID, name: String = "") throws -> Issued {
        try user.validate()
        try device.validate()
        guard name.utf8.count <= Self.maxNameBytes,
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw SyncError(
                .invalidArguments,
                "a device's name is at most \(Self.maxNameBytes) bytes of UTF-8 without control characters")
        }
        try registerUser(user)
        let time = now()
        let access = Self.newToken(Self.accessTokenPrefix)
        let refresh = Self.newToken(Self.refreshTokenPrefix)
        let stored = Session(
            id: Self.newSessionID(), user: user, device: device, name: name, created: time, refreshed: time,
            accessExpires: time + lifetimes.access.timeInterval, refreshExpires: time + lifetimes.refresh.timeInterval)
        let record = Record(session: stored, access: Self.digest(access), refresh: Self.digest(refresh))
        let (replaced, _) = try log.write { index -> (entries: [NewEntry], result: [String]) in
            let replaced = try Self.sessions(of: user, in: index).filter { $0.session.device == device }.map(
                \.session.id)
            return (
                replaced.map { NewEntry(kind: Self.revokedKind, payload: Array($0.utf8)) }
                    + [NewEntry(kind: Self.createdKind, payload: try Self.encode(record))],
                replaced
            )
        }
        try announce(replaced.map(Revocation.session))
        return Issued(session: stored, accessToken: access, refreshToken: refresh)
    }

    /// What `token` grants, if it is a session's current access token.
    ///
    /// - Throws: The storage's error.
    public func lookUp(accessToken token: String) throws -> AccessLookup {
        guard token.hasPrefix(Self.accessTokenPrefix) else { return .unknown }
        let digest = Self.digest(token)
        guard
            let record = try log.read({ index -> Record? in
                guard let id = try index.value(forKey: Array(digest.utf8), in: "access") else { return nil }
                return try Self.record(id: String(decoding: id, as: UTF8.self), in: index)
            })
        else { return .unknown }
        let session = record.session
        let grant = Grant(
            user: session.user, session: session.id, device: session.device, expires: session.accessExpires)
        return now() < session.accessExpires ? .valid(grant) : .expired(grant)
    }

    /// Replaces the tokens of the session whose refresh token is `token`; revokes the session if
    /// `token` is one it replaced already.
    ///
    /// - Throws: The storage's error.
    public func refresh(_ token: String) throws -> RefreshOutcome {
        guard token.hasPrefix(Self.refreshTokenPrefix) else { return .unknown }
        let digest = Array(Self.digest(token).utf8)
        let time = now()
        let access = Self.newToken(Self.accessTokenPrefix)
        let refresh = Self.newToken(Self.refreshTokenPrefix)
        let newAccess = Self.digest(access)
        let (outcome, _) = try log.write { index -> (entries: [NewEntry], result: (RefreshOutcome, Revocation?)) in
            if let id = try index.value(forKey: digest, in: "refresh") {
                guard var record = try Self.record(id: String(decoding: id, as: UTF8.self), in: index) else {
                    return ([], (.unknown, nil))
                }
                guard time < record.session.refreshExpires else { return ([], (.expired, nil)) }
                let replaced = record.access
                record.session.refreshed = time
                record.session.accessExpires = time + lifetimes.access.timeInterval
                record.session.refreshExpires = time + lifetimes.refresh.timeInterval
                record.access = newAccess
                record.refresh = Self.digest(refresh)
                let issued = Issued(session: record.session, accessToken: access, refreshToken: refresh)
                return (
                    [NewEntry(kind: Self.refreshedKind, payload: try Self.encode(record))],
                    (.refreshed(issued), .credential(replaced))
                )
            }
            if let id = try index.value(forKey: digest, in: "used") {
                let id = String(decoding: id, as: UTF8.self)
                guard let record = try Self.record(id: id, in: index) else { return ([], (.unknown, nil)) }
                return (
                    [NewEntry(kind: Self.revokedKind, payload: Array(id.utf8))],
                    (.reused(session: id, user: record.session.user), .session(id))
                )
            }
            return ([], (.unknown, nil))
        }
        if let revocation = outcome.1 { try announce([revocation]) }
        return outcome.0
    }

    /// The session `id`, if it is not revoked.
    ///
    /// - Throws: The storage's error.
    public func session(id: String) throws -> Session? {
        try log.read { index in try Self.record(id: id, in: index) }?.session
    }

    /// The sessions of `user`, oldest sign-in first, those whose refresh token expired left out.
    ///
    /// - Throws: The storage's error.
    public func sessions(of user: UserID) throws -> [Session] {
        let time = now()
        return try log.read { index in try Self.sessions(of: user, in: index) }.map(\.session)
            .filter { $0.refreshExpires > time }
            .sorted { ($0.created, $0.id) < ($1.created, $1.id) }
    }

    /// Revokes the sessions of `user` on `device` (one at most, unless signed in twice at once);
    /// returns how many. The same whether or not there was one.
    ///
    /// - Throws: The storage's error.
    @discardableResult
    public func revoke(user: UserID, device: DeviceID) throws -> Int {
        try revoke(user: user) { $0.device == device }
    }

    /// Revokes every session of `user` (every device signs in again); returns how many.
    ///
    /// - Throws: The storage's error.
    @discardableResult
    public func revokeAll(of user: UserID) throws -> Int {
        try revoke(user: user) { _ in true }
    }

    /// Revokes the session `id` of `user`; `false` if `user` has no such session.
    ///
    /// - Throws: The storage's error.
    @discardableResult
    public func revoke(session id: String, of user: UserID) throws -> Bool {
        try revoke(user: user) { $0.id == id } > 0
    }

    private func revoke(user: UserID, where chosen: @escaping (Session) -> Bool) throws -> Int {
        let (revoked, _) = try log.write { index -> (entries: [NewEntry], result: [String]) in
            let ids = try Self.sessions(of: user, in: index).map(\.session).filter(chosen).map(\.id)
            return (ids.map { NewEntry(kind: Self.revokedKind, payload: Array($0.utf8)) }, ids)
        }
        try announce(revoked.map(Revocation.session))
        return revoked.count
    }

    // MARK: Revocations between nodes

    /// Starts telling `handler` of the revocations of sessions (and of replaced access tokens)
    /// on any node, and whether they can be heard (as `StoredTokens/observeRevocations(_:)`).
    public func observeRevocations(_ handler: @escaping @Sendable (RevocationEvent) -> Void) {
        if let tokens = storage.tokens {
            tokens.observeRevocations(handler)
        } else {
            observers.withLock { $0.append(handler) }
            handler(.listening)
        }
    }

    /// Tells every node of `revocations`, committed already.
    private func announce(_ revocations: [Revocation]) throws {
        guard !revocations.isEmpty else { return }
        if let tokens = storage.tokens {
            for revocation in revocations { _ = try tokens.revoke(revocation) }
        } else {
            let handlers = observers.withLock { $0 }
            for revocation in revocations { for handler in handlers { handler(.revoked(revocation)) } }
        }
    }

    // MARK: Tokens

    /// A token: `prefix` and 43 characters of base64url (256 random bits).
    static func newToken(_ prefix: String) -> String {
        prefix
            + Data(randomBytes(32)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func newSessionID() -> String {
        randomBytes(16).map { String(format: "%02x", $0) }.joined()
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// `sha256:` and the 64 lowercase hexadecimal digits of the token's SHA-256, as bearer
    /// tokens' digests are written.
    public static func digest(_ token: String) -> String {
        "sha256:" + SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
