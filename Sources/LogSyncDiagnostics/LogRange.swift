import LogStore

extension Log {
    /// The range a run through `end` reads: its last entry (`end`, or the log's last entry when
    /// `end` is `nil`) and the log's last entry.
    ///
    /// - Throws: the log store's error reading the log's end; ``DiagnosticsError``
    ///   `offsetPastEnd` naming `end`, with the message `pastEnd(end, last)` and the `operation`
    ///   given, when `end` lies past the log's last entry.
    func range(
        through end: LogOffset?, operation: String? = nil, pastEnd: (_ end: LogOffset, _ last: LogOffset) -> String
    ) throws -> (end: LogOffset, last: LogOffset) {
        let last = try lastOffset
        let target = end ?? last
        guard target <= last else {
            throw DiagnosticsError(.offsetPastEnd, pastEnd(target, last), offset: target, operation: operation)
        }
        return (target, last)
    }
}

extension LogStoreError {
    /// The error with the entry's `offset`, `log`'s name and its directory filled in where it
    /// did not name them.
    func located(at offset: LogOffset?, in log: Log) -> LogStoreError {
        var located = self
        if located.offset == nil { located.offset = offset }
        if located.path == nil { located.path = log.environment.path }
        if located.log == nil { located.log = log.name }
        return located
    }
}
