import LogStore

/// Writes a range of a log's entries that pass a filter, one line each, reading them lazily with
/// an `EntryCursor` (memory does not grow with the range).
public struct EntryDumper: Sendable {
    public enum Format: Sendable, Hashable {
        /// `EntryFormatter.textLine`.
        case text
        /// `EntryFormatter.jsonLine` (JSON Lines).
        case jsonLines
    }

    public var format: Format
    /// Used as is, except that the offset column widens to fit the range's last offset.
    public var formatter: EntryFormatter
    /// Which entries to write; the formatter's decoder describes them for `--record`/`--zone`.
    public var filter: EntryFilter
    /// What to add to an offset of the log read to get the offset written: 0, or a support
    /// bundle's `baseOffset` for a range export, whose entries are the device's from
    /// `baseOffset + 1` on. `start` and `end` are the log's own offsets.
    public var offsetBase: UInt64 = 0

    public init(
        format: Format = .text, formatter: EntryFormatter = EntryFormatter(), filter: EntryFilter = EntryFilter()
    ) {
        self.format = format
        self.formatter = formatter
        self.filter = filter
    }

    /// Writes the entries of `log` from `start` through `end` (clamped to the log's last
    /// offset; `nil`: the last offset) that pass `filter` to `output` and returns how many it
    /// wrote.
    ///
    /// Every entry of the range is read and decoded, whatever the filter: every entry before a
    /// corrupt one is written before the error is thrown, so the output shows how far the log
    /// is readable.
    ///
    /// - Parameters:
    ///   - log: The log to read.
    ///   - start: The first offset to write.
    ///   - end: The last offset to write; `nil` for the log's last offset.
    ///   - output: Where the entries go, one per line (or one JSON object per line).
    ///   - progress: Told of each entry read (of the range's length), passed or not.
    /// - Throws: `LogStoreError` (`.corruptEntry`, `.unknownFormatVersion`, …) naming the offset,
    ///   the log and its path — for a bad envelope, or a payload the decoder cannot decode.
    @discardableResult
    public func dump(
        _ log: Log, from start: LogOffset = .first, through end: LogOffset? = nil,
        to output: inout some TextOutputStream, progress: (ProgressEvent) -> Void = { _ in }
    ) throws -> Int {
        let last = try log.lastOffset
        let end = min(end ?? last, last)
        let start = max(start, .first)
        guard start <= end else { return 0 }
        var formatter = self.formatter
        formatter.offsetWidth = max(formatter.offsetWidth, (end.rawValue + offsetBase).description.count)

        // The cursor hands out every good entry before a corrupt one, then throws naming it.
        var cursor = try log.entries(from: start, through: end)
        var written = 0
        let total = end.rawValue - start.rawValue + 1
        while var entry = try nextEntry(&cursor) {
            progress(.entries(done: entry.offset.rawValue - start.rawValue + 1, total: total))
            entry.offset = LogOffset(entry.offset.rawValue + offsetBase)
            let description: EntryDescription?
            do {
                description = try formatter.describe(entry)
            } catch {
                var located = error
                if located.path == nil { located.path = log.environment.path }
                if located.log == nil { located.log = log.name }
                throw located
            }
            guard filter.matches(entry, description: description) else { continue }
            output.write(
                format == .text
                    ? formatter.textLine(entry, description: description)
                    : formatter.jsonLine(entry, description: description))
            output.write("\n")
            written += 1
        }
        return written
    }

    /// The cursor's next entry; a corrupt entry's error names the offset as written (with
    /// ``offsetBase``).
    private func nextEntry(_ cursor: inout EntryCursor) throws(LogStoreError) -> LogEntry? {
        do { return try cursor.next() } catch {
            var shifted = error
            if let offset = error.offset { shifted.offset = LogOffset(offset.rawValue + offsetBase) }
            throw shifted
        }
    }
}
