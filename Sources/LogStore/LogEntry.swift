import Foundation

/// An entry to append: what it is, its payload and, optionally, its time.
public struct NewEntry: Sendable, Hashable {
    public var kind: EntryKind
    public var payload: [UInt8]
    /// The entry's wall-clock time; `nil` takes the time from the log's clock at append.
    public var time: EntryTime?
    /// What the appender already holds the payload to mean, handed to the log's projections
    /// (`LogEntry.decoded`) so that they need not decode the bytes just encoded. Never stored.
    /// It must be exactly what decoding `payload` gives: a rebuild has only the bytes, and
    /// `Log.verifyProjections()` compares the two. Not part of equality or hashing.
    public var decoded: (any Sendable)?

    public init(kind: EntryKind, payload: [UInt8], time: EntryTime? = nil, decoded: (any Sendable)? = nil) {
        self.kind = kind
        self.payload = payload
        self.time = time
        self.decoded = decoded
    }

    public static func == (lhs: NewEntry, rhs: NewEntry) -> Bool {
        lhs.kind == rhs.kind && lhs.payload == rhs.payload && lhs.time == rhs.time
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(payload)
        hasher.combine(time)
    }
}

/// An entry read back from a log, its checksum verified.
public struct LogEntry: Sendable, Hashable {
    public var offset: LogOffset
    public var kind: EntryKind
    public var time: EntryTime
    public var payload: [UInt8]
    /// The appender's decoded form of `payload` (`NewEntry.decoded`), present only while the
    /// entry is applied to projections in its own append; `nil` for every entry read back and
    /// during rebuilds and catch-ups. A projection may use it instead of decoding `payload`.
    /// Not part of equality or hashing.
    public var decoded: (any Sendable)?

    public init(offset: LogOffset, kind: EntryKind, time: EntryTime, payload: [UInt8], decoded: (any Sendable)? = nil) {
        self.offset = offset
        self.kind = kind
        self.time = time
        self.payload = payload
        self.decoded = decoded
    }

    public static func == (lhs: LogEntry, rhs: LogEntry) -> Bool {
        lhs.offset == rhs.offset && lhs.kind == rhs.kind && lhs.time == rhs.time && lhs.payload == rhs.payload
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(offset)
        hasher.combine(kind)
        hasher.combine(time)
        hasher.combine(payload)
    }
}

extension EntryTime {
    /// The time as a `Date`.
    public var date: Date {
        Date(timeIntervalSince1970: Double(microsecondsSince1970) / 1_000_000)
    }

    /// The time of `date`, truncated to whole microseconds.
    public init(_ date: Date) {
        self.init(microsecondsSince1970: Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.down)))
    }

    /// The system's wall-clock time now.
    public static func now() -> EntryTime { EntryTime(Date()) }
}
