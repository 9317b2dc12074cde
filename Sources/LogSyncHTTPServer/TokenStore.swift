import Crypto
import Foundation
import LogSyncPlatform
import LogSyncServer
import LogSyncWire
import Logging
import SyncModel
import Synchronization

/// The bearer tokens a server accepts, each standing for one user.
///
/// A token file holds one token per line as its SHA-256 digest, `sha256:` and 64 hexadecimal
/// digits, then a space, then the user ID (the rest of the line; it may hold spaces). Blank lines
/// and lines starting with `#` are ignored; lines may end with LF or CRLF, and a UTF-8 byte
/// order mark at the start is skipped:
///
/// ```
/// # logsync-server tokens: "sha256:<SHA-256 of the token, in hex> <user ID>", one per line. Keep this file private.
/// sha256:f6cdd79c4cf606637c4f2326a8bf2ae2cbc0ce92fe21e17b7d045e58c5b5ecb5 alice@example.com
/// sha256:1370bbc256a66a9bb539b421c44aa9eebcadbb36faab97a874330861cbb6f884 bob
/// ```
///
/// `logsync-server user add USER` prints a new random token once and appends only its digest,
/// so the file never holds a token that authenticates. A line in the older form, the token in the
/// clear (`lsk_… alice`), is still accepted; each read of a file with such lines logs one warning
/// naming them, and ``rehash(file:)`` (`logsync-server user rehash`) replaces them by digests.
///
/// **Revocation.** A token taken away (``revoke(_:)``, `logsync-server user revoke`) stops working
/// within a second on every node, and ends the push channels opened with it
/// (`untilRevoked(token:user:)`):
///
/// - A store on a file reads it again when a request presents a token it does not know, and
///   whenever the file changed, which ``watchFile()`` (run by `HTTPSyncServer`) checks every
///   ``checkInterval``. A read that fails (the file missing, unreadable or malformed) keeps the
///   tokens last read and logs an error: only a file that reads well changes who may connect.
/// - A store on a storage's tokens (`StoredTokens`, PostgreSQL) keeps the tokens it looked up
///   in memory only while it hears the storage's revocations, and drops a revoked one when it
///   hears of it. While it cannot hear them (its listening connection is lost), it asks the
///   storage on every request, and once it hears them again it forgets what it kept and checks
///   its open push channels' tokens anew, so a revocation it missed still takes effect.
///
/// A presented token is hashed and its digest looked up in a dictionary. The look-up compares
/// digests, not tokens, and may stop at the first differing byte, but that says nothing useful
/// about the accepted tokens: the digest of a guess cannot be steered towards a stored digest
/// (that would take SHA-256 preimages), and even a stored digest, if it leaked, does not give
/// back a token of 256 random bits. So no constant-time comparison is needed. A request's user
/// comes only from its token, never from its path or its headers.
public final class TokenStore: Sendable {
    /// What a token file line that cannot be read looks like, for error messages.
    public struct FileError: Error, CustomStringConvertible, Sendable {
        /// The file.
        public let path: String
        /// The line (from 1), or 0 for the file as a whole.
        public let line: Int
        /// What is wrong.
        public let problem: String

        public var description: String {
            line == 0 ? "token file \(path): \(problem)" : "token file \(path), line \(line): \(problem)"
        }
    }

    struct State {
        /// The user of each token: all of them for a file (the last good read) or in memory; for
        /// a storage, those this node looked up, trusted only while `hearsRevocations`.
        var users: [TokenDigest: UserID] = [:]
        var clearTokenLines: [Int] = []
        /// The token file as last looked at (read or refused; `nil` when it was missing): its
        /// device and inode (a file renamed into place is another), size, and modification and
        /// status change times to the nanosecond tell one version from the next unread.
        var file: FileStatus?
        /// Whether a good read of the file has happened, so a missing file is an error from then on.
        var fileRead = false
        /// Whether the storage's revocations are heard now.
        var hearsRevocations = false
        /// Moves at every revocation event: a storage look-up that started before it does not
        /// keep its answer, which may predate the revocation.
        var epoch = 0
        /// The open push channels, each ended when its token is revoked.
        var channels: [Int: Channel] = [:]
        /// What the sessions' access tokens this node looked up grant, trusted only while
        /// `hearsSessionRevocations`.
        var sessions: [TokenDigest: SessionStore.Grant] = [:]
        /// Whether the sessions' revocations are heard now.
        var hearsSessionRevocations = false
        var nextChannel = 0
    }

