import Foundation
import LogSyncWire
import SyncModel

/// A device's session (Docs/Protocol.md, "Authentication"), as the ``Credentials`` of an
/// ``HTTPSyncClient``: it signs in once with an identity token, presents the access token,
/// refreshes the session by itself when the access token is about to expire or the server
/// refuses it, and keeps each new pair where the app says (``Storage``).
///
/// ```swift
/// let session = SessionCredentials(
///     sessions: SessionClient(serverURL: server), device: "phone-1", storage: .file(tokensURL))
/// if try await !session.isSignedIn {
///     try await session.signIn(identityToken: jwtFromTheIdentityProvider, name: "Alice's phone")
/// }
/// let client = HTTPSyncClient(.init(serverURL: server, credentials: session.credentials, device: "phone-1"))
/// ```
///
/// When the server refuses the refresh (the device was signed out from another device or by
/// the app's backend, the refresh token expired, or it was used twice), the session is gone:
/// the stored tokens are removed, requests fail with `notAuthenticated`, and an engine on the
/// client delivers an `accountChange` (signed out). The device signs in again with a new
/// identity token.
///
/// A refresh token works once, so refreshes take turns: requests that need one while another
/// runs wait for its pair. A process killed after the server answered a refresh but before
/// ``Storage`` kept the new pair comes back with the replaced refresh token, which the server
/// takes as stolen: that device signs in again.
public actor SessionCredentials {
    /// Where the session's tokens are kept between launches (the Keychain, a file readable by
    /// the app only): `load` is called once, `save` with each new pair and with `nil` when
    /// the session ends.
    public struct Storage: Sendable {
        public var load: @Sendable () throws -> WireSessions.Tokens?
        public var save: @Sendable (WireSessions.Tokens?) throws -> Void

        public init(
            load: @escaping @Sendable () throws -> WireSessions.Tokens?,
            save: @escaping @Sendable (WireSessions.Tokens?) throws -> Void
        ) {
            self.load = load
            self.save = save
        }

        /// Nothing kept: the session lasts as long as the process.
        public static var memory: Storage { Storage(load: { nil }, save: { _ in }) }

        /// A JSON file, written whole to a temporary file, flushed to disk and renamed over it
        /// (readable by its owner only), removed when the session ends.
        public static func file(_ url: URL) -> Storage {
            Storage(
                load: {
                    guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
                    return try WireSessions.decode(WireSessions.Tokens.self, from: Array(data))
                },
                save: { tokens in
                    guard let tokens else {
                        if FileManager.default.fileExists(atPath: url.path) {
                            try FileManager.default.removeItem(at: url)
                        }
                        return
                    }
                    try writePrivateFile(Data(WireSessions.encode(tokens)), to: url, what: "the session's tokens")
                })
        }
    }

    /// Signs in and refreshes.
    public nonisolated let sessions: SessionClient
    /// The device the session is for.
    public nonisolated let device: DeviceID
    /// How long before its expiry an access token is refreshed rather than presented.
    public nonisolated let refreshMargin: Duration
    private nonisolated let storage: Storage
    private nonisolated let now: @Sendable () -> Date
    private var tokens: WireSessions.Tokens?
    private var loaded = false
    /// The refresh under way, which other requests wait for.
    private var refreshing: Task<WireSessions.Tokens?, any Error>?

    /// A session of `device`, kept in `storage`.
    ///
    /// - Parameters:
    ///   - sessions: The server's session routes.
    ///   - device: The device the session is for.
    ///   - storage: Where the tokens are kept between launches.
    ///   - refreshMargin: How long before its expiry an access token is refreshed first.
    ///   - now: The clock of the expiries (the wall clock; tests move their own).
    public init(
        sessions: SessionClient, device: DeviceID, storage: Storage = .memory, refreshMargin: Duration = .seconds(30),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.sessions = sessions
        self.device = device
        self.storage = storage
        self.refreshMargin = refreshMargin
        self.now = now
    }

    /// What an ``HTTPSyncClient`` of this device presents: this session's access tokens.
    public nonisolated var credentials: Credentials {
        .provider(account: "device \(device.rawValue) at \(sessions.serverURL.absoluteString)") { request in
            try await self.accessToken(rejected: request.rejected)
        }
    }

    /// Whether the device has a session (it may still be refused at its next refresh).
    public var isSignedIn: Bool {
        get throws { try current() != nil }
    }

    /// The session's tokens, `nil` when signed out.
    public var currentTokens: WireSessions.Tokens? {
        get throws { try current() }
    }

    /// Signs the device in with `identityToken` (from the app's identity provider), replacing
    /// a session it had, and keeps the new tokens.
    ///
    /// - Throws: `SyncError(.notAuthenticated)` when the server refuses the identity token;
    ///   transport failures; the storage's error.
    @discardableResult
    public func signIn(identityToken: String, name: String? = nil) async throws -> WireSessions.Tokens {
        let issued = try await sessions.signIn(identityToken: identityToken, device: device, name: name)
        try keep(issued)
        return issued
    }

    /// Signs the device out: the server revokes the session (its push channels end) and the
    /// tokens are removed. Signed out already, it does nothing.
    ///
    /// - Throws: transport failures (the tokens are kept then, to try again); the storage's error.
    public func signOut() async throws {
        guard let tokens = try current() else { return }
        do {
            try await sessions.revoke(
                device: device, accessToken: try await accessToken(rejected: nil) ?? tokens.accessToken)
        } catch let error as SyncError where error.code == .notAuthenticated {
            // The session is gone already.
        }
        try keep(nil)
    }

    /// The access token to present: the current one while it is valid, a refreshed one when it
    /// is about to expire or the server refused `rejected`; `nil` when signed out.
    func accessToken(rejected: String?) async throws -> String? {
        if let refreshing { return try await refreshing.value?.accessToken }
        guard let tokens = try current() else { return nil }
        let expiring = tokens.accessExpires.timeIntervalSince(now()) < refreshMargin.seconds
        if rejected == nil || rejected != tokens.accessToken, !expiring { return tokens.accessToken }
        let refresh = Task { try await self.refresh(tokens.refreshToken) }
        refreshing = refresh
        defer { refreshing = nil }
        return try await refresh.value?.accessToken
    }

    /// The session's next pair, kept; `nil`, with the tokens removed, when the server refuses
    /// the refresh token.
    private func refresh(_ refreshToken: String) async throws -> WireSessions.Tokens? {
        let issued: WireSessions.Tokens
        do {
            issued = try await sessions.refresh(refreshToken)
        } catch  where error.code == .notAuthenticated {
            try keep(nil)
            return nil
        }
        try keep(issued)
        return issued
    }

    private func current() throws -> WireSessions.Tokens? {
        if !loaded {
            tokens = try storage.load()
            loaded = true
        }
        return tokens
    }

    private func keep(_ tokens: WireSessions.Tokens?) throws {
        try storage.save(tokens)
        self.tokens = tokens
        loaded = true
    }
}

extension Duration {
    /// The duration in seconds, as a `TimeInterval`.
    fileprivate var seconds: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}
