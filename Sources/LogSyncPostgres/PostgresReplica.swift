import Foundation
import LogStore
import LogSyncServer
import Logging
import Metrics
import SyncModel
import Synchronization

/// A streaming replica of the store's database (`--replica-url`) that serves fetches.
///
/// A fetch with a change token may be answered by any snapshot of the log from the token on
/// (Docs/Protocol.md, F142): a physical replica's snapshot is the primary's as of a moment
/// past, so it answers when the replica holds the log up to the token. In one read-only
/// repeatable-read transaction on the replica, the log's `last_offset` is read first: when it
/// reaches the token, the fetch is answered there, and its token (the replica's end of the log)
/// is never older than the request's. Otherwise (the replica lags), and whenever the replica
/// cannot answer (down, a statement cancelled by recovery, an error the answer itself is),
/// the fetch reads the primary: a replica never makes a fetch fail or go backwards.
///
/// After the replica fails at the connection level it rests for ``restAfterFailure``, so a
/// replica that is down costs the fetches one failed connection now and then, not each.
/// `logsync_postgres_replica_reads_total` counts fetches by where they were answered:
/// `result="replica"` or `result="primary"` (the replica lagged, failed or rested).
final class PostgresReplica: Sendable {
    /// The replica's connections.
    let pool: PostgresPool
    private let logger: Logger
    private let answered: Counter
    private let fellBack: Counter
    /// Until when the replica is not asked, after a connection failure.
    private let restingUntil = Mutex<ContinuousClock.Instant?>(nil)

    /// How long the replica is left alone after it failed at the connection level.
    static let restAfterFailure = Duration.seconds(2)

    init(url: PostgresURL, connections: Int, logger: Logger, metricsFactory: any MetricsFactory) {
        self.logger = logger
        pool = PostgresPool(
            url: url, size: max(1, connections) * 2 + 1, threads: 1, logger: logger,
            inUse: Meter(label: "logsync_postgres_replica_pool_in_use", factory: metricsFactory))
        answered = Counter(
            label: "logsync_postgres_replica_reads_total", dimensions: [("result", "replica")], factory: metricsFactory)
        fellBack = Counter(
            label: "logsync_postgres_replica_reads_total", dimensions: [("result", "primary")], factory: metricsFactory)
    }

    /// `body`'s answer from the replica's snapshot of log `logID`, when the replica holds the log
    /// up to `offset` and answers without error; `nil` (counted as a read of the primary) when
    /// the caller must read the primary instead.
    func read<R>(logID: Int64, notOlderThan offset: UInt64, _ body: (any IndexReader) throws -> R) -> R? {
        if let until = restingUntil.withLock({ $0 }), ContinuousClock.now < until {
            fellBack.increment()
            return nil
        }
        do {
            let answer = try pool.withSession { session -> R? in
                try session.transaction { session -> R? in
                    try session.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    guard let last = try PostgresIndexReader.lastOffset(of: logID, locking: false, session),
                        last >= offset
                    else { return nil }
                    return try body(PostgresIndexReader(session: session, logID: logID, lastOffset: last))
                }
            }
            if answer != nil { answered.increment() } else { fellBack.increment() }
            return answer
        } catch let error as SyncError where error.code == .serviceUnavailable {
            restingUntil.withLock { $0 = ContinuousClock.now + Self.restAfterFailure }
            logger.warning(
                "the PostgreSQL replica failed; fetches read the primary for a while",
                metadata: ["replica": "\(pool.url)", "error": "\(error)"])
            fellBack.increment()
            return nil
        } catch {
            // The answer is an error, or the replica refused a statement (cancelled by a
            // conflict with recovery): the primary says what is so.
            logger.debug("a fetch from the PostgreSQL replica failed", metadata: ["error": "\(error)"])
            fellBack.increment()
            return nil
        }
    }

    /// Closes the replica's connections.
    func shutdown() { pool.shutdown() }
}

extension PostgresServerLog {
    /// A fetch's read (`ServerLog.read(notOlderThan:_:)`): from the store's replica when it has
    /// one that holds the log up to `offset`, else from the primary.
    func read<R>(notOlderThan offset: LogOffset, _ body: (any IndexReader) throws -> R) throws -> R {
        if let replica = storage.replica,
            let answer = replica.read(logID: logID, notOlderThan: offset.rawValue, body)
        {
            return answer
        }
        return try read(body)
    }
}
