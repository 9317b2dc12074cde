import Foundation
import Hummingbird
import JWTKit
import LogSyncIdentity
import LogSyncServer
import Logging
import Synchronization

/// A clock the test moves by hand: the verifier's `now`.
final class TestClock: Sendable {
    private let date: Mutex<Date>
    init(_ date: Date = Date(timeIntervalSince1970: 1_800_000_000)) { self.date = Mutex(date) }
    var now: Date { date.withLock { $0 } }
    func advance(by seconds: TimeInterval) { date.withLock { $0.addTimeInterval(seconds) } }
    /// The verifier's `now` closure.
    var reader: @Sendable () -> Date { { self.now } }
}

/// A count tasks add to.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}

/// Keys made once for the whole test target (RSA keys take a while): one per algorithm of the
/// issuer `acme`, one of the issuer `other`, and one no JWKS lists.
struct TestKeys: Sendable {
    let rsa: DevelopmentSigningKey
    let p256: DevelopmentSigningKey
    let ed25519: DevelopmentSigningKey
    let other: DevelopmentSigningKey
    let stranger: DevelopmentSigningKey
    let rsaPublicPEM: String

    static let shared = Task { try await TestKeys() }
    static var value: TestKeys { get async throws { try await shared.value } }

    private init() async throws {
        rsa = try await .generate(.rs256, kid: "acme-rs")
        p256 = try await .generate(.es256, kid: "acme-es")
        ed25519 = try await .generate(.eddsa, kid: "acme-ed")
        other = try await .generate(.es256, kid: "other-es")
        stranger = try await .generate(.es256, kid: "acme-stranger")
        rsaPublicPEM = try Insecure.RSA.PrivateKey(pem: rsa.privatePEM).publicKey.pemRepresentation
    }

    var acme: [DevelopmentSigningKey] { [rsa, p256, ed25519] }
}

enum Acme {
    static let iss = "https://acme.example"
    static let audience = "com.example.notes"
}

/// Claims of a good token of `acme` for alice at `now`: valid an hour.
func goodClaims(
    now: Date, subject: String = "alice", issuer: String = Acme.iss, audiences: [String] = [Acme.audience]
) -> IdentityTokenClaims {
    IdentityTokenClaims(
        issuer: issuer, subject: subject, audiences: audiences, expires: now.addingTimeInterval(3600),
        notBefore: now.addingTimeInterval(-10), issuedAt: now.addingTimeInterval(-10))
}

/// `acme` with `keys.acme` in a JWKS file of `directory`, its users named by `userClaim`,
/// verified at `clock`'s time.
func acmeVerifier(
    in directory: URL, keys: TestKeys, clock: TestClock, userClaim: String = "sub"
) throws -> JWTIdentityVerifier {
    let jwks = directory.appendingPathComponent("jwks.json")
    try DevelopmentSigningKey.jwks(keys.acme).write(to: jwks)
    return try acmeVerifier(jwks: jwks, clock: clock, userClaim: userClaim)
}

/// `acme` with its keys in `file`, its users named by `userClaim`, verified at `clock`'s time.
func acmeVerifier(
    jwks file: URL, clock: TestClock, userClaim: String = "sub", options: JWTIdentityVerifier.Options = .init()
) throws -> JWTIdentityVerifier {
    try JWTIdentityVerifier(
        issuers: [
            TrustedIssuer(
                name: "acme", issuer: Acme.iss, audiences: [Acme.audience], userClaim: userClaim, keys: .jwksFile(file))
        ], options: options, now: clock.reader)
}

/// Base64url without padding, for tokens assembled by hand.
func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

func base64URLDecoded(_ text: some StringProtocol) -> Data {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    return Data(base64Encoded: base64)!
}

