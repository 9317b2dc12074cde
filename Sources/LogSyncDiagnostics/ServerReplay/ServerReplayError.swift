import LogStore
import SyncModel

/// Why a replay of a device log against a server could not finish: an entry that cannot be
/// read, a range past the log's end, or a replayed request that failed for reasons that say
/// nothing about the server's rules.
///
/// A server answering differently from the recorded answer is not an error: it is a
/// ``ServerReplayMismatch`` in the report. ``description`` is one line naming the offset, for
/// example `server replay: corrupt entry at offset 7 of log "device" in /tmp/x: …`.
public struct ServerReplayError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare with the static members.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// An entry could not be read (bad checksum, unknown format version) or does not decode
        /// as a device entry (an unknown kind, a payload that is not its kind's message).
        public static let corruptEntry = Code(rawValue: "corruptEntry")
        /// `through` names an offset past the log's last entry.
        public static let offsetPastEnd = Code(rawValue: "offsetPastEnd")
        /// Reading the log failed for another reason than an entry's bytes (see ``logError``).
        public static let unreadableLog = Code(rawValue: "unreadableLog")
        /// A re-issued request failed as a whole with a transport failure, a transient code or
        /// a cancellation: the replay cannot go on without its answer (see ``requestError``).
        public static let requestFailed = Code(rawValue: "requestFailed")
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, in words.
    public var message: String
    /// The entry concerned, if any.
    public var offset: LogOffset?
    /// The log's error, for `corruptEntry` and `unreadableLog`.
    public var logError: LogStoreError?
    /// The server's (or transport's) error, for `requestFailed`.
    public var requestError: SyncError?

    /// Creates an error.
    public init(
        _ code: Code, _ message: String, offset: LogOffset? = nil, logError: LogStoreError? = nil,
        requestError: SyncError? = nil
    ) {
        self.code = code
        self.message = message
        self.offset = offset
        self.logError = logError
        self.requestError = requestError
    }

    /// One line: `server replay: ` and the failure, naming the offset (and, for a log failure,
    /// the log and its directory).
    public var description: String {
        if let logError, code == .corruptEntry || code == .unreadableLog {
            var located = logError
            if located.offset == nil { located.offset = offset }
            return "server replay: \(located)"
        }
        let what: String = switch code {
        case .offsetPastEnd: "offset past the end"
        case .requestFailed: "request failed"
        default: code.rawValue
        }
        var text = "server replay: \(what)"
        if let offset { text += " at offset \(offset)" }
        return text + ": \(message)"
    }

    /// The error for a log failure met while reading or decoding the entry at `offset` of `log`.
    static func reading(_ error: LogStoreError, at offset: LogOffset?, of log: Log) -> ServerReplayError {
        var located = error
        if located.path == nil { located.path = log.environment.path }
        if located.log == nil { located.log = log.name }
        if located.offset == nil { located.offset = offset }
        let entryFault = error.code == .corruptEntry || error.code == .unknownFormatVersion
        return ServerReplayError(
            entryFault ? .corruptEntry : .unreadableLog, located.message, offset: located.offset, logError: located)
    }
}
