import CLMDB
import LogSyncPlatform

/// An error from the log: what went wrong, and the offset, path or table it concerns.
///
/// `description` is one line that names the offset, path or table, for example
/// `corrupt entry at offset 42 of log "device" in /tmp/x: checksum mismatch`.
public struct LogStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. Extensible: compare with the static members.
    public struct Code: TypedValue, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// An entry's bytes do not match its checksum, its length field or its key.
        public static let corruptEntry = Code(rawValue: "corruptEntry")
        /// The environment's file (`data.mdb`) is damaged: its structure check found a meta page,
        /// a page header, a node, a key, a value's bounds or a table's counts that cannot be
        /// right, a log's entries end before the offset its tail record names, or its tables are
        /// not the ones its catalogue lists (a damaged table name). `page` names the page where one
        /// is known, `offset` the entry where one is known, `table` the table where one is known.
        public static let corruptFile = Code(rawValue: "corruptFile")
        /// An entry was written in a format version this build does not know.
        public static let unknownFormatVersion = Code(rawValue: "unknownFormatVersion")
        /// The path does not exist.
        public static let missingPath = Code(rawValue: "missingPath")
        /// The path exists but holds no log (no LMDB environment, or not this log).
        public static let notALog = Code(rawValue: "notALog")
        /// The environment is already open in this process with other options.
        public static let alreadyOpen = Code(rawValue: "alreadyOpen")
        /// A write was attempted on a read-only log or transaction.
        public static let readOnly = Code(rawValue: "readOnly")
        /// The map could not grow any further (the configured maximum or the address space).
        public static let mapFull = Code(rawValue: "mapFull")
        /// A caller passed something invalid (a name, a range, a table a projection did not declare).
        public static let invalidArgument = Code(rawValue: "invalidArgument")
        /// A projection's stored state disagrees with the log (applied past its end).
        public static let projectionInconsistent = Code(rawValue: "projectionInconsistent")
        /// Any other LMDB failure; `lmdbStatus` holds LMDB's return code.
        public static let lmdb = Code(rawValue: "lmdb")
        /// A file-system operation failed.
        public static let io = Code(rawValue: "io")
    }

    public var code: Code
    /// What happened, in words.
    public var message: String
    /// The entry concerned, if any.
    public var offset: LogOffset?
    /// The log directory concerned, if known.
    public var path: String?
    /// The log (within its environment) concerned, if any.
    public var log: String?
    /// LMDB's return code, if LMDB reported the failure.
    public var lmdbStatus: Int32?
    /// The page of `data.mdb` concerned (pages are numbered from 0), if any.
    public var page: UInt64?
    /// The table concerned, by its name in the environment (`log.device`), if any.
    public var table: String?

    public init(
        _ code: Code, _ message: String, offset: LogOffset? = nil, path: String? = nil,
        log: String? = nil, lmdbStatus: Int32? = nil, page: UInt64? = nil, table: String? = nil
    ) {
        self.code = code
        self.message = message
        self.offset = offset
        self.path = path
        self.log = log
        self.lmdbStatus = lmdbStatus
        self.page = page
        self.table = table
    }

    public var description: String {
        var text = ""
        switch code {
        case .corruptEntry: text = "corrupt entry"
        case .corruptFile: text = "corrupt file"
        case .unknownFormatVersion: text = "unknown entry format version"
        case .missingPath: text = "no such path"
        case .notALog: text = "not a log"
        case .alreadyOpen: text = "log already open"
        case .readOnly: text = "read-only"
        case .mapFull: text = "log map full"
        case .invalidArgument: text = "invalid argument"
        case .projectionInconsistent: text = "projection inconsistent"
        case .io: text = "I/O error"
        default: text = "LMDB error"
        }
        if let page { text += " at page \(page)" }
        if let offset { text += "\(page == nil ? " at" : ",") offset \(offset)" }
        if let table { text += "\(page == nil && offset == nil ? " in" : ",") table \"\(table)\"" }
        if let log { text += " of log \"\(log)\"" }
        if let path { text += " in \(path)" }
        text += ": \(message)"
        return text
    }

    /// The same error with the path and log filled in where they were unknown.
    func located(path: String?, log: String?) -> LogStoreError {
        var copy = self
        if copy.path == nil { copy.path = path }
        if copy.log == nil { copy.log = log }
        return copy
    }
}

/// Converts an LMDB return code into a typed error. Every LMDB call goes through here.
@inline(__always)
func check(_ status: Int32, _ operation: StaticString) throws(LogStoreError) {
    if status != MDB_SUCCESS { throw lmdbError(status, operation) }
}

func lmdbError(_ status: Int32, _ operation: StaticString) -> LogStoreError {
    let text = String(cString: mdb_strerror(status))
    switch status {
    case MDB_MAP_FULL:
        return LogStoreError(.mapFull, "\(operation): \(text)", lmdbStatus: status)
    case MDB_INVALID, MDB_VERSION_MISMATCH:
        return LogStoreError(.notALog, "\(operation): \(text)", lmdbStatus: status)
    case EACCES:
        return LogStoreError(.readOnly, "\(operation): \(text)", lmdbStatus: status)
    default:
        return LogStoreError(.lmdb, "\(operation): \(text) (\(status))", lmdbStatus: status)
    }
}