    /// An open push channel: its token's digest and user, and how to end it. A channel opened
    /// with a session's access token ends with its session (`session`, once known), not with
    /// the token, which a refresh replaces.
    struct Channel {
        let digest: TokenDigest
        let user: UserID
        var isSession = false
        var session: String?
        let revoked: AsyncStream<Void>.Continuation

        /// Whether `revocation` ends this channel.
        func isEnded(by revocation: Revocation) -> Bool {
            isSession
                ? session.map(revocation.covers(session:)) ?? false
                : revocation.covers(credential: digest.description, of: user)
        }
    }

    /// The file the tokens come from, if any.
    public let file: URL?
    /// The storage's tokens, when the store keeps them (PostgreSQL: every node the same).
    public let stored: (any StoredTokens)?
    /// The devices' sessions, whose access tokens are accepted beside the bearer tokens.
    public let sessions: SessionStore?
    /// How often ``watchFile()`` looks at the token file (a `stat`; a read only when it changed).
    public let checkInterval: Duration
    let logger: Logger
    let state = Mutex(State())
    /// Held while the file is read, so that two reads never interleave.
    let reads = Mutex(())

    /// A store of tokens kept in memory only (tests, embedding), accepting the access tokens of
    /// `sessions` too.
    public init(sessions: SessionStore? = nil) {
        file = nil
        stored = nil
        self.sessions = sessions
        checkInterval = .milliseconds(250)
        logger = Logger(label: "logsync.tokens", factory: { _ in SwiftLogNoOpLogHandler() })
        observeSessions()
    }

    /// A store reading `file`; a missing file is an empty store until it appears.
    ///
    /// - Parameters:
    ///   - file: The token file.
    ///   - checkInterval: How often ``watchFile()`` looks for a change of the file; a revoked
    ///     token stops working within about this long. A quarter of a second by default.
    ///   - logger: Where a read that finds tokens in the clear logs its warning, and a read that
    ///     fails its error (silent by default).
    ///   - sessions: The devices' sessions, whose access tokens are accepted too.
    /// - Throws: ``FileError`` naming the line of a malformed entry or a token given twice, or
    ///   saying why the file cannot be read.
    public init(
        file: URL, checkInterval: Duration = .milliseconds(250),
        logger: Logger = Logger(label: "logsync.tokens", factory: { _ in SwiftLogNoOpLogHandler() }),
        sessions: SessionStore? = nil
    ) throws {
        self.file = file
        self.stored = nil
        self.sessions = sessions
        self.checkInterval = checkInterval
        self.logger = logger
        try reload()
        observeSessions()
    }

    /// The tokens a server's storage keeps (`StoredTokens`): a token is looked up there the
    /// first time this node sees it, then kept in memory while the node hears the storage's
    /// revocations, so a token added on one node is accepted by every node, and one revoked on
    /// any node is refused by every node. The access tokens of `sessions` are accepted too.
    public init(
        stored: any StoredTokens,
        logger: Logger = Logger(label: "logsync.tokens", factory: { _ in SwiftLogNoOpLogHandler() }),
        sessions: SessionStore? = nil
    ) {
        self.file = nil
        self.stored = stored
        self.sessions = sessions
        self.checkInterval = .milliseconds(250)
        self.logger = logger
        stored.observeRevocations { [weak self] event in self?.heard(event, bearer: true, sessions: false) }
        observeSessions()
    }

    /// The user a token stands for, or `nil` if the token is unknown.
    ///
    /// Complexity: one SHA-256 of the token and a dictionary look-up; a read of the file when
    /// the token is unknown and the file changed.
    public func user(for token: String) -> UserID? {
        (try? lookUp(token)) ?? nil
    }

