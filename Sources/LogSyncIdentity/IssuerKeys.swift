import AsyncHTTPClient
import Foundation
import JWTKit
import LogSyncServer
import NIOCore
import Synchronization

/// One issuer's public keys: loaded once and kept, loaded again when a token names a key that
/// is not among them, but no more often than the refetch floor.
///
/// Tokens of known keys never wait for a fetch: the lock guards the key table only, never a
/// fetch, and concurrent tokens of unknown keys share one fetch. A fetch that fails keeps the
/// keys loaded before.
final class IssuerKeys: Sendable {
    /// One verifying key, with the jwt-kit collection that holds it alone (a collection falls
    /// back to its default key for a `kid` it lacks; one key per collection leaves nothing to
    /// fall back to).
    struct Key: Sendable {
        let kid: String
        let jwk: JWK
        let collection: JWTKeyCollection
    }

    private struct State {
        var keys: [String: Key] = [:]
        /// When the last fetch started: the floor counts from it.
        var lastFetch: Date?
        /// The fetch under way, which every token of an unknown key awaits.
        var fetch: Task<Void, Never>?
        /// Why the last fetch failed, or nil when it succeeded.
        var failure: IdentityError?
        var fetches = 0
    }

    let issuer: TrustedIssuer
    private let loader: KeyLoader
    private let floor: Duration
    private let now: @Sendable () -> Date
    private let state = Mutex(State())

    init(issuer: TrustedIssuer, loader: KeyLoader, floor: Duration, now: @escaping @Sendable () -> Date) {
        self.issuer = issuer
        self.loader = loader
        self.floor = floor
        self.now = now
    }

    /// How many fetches have started.
    var fetches: Int { state.withLock { $0.fetches } }

    /// Loads the keys now, whatever the floor, and answers why it failed, if it did.
    func load() async -> IdentityError? {
        let task = state.withLock { state in
            if let fetch = state.fetch { return fetch }
            return startFetch(&state)
        }
        await task.value
        return state.withLock { $0.failure }
    }

    /// The key named `kid`: at once when it is known; otherwise after a fetch, the one under way
    /// or a new one if the floor allows.
    ///
    /// - Throws: `IdentityError`: the key is unknown (after a fetch, or with the floor not
    ///   passed yet), or the keys failed to load (naming where from).
    func key(_ kid: String) async throws(IdentityError) -> Key {
        enum Step {
            case found(Key)
            case wait(Task<Void, Never>)
            case refuse(IdentityError)
        }
        let step: Step = state.withLock { state in
            if let key = state.keys[kid] { return .found(key) }
            if let fetch = state.fetch { return .wait(fetch) }
            if let last = state.lastFetch, now().timeIntervalSince(last) < floor.seconds {
                return .refuse(unknown(kid, state, floorNotPassed: true))
            }
            return .wait(startFetch(&state))
        }
        switch step {
        case .found(let key): return key
        case .refuse(let error): throw error
        case .wait(let fetch):
            await fetch.value
            let result: Result<Key, IdentityError> = state.withLock { state in
                if let key = state.keys[kid] { return .success(key) }
                return .failure(unknown(kid, state, floorNotPassed: false))
            }
            return try result.get()
        }
    }

    private func unknown(_ kid: String, _ state: State, floorNotPassed: Bool) -> IdentityError {
        if let failure = state.failure {
            return IdentityError("unknown kid \"\(kid)\" of issuer \(issuer.name): \(failure.reason)")
        }
        let when = floorNotPassed ? " (keys fetched less than \(floor.seconds) s ago)" : ""
        return IdentityError(
            "unknown kid \"\(kid)\": not among the \(state.keys.count) keys of issuer \(issuer.name) from \(issuer.keys)\(when)"
        )
    }

    /// Starts a fetch; the caller holds the lock, which the fetch takes only when it is done.
    private func startFetch(_ state: inout State) -> Task<Void, Never> {
        state.lastFetch = now()
        state.fetches += 1
        let task = Task { await self.fetch() }
        state.fetch = task
        return task
    }

    private func fetch() async {
        let result: Result<[String: Key], IdentityError>
        do throws(IdentityError) {
            let (data, location) = try await loader.load()
            result = .success(try await Self.keys(from: data, location: location))
        } catch {
            result = .failure(error)
        }
        state.withLock { state in
            switch result {
            case .success(let keys):
                state.keys = keys
                state.failure = nil
            case .failure(let error):
                state.failure = error
            }
            state.fetch = nil
        }
    }

