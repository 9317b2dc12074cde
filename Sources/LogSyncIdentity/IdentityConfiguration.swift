import AsyncHTTPClient
import Foundation

/// A configuration of identity tokens that is wrong, naming the field: `issuers[1].audiences`.
public struct IdentityConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The field that is wrong, as a path into the configuration (`issuers[0].jwksURL`), or
    /// empty for the file as a whole.
    public let field: String
    /// What is wrong with it.
    public let problem: String

    public init(field: String, _ problem: String) {
        self.field = field
        self.problem = problem
    }

    public var description: String { field.isEmpty ? problem : "\(field): \(problem)" }

    /// The same error, its field inside `parent` (`issuers[0]` and `audiences` make
    /// `issuers[0].audiences`).
    func inside(_ parent: String) -> IdentityConfigurationError {
        IdentityConfigurationError(field: field.isEmpty ? parent : "\(parent).\(field)", problem)
    }
}

/// The identity-token configuration file that `logsync-server --identity-config FILE` reads:
/// the trusted issuers and the verifier's limits, as JSON.
///
/// ```json
/// {
///   "leewaySeconds": 60,
///   "refetchFloorSeconds": 30,
///   "issuers": [
///     { "name": "apple", "issuer": "https://appleid.apple.com",
///       "audiences": ["com.example.notes"],
///       "jwksURL": "https://appleid.apple.com/auth/keys" }
///   ]
/// }
/// ```
///
/// Each issuer names its keys by exactly one of `jwksFile` (a path, relative to the
/// configuration file's directory), `jwksURL` or `discovery` (an OpenID Connect discovery
/// document's URL); `userClaim` is `sub` unless given. The limits are optional and default to
/// those of ``JWTIdentityVerifier/Options``.
public struct IdentityConfiguration: Codable, Sendable, Hashable {
    /// One trusted issuer as written in the file.
    public struct Issuer: Codable, Sendable, Hashable {
        public var name: String?
        public var issuer: String?
        public var audiences: [String]?
        public var userClaim: String?
        public var jwksFile: String?
        public var jwksURL: String?
        public var discovery: String?

        public init(
            name: String? = nil, issuer: String? = nil, audiences: [String]? = nil, userClaim: String? = nil,
            jwksFile: String? = nil, jwksURL: String? = nil, discovery: String? = nil
        ) {
            self.name = name
            self.issuer = issuer
            self.audiences = audiences
            self.userClaim = userClaim
            self.jwksFile = jwksFile
            self.jwksURL = jwksURL
            self.discovery = discovery
        }
    }

    public var issuers: [Issuer]?
    /// How far `exp`, `nbf` and `iat` may be off, in seconds.
    public var leewaySeconds: Double?
    /// The least time between two fetches of one issuer's keys, in seconds.
    public var refetchFloorSeconds: Double?
    /// How long one fetch of keys may take, in seconds.
    public var fetchTimeoutSeconds: Double?
    /// The largest token accepted, in bytes.
    public var maximumTokenBytes: Int?

    public init(
        issuers: [Issuer]? = nil, leewaySeconds: Double? = nil, refetchFloorSeconds: Double? = nil,
        fetchTimeoutSeconds: Double? = nil, maximumTokenBytes: Int? = nil
    ) {
        self.issuers = issuers
        self.leewaySeconds = leewaySeconds
        self.refetchFloorSeconds = refetchFloorSeconds
        self.fetchTimeoutSeconds = fetchTimeoutSeconds
        self.maximumTokenBytes = maximumTokenBytes
    }

