import Foundation
import JWTKit
import LogSyncServer
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSyncIdentity

/// A token the verifier must refuse, and what its reason must say.
struct BadToken: CustomTestStringConvertible, Sendable {
    let name: String
    let reason: String
    let make: @Sendable (TestKeys, Date) async throws -> String

    var testDescription: String { name }

    /// Every bad token, the expired one and the one not yet valid a second past the leeway.
    static let all = all(margin: 61)

    /// Every bad token, the expired one and the one not yet valid `margin` seconds off (past the
    /// 60 s leeway): a server that reads the wall clock a moment after the test signed needs
    /// more than a second.
    static func all(margin: TimeInterval) -> [BadToken] {
        [
            BadToken(name: "expired", reason: "expired at") { keys, now in
                var claims = goodClaims(now: now)
                claims.expires = now.addingTimeInterval(-margin)
                claims.issuedAt = now.addingTimeInterval(-max(3600, 2 * margin))
                return try await keys.p256.sign(claims)
            },
            BadToken(name: "not yet valid (nbf)", reason: "not yet valid: nbf") { keys, now in
                var claims = goodClaims(now: now)
                claims.notBefore = now.addingTimeInterval(margin)
                return try await keys.ed25519.sign(claims)
            },
        ] + timeless
    }

    /// The bad tokens that stay bad whenever they are checked.
    static let timeless: [BadToken] = [
        BadToken(name: "issued in the future (iat)", reason: "not yet valid: issued in the future") { keys, now in
            var claims = goodClaims(now: now)
            claims.issuedAt = now.addingTimeInterval(120)
            return try await keys.rsa.sign(claims)
        },
        BadToken(name: "without exp", reason: "expired: the token has no exp") { keys, now in
            var claims = goodClaims(now: now)
            claims.expires = nil
            return try await keys.p256.sign(claims)
        },
        BadToken(name: "wrong audience", reason: "wrong audience") { keys, now in
            try await keys.p256.sign(goodClaims(now: now, audiences: ["com.example.other-app"]))
        },
        BadToken(name: "wrong issuer", reason: "unknown issuer \"https://evil.example\"") { keys, now in
            try await keys.p256.sign(goodClaims(now: now, issuer: "https://evil.example"))
        },
        BadToken(name: "alg none", reason: "algorithm not allowed: none") { keys, now in
            let header = base64URL(Data(#"{"alg":"none","kid":"acme-es","typ":"JWT"}"#.utf8))
            let payload = base64URL(try JSONEncoder().encode(goodClaims(now: now)))
            return "\(header).\(payload)."
        },
        BadToken(name: "HS256 with the RSA public key as its secret", reason: "algorithm not allowed: HS256") {
            keys, now in
            let forger = JWTKeyCollection()
            await forger.add(hmac: HMACKey(from: keys.rsaPublicPEM), digestAlgorithm: .sha256, kid: "acme-rs")
            return try await forger.sign(goodClaims(now: now), kid: "acme-rs")
        },
        BadToken(name: "ES256 header on the RSA key's kid", reason: "algorithm not allowed: ES256 does not fit key") {
            keys, now in
            let forger = JWTKeyCollection()
            await forger.add(ecdsa: try ES256PrivateKey(pem: keys.stranger.privatePEM), kid: "acme-rs")
            return try await forger.sign(goodClaims(now: now), kid: "acme-rs")
        },
        BadToken(name: "a critical header extension", reason: "critical header parameters not understood") {
            keys, now in
            let forger = JWTKeyCollection()
            await forger.add(ecdsa: try ES256PrivateKey(pem: keys.p256.privatePEM), kid: "acme-es")
            let header: JWTHeader = ["crit": .array([.string("x-policy")]), "x-policy": .string("strict")]
            return try await forger.sign(goodClaims(now: now), kid: "acme-es", header: header)
        },
        BadToken(name: "unknown kid", reason: "unknown kid \"acme-stranger\"") { keys, now in
            try await keys.stranger.sign(goodClaims(now: now))
        },
        BadToken(name: "no kid", reason: "unknown kid: the token names no key") { keys, now in
            let forger = JWTKeyCollection()
            await forger.add(ecdsa: try ES256PrivateKey(pem: keys.p256.privatePEM))
            return try await forger.sign(goodClaims(now: now))
        },
        BadToken(name: "tampered payload", reason: "bad signature") { keys, now in
            let parts = try await keys.rsa.sign(goodClaims(now: now)).split(separator: ".")
            let forged = base64URL(try JSONEncoder().encode(goodClaims(now: now, subject: "mallory")))
            return "\(parts[0]).\(forged).\(parts[2])"
        },
        BadToken(name: "tampered signature", reason: "bad signature") { keys, now in
            let parts = try await keys.ed25519.sign(goodClaims(now: now)).split(separator: ".")
            var signature = base64URLDecoded(parts[2])
            signature[signature.startIndex + 5] ^= 0x01
            return "\(parts[0]).\(parts[1]).\(base64URL(signature))"
        },
        BadToken(name: "oversized", reason: "oversized: ") { keys, now in
            var claims = goodClaims(now: now)
            claims.other["padding"] = String(repeating: "a", count: 9000)
            return try await keys.p256.sign(claims)
        },
        BadToken(name: "not a JWT", reason: "malformed token") { _, _ in "not.a.jwt" },
    ]
}

@Suite("JWT identity tokens")
struct JWTIdentityVerifierTests {
    @Test("every bad token is refused with a reason that says why", arguments: BadToken.all)
    func badToken(_ bad: BadToken) async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            let clock = TestClock()
            let verifier = try acmeVerifier(in: directory, keys: keys, clock: clock)
            let token = try await bad.make(keys, clock.now)
            let error = await #expect(throws: IdentityError.self) { try await verifier.verify(token) }
            #expect(error?.reason.contains(bad.reason) == true, "\(bad.name): \(error?.reason ?? "accepted")")
        }
    }

