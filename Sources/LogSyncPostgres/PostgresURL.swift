/// Where a PostgreSQL database is and who connects to it:
/// `postgres://user[:password]@host[:port]/database` (or `postgresql://`).
///
/// Parsed once at startup so a mistyped flag fails with a message naming the wrong part,
/// rather than as a connection error later. ``description`` hides the password, so the URL
/// can be logged.
package struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
    /// The user name PostgreSQL authenticates.
    package var user: String
    /// The password, if the URL has one.
    package var password: String?
    /// The host name or address.
    package var host: String
    /// The TCP port; 5432 when the URL names none.
    package var port: Int
    /// The database name.
    package var database: String

    /// Creates a URL from its parts.
    package init(user: String, password: String? = nil, host: String, port: Int = 5432, database: String) {
        self.user = user
        self.password = password
        self.host = host
        self.port = port
        self.database = database
    }

    /// Parses `postgres://user[:password]@host[:port]/database`; user, password and database
    /// may be percent-encoded.
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
        if let query = rest.firstIndex(of: "?") { rest = rest[..<query] }
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
        let hostPort = authority[authority.index(after: at)...]
        let userPart: Substring
        var passwordPart: Substring?
        if let colon = userInfo.firstIndex(of: ":") {
            userPart = userInfo[..<colon]
            passwordPart = userInfo[userInfo.index(after: colon)...]
        } else {
            userPart = userInfo
        }
        guard !userPart.isEmpty else { throw PostgresURLError(text: text, problem: "the user name is empty") }
        var hostPart = hostPort
        var port = 5432
        if hostPort.hasPrefix("[") {
            // An IPv6 address: [::1]:5432
            guard let close = hostPort.firstIndex(of: "]") else {
                throw PostgresURLError(text: text, problem: "the IPv6 host has no closing ]")
            }
            hostPart = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let afterClose = hostPort[hostPort.index(after: close)...]
            if !afterClose.isEmpty {
                guard afterClose.hasPrefix(":") else {
                    throw PostgresURLError(text: text, problem: "unexpected text after the IPv6 host")
                }
                port = try Self.port(afterClose.dropFirst(), in: text)
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            hostPart = hostPort[..<colon]
            port = try Self.port(hostPort[hostPort.index(after: colon)...], in: text)
        }
        guard !hostPart.isEmpty else { throw PostgresURLError(text: text, problem: "the host is empty") }
        self.user = try Self.decode(userPart, part: "user name", in: text)
        self.password = try passwordPart.map { try Self.decode($0, part: "password", in: text) }
        self.host = String(hostPart)
        self.port = port
        self.database = try Self.decode(databasePart, part: "database name", in: text)
    }

    /// The URL with the password replaced by `***`, safe to log.
    package var description: String {
        let secret = password == nil ? "" : ":***"
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "postgres://\(user)\(secret)@\(shownHost):\(port)/\(database)"
    }

    /// `host:port`, for error messages about connections.
    package var endpoint: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

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
