import AsyncHTTPClient
import Foundation
import JWTKit
import LogSyncServer

/// Verifies identity tokens (JWTs) from the issuers the server trusts, with jwt-kit.
///
/// A token is refused, with an `IdentityError` naming why, when it is larger than
/// ``Options/maximumTokenBytes`` (before it is parsed); when its `alg` is not RS256, ES256 or
/// EdDSA (so `none`, and HS256 signed with a public key as its secret, never pass); when its
/// header marks extensions critical (`crit`), which this verifier does not understand; when its
/// `iss` is not a trusted issuer's; when its `kid` names no key of that issuer (after one fetch
/// of the issuer's keys, at most once per ``Options/refetchFloor``); when the key's type does
/// not fit the algorithm; when the signature does not verify; when no `aud` is one of the
/// issuer's audiences; when it has expired (`exp`), is not valid yet (`nbf`) or was issued in
/// the future (`iat`), each with ``Options/leeway``; or when it lacks the claim the user comes
/// from.
///
/// The issuer is chosen by the token's `iss`, read before the signature is checked; everything
/// is then checked against that issuer's keys and settings. A token of a known key never waits
/// for a fetch of keys under way.
public final class JWTIdentityVerifier: IdentityVerifier {
    /// The verifier's limits.
    public struct Options: Sendable, Hashable {
        /// How far `exp`, `nbf` and `iat` may be off, for clocks that disagree: 60 seconds.
        public var leeway: Duration = .seconds(60)
        /// The least time between two fetches of one issuer's keys on unknown `kid`s: 30
        /// seconds. A token naming an unknown key within it is refused without a fetch.
        public var refetchFloor: Duration = .seconds(30)
        /// How long one fetch of keys (or of a discovery document) may take: 10 seconds.
        public var fetchTimeout: Duration = .seconds(10)
        /// The largest token accepted, in bytes: 8 KiB. Larger ones are refused unparsed.
        public var maximumTokenBytes = 8 << 10

        public init() {}
    }

    /// The signature algorithms accepted, as a token's `alg` names them.
    public static let acceptedAlgorithms = ["RS256", "ES256", "EdDSA"]

    /// The trusted issuers.
    public let issuers: [TrustedIssuer]
    public let options: Options
    private let keys: [String: IssuerKeys]  // by `iss`
    private let now: @Sendable () -> Date