    @Test("a JWKS that fails to load refuses the token with the file it tried")
    func jwksFileMissing() async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("no-such-jwks.json")
            let clock = TestClock()
            let verifier = try acmeVerifier(jwks: missing, clock: clock)
            let error = await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))
            }
            #expect(
                error?.reason.contains("JWKS failed to load from \(missing.path)") == true,
                "\(String(describing: error))")
        }
    }

    @Test("good tokens of RS256, ES256 and EdDSA are accepted as issuer-name:sub", arguments: ["rs", "es", "ed"])
    func goodTokens(_ which: String) async throws {
        let keys = try await TestKeys.value
        let key = ["rs": keys.rsa, "es": keys.p256, "ed": keys.ed25519][which]!
        try await withTemporaryDirectory { directory in
            let clock = TestClock()
            let verifier = try acmeVerifier(in: directory, keys: keys, clock: clock)
            let identity = try await verifier.verify(try await key.sign(goodClaims(now: clock.now)))
            #expect(identity.user == UserID(rawValue: "acme:alice"))
            #expect(identity.expires == clock.now.addingTimeInterval(3600))

            // Within the leeway either side: just expired, and not quite valid yet.
            var late = goodClaims(now: clock.now)
            late.expires = clock.now.addingTimeInterval(-59)
            _ = try await verifier.verify(try await key.sign(late))
            var early = goodClaims(now: clock.now)
            early.notBefore = clock.now.addingTimeInterval(59)
            early.issuedAt = clock.now.addingTimeInterval(59)
            _ = try await verifier.verify(try await key.sign(early))

            // A token for several audiences, one of them ours.
            let several = try await verifier.verify(
                try await key.sign(goodClaims(now: clock.now, audiences: ["com.example.web", Acme.audience])))
            #expect(several.subject == "alice")
        }
    }

    @Test("a configured claim names the user instead of sub")
    func userClaim() async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            let clock = TestClock()
            let verifier = try acmeVerifier(in: directory, keys: keys, clock: clock, userClaim: "uid")
            var claims = goodClaims(now: clock.now)
            claims.other["uid"] = "u-42"
            #expect(try await verifier.verify(try await keys.p256.sign(claims)).user == UserID(rawValue: "acme:u-42"))
            let error = await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))
            }
            #expect(error?.reason.contains("uid claim is missing") == true)
        }
    }

    @Test(
        "an e-mail address counts only when the issuer marks it verified (true, or \"true\" as Apple writes it)",
        arguments: [("true", "alice@example.com"), ("\"true\"", "alice@example.com"), ("false", nil), (nil, nil)]
            as [(String?, String?)])
    func verifiedEmail(_ verified: String?, _ expected: String?) async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            let clock = TestClock()
            let verifier = try acmeVerifier(in: directory, keys: keys, clock: clock)
            // The test claims hold strings only: a boolean is written into the payload's JSON.
            var claims = goodClaims(now: clock.now)
            claims.other["email"] = "alice@example.com"
            var json = String(decoding: try JSONEncoder().encode(claims), as: UTF8.self)
            if let verified { json = String(json.dropLast()) + ",\"email_verified\":\(verified)}" }
            let signer = JWTKeyCollection()
            await signer.add(
                ecdsa: try ES256PrivateKey(pem: keys.p256.privatePEM), kid: JWKIdentifier(string: keys.p256.kid))
            let token = try await signer.sign(
                JSONDecoder().decode(TokenClaims.self, from: Data(json.utf8)), kid: JWKIdentifier(string: keys.p256.kid)
            )
            #expect(try await verifier.verify(token).emailAddress == expected)
        }
    }

    @Test("two issuers with the same sub give two different users")
    func twoIssuers() async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            let acmeKeys = directory.appendingPathComponent("acme.json")
            let otherKeys = directory.appendingPathComponent("other.json")
            try DevelopmentSigningKey.jwks(keys.acme).write(to: acmeKeys)
            try DevelopmentSigningKey.jwks([keys.other]).write(to: otherKeys)
            let clock = TestClock()
            let verifier = try JWTIdentityVerifier(
                issuers: [
                    TrustedIssuer(
                        name: "acme", issuer: Acme.iss, audiences: [Acme.audience], keys: .jwksFile(acmeKeys)),
                    TrustedIssuer(
                        name: "other", issuer: "https://other.example", audiences: ["other-app"],
                        keys: .jwksFile(otherKeys)),
                ], now: clock.reader)
            let fromAcme = try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))
            let fromOther = try await verifier.verify(
                try await keys.other.sign(
                    goodClaims(now: clock.now, issuer: "https://other.example", audiences: ["other-app"])))
            #expect(fromAcme.subject == fromOther.subject)
            #expect(fromAcme.user == UserID(rawValue: "acme:alice"))
            #expect(fromOther.user == UserID(rawValue: "other:alice"))

            // The other issuer's key does not vouch for acme's users, even with acme's iss.
            let error = await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await keys.other.sign(goodClaims(now: clock.now)))
            }
            #expect(error?.reason.contains("unknown kid \"other-es\"") == true)
        }
    }

    @Test("an unknown kid fetches the keys again, at most once per refetch floor")
    func refetchFloor() async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            let jwks = directory.appendingPathComponent("jwks.json")
            try DevelopmentSigningKey.jwks([keys.p256]).write(to: jwks)
            let clock = TestClock()
            var options = JWTIdentityVerifier.Options()
            options.refetchFloor = .seconds(30)
            let verifier = try acmeVerifier(jwks: jwks, clock: clock, options: options)
            _ = try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))
            #expect(verifier.keyFetches(issuer: "acme") == 1)

            // The issuer rotates in a new key; a token of it within the floor is refused unfetched.
            try DevelopmentSigningKey.jwks([keys.p256, keys.ed25519]).write(to: jwks)
            clock.advance(by: 29)
            let early = await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await keys.ed25519.sign(goodClaims(now: clock.now)))
            }
            #expect(early?.reason.contains("unknown kid \"acme-ed\"") == true)
            #expect(verifier.keyFetches(issuer: "acme") == 1)

            // Past the floor, the same token's key is fetched.
            clock.advance(by: 2)
            _ = try await verifier.verify(try await keys.ed25519.sign(goodClaims(now: clock.now)))
            #expect(verifier.keyFetches(issuer: "acme") == 2)

            // At once another unknown kid: refused, no fetch; a known one still passes.
            await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await keys.rsa.sign(goodClaims(now: clock.now)))
            }
            _ = try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))
            #expect(verifier.keyFetches(issuer: "acme") == 2)
        }
    }

    @Test("keys from a JWKS URL and from OpenID discovery on loopback", arguments: ["jwksURL", "discovery"])
    func urlSources(_ source: String) async throws {
        let keys = try await TestKeys.value
        try await withKeyServer(jwks: try DevelopmentSigningKey.jwks(keys.acme), issuer: Acme.iss) { server in
            let clock = TestClock()
            let verifier = try JWTIdentityVerifier(
                issuers: [
                    TrustedIssuer(
                        name: "acme", issuer: Acme.iss, audiences: [Acme.audience],
                        keys: source == "jwksURL" ? .jwksURL(server.jwksURL) : .discovery(server.discoveryURL))
                ], now: clock.reader)
            for key in keys.acme {
                #expect(
                    try await verifier.verify(try await key.sign(goodClaims(now: clock.now))).user.rawValue
                        == "acme:alice")
            }
            #expect(server.requests == 1)

            // The endpoint fails: an unknown kid is refused naming the URL; known keys still pass.
            server.set(.fail)
            clock.advance(by: 31)
            let error = await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await keys.stranger.sign(goodClaims(now: clock.now)))
            }
            #expect(
                error?.reason.contains("JWKS failed to load from \(server.jwksURL.absoluteString)") == true,
                "\(String(describing: error))")
            #expect(error?.reason.contains("HTTP status 500") == true)
            _ = try await verifier.verify(try await keys.rsa.sign(goodClaims(now: clock.now)))
            #expect(server.requests == 2)
        }
    }

    // A key URL redirected elsewhere must still be https (or http to loopback) at every hop:
    // a redirect to plain http elsewhere would let anyone on the path hand out keys.
    @Test(
        "a key URL's redirects are followed only to URLs a key URL may have",
        arguments: [
            ("moved", nil), ("away", "redirected to \"http://keys.example.com/jwks.json\" must be https"),
            ("loop", "more than 5 redirects"),
        ])
    func redirects(_ path: String, _ refusal: String?) async throws {
        let keys = try await TestKeys.value
        try await withKeyServer(jwks: try DevelopmentSigningKey.jwks(keys.acme), issuer: Acme.iss) { server in
            let clock = TestClock()
            let url = URL(string: "http://127.0.0.1:\(server.port)/\(path)")!
            let verifier = try JWTIdentityVerifier(
                issuers: [
                    TrustedIssuer(name: "acme", issuer: Acme.iss, audiences: [Acme.audience], keys: .jwksURL(url))
                ],
                now: clock.reader)
            let token = try await keys.p256.sign(goodClaims(now: clock.now))
            guard let refusal else {
                #expect(try await verifier.verify(token).user.rawValue == "acme:alice")
                #expect(server.requests == 1)
                return
            }
            let error = await #expect(throws: IdentityError.self) { try await verifier.verify(token) }
            #expect(error?.reason.contains("JWKS failed to load from \(url.absoluteString)") == true)
            #expect(error?.reason.contains(refusal) == true, "\(String(describing: error))")
            #expect(server.requests == 0)
        }
    }

    @Test("a discovery document of another issuer is refused")
    func discoveryOfAnotherIssuer() async throws {
        let keys = try await TestKeys.value
        try await withKeyServer(jwks: try DevelopmentSigningKey.jwks(keys.acme), issuer: "https://evil.example") {
            server in
            let clock = TestClock()
            let verifier = try JWTIdentityVerifier(
                issuers: [
                    TrustedIssuer(
                        name: "acme", issuer: Acme.iss, audiences: [Acme.audience],
                        keys: .discovery(server.discoveryURL))
                ], now: clock.reader)
            let failures = await verifier.loadKeys()
            #expect(failures.count == 1)
            #expect(failures.first?.reason.contains("of issuer \"https://evil.example\"") == true)
        }
    }

    @Test(
        "a JWKS endpoint that hangs holds neither known-kid verifications nor a second fetch",
        .timeLimit(.minutes(3)))
    func hangingEndpoint() async throws {
        let keys = try await TestKeys.value
        try await withKeyServer(jwks: try DevelopmentSigningKey.jwks([keys.p256]), issuer: Acme.iss) { server in
            let clock = TestClock()
            var options = JWTIdentityVerifier.Options()
            options.fetchTimeout = .seconds(600)  // the test lets the held request go itself
            let verifier = try JWTIdentityVerifier(
                issuers: [
                    TrustedIssuer(
                        name: "acme", issuer: Acme.iss, audiences: [Acme.audience], keys: .jwksURL(server.jwksURL))
                ], options: options, now: clock.reader)
            _ = try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))

            // The endpoint now takes requests and never answers; two tokens of a new key wait.
            server.set(.hold)
            clock.advance(by: 31)
            let newKeyToken = try await keys.ed25519.sign(goodClaims(now: clock.now))
            let finished = Counter()
            let waiting = (0..<2).map { _ in
                Task {
                    defer { finished.add() }
                    return try await verifier.verify(newKeyToken)
                }
            }
            await server.waitUntilHolding(1)

            // While that fetch hangs, a known key's token is verified at once.
            let known = try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))
            #expect(known.user.rawValue == "acme:alice")
            #expect(server.holding == 1)
            #expect(finished.value == 0)
            #expect(verifier.keyFetches(issuer: "acme") == 2)  // the two waiting tokens share one fetch

            // The endpoint answers at last, with the new key: both waiting tokens pass.
            server.serve(try DevelopmentSigningKey.jwks([keys.p256, keys.ed25519]))
            server.release()
            for task in waiting { #expect(try await task.value.user.rawValue == "acme:alice") }
            #expect(server.requests == 2)
        }
    }

    @Test("a fetch that outlasts its timeout fails naming the URL; known keys stay usable", .timeLimit(.minutes(3)))
    func fetchTimeout() async throws {
        let keys = try await TestKeys.value
        try await withKeyServer(jwks: try DevelopmentSigningKey.jwks([keys.p256]), issuer: Acme.iss) { server in
            let clock = TestClock()
            var options = JWTIdentityVerifier.Options()
            options.fetchTimeout = .milliseconds(200)
            let verifier = try JWTIdentityVerifier(
                issuers: [
                    TrustedIssuer(
                        name: "acme", issuer: Acme.iss, audiences: [Acme.audience], keys: .jwksURL(server.jwksURL))
                ], options: options, now: clock.reader)
            // The first load itself may outlast 200 ms on a busy machine: load until the keys are in.
            var loaded = false
            for _ in 0..<50 where !loaded {
                loaded = await verifier.loadKeys().isEmpty
                if !loaded { clock.advance(by: 31) }
            }
            try #require(loaded)
            server.set(.hold)
            clock.advance(by: 31)
            let error = await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await keys.ed25519.sign(goodClaims(now: clock.now)))
            }
            #expect(
                error?.reason.contains("JWKS failed to load from \(server.jwksURL.absoluteString)") == true,
                "\(String(describing: error))")
            _ = try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now)))
        }
    }

    @Test("a key set with keys of other kinds keeps those that fit an accepted algorithm")
    func mixedKeySet() async throws {
        let keys = try await TestKeys.value
        try await withTemporaryDirectory { directory in
            // An HMAC secret, the RSA key marked for encryption (RSA-OAEP), and the P-256 key.
            var encryption = keys.rsa.publicJWK
            encryption.keyIdentifier = "acme-enc"
            encryption.algorithm = .rsaOAEP
            let signing = try JSONSerialization.jsonObject(with: JSONEncoder().encode(keys.p256.publicJWK))
            let oaep = try JSONSerialization.jsonObject(with: JSONEncoder().encode(encryption))
            let jwks = directory.appendingPathComponent("jwks.json")
            try JSONSerialization.data(withJSONObject: [
                "keys": [["kty": "oct", "kid": "acme-secret", "k": "c2VjcmV0"], oaep, signing]
            ]).write(to: jwks)
            let clock = TestClock()
            let verifier = try acmeVerifier(jwks: jwks, clock: clock)
            #expect(try await verifier.verify(try await keys.p256.sign(goodClaims(now: clock.now))).subject == "alice")

            let forger = JWTKeyCollection()
            await forger.add(
                rsa: try Insecure.RSA.PrivateKey(pem: keys.rsa.privatePEM), digestAlgorithm: .sha256, kid: "acme-enc")
            let error = await #expect(throws: IdentityError.self) {
                try await verifier.verify(try await forger.sign(goodClaims(now: clock.now), kid: "acme-enc"))
            }
            #expect(error?.reason.contains("unknown kid \"acme-enc\"") == true, "\(String(describing: error))")
        }
    }
}
