import LogStore

/// A user of the server: the owner of a private database.
public struct UserID: TypedValue, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { "user \"\(rawValue)\"" }
}
