/// The position of an entry in a log: dense, starting at 1, never reused.
///
/// Offsets are what the rest of LogSync builds on: a server change token is an offset in a
/// database's log, and a device's delivery cursor is an offset in its own log.
public struct LogOffset: TypedValue, Strideable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(integerLiteral value: UInt64) { self.rawValue = value }

    /// The offset of the first entry of every log.
    public static let first = LogOffset(1)

    /// "Nothing yet": the offset a log or projection is at before its first entry.
    public static let zero = LogOffset(0)

    /// The offset right after this one.
    public var next: LogOffset { LogOffset(rawValue + 1) }

    public static func < (lhs: LogOffset, rhs: LogOffset) -> Bool { lhs.rawValue < rhs.rawValue }

    public func distance(to other: LogOffset) -> Int64 { Int64(bitPattern: other.rawValue &- rawValue) }
    public func advanced(by n: Int64) -> LogOffset { LogOffset(rawValue &+ UInt64(bitPattern: n)) }

    /// The 8-byte big-endian key under which the entry is stored (big-endian keeps LMDB's
    /// byte order equal to numeric order, which `MDB_APPEND` requires).
    var key: UInt64 { rawValue.bigEndian }
}

/// What an entry is, as a number the layer that wrote it gives meaning to.
///
/// `LogStore` stores and checks kinds but does not interpret them; the engine and the server
/// define their own kinds in disjoint ranges.
public struct EntryKind: TypedValue, CustomStringConvertible, ExpressibleByIntegerLiteral {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(integerLiteral value: UInt16) { self.rawValue = value }
}

/// The wall-clock time of an entry, in whole microseconds since 1970-01-01T00:00:00Z.
///
/// A value of its own (not `Date`) so that it round-trips through the log exactly.
public struct EntryTime: RawRepresentable, Hashable, Comparable, Sendable, Codable {
    public let microsecondsSince1970: Int64
    public var rawValue: Int64 { microsecondsSince1970 }
    public init(rawValue: Int64) { self.microsecondsSince1970 = rawValue }
    public init(microsecondsSince1970: Int64) { self.microsecondsSince1970 = microsecondsSince1970 }
    public static func < (lhs: EntryTime, rhs: EntryTime) -> Bool {
        lhs.microsecondsSince1970 < rhs.microsecondsSince1970
    }
}
