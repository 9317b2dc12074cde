import Foundation

/// An entry to append: what it is, its payload and, optionally, its time.
public struct NewEntry: Sendable, Hashable {
    public var kind: EntryKind
    public var payload: [UInt8]
    /// The entry's wall-clock time; `nil` takes the time from the log's clock at append.
    public var time: EntryTime?

    public init(kind: EntryKind, payload: [UInt8], time: EntryTime? = nil) {
        self.kind = kind
        self.payload = payload
        self.time = time
    }
}

/// An entry read back from a log, its checksum verified.
public struct LogEntry: Sendable, Hashable {
    public var offset: LogOffset
    public var kind: EntryKind
    public var time: EntryTime
    public var payload: [UInt8]

    public init(offset: LogOffset, kind: EntryKind, time: EntryTime, payload: [UInt8]) {
        self.offset = offset
        self.kind = kind
        self.time = time
        self.payload = payload
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