/// A JWKS server on loopback for the URL and discovery key sources: it serves `/jwks.json` and
/// `/.well-known/openid-configuration`, counts requests, can fail them, and can hold them (a
/// server that takes the request and never answers, until the test lets it go).
final class KeyServer: Sendable {
    enum Mode { case serve, fail, hold }
    private struct State {
        var jwks: Data
        var mode = Mode.serve
        var requests = 0
        var held: [CheckedContinuation<Void, Never>] = []
        var heldWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
    }
    private let state: Mutex<State>
    let issuer: String
    private let portBox = Mutex(0)
    var port: Int { portBox.withLock { $0 } }

    init(jwks: Data, issuer: String) {
        state = Mutex(State(jwks: jwks))
        self.issuer = issuer
    }

    var jwksURL: URL { URL(string: "http://127.0.0.1:\(port)/jwks.json")! }
    var discoveryURL: URL { URL(string: "http://127.0.0.1:\(port)/.well-known/openid-configuration")! }
    /// How many key-set requests arrived.
    var requests: Int { state.withLock { $0.requests } }

    func serve(_ jwks: Data) { state.withLock { $0.jwks = jwks } }
    func set(_ mode: Mode) { state.withLock { $0.mode = mode } }

    /// Waits until `count` requests are held.
    func waitUntilHolding(_ count: Int) async {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                if state.held.count >= count {
                    continuation.resume()
                } else {
                    state.heldWaiters.append((count, continuation))
                }
            }
        }
    }

    var holding: Int { state.withLock { $0.held.count } }

    /// Lets the held requests go: they get the key set served then.
    func release() {
        let held = state.withLock { state in
            state.mode = .serve
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    fileprivate func answerJWKS() async -> Response {
        let mode = state.withLock { state in
            state.requests += 1
            return state.mode
        }
        switch mode {
        case .fail: return Response(status: .internalServerError)
        case .serve: break
        case .hold:
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    state.held.append(continuation)
                    let count = state.held.count
                    let ready = state.heldWaiters.filter { $0.0 <= count }.map(\.1)
                    state.heldWaiters.removeAll { $0.0 <= count }
                    return ready
                }
                for waiter in ready { waiter.resume() }
            }
        }
        let jwks = state.withLock { $0.jwks }
        return Response(
            status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: jwks)))
    }

    fileprivate func answerDiscovery() throws -> Response {
        let body = try JSONSerialization.data(withJSONObject: [
            "issuer": issuer, "jwks_uri": jwksURL.absoluteString,
        ])
        return Response(
            status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    fileprivate func bound(_ port: Int) { portBox.withLock { $0 = port } }
}

/// A ``KeyServer`` on 127.0.0.1 for the time of `body`, stopped after it (held requests let go).
func withKeyServer<R: Sendable>(
    jwks: Data, issuer: String, _ body: (KeyServer) async throws -> R
) async throws -> R {
    let server = KeyServer(jwks: jwks, issuer: issuer)
    let router = Router()
    router.get("jwks.json") { _, _ in await server.answerJWKS() }
    router.get(".well-known/openid-configuration") { _, _ in try server.answerDiscovery() }
    // A redirect to the key set on this loopback server, one to plain http elsewhere, one to itself.
    router.get("moved") { _, _ in
        Response(status: .movedPermanently, headers: [.location: server.jwksURL.absoluteString])
    }
    router.get("away") { _, _ in
        Response(status: .found, headers: [.location: "http://keys.example.com/jwks.json"])
    }
    router.get("loop") { _, _ in Response(status: .found, headers: [.location: "/loop"]) }
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            portContinuation.yield(channel.localAddress?.port ?? 0)
            portContinuation.finish()
        },
        // Quiet: a cancelled server logs its cancelled channels as errors.
        logger: Logger(label: "key-server", factory: { _ in SwiftLogNoOpLogHandler() }))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw IdentityError("the key server did not start") }
        server.bound(port)
        do {
            let result = try await body(server)
            server.release()
            group.cancelAll()
            return result
        } catch {
            server.release()
            group.cancelAll()
            throw error
        }
    }
}
