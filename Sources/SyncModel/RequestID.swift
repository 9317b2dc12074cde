/// A client-chosen identifier of one modify request, which makes retries idempotent (F103, F160).
///
/// A server that has already applied a request with this ID returns the first outcome instead of
/// applying it again, so a retry after `serverResponseLost` is not reported as a conflict. The
/// engine derives request IDs from its log, never from a random source it cannot replay.
public struct RequestID: TypedRawValue, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The identifier's text.
    public let rawValue: String

    /// Creates a request ID from its text.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A one-line rendering, such as `request "dev1-42"`.
    public var description: String { "request \(quoted(rawValue))" }

}
