import LogStore
import SyncModel

/// Why a replay of a device log against a server could not finish: a ``DiagnosticsError`` whose
/// ``DiagnosticsError/operation`` is `server replay`, with the code `corruptEntry` or
/// `unreadableLog` for an entry that cannot be read, `offsetPastEnd` for a range past the log's
/// end, or `requestFailed` for a replayed request that failed for reasons that say nothing about
/// the server's rules.
///
/// `description` is one line naming the offset, for example
/// `server replay: corrupt entry at offset 7 of log "device" in /tmp/x: …`.
public typealias ServerReplayError = DiagnosticsError

extension DiagnosticsError {
    /// The ``operation`` of a replay against a server.
    static let serverReplayOperation = "server replay"

    /// An error of a replay against a server: its description starts with `server replay: `.
    static func serverReplay(
        _ code: Code, _ message: String, offset: LogOffset? = nil, logError: LogStoreError? = nil,
        requestError: SyncError? = nil
    ) -> DiagnosticsError {
        DiagnosticsError(
            code, message, offset: offset, logError: logError, requestError: requestError,
            operation: serverReplayOperation)
    }

    /// The error for a log failure met while reading or decoding the entry at `offset` of `log`
    /// in a replay against a server.
    static func reading(_ error: LogStoreError, at offset: LogOffset?, of log: Log) -> DiagnosticsError {
        let located = error.located(at: offset, in: log)
        let entryFault = error.code == .corruptEntry || error.code == .unknownFormatVersion
        return serverReplay(
            entryFault ? .corruptEntry : .unreadableLog, located.message, offset: located.offset, logError: located)
    }
}
