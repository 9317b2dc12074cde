import Foundation
import SyncModel
import Synchronization

/// What an ``HTTPSyncClient`` presents as `Authorization: Bearer <token>`: a fixed bearer token,
/// or a provider asked for one (Docs/Protocol.md, "Authentication").
///
/// ```swift
/// // A token from `logsync-server user add`, for scripts and tests:
/// HTTPSyncClient(.init(serverURL: url, credentials: .token(token)))
/// // A session, refreshed by itself (see SessionCredentials):
/// HTTPSyncClient(.init(serverURL: url, credentials: session.credentials, device: device))
/// // The app's own: asked for a token before the first request and again after a 401.
/// HTTPSyncClient(.init(serverURL: url, credentials: .provider(account: "alice") { request in
///     try await myBackend.syncToken(refreshing: request.rejected != nil)
/// }))
/// ```
///
/// A provider that returns `nil` says nobody is signed in: requests then fail with
/// `notAuthenticated` without being sent, and an engine on the client delivers an
/// `accountChange` (signed out), as CloudKit does when the iCloud account goes (F86, F104).
public struct Credentials: Sendable {
    /// Why a provider is asked.
    public struct Request: Sendable, Hashable {
        /// The token the server just refused (401), or `nil` when the client has none yet: a
        /// provider returns a new one, or `nil` if the device is signed out.
        public var rejected: String?

        public init(rejected: String? = nil) {
            self.rejected = rejected
        }
    }

    /// Returns the token to present, or `nil` when nobody is signed in.
    public typealias Provider = @Sendable (Request) async throws -> String?

    enum Source: Sendable {
        case token(String)
        case provider(account: String, Provider)
    }

    let source: Source

    /// A fixed bearer token (`logsync-server user add`): it names the user, and a 401 is final.
    public static func token(_ token: String) -> Credentials {
        Credentials(source: .token(token))
    }

    /// Tokens from `provide`, asked before the client's first request and whenever the server
    /// refuses the token it gave (once per refusal: the request is then sent again with the new
    /// token). `account` names what the provider signs in, for the database's identity (F118:
    /// one production engine per database): the device, or the app's account ID; never a
    /// token.
    public static func provider(account: String, _ provide: @escaping Provider) -> Credentials {
        Credentials(source: .provider(account: account, provide))
    }

    /// What the database identity of a client with these credentials names: the token itself
    /// for a fixed token (as before providers existed, so that device logs keep their
    /// identity), the account for a provider.
    var identity: String {
        switch source {
        case .token(let token): token
        case .provider(let account, _): "account \(account)"
        }
    }
}

/// The token a client presents now, asked of its ``Credentials`` when it has none or the
/// server refused it.
final class CurrentToken: Sendable {
    let credentials: Credentials
    private let state = Mutex<String?>(nil)

    init(_ credentials: Credentials) {
        self.credentials = credentials
    }

    /// The token to send.
    ///
    /// - Throws: `SyncError(.notAuthenticated)` when the provider has none (signed out);
    ///   `SyncError(.networkFailure)` when it failed (the engine retries).
    func token() async throws(SyncError) -> String {
        switch credentials.source {
        case .token(let token):
            return token
        case .provider:
            if let token = state.withLock({ $0 }) { return token }
            return try await ask(Credentials.Request())
        }
    }

    /// The server refused `token` (401): the token to try instead, if the provider has a new
    /// one; `nil` for a fixed token, or when the provider returns the same token.
    ///
    /// - Throws: as ``token()``.
    func replacement(forRejected token: String) async throws(SyncError) -> String? {
        guard case .provider = credentials.source else { return nil }
        if let current = state.withLock({ $0 }), current != token {
            return current  // another request already replaced it
        }
        let fresh = try await ask(Credentials.Request(rejected: token))
        return fresh == token ? nil : fresh
    }

    private func ask(_ request: Credentials.Request) async throws(SyncError) -> String {
        guard case .provider(_, let provide) = credentials.source else { preconditionFailure("asked a fixed token") }
        let answer: String?
        do {
            answer = try await provide(request)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.networkFailure, "the credentials provider failed", cause: "\(error)")
        }
        state.withLock { $0 = answer }
        guard let answer else {
            throw SyncError(.notAuthenticated, "nobody is signed in: the credentials provider has no token")
        }
        return answer
    }
}
