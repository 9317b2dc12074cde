import Logging
import NIOCore
import PostgresNIO
import SyncModel
import Synchronization

/// One value bound to a `$n` parameter of a statement.
///
/// A closed set, so a caller never meets postgres-nio's overloads (an `[UInt8]` could be
/// `bytea` or `"char"[]`): bytes are `bytea`, and the arrays suit `unnest($1::bytea[])`.
package enum PostgresValue: Sendable, Hashable {
    /// `bigint`.
    case int64(Int64)
    /// `integer`.
    case int32(Int32)
    /// `boolean`.
    case bool(Bool)
    /// `text`.
    case string(String)
    /// `bytea`.
    case bytes([UInt8])
    /// `bigint[]`.
    case int64Array([Int64])
    /// `bytea[]`.
    case bytesArray([[UInt8]])
    /// `text[]`.
    case stringArray([String])
    /// SQL `NULL`.
    case null

    /// Appends the value to `bindings` in PostgreSQL's binary format.
    func append(to bindings: inout PostgresBindings) {
        switch self {
        case .int64(let value): bindings.append(value)
        case .int32(let value): bindings.append(value)
        case .bool(let value): bindings.append(value)
        case .string(let value): bindings.append(value)
        case .bytes(let value): bindings.append(ByteBuffer(bytes: value))
        case .int64Array(let value): bindings.append(value)
        case .bytesArray(let value): bindings.append(value.map { ByteBuffer(bytes: $0) })
        case .stringArray(let value): bindings.append(value)
        case .null: bindings.appendNull()
        }
    }
}

extension PostgresValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral {
    /// An integer literal binds as `bigint`.
    package init(integerLiteral value: Int64) { self = .int64(value) }
    /// A string literal binds as `text`.
    package init(stringLiteral value: String) { self = .string(value) }
}

