import Foundation
import LogSyncServer
import Synchronization
import SyncModel

/// The bearer tokens a server accepts, each standing for one user.
///
/// A token file holds one token per line, then a space, then the user ID (the rest of the line;
/// it may hold spaces). Blank lines and lines starting with `#` are ignored:
///
/// ```
/// # logsync-server tokens: "<token> <user ID>", one per line. Keep this file private.
/// lsk_3q2x…Zk alice@example.com
/// lsk_9fJd…0a bob
/// ```
///
/// `logsync-server user add USER` appends a line with a new random token. A store opened on a
/// file reads it again when a request presents a token it does not know and the file changed, so
/// a user added while the server runs can connect at once.
///
/// Tokens are compared in full; a request's user comes only from its token, never from its path
/// or its headers.
public final class TokenStore: Sendable {
    /// What a token file line that cannot be read looks like, for error messages.
    public struct FileError: Error, CustomStringConvertible, Sendable {
        /// The file.
        public let path: String
        /// The line (from 1), or 0 for the file as a whole.
        public let line: Int
        /// What is wrong.
        public let problem: String

        public var description: String {
            line == 0 ? "token file \(path): \(problem)" : "token file \(path), line \(line): \(problem)"
        }
    }

    private struct State {
        var users: [String: UserID] = [:]
        var modified: Date?
    }

    /// The file the tokens come from, if any.
    public let file: URL?
    private let state = Mutex(State())

    /// A store of tokens kept in memory only (tests, embedding).
    public init() {
        file = nil
    }

    /// A store reading `file`; a missing file is an empty store until it appears.
    ///
    /// - Throws: ``FileError`` naming the line of a malformed entry or a token given twice.
    public init(file: URL) throws {
        self.file = file
        try reload()
    }

    /// The user a token stands for, or `nil` if the token is unknown.
    public func user(for token: String) -> UserID? {
        if let user = state.withLock({ $0.users[token] }) { return user }
        guard file != nil, (try? reloadIfChanged()) == true else { return nil }
        return state.withLock { $0.users[token] }
    }

    /// Accepts `token` for `user` (in memory; see ``append(token:user:to:)`` for files).
    ///
    /// - Throws: ``FileError`` if the token is not a valid token or already stands for a user.
    public func add(token: String, for user: UserID) throws {
        try Self.checkToken(token, path: file?.path ?? "(memory)", line: 0)
        try state.withLock { state in
            if state.users[token] != nil {
                throw FileError(path: file?.path ?? "(memory)", line: 0, problem: "the token is already in use")
            }
            state.users[token] = user
        }
    }

    /// How many tokens the store holds.
    public var count: Int { state.withLock { $0.users.count } }

    /// A new random token: `lsk_` and 43 characters of base64url (256 bits).
    public static func generateToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let base64 = Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return "lsk_" + base64
    }

    /// Appends a line for `user` with `token` to the token file at `file`, creating it (readable
    /// by its owner only) with a header comment if it does not exist.
    ///
    /// - Throws: ``FileError`` for a user ID with a line break or an unusable token, or if the
    ///   file exists and holds the token already; file system errors.
    public static func append(token: String, user: UserID, to file: URL) throws {
        try checkToken(token, path: file.path, line: 0)
        guard !user.rawValue.isEmpty, !user.rawValue.contains(where: \.isNewline),
              user.rawValue.trimmingCharacters(in: .whitespaces) == user.rawValue
        else {
            throw FileError(path: file.path, line: 0, problem: "a user ID must be non-empty, on one line, without surrounding spaces")
        }
        let manager = FileManager.default
        if !manager.fileExists(atPath: file.path) {
            try manager.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            let header = "# logsync-server tokens: \"<token> <user ID>\", one per line. Keep this file private.\n"
            guard manager.createFile(atPath: file.path, contents: Data(header.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw FileError(path: file.path, line: 0, problem: "cannot create the file")
            }
        } else if try parse(String(contentsOf: file, encoding: .utf8), path: file.path)[token] != nil {
            throw FileError(path: file.path, line: 0, problem: "the token is already in use")
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\(token) \(user.rawValue)\n".utf8))
    }

    /// The token → user map of a token file's text.
    ///
    /// - Throws: ``FileError`` naming the first bad line.
    public static func parse(_ text: String, path: String) throws -> [String: UserID] {
        var users: [String: UserID] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let space = line.firstIndex(of: " ") else {
                throw FileError(path: path, line: index + 1, problem: "expected \"<token> <user ID>\"")
            }
            let token = String(line[..<space])
            let user = line[line.index(after: space)...].trimmingCharacters(in: .whitespaces)
            try checkToken(token, path: path, line: index + 1)
            guard !user.isEmpty else { throw FileError(path: path, line: index + 1, problem: "the user ID is missing") }
            guard users.updateValue(UserID(user), forKey: token) == nil else {
                throw FileError(path: path, line: index + 1, problem: "this token is already given to a user on an earlier line")
            }
        }
        return users
    }

    /// Reads the file again.
    ///
    /// - Throws: ``FileError``.
    public func reload() throws {
        guard let file else { return }
        let modified = Self.modificationDate(of: file)
        let users: [String: UserID]
        if modified == nil {
            users = [:]
        } else {
            do {
                users = try Self.parse(try String(contentsOf: file, encoding: .utf8), path: file.path)
            } catch let error as FileError {
                throw error
            } catch {
                throw FileError(path: file.path, line: 0, problem: "cannot read it: \(error)")
            }
        }
        state.withLock { state in
            state.users = users
            state.modified = modified
        }
    }

    /// Reloads the file if its modification date changed; returns whether it did.
    private func reloadIfChanged() throws -> Bool {
        guard let file else { return false }
        let modified = Self.modificationDate(of: file)
        guard modified != state.withLock({ $0.modified }) else { return false }
        try reload()
        return true
    }

    private static func modificationDate(of file: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: file.path))?[.modificationDate] as? Date
    }

    private static func checkToken(_ token: String, path: String, line: Int) throws {
        guard token.utf8.count >= 16, token.utf8.count <= 512,
              token.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 32 && $0.value < 127 })
        else {
            throw FileError(path: path, line: line, problem: "a token is 16 to 512 printable ASCII characters without spaces")
        }
    }
}
