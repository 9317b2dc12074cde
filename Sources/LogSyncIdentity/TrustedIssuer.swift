import Foundation

/// One identity provider the server trusts: whose tokens it accepts, for which audiences, with
/// which keys, and under which name its users live.
public struct TrustedIssuer: Sendable, Hashable {
    /// Where an issuer's public keys come from.
    public enum KeySource: Sendable, Hashable, CustomStringConvertible {
        /// A JSON Web Key Set in a file, read at start and read again on an unknown key.
        case jwksFile(URL)
        /// A JSON Web Key Set at a URL: `https`, or plain `http` to a loopback address only.
        case jwksURL(URL)
        /// An OpenID Connect discovery document (`…/.well-known/openid-configuration`), whose
        /// `jwks_uri` names the key set.
        case discovery(URL)

        public var description: String {
            switch self {
            case .jwksFile(let file): "JWKS file \(file.path)"
            case .jwksURL(let url): "JWKS \(url.absoluteString)"
            case .discovery(let url): "OpenID discovery \(url.absoluteString)"
            }
        }
    }

    /// The issuer's name in LogSync: the namespace of its users (`name:subject`). Not empty,
    /// without `:`.
    public let name: String
    /// The `iss` claim its tokens carry, exactly.
    public let issuer: String
    /// The `aud` values accepted: a token must name at least one of them.
    public let audiences: [String]
    /// The claim whose string value is the user's subject: `sub` unless configured otherwise.
    public let userClaim: String
    /// Where its keys come from.
    public let keys: KeySource

    /// An issuer, checked: `name` not empty and without `:`, `issuer` not empty, at least one
    /// audience and none empty, `userClaim` not empty, and a key URL that is `https` (or `http`
    /// to a loopback address).
    ///
    /// - Throws: ``IdentityConfigurationError`` naming the field that is wrong.
    public init(
        name: String, issuer: String, audiences: [String], userClaim: String = "sub", keys: KeySource
    ) throws(IdentityConfigurationError) {
        guard !name.isEmpty else { throw IdentityConfigurationError(field: "name", "must not be empty") }
        guard !name.contains(":") else {
            throw IdentityConfigurationError(field: "name", "must not contain \":\" (it separates issuer and subject)")
        }
        guard !issuer.isEmpty else { throw IdentityConfigurationError(field: "issuer", "must not be empty") }
        guard !audiences.isEmpty else {
            throw IdentityConfigurationError(field: "audiences", "must name at least one audience")
        }
        if let index = audiences.firstIndex(where: \.isEmpty) {
            throw IdentityConfigurationError(field: "audiences[\(index)]", "must not be empty")
        }
        guard !userClaim.isEmpty else { throw IdentityConfigurationError(field: "userClaim", "must not be empty") }
        switch keys {
        case .jwksFile: break
        case .jwksURL(let url):
            if let problem = Self.problem(with: url) { throw IdentityConfigurationError(field: "jwksURL", problem) }
        case .discovery(let url):
            if let problem = Self.problem(with: url) { throw IdentityConfigurationError(field: "discovery", problem) }
        }
        self.name = name
        self.issuer = issuer
        self.audiences = audiences
        self.userClaim = userClaim
        self.keys = keys
    }

    /// Why keys may not be fetched from `url`, or nil: keys come over HTTPS, or over plain HTTP
    /// from this machine only (for tests and local development).
    static func problem(with url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            return "\"\(url.absoluteString)\" is not an absolute URL"
        }
        switch scheme {
        case "https": return nil
        case "http":
            return isLoopback(host)
                ? nil : "\"\(url.absoluteString)\" must be https (plain http only to a loopback address)"
        default: return "\"\(url.absoluteString)\" must be https, not \(scheme)"
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        let host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
