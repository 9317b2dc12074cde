import LogStore
import SyncModel

extension SyncServer {
    /// Appends entries recorded in another server's log of a database, as they are (kind,
    /// payload, time), to `user`'s database of `scope`, each at the offset it has there: what a
    /// replay seeded from a server's side (`logtool replay --against-fresh-server --server`)
    /// builds its fresh server with. The index applies them as it applies the server's own.
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming the offset when an entry's offset is not
    ///   the next one of this database's log (nothing is appended then); storage errors.
    package func appendRecordedEntries(_ entries: [LogEntry], of user: UserID, scope: DatabaseScope) throws {
        guard !entries.isEmpty else { return }
        _ = try store(user, scope).log.write { index in
            var next = try index.lastOffset.next
            for entry in entries {
                guard entry.offset == next else {
                    throw SyncError(
                        .invalidArguments,
                        "the recorded entry at offset \(entry.offset) does not follow this log's end (next offset \(next))"
                    )
                }
                next = next.next
            }
            return (entries.map { NewEntry(kind: $0.kind, payload: $0.payload, time: $0.time) }, ())
        }
    }

    /// The entries of `user`'s database of `scope` at `offsets` (those it holds).
    package func recordedEntries(
        of user: UserID, scope: DatabaseScope, at offsets: ClosedRange<LogOffset>
    ) throws -> [LogEntry] {
        try store(user, scope).log.read { index in
            var entries: [LogEntry] = []
            var offset = offsets.lowerBound
            while offset <= offsets.upperBound, let entry = try index.entry(at: offset) {
                entries.append(entry)
                offset = offset.next
            }
            return entries
        }
    }

    /// The offset of the last entry of `user`'s database of `scope` (`0` when empty).
    package func lastOffset(of user: UserID, scope: DatabaseScope) throws -> LogOffset {
        try store(user, scope).log.lastOffset
    }
}
