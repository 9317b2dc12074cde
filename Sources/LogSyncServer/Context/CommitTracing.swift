import LogStore
import SyncModel
import Synchronization
import Tracing

/// The spans of a commit (``SyncServer/Configuration/tracer``): `server.commit` around a request
/// that writes, `server.store.append` around each write to a log below it, both tagged with the
/// user, the database and the offsets written, so that a trace leads to `logtool` on the server's
/// log.
///
/// The commit runs in the storage's `perform`, on a thread of the PostgreSQL pool or on the
/// calling one (LMDB): the commit's span context is bound around it there, so the log writes'
/// spans are its children whichever thread they run on. The writes tell the commit which of its
/// own database's offsets they wrote through ``current``.
final class CommitTrace: Sendable {
    static let commitSpan = "server.commit"
    static let appendSpan = "server.store.append"
    /// The user whose database a span wrote.
    static let user = "logsync.user"
    /// The database a span wrote: its scope (`private`, `shared`).
    static let database = "logsync.database"
    /// The first server-log offset written.
    static let offset = "logsync.server_log.offset"
    /// The last server-log offset written.
    static let endOffset = "logsync.server_log.end_offset"
    static let requestID = "logsync.request_id"

    /// The commit under way in this task (or, inside the storage's `perform`, on this thread).
    @TaskLocal static var current: CommitTrace?

    let user: UserID
    let scope: DatabaseScope
    private let written = Mutex<(first: LogOffset, last: LogOffset)?>(nil)

    init(user: UserID, scope: DatabaseScope) {
        self.user = user
        self.scope = scope
    }

    /// The offsets the commit wrote to its own database, or `nil` if none.
    var range: (first: LogOffset, last: LogOffset)? { written.withLock { $0 } }

    /// Notes that `offsets` were written to `user`'s database of `scope` (only the commit's own
    /// database counts: a commit also writes to participants' shared databases).
    func note(_ offsets: Range<LogOffset>, user: UserID, scope: DatabaseScope) {
        guard !offsets.isEmpty, user == self.user, scope == self.scope else { return }
        let last = offsets.upperBound.advanced(by: -1)
        written.withLock { range in
            range = (range?.first ?? offsets.lowerBound, last)
        }
    }

    /// Tags `span` with the user, the database and `offsets` (when not empty).
    static func tag(_ span: any Span, user: UserID, scope: DatabaseScope, first: LogOffset?, last: LogOffset?) {
        span.updateAttributes { attributes in
            attributes[Self.user] = user.rawValue
            attributes[Self.database] = scope.description
            if let first { attributes[Self.offset] = Int64(truncatingIfNeeded: first.rawValue) }
            if let last { attributes[Self.endOffset] = Int64(truncatingIfNeeded: last.rawValue) }
        }
    }
}
