import Logging
import NIOCore
import PostgresNIO
import SyncModel

/// Connecting to the right server of a URL's hosts, so that a node follows a failover: each
/// new connection tries the hosts in order and keeps the first whose session suits the URL's
/// `target_session_attrs`, checked with `pg_is_in_recovery()` and `transaction_read_only` as
/// libpq does. Until a standby is promoted, no host suits `read-write` and connecting fails
/// with `serviceUnavailable`, which clients retry; once one is, the next connection reaches it.
extension PostgresURL {
    /// postgres-nio's configuration for `host`: plain TCP (the database runs next to the server
    /// or on a private network).
    func connectionConfiguration(for host: PostgresHost) -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: host.host, port: host.port, username: user, password: password, database: database, tls: .disable)
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }

    /// A new connection, numbered `id`, to the first of ``hosts`` that answers and suits
    /// ``targetSessionAttributes`` (for `prefer-standby`: the first standby, else the first host
    /// that answers), and the host it reached.
    ///
    /// Fails with `SyncError(.serviceUnavailable)` saying, for each host, why it was passed over.
    func connect(
        on eventLoop: any EventLoop, id: Int, logger: Logger
    ) -> EventLoopFuture<(PostgresConnection, PostgresHost)> {
        let tries: [(PostgresHost, PostgresTargetSessionAttributes)] =
            switch targetSessionAttributes {
            case .preferStandby: hosts.map { ($0, .standby) } + hosts.map { ($0, .any) }
            default: hosts.map { ($0, targetSessionAttributes) }
            }
        return attempt(tries[...], reasons: [], on: eventLoop, id: id, logger: logger)
    }

    /// Tries the first of `tries`, then the rest; `reasons` says why the earlier ones failed.
    private func attempt(
        _ tries: ArraySlice<(PostgresHost, PostgresTargetSessionAttributes)>, reasons: [String],
        on eventLoop: any EventLoop, id: Int, logger: Logger
    ) -> EventLoopFuture<(PostgresConnection, PostgresHost)> {
        guard let (host, wanted) = tries.first else {
            let failure: SyncError
            if hosts.count == 1 && targetSessionAttributes == .any, let only = reasons.first {
                failure = PostgresFailure.unavailable(only)
            } else {
                failure = PostgresFailure.unavailable(
                    "no PostgreSQL server of \(endpoint) is \(targetSessionAttributes.rawValue): "
                        + reasons.joined(separator: "; "))
            }
            return eventLoop.makeFailedFuture(failure)
        }
        let next = tries.dropFirst()
        let answer = eventLoop.makePromise(of: (PostgresConnection, PostgresHost).self)
        /// Passes over `host` for `reason` and tries the next.
        @Sendable func passOver(_ reason: String) {
            attempt(next, reasons: reasons + [reason], on: eventLoop, id: id, logger: logger).cascade(to: answer)
        }
        PostgresConnection.connect(
            on: eventLoop, configuration: connectionConfiguration(for: host), id: id, logger: logger
        )
        .whenComplete { connected in
            switch connected {
            case .failure(let error):
                passOver(Self.reason(error, host: host))
            case .success(let connection) where wanted == .any:
                answer.succeed((connection, host))
            case .success(let connection):
                Self.role(of: connection, logger: logger).whenComplete { role in
                    switch role {
                    case .success(let role) where role.suits(wanted):
                        answer.succeed((connection, host))
                    case .success(let role):
                        logger.debug(
                            "passing over a PostgreSQL server",
                            metadata: ["endpoint": "\(host)", "role": "\(role)", "wanted": "\(wanted.rawValue)"])
                        connection.close().whenComplete { _ in
                            withExtendedLifetime(connection) { passOver("\(host) is \(role)") }
                        }
                    case .failure(let error):
                        connection.close().whenComplete { _ in
                            withExtendedLifetime(connection) { passOver(Self.reason(error, host: host)) }
                        }
                    }
                }
            }
        }
        return answer.futureResult
    }

    /// Why connecting to `host` failed, in words.
    private static func reason(_ error: any Error, host: PostgresHost) -> String {
        if let failure = error as? SyncError { return failure.message }
        switch PostgresFailure(error, sql: nil, endpoint: host.endpoint) {
        case .connection(let failure): return failure.message
        case .statement(let failure): return "\(failure)"
        }
    }

    /// Whether the server behind `connection` is in recovery and whether it refuses writes.
    private static func role(of connection: PostgresConnection, logger: Logger) -> EventLoopFuture<PostgresServerRole> {
        connection.query(
            PostgresQuery(unsafeSQL: "SELECT pg_is_in_recovery(), current_setting('transaction_read_only')"),
            logger: logger
        )
        .flatMapThrowing { result in
            guard let row = Array(result).first else {
                throw PostgresFailure.unavailable("the server did not say whether it is a standby")
            }
            let (inRecovery, readOnly) = try row.decode((Bool, String).self)
            return PostgresServerRole(inRecovery: inRecovery, readOnly: readOnly == "on")
        }
    }
}

/// What a server a connection reached is: a primary or a standby, writable or not.
struct PostgresServerRole: Sendable, CustomStringConvertible {
    /// `pg_is_in_recovery()`: a standby (or a server still recovering).
    var inRecovery: Bool
    /// `transaction_read_only`: writes are refused.
    var readOnly: Bool

    /// Whether a connection that wants `attributes` keeps this server.
    func suits(_ attributes: PostgresTargetSessionAttributes) -> Bool {
        switch attributes {
        case .any, .preferStandby: true
        case .readWrite: !readOnly
        case .readOnly: readOnly
        case .primary: !inRecovery
        case .standby: inRecovery
        }
    }

    var description: String {
        inRecovery ? "a standby (in recovery)" : readOnly ? "read-only" : "a writable primary"
    }
}
