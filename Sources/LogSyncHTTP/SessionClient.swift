import Foundation
import LogSyncWire
import NIOHTTP1
import NIOSSL
import SyncModel

/// What a device calls to sign in, refresh its session, and list or sign out the user's devices
/// (Docs/Protocol.md, "Authentication").
///
/// ```swift
/// let sessions = SessionClient(serverURL: server)
/// var tokens = try await sessions.signIn(identityToken: jwt, device: "phone-1", name: "Alice's phone")
/// let client = HTTPSyncClient(.init(serverURL: server, credentials: .token(tokens.accessToken), device: "phone-1"))
/// // … 15 minutes later, or after a 401 saying the access token expired:
/// tokens = try await sessions.refresh(tokens.refreshToken)
/// ```
///
/// A refresh token works once: keep the pair each refresh answers, and never send an old
/// refresh token again, or the server revokes the session (it takes a second use as theft).
public struct SessionClient: Sendable {
    /// The server's base URL, as `HTTPSyncClient.Configuration.serverURL`.
    public var serverURL: URL
    /// How long a request may take.
    public var requestTimeout: Duration
    /// The client side of TLS, for `https` servers with a private authority.
    public var tlsConfiguration: TLSConfiguration?

    public init(serverURL: URL, requestTimeout: Duration = .seconds(30), tlsConfiguration: TLSConfiguration? = nil) {
        self.serverURL = serverURL
        self.requestTimeout = requestTimeout
        self.tlsConfiguration = tlsConfiguration
    }

    /// Signs `device` in with `identityToken` (from the app's identity provider): a new session,
    /// replacing one the device had.
    ///
    /// - Throws: `SyncError(.notAuthenticated)` for an identity token the server refuses;
    ///   `SyncError(.invalidArguments)` for a bad device ID or name; transport failures.
    public func signIn(
        identityToken: String, device: DeviceID, name: String? = nil
    ) async throws(SyncError)
        -> WireSessions.Tokens
    {
        let body = WireSessions.encode(WireSessions.SignIn(device: device.rawValue, name: name))
        return try await decoded(
            send(.POST, WireSessions.signInPath, token: identityToken, body: body, doing: "sign-in"))
    }

    /// The session's new tokens for its current `refreshToken`.
    ///
    /// - Throws: `SyncError(.notAuthenticated)` when the refresh token is not valid (unknown,
    ///   expired, or replaced already: the session is then revoked); the device signs in again.
    public func refresh(_ refreshToken: String) async throws(SyncError) -> WireSessions.Tokens {
        let body = WireSessions.encode(WireSessions.Refresh(refreshToken: refreshToken))
        return try await decoded(send(.POST, WireSessions.refreshPath, token: nil, body: body, doing: "refresh"))
    }

    /// The user's signed-in devices, oldest first; `accessToken` is a session's or a bearer token.
    public func devices(accessToken: String) async throws(SyncError) -> [WireSessions.Device] {
        let list: WireSessions.Devices = try await decoded(
            send(.GET, WireSessions.devicesPath, token: accessToken, body: nil, doing: "list devices"))
        return list.devices
    }

    /// Signs `device` of the user out: its session is revoked and its push channels end. The
    /// same answer whether or not the device was signed in.
    public func revoke(device: DeviceID, accessToken: String) async throws(SyncError) {
        _ = try await send(
            .DELETE, WireSessions.devicePath(device.rawValue), token: accessToken, body: nil, doing: "revoke device")
    }

    private var requests: JSONRequests {
        JSONRequests(serverURL: serverURL, requestTimeout: requestTimeout, tlsConfiguration: tlsConfiguration)
    }

    private func decoded<T: Decodable>(_ body: [UInt8]) throws(SyncError) -> T {
        try requests.decoded(body)
    }

    private func send(
        _ method: HTTPMethod, _ path: String, token: String?, body: [UInt8]?, doing operation: String
    ) async throws(SyncError) -> [UInt8] {
        try await requests.send(method, path, token: token, body: body, doing: operation)
    }
}
