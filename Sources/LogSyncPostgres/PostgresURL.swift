/// Where a PostgreSQL database is and who connects to it:
/// `postgres://user[:password]@host[:port][,host[:port]…]/database[?target_session_attrs=…]`
/// (or `postgresql://`), as libpq spells it.
///
/// Several hosts name a primary and its standbys: a connection tries them in order and keeps the
/// first whose session suits ``targetSessionAttributes`` (`read-write` for a node's store, so it
/// always reaches the writable primary, whichever host that is after a failover).
///
/// Parsed once at startup so a mistyped flag fails with a message naming the wrong part,
/// rather than as a connection error later. ``description`` hides the password, so the URL
/// can be logged.
package struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
    /// The user name PostgreSQL authenticates.
    package var user: String
    /// The password, if the URL has one.
    package var password: String?
    /// The hosts to try, in order; never empty.
    package var hosts: [PostgresHost]
    /// The database name.
    package var database: String
    /// Which server of ``hosts`` a connection accepts (`target_session_attrs`); `any` when the
    /// URL names none, as in libpq.
    package var targetSessionAttributes: PostgresTargetSessionAttributes

    /// The first host's name or address.
    package var host: String {
        get { hosts[0].host }
        set { hosts[0].host = newValue }
    }

    /// The first host's TCP port; 5432 when the URL names none.
    package var port: Int {
        get { hosts[0].port }
        set { hosts[0].port = newValue }
    }

    /// Creates a URL of one host from its parts.
    package init(
        user: String, password: String? = nil, host: String, port: Int = 5432, database: String,
        targetSessionAttributes: PostgresTargetSessionAttributes = .any
    ) {
        self.user = user
        self.password = password
        self.hosts = [PostgresHost(host: host, port: port)]
        self.database = database
        self.targetSessionAttributes = targetSessionAttributes
    }

    /// Parses `postgres://user[:password]@host[:port][,host[:port]…]/database[?parameters]`;
    /// user, password, database and parameter values may be percent-encoded. Of the parameters,
    /// `target_session_attrs` is read (`any`, `read-write`, `read-only`, `primary`, `standby` or
    /// `prefer-standby`); the others libpq knows are left to it and ignored here.
    ///
    /// - Throws: ``PostgresURLError`` naming the part that is missing or wrong.
    package init(_ text: String) throws {
        var rest: Substring
        if text.hasPrefix("postgres://") {
            rest = text.dropFirst("postgres://".count)
        } else if text.hasPrefix("postgresql://") {
            rest = text.dropFirst("postgresql://".count)
        } else {
            throw PostgresURLError(text: text, problem: "the scheme is not postgres:// or postgresql://")
        }
        var attributes = PostgresTargetSessionAttributes.any
        if let query = rest.firstIndex(of: "?") {
            attributes = try Self.targetSessionAttributes(in: rest[rest.index(after: query)...], of: text)
            rest = rest[..<query]
        }
        guard let slash = rest.firstIndex(of: "/") else {
            throw PostgresURLError(text: text, problem: "no /database after the host")
        }
        let authority = rest[..<slash]
        let databasePart = rest[rest.index(after: slash)...]
        guard !databasePart.isEmpty, !databasePart.contains("/") else {
            throw PostgresURLError(text: text, problem: "the database name is empty or contains /")
        }
        guard let at = authority.lastIndex(of: "@") else {
            throw PostgresURLError(text: text, problem: "no user@ before the host")
        }
        let userInfo = authority[..<at]
        let hostList = authority[authority.index(after: at)...]
        let userPart: Substring
        var passwordPart: Substring?
        if let colon = userInfo.firstIndex(of: ":") {
            userPart = userInfo[..<colon]
            passwordPart = userInfo[userInfo.index(after: colon)...]
        } else {
            userPart = userInfo
        }
        guard !userPart.isEmpty else { throw PostgresURLError(text: text, problem: "the user name is empty") }
        let hostParts = hostList.split(separator: ",", omittingEmptySubsequences: false)
        self.hosts = try hostParts.enumerated().map { index, part in
            try Self.host(part, number: index + 1, of: hostParts.count, in: text)
        }
        self.user = try Self.decode(userPart, part: "user name", in: text)
        self.password = try passwordPart.map { try Self.decode($0, part: "password", in: text) }
        self.database = try Self.decode(databasePart, part: "database name", in: text)
        self.targetSessionAttributes = attributes
    }

    /// One `host[:port]` (or `[v6 address][:port]`) of the host list, the `number`th of `count`.
    private static func host(_ hostPort: Substring, number: Int, of count: Int, in text: String) throws -> PostgresHost
    {
        let which = count == 1 ? "the host" : "host \(number) of \(count)"
        var hostPart = hostPort
        var port = 5432
        if hostPort.hasPrefix("[") {
            // An IPv6 address: [::1]:5432
            guard let close = hostPort.firstIndex(of: "]") else {
                throw PostgresURLError(text: text, problem: "the IPv6 address of \(which) has no closing ]")
            }
            hostPart = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let afterClose = hostPort[hostPort.index(after: close)...]
            if !afterClose.isEmpty {
                guard afterClose.hasPrefix(":") else {
                    throw PostgresURLError(text: text, problem: "unexpected text after the IPv6 address of \(which)")
                }
                port = try Self.port(afterClose.dropFirst(), in: text)
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            hostPart = hostPort[..<colon]
            port = try Self.port(hostPort[hostPort.index(after: colon)...], in: text)
        }
        guard !hostPart.isEmpty else {
            throw PostgresURLError(text: text, problem: count == 1 ? "the host is empty" : "\(which) is empty")
        }
        return PostgresHost(host: String(hostPart), port: port)
    }

    /// The `target_session_attrs` of the query `query` (`name=value&…`), `any` without one.
    private static func targetSessionAttributes(
        in query: Substring, of text: String
    ) throws -> PostgresTargetSessionAttributes {
        var attributes = PostgresTargetSessionAttributes.any
        for parameter in query.split(separator: "&") {
            guard let equals = parameter.firstIndex(of: "=") else {
                throw PostgresURLError(text: text, problem: "the parameter \"\(parameter)\" has no =value")
            }
            guard parameter[..<equals] == "target_session_attrs" else { continue }
            let value = try decode(parameter[parameter.index(after: equals)...], part: "target_session_attrs", in: text)
            guard let known = PostgresTargetSessionAttributes(rawValue: value) else {
                let allowed = PostgresTargetSessionAttributes.allCases.map(\.rawValue).joined(separator: ", ")
                throw PostgresURLError(
                    text: text, problem: "target_session_attrs \"\(value)\" is not one of \(allowed)")
            }
            attributes = known
        }
        return attributes
    }

    /// The URL with the password replaced by `***`, safe to log.
    package var description: String {
        let secret = password == nil ? "" : ":***"
        let query = targetSessionAttributes == .any ? "" : "?target_session_attrs=\(targetSessionAttributes.rawValue)"
        return "postgres://\(user)\(secret)@\(endpoint)/\(database)\(query)"
    }

    /// `host:port` (`host:port,host:port` for several hosts), for error messages about
    /// connections.
    package var endpoint: String { hosts.map(\.endpoint).joined(separator: ",") }

    /// The URL of one of its hosts alone, with the same user, database and attributes.
    package func only(_ host: PostgresHost) -> PostgresURL {
        var url = self
        url.hosts = [host]
        return url
    }

    /// A port number between 1 and 65535.
    private static func port(_ text: Substring, in url: String) throws -> Int {
        guard let port = Int(text), (1...65535).contains(port) else {
            throw PostgresURLError(text: url, problem: "the port \"\(text)\" is not a number from 1 to 65535")
        }
        return port
    }

    /// Percent-decodes one part of the URL.
    private static func decode(_ text: Substring, part: String, in url: String) throws -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else {
                    throw PostgresURLError(text: url, problem: "the \(part) has a bad percent escape")
                }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw PostgresURLError(text: url, problem: "the \(part) is not UTF-8 once decoded")
        }
        return decoded
    }
}

