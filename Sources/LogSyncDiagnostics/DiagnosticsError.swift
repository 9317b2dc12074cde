import LogStore
import SyncModel

/// Why a log could not be inspected or replayed: a directory that holds no device log, an offset
/// past the end, an unknown entry kind, a replay into a scratch log that failed, or, in a replay
/// against a server (``ServerReplay``), an entry that cannot be read or a re-issued request that
/// failed for reasons that say nothing about the server's rules.
///
/// A fault of the log itself met while inspecting it (a corrupt entry, a bad checksum) is the log
/// store's `LogStoreError`, which names the entry's offset; a replay against a server wraps it in
/// ``logError``. A server answering differently from the recorded answer is not an error: it is
/// a ``ServerReplayMismatch`` in the report.
///
/// ``description`` is one line. For most errors it is the message, for example `--to 90 is past
/// the end of the log "device" in /data/sync, which ends at offset 42`; for an error of a replay
/// against a server it starts with `server replay: ` and names the offset, for example
/// `server replay: corrupt entry at offset 7 of log "device" in /tmp/x: …`.
public struct DiagnosticsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare with the static members.
    public struct Code: TypedValue, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The directory holds no log named `device` (`DeviceLog.logName`).
        public static let notADeviceLog = Code(rawValue: "notADeviceLog")
        /// An offset asked for (a replay's `through`) lies past the log's last entry.
        public static let offsetPastEnd = Code(rawValue: "offsetPastEnd")
        /// An entry kind named by a filter is neither a number nor a known kind's name.
        public static let unknownKind = Code(rawValue: "unknownKind")
        /// Appending replayed entries to the scratch log failed.
        public static let replayFailed = Code(rawValue: "replayFailed")
        /// A scratch directory could not be created.
        public static let scratchDirectory = Code(rawValue: "scratchDirectory")
        /// An entry could not be read (bad checksum, unknown format version) or does not decode
        /// as a device entry (an unknown kind, a payload that is not its kind's message).
        public static let corruptEntry = Code(rawValue: "corruptEntry")
        /// Reading the log failed for another reason than an entry's bytes (see ``logError``).
        public static let unreadableLog = Code(rawValue: "unreadableLog")
        /// A re-issued request failed as a whole with a transport failure, a transient code or
        /// a cancellation: the replay cannot go on without its answer (see ``requestError``).
        public static let requestFailed = Code(rawValue: "requestFailed")
        /// A record name given without a zone names records in several zones (`logtool blame`).
        public static let ambiguousRecord = Code(rawValue: "ambiguousRecord")
        /// The directory is a support bundle of a range that starts past offset 1: its entries
        /// cannot rebuild a device's state, which starts at offset 1 (`logtool dump` reads it,
        /// showing the device's offsets).
        public static let partialBundle = Code(rawValue: "partialBundle")
        /// An invariant named by `logtool bisect --invariant` is not a built-in one.
        public static let unknownInvariant = Code(rawValue: "unknownInvariant")
        /// The server's side a replay is seeded from does not fit the device's log: another
        /// user's or another key's, or offsets that do not line up (``ServerSide``).
        public static let serverSideMismatch = Code(rawValue: "serverSideMismatch")
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, naming the log, path or offset concerned.
    public var message: String
    /// The entry concerned, if any.
    public var offset: LogOffset?
    /// The log's error, for `corruptEntry` and `unreadableLog`.
    public var logError: LogStoreError?
    /// The server's (or transport's) error, for `requestFailed`.
    public var requestError: SyncError?
    /// The operation that failed, when ``description`` names it before the failure (`server
    /// replay`); `nil` when the message says it all.
    public var operation: String?

    /// Creates an error.
    public init(
        _ code: Code, _ message: String, offset: LogOffset? = nil, logError: LogStoreError? = nil,
        requestError: SyncError? = nil, operation: String? = nil
    ) {
        self.code = code
        self.message = message
        self.offset = offset
        self.logError = logError
        self.requestError = requestError
        self.operation = operation
    }

    /// One line: the message or, with an ``operation``, the operation and the failure, naming
    /// the offset (and, for a log failure, the log and its directory).
    public var description: String {
        guard let operation else { return message }
        if let logError, code == .corruptEntry || code == .unreadableLog {
            var located = logError
            if located.offset == nil { located.offset = offset }
            return "\(operation): \(located)"
        }
        let what: String =
            switch code {
            case .offsetPastEnd: "offset past the end"
            case .requestFailed: "request failed"
            default: code.rawValue
            }
        var text = "\(operation): \(what)"
        if let offset { text += " at offset \(offset)" }
        return text + ": \(message)"
    }
}
