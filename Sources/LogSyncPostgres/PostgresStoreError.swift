import PostgresNIO
import SyncModel

/// A statement PostgreSQL refused: a constraint violation, a syntax error, a serialization
/// failure. Names the statement (its first line), PostgreSQL's message and SQLSTATE code, so a
/// log line says which statement failed and why.
///
/// Connection failures are not this type: they throw `SyncError(.serviceUnavailable)`, which
/// clients already retry.
package struct PostgresStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The first line of the statement that failed.
    package var statement: String
    /// PostgreSQL's five-character SQLSTATE code, such as `23505` (unique violation); empty
    /// when the error did not come from the server.
    package var sqlState: String
    /// PostgreSQL's message, or the client library's description when the server sent none.
    package var message: String

    /// Creates the error from its parts.
    package init(statement: String, sqlState: String, message: String) {
        self.statement = Self.firstLine(statement)
        self.sqlState = sqlState
        self.message = message
    }

    /// Whether running the whole transaction again may succeed: a serialization failure
    /// (`40001`) or a deadlock (`40P01`), where PostgreSQL chose this transaction to abort.
    package var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// Whether the statement broke a unique or primary key constraint (`23505`).
    package var isUniqueViolation: Bool { sqlState == "23505" }

    /// `PostgreSQL error 23505 in "INSERT INTO …": duplicate key value …`.
    package var description: String { "PostgreSQL error \(sqlState) in \"\(statement)\": \(message)" }

    /// The statement's first non-empty line, trimmed, so errors stay one line.
    static func firstLine(_ sql: String) -> String {
        let line = sql.split(whereSeparator: \.isNewline).first { !$0.allSatisfy(\.isWhitespace) } ?? ""
        return String(line.drop { $0.isWhitespace })
    }
}

/// What a failed PostgreSQL call means for the connection it ran on.
enum PostgresFailure {
    /// The connection is unusable (lost, refused, shut down by the server): close it and throw
    /// this `serviceUnavailable` error.
    case connection(SyncError)
    /// The server refused the statement; the connection is still good.
    case statement(PostgresStoreError)

    /// Classifies `error`, thrown by a statement `sql` (nil while connecting) on the server at
    /// `endpoint`.
    init(_ error: any Error, sql: String?, endpoint: String) {
        let what = sql.map { "the statement \"\(PostgresStoreError.firstLine($0))\"" } ?? "connecting"
        if let error = error as? PSQLError {
            if error.code == .server, let state = error.serverInfo?[.sqlState] {
                let message = error.serverInfo?[.message] ?? ""
                // Class 08 (connection exception) and 57P0x (the server shutting down or
                // starting up) mean the connection, not the statement, failed.
                if state == "25006" {
                    // A write reached a read-only server: a standby, or a primary demoted by a
                    // failover. Dropping the connection lets the next one find the primary.
                    self = .connection(
                        Self.unavailable(
                            "PostgreSQL at \(endpoint) is read-only (a standby?) and refused \(what): \(message) (\(state))"
                        ))
                } else if state.hasPrefix("08") || state.hasPrefix("57P0") || state == "53300" {
                    self = .connection(
                        Self.unavailable(
                            "PostgreSQL at \(endpoint) ended the connection while \(what): \(message) (\(state))"))
                } else if let sql {
                    self = .statement(PostgresStoreError(statement: sql, sqlState: state, message: message))
                } else {
                    self = .connection(
                        Self.unavailable(
                            "PostgreSQL at \(endpoint) refused the connection: \(message) (\(state))"))
                }
                return
            }
            self = .connection(
                Self.unavailable(
                    "lost the connection to PostgreSQL at \(endpoint) while \(what): \(error.code)\(error.underlying.map { " (\($0))" } ?? "")"
                ))
            return
        }
        if let error = error as? PostgresDecodingError, let sql {
            self = .statement(PostgresStoreError(statement: sql, sqlState: "", message: "\(error)"))
            return
        }
        self = .connection(Self.unavailable("PostgreSQL at \(endpoint) failed while \(what): \(error)"))
    }

    /// `serviceUnavailable`, retried by clients after one second.
    static func unavailable(_ message: String) -> SyncError {
        SyncError(.serviceUnavailable, message, retryAfter: .seconds(1))
    }
}
