import Foundation

/// The bodies of the session routes (Docs/Protocol.md, "Authentication"): JSON, not Protocol
/// Buffers. They are not `CloudDatabase` operations; they are few, small and rare (a sign-in,
/// a refresh every quarter of an hour), and an app's backend or `curl` reads them as they are.
/// Dates are ISO 8601 strings in UTC.
public enum WireSessions {
    /// `POST /v1/sessions`: a device signs in with an identity token.
    public static var signInPath: String { "/\(WireProtocol.versionPath)/sessions" }
    /// `POST /v1/sessions/refresh`: a refresh token for a new pair.
    public static var refreshPath: String { "/\(WireProtocol.versionPath)/sessions/refresh" }
    /// `GET /v1/devices`: the user's signed-in devices.
    public static var devicesPath: String { "/\(WireProtocol.versionPath)/devices" }

    /// `DELETE /v1/devices/{device}`: the device's path, its ID percent-encoded.
    public static func devicePath(_ device: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return devicesPath + "/" + (device.addingPercentEncoding(withAllowedCharacters: allowed) ?? device)
    }

    /// The largest body the session routes read, in bytes.
    public static let maxBodyBytes = 4096

    /// The body of a sign-in.
    public struct SignIn: Codable, Sendable, Hashable {
        /// The device signing in (1 to 255 bytes of UTF-8): the same ID it sends in `LogSync-Device`.
        public var device: String
        /// A name for the user to recognise the device by in the list ("Alice's iPhone").
        public var name: String?

        public init(device: String, name: String? = nil) {
            self.device = device
            self.name = name
        }
    }

    /// The body of a refresh.
    public struct Refresh: Codable, Sendable, Hashable {
        public var refreshToken: String

        public init(refreshToken: String) { self.refreshToken = refreshToken }
    }

    /// The answer to a sign-in or a refresh: the session's new tokens.
    public struct Tokens: Codable, Sendable, Hashable {
        /// The user the session belongs to (for an identity token, `issuer:subject`).
        public var user: String
        public var device: String
        /// What requests send as `Authorization: Bearer <accessToken>`.
        public var accessToken: String
        public var accessExpires: Date
        /// What the next refresh sends; replaced by each refresh, and usable only once.
        public var refreshToken: String
        public var refreshExpires: Date

        public init(
            user: String, device: String, accessToken: String, accessExpires: Date, refreshToken: String,
            refreshExpires: Date
        ) {
            self.user = user
            self.device = device
            self.accessToken = accessToken
            self.accessExpires = accessExpires
            self.refreshToken = refreshToken
            self.refreshExpires = refreshExpires
        }
    }

    /// One signed-in device of the user.
    public struct Device: Codable, Sendable, Hashable {
        public var device: String
        public var name: String
        /// When it signed in.
        public var signedIn: Date
        /// When it last refreshed its session (its sign-in until then).
        public var refreshed: Date
        /// Whether the request that listed the devices came from this device's session.
        public var current: Bool

        public init(device: String, name: String, signedIn: Date, refreshed: Date, current: Bool) {
            self.device = device
            self.name = name
            self.signedIn = signedIn
            self.refreshed = refreshed
            self.current = current
        }
    }

    /// The answer to `GET /v1/devices`.
    public struct Devices: Codable, Sendable, Hashable {
        /// Oldest sign-in first.
        public var devices: [Device]

        public init(devices: [Device]) { self.devices = devices }
    }

    /// `value` as the routes' JSON.
    public static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = .sortedKeys
        return Array((try? encoder.encode(value)) ?? Data())
    }

    /// A value of the routes' JSON.
    ///
    /// - Throws: `DecodingError` saying what is missing or malformed.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: Data(bytes))
    }
}
