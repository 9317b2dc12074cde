import Foundation

extension Log {
    /// Copies the entries `1...offset` into the log of the same name in the environment at
    /// `directory`, with the same projections, which rebuild as the entries are appended: the
    /// log and its projections as they were after `offset`. This log is only read.
    ///
    /// Each entry keeps its kind, time and payload (and so its offset). The copy is appended in
    /// write transactions of up to 4096 entries; `.zero` gives an empty log.
    ///
    /// ```swift
    /// let past = try log.rebuiltCopy(through: LogOffset(42), at: scratch)
    /// try past.read { reader in … }     // the projections as of offset 42
    /// ```
    ///
    /// - Parameters:
    ///   - offset: the last entry to copy; at most `lastOffset`.
    ///   - directory: the copy's environment, created if missing. It must not hold this log's
    ///     name with entries already.
    ///   - options: the copy's environment options; `nil` takes this environment's, writable.
    /// - Returns: the copy, open.
    /// - Throws: `LogStoreError` `.invalidArgument` if `offset` is past the end of the log or
    ///   `directory` already holds entries of the log; what reading an entry, opening the
    ///   environment or a projection throws.
    public func rebuiltCopy(
        through offset: LogOffset, at directory: URL, options: LogEnvironment.Options? = nil
    ) throws -> Log {
        let last = try lastOffset
        guard offset <= last else {
            throw located(
                LogStoreError(
                    .invalidArgument, "cannot copy through offset \(offset): the log ends at \(last)", offset: offset))
        }
        var copyOptions = options ?? environment.options
        if options == nil {
            copyOptions.readOnly = false
            copyOptions.initialMapSize = max(copyOptions.initialMapSize, 1 << 20)
        }
        let copy = try Log.open(
            at: directory, named: name, options: copyOptions, projections: projections, clock: clock)
        let existing = try copy.lastOffset
        guard existing == .zero else {
            throw copy.located(
                LogStoreError(
                    .invalidArgument, "the copy's directory already holds \(existing.rawValue) entries of the log"))
        }
        var cursor = try entries(from: .first, through: offset)
        var batch: [NewEntry] = []
        batch.reserveCapacity(min(Int(offset.rawValue), 4096))
        while true {
            let entry = try cursor.next()
            if let entry { batch.append(NewEntry(kind: entry.kind, payload: entry.payload, time: entry.time)) }
            if batch.count == 4096 || (entry == nil && !batch.isEmpty) {
                try copy.append(batch)
                batch.removeAll(keepingCapacity: true)
            }
            if entry == nil { break }
        }
        return copy
    }
}
