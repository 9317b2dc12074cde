import LogStore
import LogSync

extension Log {
    /// Calls `body` with each entry from `start` through `end` (the last entry when `nil`), in
    /// order, until it returns `false`: the one loop of the diagnostics that read a log whole.
    ///
    /// A failure to read becomes a ``DiagnosticsError`` naming the offset where reading stopped
    /// and the log (``DeviceLogBisect/failure(_:at:of:)``).
    func walkEntries(
        from start: LogOffset = .first, through end: LogOffset? = nil,
        _ body: (LogEntry) throws(DiagnosticsError) -> Bool
    ) throws(DiagnosticsError) {
        var cursor: EntryCursor
        do { cursor = try entries(from: start, through: end) } catch {
            throw DeviceLogBisect.failure(error, at: nil, of: self)
        }
        var expected = max(start, .first)
        while true {
            let entry: LogEntry?
            do throws(LogStoreError) { entry = try cursor.next() } catch {
                throw DeviceLogBisect.failure(error, at: expected, of: self)
            }
            guard let entry else { return }
            expected = entry.offset.next
            guard try body(entry) else { return }
        }
    }

    /// Calls `body` with each entry of a device log, decoded; an entry that does not decode is a
    /// ``DiagnosticsError`` naming its offset.
    func walkDeviceEntries(
        from start: LogOffset = .first, through end: LogOffset? = nil,
        _ body: (LogEntry, DeviceEntry) throws(DiagnosticsError) -> Void
    ) throws(DiagnosticsError) {
        try walkEntries(from: start, through: end) { (entry) throws(DiagnosticsError) in
            let decoded: DeviceEntry
            do throws(LogStoreError) { decoded = try DeviceEntry(entry, in: self) } catch {
                throw DeviceLogBisect.failure(error, at: entry.offset, of: self)
            }
            try body(entry, decoded)
            return true
        }
    }
}
