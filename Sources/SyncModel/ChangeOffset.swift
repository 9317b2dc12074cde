/// The position of a change in a server database's change feed, as a change token carries it:
/// the offset of the change's entry in the database's log, dense and starting at 1 (F142).
///
/// A type of the model's own, not the log's `LogOffset`, so that the model, and a client that
/// links only the model and the network, needs no storage: the server and the engine convert at
/// their boundary with LogStore.
public struct ChangeOffset: TypedRawValue, Strideable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(integerLiteral value: UInt64) { self.rawValue = value }

    /// "Nothing yet": the position before the first change.
    public static let zero = ChangeOffset(0)

    /// The position right after this one.
    public var next: ChangeOffset { ChangeOffset(rawValue + 1) }

    public static func < (lhs: ChangeOffset, rhs: ChangeOffset) -> Bool { lhs.rawValue < rhs.rawValue }

    public func distance(to other: ChangeOffset) -> Int64 { Int64(bitPattern: other.rawValue &- rawValue) }
    public func advanced(by n: Int64) -> ChangeOffset { ChangeOffset(rawValue &+ UInt64(bitPattern: n)) }
}
