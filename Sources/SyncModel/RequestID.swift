/// A client-chosen identifier of one modify request, which makes retries idempotent (F103, F160).
///
/// A server that has already applied a request with this ID returns the first outcome instead of
/// applying it again, so a retry after `serverResponseLost` is not reported as a conflict. The
/// engine derives request IDs from its log, never from a random source it cannot replay.
public struct RequestID: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The identifier's text.
    public let rawValue: String

    /// Creates a request ID from its text.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Creates a request ID from its text.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// Creates a request ID from a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// A one-line rendering, such as `request "dev1-42"`.
    public var description: String { "request \(quoted(rawValue))" }

    /// Decodes a request ID from its text.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the request ID as its text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