/// One server of a ``PostgresURL``: a host name or address and a TCP port.
package struct PostgresHost: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address.
    package var host: String
    /// The TCP port.
    package var port: Int

    /// Creates a host.
    package init(host: String, port: Int = 5432) {
        self.host = host
        self.port = port
    }

    /// `host:port`, or `[address]:port` for an IPv6 address.
    package var endpoint: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    package var description: String { endpoint }
}

/// Which server a connection accepts among a URL's hosts, as libpq's `target_session_attrs`
/// says: checked on each new connection with `pg_is_in_recovery()` and `transaction_read_only`.
package enum PostgresTargetSessionAttributes: String, Sendable, Hashable, CaseIterable {
    /// The first host that answers.
    case any
    /// A server that accepts writes (`transaction_read_only` off): the primary.
    case readWrite = "read-write"
    /// A server that refuses writes (`transaction_read_only` on).
    case readOnly = "read-only"
    /// A server not in recovery: the primary.
    case primary
    /// A server in recovery: a standby.
    case standby
    /// A standby if one answers, else any server.
    case preferStandby = "prefer-standby"
}

/// A PostgreSQL URL that could not be parsed: which part is wrong, and the URL with any
/// password hidden.
package struct PostgresURLError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URL as given, with the text between `:` and `@` of the user part hidden.
    package var url: String
    /// What is wrong, in words.
    package var problem: String

    /// Creates the error, hiding a password in `text`.
    init(text: String, problem: String) {
        self.url = Self.hidingPassword(text)
        self.problem = problem
    }

    /// `invalid PostgreSQL URL postgres://u:***@h/db: <problem>`.
    package var description: String { "invalid PostgreSQL URL \(url): \(problem)" }

    /// The URL with the password (between the scheme's `user:` and `@`) replaced by `***`.
    private static func hidingPassword(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].lastIndex(of: "@"),
            let colon = text[scheme.upperBound..<at].firstIndex(of: ":")
        else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }
}