    /// The user of `token` if this answer needs no wait: the token is in memory (or in the file),
    /// or the tokens live nowhere else. `.notYetKnown` for a token only the storage can tell
    /// about: an event loop must not wait for it, so the look-up is started on a thread of its
    /// own and the token is in memory for the next request (if revocations are heard meanwhile).
    package func lookUpWithoutWaiting(_ token: String) -> ImmediateLookup {
        if let sessions, isSessionToken(token) {
            let digest = TokenDigest(token: token)
            if let grant = state.withLock({ $0.trustedGrant(of: digest) }) {
                return sessions.now() < grant.expires ? .known(grant.user, device: grant.device) : .unknown
            }
            guard sessions.readsLocally else {
                Thread.detachNewThread { [self] in _ = try? self.authenticate(token) }
                return .notYetKnown
            }
            if case .session(let grant)? = try? authenticate(token) { return .known(grant.user, device: grant.device) }
            return .unknown
        }
        let digest = TokenDigest(token: token)
        if let user = state.withLock({ $0.trustedUser(of: digest, stored: stored != nil) }) {
            return .known(user, device: nil)
        }
        guard stored != nil else { return user(for: token).map { .known($0, device: nil) } ?? .unknown }
        Thread.detachNewThread { [self] in _ = try? self.lookUp(token) }
        return .notYetKnown
    }

    /// What ``lookUpWithoutWaiting(_:)`` can say at once.
    package enum ImmediateLookup: Sendable {
        /// The token's user, and for a session's access token, the session's device.
        case known(UserID, device: DeviceID?)
        case unknown
        case notYetKnown
    }

    /// ``user(for:)``, telling apart an unknown token (`nil`) from a store that could not be
    /// asked. A revoked token is an unknown token.
    ///
    /// - Throws: `SyncError(.serviceUnavailable)` (with a retry-after) when the storage that
    ///   keeps the tokens cannot be reached and the token is not one this node may trust from
    ///   memory.
    public func lookUp(_ token: String) throws(SyncError) -> UserID? {
        switch try authenticate(token) {
        case .bearer(let user): user
        case .session(let grant): grant.user
        case .expired, .unknown: nil
        }
    }

    /// What a request's token stands for (``authenticate(_:)``).
    public enum Authentication: Sendable, Hashable {
        /// A bearer token of this user.
        case bearer(UserID)
        /// A session's access token, not expired.
        case session(SessionStore.Grant)
        /// A session's access token past its expiry: the device refreshes the session.
        case expired(SessionStore.Grant)
        /// No token this store accepts.
        case unknown
    }

    /// What `token` stands for: a bearer token's user, or a session's grant (access tokens
    /// start with `lsa_`).
    ///
    /// - Throws: `SyncError(.serviceUnavailable)` (with a retry-after) when the storage cannot be
    ///   asked.
    public func authenticate(_ token: String) throws(SyncError) -> Authentication {
        if let sessions, isSessionToken(token) { return try authenticateSession(token, sessions) }
        return try bearerUser(token).map(Authentication.bearer) ?? .unknown
    }

    /// Whether `token` is a session's access token rather than a bearer token.
    func isSessionToken(_ token: String) -> Bool {
        sessions != nil && token.hasPrefix(SessionStore.accessTokenPrefix)
    }

    private func authenticateSession(_ token: String, _ sessions: SessionStore) throws(SyncError) -> Authentication {
        let digest = TokenDigest(token: token)
        let (cached, epoch) = state.withLock { ($0.trustedGrant(of: digest), $0.epoch) }
        let grant: SessionStore.Grant
        if let cached {
            grant = cached
        } else {
            let found: SessionStore.AccessLookup
            do {
                found = try sessions.lookUp(accessToken: token)
            } catch let error as SyncError {
                throw error
            } catch {
                throw SyncError(.serviceUnavailable, "the session store failed: \(error)", retryAfter: .seconds(1))
            }
            switch found {
            case .unknown: return .unknown
            case .valid(let found), .expired(let found): grant = found
            }
            let now = sessions.now()
            // Kept while revocations are heard. On LMDB, another process (`logsync-server
            // sessions revoke`) may revoke a session unheard: `watchSessions()` forgets what is
            // kept whenever the sessions' log moves, within a `checkInterval`.
            state.withLock { state in
                guard state.hearsSessionRevocations, state.epoch == epoch else { return }
                if state.sessions.count >= 10_000 {
                    state.sessions = state.sessions.filter { $0.value.expires > now }
                }
                state.sessions[digest] = grant
            }
        }
        return sessions.now() < grant.expires ? .session(grant) : .expired(grant)
    }

