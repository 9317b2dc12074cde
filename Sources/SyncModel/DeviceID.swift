/// One device of a user: the origin of requests, the receiver of push hints.
///
/// A device names itself to the server (in process, or in the `LogSync-Device` header over
/// HTTP), so that the server does not push its own commits back to it (F114).
public struct DeviceID: TypedRawValue, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { "device \"\(rawValue)\"" }
}