    /// The verifying keys of a JSON Web Key Set: those with a `kid` whose type fits an accepted
    /// algorithm (RSA for RS256, EC P-256 for ES256, OKP Ed25519 for EdDSA); others are skipped.
    static func keys(from data: Data, location: String) async throws(IdentityError) -> [String: Key] {
        struct Entry: Decodable {
            let jwk: JWK?
            init(from decoder: any Decoder) throws { jwk = try? JWK(from: decoder) }
        }
        struct Document: Decodable { let keys: [Entry] }
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch {
            throw IdentityError("JWKS failed to load from \(location): not a JSON Web Key Set (\(error))")
        }
        var keys: [String: Key] = [:]
        for case let jwk? in document.keys.map(\.jwk) {
            guard let kid = jwk.keyIdentifier?.string, JWTIdentityVerifier.algorithm(fitting: jwk) != nil else {
                continue
            }
            let collection = JWTKeyCollection()
            do {
                try await collection.add(jwk: jwk)
            } catch {
                continue  // a key jwt-kit cannot use (a malformed modulus, say) verifies nothing
            }
            keys[kid] = Key(kid: kid, jwk: jwk, collection: collection)
        }
        return keys
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Reads an issuer's key set: a file, a URL, or the `jwks_uri` of a discovery document.
struct KeyLoader: Sendable {
    let source: TrustedIssuer.KeySource
    /// The `iss` the discovery document must name.
    let issuer: String
    let client: HTTPClient
    let timeout: Duration

    /// The largest document read: key sets are a few kilobytes.
    static let maximumBytes = 1 << 20

    /// The key set's bytes and where they came from.
    func load() async throws(IdentityError) -> (Data, String) {
        switch source {
        case .jwksFile(let file):
            do {
                return (try Data(contentsOf: file), file.path)
            } catch {
                throw IdentityError("JWKS failed to load from \(file.path): \(error.localizedDescription)")
            }
        case .jwksURL(let url):
            return (try await get(url, what: ""), url.absoluteString)
        case .discovery(let url):
            struct Discovery: Decodable {
                let issuer: String?
                let jwksURI: String
                enum CodingKeys: String, CodingKey {
                    case issuer
                    case jwksURI = "jwks_uri"
                }
            }
            let data = try await get(url, what: " (OpenID discovery document)")
            let discovery: Discovery
            do {
                discovery = try JSONDecoder().decode(Discovery.self, from: data)
            } catch {
                throw IdentityError(
                    "JWKS failed to load from \(url.absoluteString): not an OpenID discovery document with a jwks_uri (\(error))"
                )
            }
            if let named = discovery.issuer, named != issuer {
                throw IdentityError(
                    "JWKS failed to load from \(url.absoluteString): the discovery document is of issuer \"\(named)\", not \"\(issuer)\""
                )
            }
            guard let jwks = URL(string: discovery.jwksURI) else {
                throw IdentityError(
                    "JWKS failed to load from \(url.absoluteString): jwks_uri \"\(discovery.jwksURI)\" is not a URL")
            }
            if let problem = TrustedIssuer.problem(with: jwks) {
                throw IdentityError(
                    "JWKS failed to load from \(jwks.absoluteString) (discovery's jwks_uri): \(problem)")
            }
            return (try await get(jwks, what: " (jwks_uri of \(url.absoluteString))"), jwks.absoluteString)
        }
    }

    /// How many redirects a key fetch follows.
    static let maximumRedirects = 5

    private func get(_ url: URL, what: String) async throws(IdentityError) -> Data {
        var current = url
        do {
            for _ in 0...Self.maximumRedirects {
                var request = HTTPClientRequest(url: current.absoluteString)
                request.headers.add(name: "Accept", value: "application/json")
                let response = try await client.execute(
                    request, timeout: .nanoseconds(Int64(timeout.seconds * 1e9)))
                if (300..<400).contains(response.status.code), let location = response.headers.first(name: "Location") {
                    guard let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                        throw IdentityError(
                            "JWKS failed to load from \(url.absoluteString)\(what): redirected to \"\(location)\", not a URL"
                        )
                    }
                    if let problem = TrustedIssuer.problem(with: next) {
                        throw IdentityError(
                            "JWKS failed to load from \(url.absoluteString)\(what): redirected to \(problem)")
                    }
                    current = next
                    continue
                }
                guard response.status == .ok else {
                    throw IdentityError(
                        "JWKS failed to load from \(url.absoluteString)\(what): HTTP status \(response.status.code)")
                }
                let body = try await response.body.collect(upTo: Self.maximumBytes)
                return Data(body.readableBytesView)
            }
            throw IdentityError(
                "JWKS failed to load from \(url.absoluteString)\(what): more than \(Self.maximumRedirects) redirects")
        } catch let error as IdentityError {
            throw error
        } catch {
            throw IdentityError("JWKS failed to load from \(url.absoluteString)\(what): \(error)")
        }
    }
}