/// One checked-out connection of a ``PostgresPool``, valid only inside
/// ``PostgresPool/withSession(_:)``.
///
/// Every call blocks until PostgreSQL answers. A connection-level failure marks the session
/// broken, so the pool closes the connection instead of reusing it.
package struct PostgresSession: Sendable {
    let connection: PostgresConnection
    /// `host:port`, named in errors.
    let endpoint: String
    let logger: Logger
    /// Whether the connection failed, how deep the open transactions are, and the statements
    /// sent and not yet answered.
    let health = Health()

    /// A statement sent ahead (``send(_:_:)``): its answer, and the timer that fails it.
    struct Sent: Sendable {
        let answer: EventLoopFuture<PostgresQueryResult>
        let deadline: Scheduled<Void>
        let sql: String
    }

    /// What a session learns about its connection while in use.
    final class Health: Sendable {
        private let state = Mutex((broken: false, transactionDepth: 0))
        private let sent = Mutex<[Sent]>([])
        /// Adds a statement sent ahead.
        func append(_ statement: Sent) { sent.withLock { $0.append(statement) } }
        /// The statements sent ahead, which are no longer kept.
        func takeSent() -> [Sent] {
            sent.withLock { sent in
                defer { sent = [] }
                return sent
            }
        }
        /// Whether statements were sent ahead and not yet awaited.
        var hasSent: Bool { sent.withLock { !$0.isEmpty } }
        /// Whether the connection failed at the connection level and must not be reused.
        var isBroken: Bool { state.withLock { $0.broken } }
        /// Marks the connection unusable.
        func markBroken() { state.withLock { $0.broken = true } }
        /// Adds `delta` to the number of open ``PostgresSession/transaction(_:)`` calls and
        /// returns the depth before.
        func enterTransaction(_ delta: Int) -> Int {
            state.withLock { state in
                defer { state.transactionDepth += delta }
                return state.transactionDepth
            }
        }
    }

    /// Runs one statement with `$1`, `$2`… bound to `binds` and returns all its rows.
    ///
    /// - Throws: ``PostgresStoreError`` when PostgreSQL refuses the statement;
    ///   `SyncError(.serviceUnavailable)` when the connection is lost.
    @discardableResult
    package func query(_ sql: String, _ binds: [PostgresValue] = []) throws -> [PostgresRow] {
        var bindings = PostgresBindings(capacity: binds.count)
        for bind in binds { bind.append(to: &bindings) }
        return try query(PostgresQuery(unsafeSQL: sql, binds: bindings))
    }

    /// Runs one statement built by postgres-nio (string interpolation binds its values) and
    /// returns all its rows.
    ///
    /// - Throws: as ``query(_:_:)``.
    @discardableResult
    package func query(_ query: PostgresQuery) throws -> [PostgresRow] {
        try self.query(query, within: Self.answerTimeout)
    }

    /// The longest wait for PostgreSQL's answer to one statement (lock waits included).
    static let answerTimeout = TimeAmount.seconds(60)

    private func query(_ query: PostgresQuery, within timeout: TimeAmount) throws -> [PostgresRow] {
        let statement = try start(query, within: timeout)
        // The statements sent ahead run first, in order: their failure is the one to report
        // (the statements after a failed one fail only because the transaction is aborted).
        let failure = answerSent()
        do {
            let rows = try answer(statement)
            if let failure { throw failure }
            return rows
        } catch {
            throw failure ?? error
        }
    }

    /// Sends one statement without waiting for its answer: it runs after the statements sent
    /// before it, and the next ``query(_:_:)`` (a transaction's `COMMIT`) waits for it and
    /// throws its failure, if it failed. A transaction's writes whose answers are not needed
    /// thereby cost one round trip together, not one each.
    ///
    /// - Throws: `SyncError(.serviceUnavailable)` when the connection is already lost.
    package func send(_ sql: String, _ binds: [PostgresValue] = []) throws {
        var bindings = PostgresBindings(capacity: binds.count)
        for bind in binds { bind.append(to: &bindings) }
        health.append(try start(PostgresQuery(unsafeSQL: sql, binds: bindings), within: Self.answerTimeout))
    }

    /// Waits for the statements sent ahead (``send(_:_:)``), when no query follows them.
    ///
    /// - Throws: as ``query(_:_:)``, for the first of them that failed.
    package func flushSent() throws {
        if let failure = answerSent() { throw failure }
    }

    /// Waits for every statement sent ahead, in order; returns the first failure among them.
    private func answerSent() -> (any Error)? {
        var failure: (any Error)?
        for sent in health.takeSent() {
            do {
                _ = try answer(sent)
            } catch {
                failure = failure ?? error
            }
        }
        return failure
    }

    /// Writes `query` to the connection, behind any statement sent before it.
    private func start(_ query: PostgresQuery, within timeout: TimeAmount) throws -> Sent {
        if health.isBroken {
            throw PostgresFailure.unavailable(
                "the connection to PostgreSQL at \(endpoint) failed earlier in this session")
        }
        // A query written to a connection that has already closed is never answered, so a
        // closed one fails here rather than waiting forever.
        if connection.isClosed {
            health.markBroken()
            throw PostgresFailure.unavailable(
                "lost the connection to PostgreSQL at \(endpoint) before the statement \"\(PostgresStoreError.firstLine(query.sql))\""
            )
        }
        // A connection that dies in a way postgres-nio does not notice would leave the statement
        // unanswered and this thread waiting forever: after `timeout` the statement fails
        // and the connection is dropped, as if it had been lost.
        let answer = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
        connection.query(query, logger: logger).cascade(to: answer)
        let endpoint = endpoint
        let deadline = connection.eventLoop.scheduleTask(in: timeout) {
            answer.fail(
                PostgresFailure.unavailable(
                    "PostgreSQL at \(endpoint) did not answer the statement \"\(PostgresStoreError.firstLine(query.sql))\" "
                        + "within \(timeout.nanoseconds / 1_000_000_000) s"))
        }
        return Sent(answer: answer.futureResult, deadline: deadline, sql: query.sql)
    }

    /// Waits for the answer to `statement` and returns its rows.
    private func answer(_ statement: Sent) throws -> [PostgresRow] {
        defer { statement.deadline.cancel() }
        do {
            return Array(try statement.answer.wait())
        } catch let error as SyncError {
            health.markBroken()
            throw error
        } catch {
            switch PostgresFailure(error, sql: statement.sql, endpoint: endpoint) {
            case .connection(let failure):
                health.markBroken()
                throw failure
            case .statement(let failure):
                throw failure
            }
        }
    }

    /// Runs `sql`, which may hold several statements separated by `;` (a migration), one
    /// statement at a time, without parameters.
    ///
    /// - Throws: as ``query(_:_:)``, for the first statement that fails.
    package func execute(_ sql: String) throws {
        for statement in Self.statements(of: sql) {
            try query(PostgresQuery(unsafeSQL: statement))
        }
    }

    /// Runs `body` inside `BEGIN` … `COMMIT`, rolling back when it throws; when PostgreSQL
    /// aborted the transaction to serialize it or break a deadlock (``PostgresStoreError/isRetryable``),
    /// runs it again, up to 5 times in all. `body` must therefore have no effects outside the
    /// database that cannot be repeated.
    ///
    /// Inside another `transaction` on this session, `body` simply joins the outer transaction
    /// (the outer one rolls back and retries).
    package func transaction<R>(_ body: (PostgresSession) throws -> R) throws -> R {
        let depth = health.enterTransaction(1)
        defer { _ = health.enterTransaction(-1) }
        if depth > 0 { return try body(self) }
        var attempt = 1
        while true {
            do {
                // Sent ahead: it travels with the transaction's first statement.
                try send("BEGIN")
                let result = try body(self)
                try query("COMMIT")
                return result
            } catch {
                if !health.isBroken {
                    do { try query("ROLLBACK") } catch { logger.debug("ROLLBACK failed: \(error)") }
                }
                if let failure = error as? PostgresStoreError, failure.isRetryable, attempt < 5 {
                    logger.debug("retrying a transaction", metadata: ["attempt": "\(attempt)", "error": "\(failure)"])
                    attempt += 1
                    continue
                }
                throw error
            }
        }
    }

    /// Sends `payload` to the listeners of `channel` (`pg_notify`), when the current
    /// transaction commits (at once outside a transaction).
    package func notify(channel: String, payload: String) throws {
        try query("SELECT pg_notify($1, $2)", [.string(channel), .string(payload)])
    }

    /// The statements of a script, split at `;` outside quotes, dollar quotes and comments,
    /// because PostgreSQL's extended protocol runs one statement per query.
    static func statements(of script: String) -> [String] {
        var statements: [String] = []
        var current = ""
        let characters = Array(script)
        var index = 0
        func flush() {
            let trimmed = current.trimmingWhitespace
            if !trimmed.isEmpty { statements.append(trimmed) }
            current = ""
        }
        while index < characters.count {
            let character = characters[index]
            switch character {
            case "'", "\"":
                // A quoted literal or identifier; a doubled quote is part of it.
                current.append(character)
                index += 1
                while index < characters.count {
                    current.append(characters[index])
                    if characters[index] == character { break }
                    index += 1
                }
                index += 1
            case "-" where index + 1 < characters.count && characters[index + 1] == "-":
                while index < characters.count && characters[index] != "\n" { index += 1 }
            case "$":
                // A dollar quote $tag$ … $tag$, or a parameter such as $1.
                var end = index + 1
                while end < characters.count && (characters[end].isLetter || characters[end] == "_") { end += 1 }
                if end < characters.count && characters[end] == "$" {
                    let tag = String(characters[index...end])
                    current += tag
                    index = end + 1
                    let rest = String(characters[index...])
                    if let close = rest.range(of: tag) {
                        current += rest[..<close.upperBound]
                        index += rest.distance(from: rest.startIndex, to: close.upperBound)
                    } else {
                        current += rest
                        index = characters.count
                    }
                } else {
                    current.append(character)
                    index += 1
                }
            case ";":
                flush()
                index += 1
            default:
                current.append(character)
                index += 1
            }
        }
        flush()
        return statements
    }
}

extension String {
    /// The string without leading and trailing whitespace and newlines.
    var trimmingWhitespace: String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