    /// The configuration in the JSON file at `file`.
    ///
    /// - Throws: ``IdentityConfigurationError``: the file cannot be read, is not JSON, or a
    ///   field has the wrong type (named by its path).
    public static func load(from file: URL) throws(IdentityConfigurationError) -> IdentityConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw IdentityConfigurationError(field: "", "cannot read \(file.path): \(error.localizedDescription)")
        }
        return try decode(data)
    }

    /// The configuration in `data`, JSON.
    ///
    /// - Throws: ``IdentityConfigurationError`` naming the field of the wrong type, or the
    ///   whole file when it is not JSON.
    public static func decode(_ data: Data) throws(IdentityConfigurationError) -> IdentityConfiguration {
        do {
            return try JSONDecoder().decode(IdentityConfiguration.self, from: data)
        } catch let error as DecodingError {
            switch error {
            case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
                throw IdentityConfigurationError(field: path(context.codingPath), "must be \(describe(type))")
            case .keyNotFound(let key, let context):
                throw IdentityConfigurationError(field: path(context.codingPath + [key]), "is missing")
            case .dataCorrupted(let context):
                throw IdentityConfigurationError(
                    field: path(context.codingPath), context.codingPath.isEmpty ? "is not JSON" : "is not valid")
            @unknown default:
                throw IdentityConfigurationError(field: "", "\(error)")
            }
        } catch {
            throw IdentityConfigurationError(field: "", "\(error)")
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        var path = ""
        for key in codingPath {
            if let index = key.intValue {
                path += "[\(index)]"
            } else {
                path += path.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return path
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Double.Type, is Int.Type: return "a number"
        case is Bool.Type: return "true or false"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "a list" }
            if name.hasPrefix("Dictionary") { return "an object" }
            return "a \(name)"
        }
    }

    /// The verifier's limits: those given, the defaults for the others.
    ///
    /// - Throws: ``IdentityConfigurationError`` for a negative or non-finite time, or a token
    ///   limit below 256 bytes.
    public func options() throws(IdentityConfigurationError) -> JWTIdentityVerifier.Options {
        var options = JWTIdentityVerifier.Options()
        func seconds(
            _ value: Double?, _ field: String, positive: Bool = false
        ) throws(IdentityConfigurationError)
            -> Duration?
        {
            guard let value else { return nil }
            guard value.isFinite, positive ? value > 0 : value >= 0 else {
                throw IdentityConfigurationError(
                    field: field, "must be a number of seconds\(positive ? " above 0" : ", 0 or more"), not \(value)")
            }
            return .milliseconds(Int64(value * 1000))
        }
        if let leeway = try seconds(leewaySeconds, "leewaySeconds") { options.leeway = leeway }
        if let floor = try seconds(refetchFloorSeconds, "refetchFloorSeconds") { options.refetchFloor = floor }
        if let timeout = try seconds(fetchTimeoutSeconds, "fetchTimeoutSeconds", positive: true) {
            options.fetchTimeout = timeout
        }
        if let maximumTokenBytes {
            guard maximumTokenBytes >= 256 else {
                throw IdentityConfigurationError(
                    field: "maximumTokenBytes", "must be at least 256, not \(maximumTokenBytes)")
            }
            options.maximumTokenBytes = maximumTokenBytes
        }
        return options
    }

    /// The trusted issuers, checked; a relative `jwksFile` is taken from `directory` (the
    /// configuration file's).
    ///
    /// - Throws: ``IdentityConfigurationError`` naming the issuer and its field that is wrong,
    ///   or two issuers of one name or one `iss`.
    public func trustedIssuers(relativeTo directory: URL) throws(IdentityConfigurationError) -> [TrustedIssuer] {
        guard let issuers, !issuers.isEmpty else {
            throw IdentityConfigurationError(field: "issuers", "must list at least one issuer")
        }
        var result: [TrustedIssuer] = []
        for (index, entry) in issuers.enumerated() {
            let field = "issuers[\(index)]"
            let issuer: TrustedIssuer
            do {
                issuer = try entry.trusted(relativeTo: directory)
            } catch {
                throw error.inside(field)
            }
            if result.contains(where: { $0.name == issuer.name }) {
                throw IdentityConfigurationError(field: "\(field).name", "\"\(issuer.name)\" names two issuers")
            }
            if result.contains(where: { $0.issuer == issuer.issuer }) {
                throw IdentityConfigurationError(
                    field: "\(field).issuer", "\"\(issuer.issuer)\" is the iss of two issuers")
            }
            result.append(issuer)
        }
        return result
    }

    /// The verifier this configuration describes, fetching keys with `httpClient`. Keys are not
    /// fetched yet (``JWTIdentityVerifier/loadKeys()`` does, or the first token of each issuer).
    ///
    /// - Throws: ``IdentityConfigurationError`` naming the field that is wrong.
    public func verifier(
        relativeTo directory: URL, httpClient: HTTPClient = JWTIdentityVerifier.defaultHTTPClient
    ) throws(IdentityConfigurationError) -> JWTIdentityVerifier {
        try JWTIdentityVerifier(
            issuers: try trustedIssuers(relativeTo: directory), options: try options(), httpClient: httpClient)
    }
}

extension IdentityConfiguration.Issuer {
    func trusted(relativeTo directory: URL) throws(IdentityConfigurationError) -> TrustedIssuer {
        guard let name else { throw IdentityConfigurationError(field: "name", "is missing") }
        guard let issuer else { throw IdentityConfigurationError(field: "issuer", "is missing") }
        guard let audiences else { throw IdentityConfigurationError(field: "audiences", "is missing") }
        let sources = [("jwksFile", jwksFile), ("jwksURL", jwksURL), ("discovery", discovery)]
            .compactMap { field, value in value.map { (field, $0) } }
        guard sources.count == 1, let (field, value) = sources.first else {
            throw IdentityConfigurationError(
                field: sources.isEmpty ? "" : sources.map(\.0).joined(separator: ", "),
                sources.isEmpty
                    ? "needs its keys: one of jwksFile, jwksURL or discovery"
                    : "give one of jwksFile, jwksURL or discovery, not several")
        }
        let keys: TrustedIssuer.KeySource
        switch field {
        case "jwksFile":
            guard !value.isEmpty else { throw IdentityConfigurationError(field: field, "must not be empty") }
            keys = .jwksFile(URL(fileURLWithPath: value, relativeTo: directory).standardizedFileURL)
        default:
            guard let url = URL(string: value) else {
                throw IdentityConfigurationError(field: field, "\"\(value)\" is not a URL")
            }
            keys = field == "jwksURL" ? .jwksURL(url) : .discovery(url)
        }
        return try TrustedIssuer(
            name: name, issuer: issuer, audiences: audiences, userClaim: userClaim ?? "sub", keys: keys)
    }
}
