import Foundation
import SyncModel

/// Who an identity token says its bearer is, once its signature and claims have been checked.
///
/// An identity token comes from the app's own identity provider (an OpenID Connect issuer, Sign
/// in with Apple, the app's backend): the server trusts the issuers it was configured with, and
/// maps each (issuer, subject) pair to one LogSync user, so that two issuers' subjects never
/// name the same user.
public struct VerifiedIdentity: Sendable, Hashable {
    /// The configured name of the issuer that vouched (not its URL): the namespace of
    /// ``subject``.
    public let issuer: String
    /// The subject within that issuer: the `sub` claim, or the claim the issuer is configured
    /// to read the user from.
    public let subject: String
    /// When the identity token stops being valid (its `exp`), if it says.
    public let expires: Date?
    /// The user's e-mail address, when the issuer vouches for it (OpenID Connect's `email`
    /// with `email_verified` true): registered at sign-in, so that share owners can invite the
    /// user by it (F119).
    public let emailAddress: String?

    public init(issuer: String, subject: String, expires: Date?, emailAddress: String? = nil) {
        self.issuer = issuer
        self.subject = subject
        self.expires = expires
        self.emailAddress = emailAddress
    }

    /// The LogSync user this identity stands for: the issuer's name, `:`, then the subject.
    /// Issuer names cannot hold a `:`, so two issuers' users never collide.
    public var user: UserID { UserID(rawValue: "\(issuer):\(subject)") }
}

/// Why an identity token was refused. The reason goes to the server's log, never into an
/// answer: a client only learns that the token is invalid.
public struct IdentityError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong with the token, for the server's log.
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { "invalid identity token: \(reason)" }
}

/// Checks identity tokens presented by devices signing in.
///
/// An implementation checks the token's signature against keys it trusts, and its claims (issuer,
/// audience, expiry), and answers who the bearer is. It must answer quickly for tokens signed by
/// keys it already knows, even while it is fetching keys it does not know yet.
public protocol IdentityVerifier: Sendable {
    /// The identity `token` vouches for.
    ///
    /// - Throws: ``IdentityError`` naming what was wrong: the signature, a claim, an unknown key,
    ///   keys that could not be loaded.
    func verify(_ token: String) async throws(IdentityError) -> VerifiedIdentity
}