    /// ``lookUp(_:)`` for bearer tokens.
    private func bearerUser(_ token: String) throws(SyncError) -> UserID? {
        let digest = TokenDigest(token: token)
        let (known, epoch) = state.withLock { ($0.trustedUser(of: digest, stored: stored != nil), $0.epoch) }
        if let known { return known }
        if let stored {
            let user: UserID?
            do {
                user = try stored.user(forDigest: digest.description)
            } catch let error as SyncError {
                throw error
            } catch {
                throw SyncError(.serviceUnavailable, "the token store failed: \(error)", retryAfter: .seconds(1))
            }
            if let user {
                state.withLock { state in
                    if state.hearsRevocations, state.epoch == epoch { state.users[digest] = user }
                }
            }
            return user
        }
        guard file != nil, refreshIfChanged() else { return nil }
        return state.withLock { $0.users[digest] }
    }

    /// Accepts `token` for `user` (in memory; see ``append(token:user:to:)`` for files). Only
    /// the token's digest is kept.
    ///
    /// - Throws: ``FileError`` if the token is not a valid token or already stands for a user,
    ///   or the user ID breaks the rules of `Identifier.userID`.
    public func add(token: String, for user: UserID) throws {
        try Self.checkToken(token, path: file?.path ?? "(memory)", line: 0)
        if let problem = Identifier.userID.violation(user.rawValue) {
            throw FileError(path: file?.path ?? "(memory)", line: 0, problem: "invalid user ID: it \(problem)")
        }
        let digest = TokenDigest(token: token)
        if let stored {
            try stored.add(digest: digest.description, user: user)
            return
        }
        try state.withLock { state in
            if state.users[digest] != nil {
                throw FileError(path: file?.path ?? "(memory)", line: 0, problem: "the token is already in use")
            }
            state.users[digest] = user
        }
    }

    /// How many tokens the store holds.
    public var count: Int { (try? stored?.count()) ?? state.withLock { $0.users.count } }

    /// The lines of the token file (from 1) that hold a token in the clear, as of the last read;
    /// empty for a store in memory. ``rehash(file:)`` replaces them by digests.
    public var clearTokenLines: [Int] { state.withLock { $0.clearTokenLines } }

    /// A new random token: `lsk_` and 43 characters of base64url (256 bits).
    public static func generateToken() -> String {
        "lsk_" + randomBase64URL(bytes: 32)
    }

    static func checkToken(_ token: String, path: String, line: Int) throws {
        guard token.utf8.count >= 16, token.utf8.count <= 512,
            token.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 32 && $0.value < 127 })
        else {
            throw FileError(
                path: path, line: line, problem: "a token is 16 to 512 printable ASCII characters without spaces")
        }
    }
}

extension TokenStore.State {
    /// The grant of a session's access token if memory may answer: while the sessions'
    /// revocations are heard.
    func trustedGrant(of digest: TokenDigest) -> SessionStore.Grant? {
        hearsSessionRevocations ? sessions[digest] : nil
    }

    /// The user of `digest` if memory may answer: always for a file or memory store; for a
    /// storage's tokens, only while its revocations are heard.
    func trustedUser(of digest: TokenDigest, stored: Bool) -> UserID? {
        stored && !hearsRevocations ? nil : users[digest]
    }
}

/// The SHA-256 digest of a bearer token, as the token file keeps it: `sha256:` and 64 lowercase
/// hexadecimal digits.
package struct TokenDigest: Hashable, Sendable, CustomStringConvertible {
    static let prefix = "sha256:"

    /// The digest's 32 bytes as four big-endian words.
    private let words: (UInt64, UInt64, UInt64, UInt64)

    /// The digest of `token`'s UTF-8 bytes.
    package init(token: String) {
        self.init(bytes: Array(SHA256.hash(data: Array(token.utf8))))!
    }

    /// Reads `sha256:<64 hex digits>` (either case); `nil` for anything else.
    package init?(_ text: String) {
        guard text.hasPrefix(Self.prefix) else { return nil }
        let hex = Array(text.utf8.dropFirst(Self.prefix.utf8.count))
        guard hex.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = Self.nibble(hex[index]), let low = Self.nibble(hex[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.init(bytes: bytes)
    }

    private init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        func word(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        words = (word(0), word(8), word(16), word(24))
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    package static func == (lhs: TokenDigest, rhs: TokenDigest) -> Bool {
        lhs.words == rhs.words
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    package var description: String {
        Self.prefix
            + [words.0, words.1, words.2, words.3].map { word in
                let hex = String(word, radix: 16)
                return String(repeating: "0", count: 16 - hex.count) + hex
            }.joined()
    }
}
