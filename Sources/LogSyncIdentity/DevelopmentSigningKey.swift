import Crypto
import CryptoExtras
import Foundation
import JWTKit

/// A private signing key of a local issuer, for development, tests and benchmarks: what
/// `logsync-server dev-issuer` keeps in its directory. It signs identity tokens and publishes
/// its public half as a JSON Web Key.
///
/// Production tokens come from the app's real identity provider; the server only ever holds
/// public keys.
public struct DevelopmentSigningKey: Sendable {
    /// A signature algorithm the verifier accepts.
    public enum Algorithm: String, Sendable, CaseIterable, Codable {
        case rs256, es256, eddsa

        /// The name a token's `alg` and a key's `alg` give it.
        public var jwtName: String {
            switch self {
            case .rs256: "RS256"
            case .es256: "ES256"
            case .eddsa: "EdDSA"
            }
        }
    }

    public let algorithm: Algorithm
    /// The key's ID: the `kid` of the tokens it signs and of its public JWK.
    public let kid: String
    /// The private key, PEM: keep it secret.
    public let privatePEM: String
    /// The public key as a JSON Web Key, with its `kid` and `alg`.
    public let publicJWK: JWK
    private let signer: JWTKeyCollection

    /// A new key of `algorithm` (RSA keys are 2048 bits).
    public static func generate(_ algorithm: Algorithm, kid: String) async throws -> DevelopmentSigningKey {
        let pem: String =
            switch algorithm {
            case .rs256: try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
            case .es256: P256.Signing.PrivateKey().pemRepresentation
            case .eddsa: try EdDSA.PrivateKey(curve: .ed25519).pemRepresentation
            }
        return try await DevelopmentSigningKey(algorithm: algorithm, kid: kid, privatePEM: pem)
    }

    /// The key of `algorithm` in `privatePEM`.
    public init(algorithm: Algorithm, kid: String, privatePEM: String) async throws {
        let signer = JWTKeyCollection()
        let identifier = JWKIdentifier(string: kid)
        switch algorithm {
        case .rs256:
            let key = try Insecure.RSA.PrivateKey(pem: privatePEM)
            let (modulus, exponent) = try key.publicKey.getKeyPrimitives()
            publicJWK = .rsa(
                .rs256, identifier: identifier, modulus: Self.base64URL(modulus), exponent: Self.base64URL(exponent))
            await signer.add(rsa: key, digestAlgorithm: .sha256, kid: identifier)
        case .es256:
            let key = try ES256PrivateKey(pem: privatePEM)
            guard let (x, y) = key.parameters else { throw JWTError.generic(identifier: "ES256", reason: "no point") }
            publicJWK = .ecdsa(.es256, identifier: identifier, x: x, y: y, curve: .p256)
            await signer.add(ecdsa: key, kid: identifier)
        case .eddsa:
            let key = try EdDSA.PrivateKey(pem: privatePEM)
            publicJWK = .octetKeyPair(
                .eddsa, identifier: identifier, x: Self.base64URL(key.publicKey.rawRepresentation), y: nil,
                curve: .ed25519)
            await signer.add(eddsa: key, kid: identifier)
        }
        self.algorithm = algorithm
        self.kid = kid
        self.privatePEM = privatePEM
        self.signer = signer
    }

    /// A token of `claims`, signed by this key, its header naming the key's `kid` and
    /// algorithm.
    public func sign(_ claims: IdentityTokenClaims) async throws -> String {
        try await signer.sign(claims, kid: JWKIdentifier(string: kid))
    }

    /// A JSON Web Key Set of `keys`' public halves, as JSON.
    public static func jwks(_ keys: [DevelopmentSigningKey]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(JWKS(keys: keys.map(\.publicJWK)))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// The claims of an identity token that ``DevelopmentSigningKey`` signs: the registered ones a
/// verifier reads, and any others as strings.
public struct IdentityTokenClaims: JWTPayload, Hashable {
    public var issuer: String?
    public var subject: String?
    /// `aud`: one audience is written as a string, several as a list.
    public var audiences: [String]
    public var expires: Date?
    public var notBefore: Date?
    public var issuedAt: Date?
    /// Other claims, by name.
    public var other: [String: String]

    public init(
        issuer: String?, subject: String?, audiences: [String], expires: Date?, notBefore: Date? = nil,
        issuedAt: Date? = nil, other: [String: String] = [:]
    ) {
        self.issuer = issuer
        self.subject = subject
        self.audiences = audiences
        self.expires = expires
        self.notBefore = notBefore
        self.issuedAt = issuedAt
        self.other = other
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (name, value) in other { try container.encode(value, forKey: Key(name)) }
        try container.encodeIfPresent(issuer, forKey: Key("iss"))
        try container.encodeIfPresent(subject, forKey: Key("sub"))
        if audiences.count == 1 {
            try container.encode(audiences[0], forKey: Key("aud"))
        } else if !audiences.isEmpty {
            try container.encode(audiences, forKey: Key("aud"))
        }
        for (name, date) in [("exp", expires), ("nbf", notBefore), ("iat", issuedAt)] {
            if let date { try container.encode(Int64(date.timeIntervalSince1970.rounded(.down)), forKey: Key(name)) }
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        issuer = try container.decodeIfPresent(String.self, forKey: Key("iss"))
        subject = try container.decodeIfPresent(String.self, forKey: Key("sub"))
        if let one = try? container.decodeIfPresent(String.self, forKey: Key("aud")) {
            audiences = [one]
        } else {
            audiences = try container.decodeIfPresent([String].self, forKey: Key("aud")) ?? []
        }
        func date(_ name: String) throws -> Date? {
            try container.decodeIfPresent(Double.self, forKey: Key(name)).map(Date.init(timeIntervalSince1970:))
        }
        expires = try date("exp")
        notBefore = try date("nbf")
        issuedAt = try date("iat")
        var other: [String: String] = [:]
        for key in container.allKeys where !["iss", "sub", "aud", "exp", "nbf", "iat"].contains(key.stringValue) {
            if let value = try? container.decode(String.self, forKey: key) { other[key.stringValue] = value }
        }
        self.other = other
    }

    /// Nothing: the verifier checks the claims itself.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}
}