    /// The client keys are fetched with by default: it follows no redirect itself. The
    /// verifier follows them, up to 5, each only to a URL that passes the rules of a key URL
    /// (`https`, or plain `http` to a loopback address), so that a key URL cannot be redirected
    /// to plain http elsewhere. A client given instead should not follow redirects either.
    public static let defaultHTTPClient = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    /// A verifier of tokens from `issuers`; keys are fetched with `httpClient` (when a source is
    /// a URL), and `now` tells the time (a test clock in tests).
    ///
    /// No key is loaded yet: ``loadKeys()`` loads them all, or the first token of each issuer
    /// does.
    ///
    /// - Throws: ``IdentityConfigurationError`` when two issuers share a name or an `iss`, or
    ///   none is given.
    public init(
        issuers: [TrustedIssuer], options: Options = Options(),
        httpClient: HTTPClient = JWTIdentityVerifier.defaultHTTPClient,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(IdentityConfigurationError) {
        guard !issuers.isEmpty else {
            throw IdentityConfigurationError(field: "issuers", "must list at least one issuer")
        }
        var keys: [String: IssuerKeys] = [:]
        var names: Set<String> = []
        for (index, issuer) in issuers.enumerated() {
            guard names.insert(issuer.name).inserted else {
                throw IdentityConfigurationError(
                    field: "issuers[\(index)].name", "\"\(issuer.name)\" names two issuers")
            }
            guard keys[issuer.issuer] == nil else {
                throw IdentityConfigurationError(
                    field: "issuers[\(index)].issuer", "\"\(issuer.issuer)\" is the iss of two issuers")
            }
            keys[issuer.issuer] = IssuerKeys(
                issuer: issuer,
                loader: KeyLoader(
                    source: issuer.keys, issuer: issuer.issuer, client: httpClient, timeout: options.fetchTimeout),
                floor: options.refetchFloor, now: now)
        }
        self.issuers = issuers
        self.options = options
        self.keys = keys
        self.now = now
    }

    /// Loads every issuer's keys now (at start-up, say), and answers what failed: one error per
    /// issuer whose keys did not load, naming where from. Those issuers' tokens are refused
    /// until a later fetch succeeds.
    public func loadKeys() async -> [IdentityError] {
        var failures: [IdentityError] = []
        for issuer in issuers {
            if let failure = await keys[issuer.issuer]?.load() { failures.append(failure) }
        }
        return failures
    }

    /// How many fetches of the named issuer's keys have started (for tests and logs).
    public func keyFetches(issuer name: String) -> Int {
        keys.values.first { $0.issuer.name == name }?.fetches ?? 0
    }

    public func verify(_ token: String) async throws(IdentityError) -> VerifiedIdentity {
        let size = token.utf8.count
        guard size <= options.maximumTokenBytes else {
            throw IdentityError("oversized: \(size) bytes, above the limit of \(options.maximumTokenBytes)")
        }
        let bytes = Array(token.utf8)

        // Unverified: the header's algorithm and key, and the issuer, to choose the keys.
        let header: JWTHeader
        let unverified: TokenClaims
        do {
            (header, unverified, _) = try DefaultJWTParser().parse(bytes, as: TokenClaims.self)
        } catch {
            throw IdentityError("malformed token: \(error)")
        }
        guard let algorithm = header.alg else { throw IdentityError("algorithm not allowed: the token names none") }
        guard Self.acceptedAlgorithms.contains(algorithm) else {
            throw IdentityError(
                "algorithm not allowed: \(algorithm) (only \(Self.acceptedAlgorithms.joined(separator: ", ")))")
        }
        // RFC 7515 §4.1.11: extensions marked critical must be understood; none is.
        if header.fields["crit"] != nil {
            throw IdentityError("critical header parameters not understood: \(header.crit ?? [])")
        }
        guard let iss = unverified.string("iss") else { throw IdentityError("unknown issuer: the token has no iss") }
        guard let issuerKeys = keys[iss] else { throw IdentityError("unknown issuer \"\(iss)\"") }
        let issuer = issuerKeys.issuer
        guard let kid = header.kid, !kid.isEmpty else {
            throw IdentityError("unknown kid: the token names no key (kid) of issuer \(issuer.name)")
        }
        let key = try await issuerKeys.key(kid)
        guard let fitting = Self.algorithm(fitting: key.jwk), fitting == algorithm else {
            throw IdentityError(
                "algorithm not allowed: \(algorithm) does not fit key \"\(kid)\" of issuer \(issuer.name) (\(key.jwk.keyType.rawValue) key for \(Self.algorithm(fitting: key.jwk) ?? "nothing accepted"))"
            )
        }

        // Verified: the signature, then the claims of the verified payload.
        let claims: TokenClaims
        do {
            claims = try await key.collection.verify(bytes, as: TokenClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw IdentityError("bad signature: not signed by key \"\(kid)\" of issuer \(issuer.name)")
        } catch {
            throw IdentityError("bad signature: key \"\(kid)\" of issuer \(issuer.name) does not verify it (\(error))")
        }
        guard claims.string("iss") == issuer.issuer else {
            throw IdentityError("unknown issuer: the signed iss is not \"\(issuer.issuer)\"")
        }
        let audiences = claims.strings("aud")
        guard audiences.contains(where: issuer.audiences.contains) else {
            throw IdentityError(
                "wrong audience \(audiences) for issuer \(issuer.name) (expected one of \(issuer.audiences))")
        }
        let now = self.now()
        let leeway = options.leeway.seconds
        guard let expires = claims.date("exp") else { throw IdentityError("expired: the token has no exp") }
        guard now.timeIntervalSince(expires) <= leeway else {
            throw IdentityError("expired at \(Self.format(expires)) (now \(Self.format(now)), leeway \(leeway) s)")
        }
        if let notBefore = claims.date("nbf"), notBefore.timeIntervalSince(now) > leeway {
            throw IdentityError(
                "not yet valid: nbf \(Self.format(notBefore)) (now \(Self.format(now)), leeway \(leeway) s)")
        }
        if let issuedAt = claims.date("iat"), issuedAt.timeIntervalSince(now) > leeway {
            throw IdentityError(
                "not yet valid: issued in the future, iat \(Self.format(issuedAt)) (now \(Self.format(now)), leeway \(leeway) s)"
            )
        }
        guard let subject = claims.string(issuer.userClaim), !subject.isEmpty else {
            throw IdentityError("no user: the token's \(issuer.userClaim) claim is missing or not a string")
        }
        return VerifiedIdentity(
            issuer: issuer.name, subject: subject, expires: expires, emailAddress: claims.verifiedEmailAddress)
    }

    /// The accepted algorithm `jwk` verifies, or nil: RS256 for RSA, ES256 for EC P-256, EdDSA
    /// for OKP Ed25519, and only that one when the key names its `alg`.
    static func algorithm(fitting jwk: JWK) -> String? {
        let fitting: String?
        switch (jwk.keyType, jwk.curve?.rawValue) {
        case (.rsa, _): fitting = "RS256"
        case (.ecdsa, "P-256"): fitting = "ES256"
        case (.octetKeyPair, "Ed25519"): fitting = "EdDSA"
        default: fitting = nil
        }
        if let named = jwk.algorithm?.rawValue, named != fitting { return nil }
        return fitting
    }

    private static func format(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}

/// A token's claims as they are, whatever they hold: the verifier reads the standard ones and
/// the configured user claim itself, and jwt-kit checks none of them.
struct TokenClaims: JWTPayload {
    indirect enum Value: Codable, Sendable {
        case string(String)
        case number(Double)
        case bool(Bool)
        case array([Value])
        case object([String: Value])
        case null

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Double.self) {
                self = .number(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if let value = try? container.decode([Value].self) {
                self = .array(value)
            } else {
                self = .object(try container.decode([String: Value].self))
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let value): try container.encode(value)
            case .number(let value): try container.encode(value)
            case .bool(let value): try container.encode(value)
            case .array(let value): try container.encode(value)
            case .object(let value): try container.encode(value)
            case .null: try container.encodeNil()
            }
        }
    }

    let values: [String: Value]

    init(from decoder: any Decoder) throws {
        values = try decoder.singleValueContainer().decode([String: Value].self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(values)
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}

    func string(_ claim: String) -> String? {
        if case .string(let value) = values[claim] { value } else { nil }
    }

    /// `email` when `email_verified` is true (a boolean, or the string `"true"` as Sign in with
    /// Apple writes it); `nil` otherwise.
    var verifiedEmailAddress: String? {
        guard let email = string("email"), !email.isEmpty else { return nil }
        switch values["email_verified"] {
        case .bool(true)?, .string("true")?: return email
        default: return nil
        }
    }

    /// A claim that is a string or a list of strings (`aud`).
    func strings(_ claim: String) -> [String] {
        switch values[claim] {
        case .string(let value): [value]
        case .array(let values): values.compactMap { if case .string(let value) = $0 { value } else { nil } }
        default: []
        }
    }

    /// A NumericDate claim: seconds since 1970.
    func date(_ claim: String) -> Date? {
        if case .number(let seconds) = values[claim] { Date(timeIntervalSince1970: seconds) } else { nil }
    }
}
