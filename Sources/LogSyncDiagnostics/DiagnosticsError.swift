import LogStore

/// Why a log could not be inspected: a directory that holds no device log, an offset past the
/// end, an unknown entry kind, a replay into a scratch log that failed.
///
/// A fault of the log itself (a corrupt entry, a bad checksum) is the log store's
/// `LogStoreError`, which names the entry's offset; a replay against a server fails with
/// ``ServerReplayError``. ``description`` is one line, for example `--to 90 is past the end of the
/// log "device" in /data/sync, which ends at offset 42`.
public struct DiagnosticsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare with the static members.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The directory holds no log named `device` (`DeviceLog.logName`).
        public static let notADeviceLog = Code(rawValue: "notADeviceLog")
        /// An offset asked for lies past the log's last entry.
        public static let offsetPastEnd = Code(rawValue: "offsetPastEnd")
        /// An entry kind named by a filter is neither a number nor a known kind's name.
        public static let unknownKind = Code(rawValue: "unknownKind")
        /// Appending replayed entries to the scratch log failed.
        public static let replayFailed = Code(rawValue: "replayFailed")
        /// A scratch directory could not be created.
        public static let scratchDirectory = Code(rawValue: "scratchDirectory")
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, naming the log, path or offset concerned.
    public var message: String
    /// The entry concerned, if any.
    public var offset: LogOffset?

    /// Creates an error.
    public init(_ code: Code, _ message: String, offset: LogOffset? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
    }

    /// The message: one line.
    public var description: String { message }
}
