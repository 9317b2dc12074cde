import Crypto
import Foundation
import Logging
import LogSyncServer
import LogSyncWire
import Synchronization
import SyncModel

/// The bearer tokens a server accepts, each standing for one user.
///
/// A token file holds one token per line as its SHA-256 digest, `sha256:` and 64 hexadecimal
/// digits, then a space, then the user ID (the rest of the line; it may hold spaces). Blank lines
/// and lines starting with `#` are ignored:
///
/// ```
/// # logsync-server tokens: "sha256:<SHA-256 of the token, in hex> <user ID>", one per line. Keep this file private.
/// sha256:f6cdd79c4cf606637c4f2326a8bf2ae2cbc0ce92fe21e17b7d045e58c5b5ecb5 alice@example.com
/// sha256:1370bbc256a66a9bb539b421c44aa9eebcadbb36faab97a874330861cbb6f884 bob
/// ```
///
/// `logsync-server user add USER` prints a new random token once and appends only its digest,
/// so the file never holds a token that authenticates. A line in the older form, the token in the
/// clear (`lsk_… alice`), is still accepted; each read of a file with such lines logs one warning
/// naming them, and ``rehash(file:)`` (`logsync-server user rehash`) replaces them by digests.
///
/// A store opened on a file reads it again when a request presents a token it does not know and
/// the file changed, so a user added while the server runs can connect at once.
///
/// A presented token is hashed and its digest looked up in a dictionary. The look-up compares
/// digests, not tokens, and may stop at the first differing byte, but that says nothing useful
/// about the accepted tokens: the digest of a guess cannot be steered towards a stored digest
/// (that would take SHA-256 preimages), and even a stored digest, if it leaked, does not give
/// back a token of 256 random bits. So no constant-time comparison is needed. A request's user
/// comes only from its token, never from its path or its headers.
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
        var users: [TokenDigest: UserID] = [:]
        var clearTokenLines: [Int] = []
        var modified: Date?
    }

    /// The file the tokens come from, if any.
    public let file: URL?
    /// The storage's tokens, when the store keeps them (PostgreSQL: every node the same).
    public let stored: (any StoredTokens)?
    private let logger: Logger
    private let state = Mutex(State())

    /// A store of tokens kept in memory only (tests, embedding).
    public init() {
        file = nil
        stored = nil
        logger = Logger(label: "logsync.tokens", factory: { _ in SwiftLogNoOpLogHandler() })
    }

    /// A store reading `file`; a missing file is an empty store until it appears.
    ///
    /// - Parameters:
    ///   - file: The token file.
    ///   - logger: Where a read that finds tokens in the clear logs its warning (silent by default).
    /// - Throws: ``FileError`` naming the line of a malformed entry or a token given twice.
    public init(file: URL, logger: Logger = Logger(label: "logsync.tokens", factory: { _ in SwiftLogNoOpLogHandler() })) throws {
        self.file = file
        self.stored = nil
        self.logger = logger
        try reload()
    }

    /// The tokens a server's storage keeps (``StoredTokens``): a token is looked up there the
    /// first time this node sees it, then kept in memory, so a token added on one node is
    /// accepted by every node.
    public init(stored: any StoredTokens, logger: Logger = Logger(label: "logsync.tokens", factory: { _ in SwiftLogNoOpLogHandler() })) {
        self.file = nil
        self.stored = stored
        self.logger = logger
    }

    /// The user a token stands for, or `nil` if the token is unknown.
    ///
    /// Complexity: one SHA-256 of the token and a dictionary look-up; a read of the file when
    /// the token is unknown and the file changed.
    public func user(for token: String) -> UserID? {
        (try? lookUp(token)) ?? nil
    }

    /// The user of `token` if this answer needs no wait: the token is in memory (or in the file),
    /// or the tokens live nowhere else. `.notYetKnown` for a token only the storage can tell
    /// about: an event loop must not wait for it, so the look-up is started on a thread of its
    /// own and the token is in memory for the next request.
    package func lookUpWithoutWaiting(_ token: String) -> ImmediateLookup {
        let digest = TokenDigest(token: token)
        if let user = state.withLock({ $0.users[digest] }) { return .known(user) }
        guard stored != nil else { return user(for: token).map(ImmediateLookup.known) ?? .unknown }
        Thread.detachNewThread { [self] in _ = try? self.lookUp(token) }
        return .notYetKnown
    }

    /// What ``lookUpWithoutWaiting(_:)`` can say at once.
    package enum ImmediateLookup: Sendable {
        case known(UserID)
        case unknown
        case notYetKnown
    }

    /// ``user(for:)``, telling apart an unknown token (`nil`) from a store that could not be
    /// asked: a token found in the storage is kept in memory, so devices already seen keep
    /// authenticating while the storage is away, and their requests fail as the store does.
    ///
    /// - Throws: `SyncError(.serviceUnavailable)` (with a retry-after) when the storage that
    ///   keeps the tokens cannot be reached.
    public func lookUp(_ token: String) throws(SyncError) -> UserID? {
        let digest = TokenDigest(token: token)
        if let user = state.withLock({ $0.users[digest] }) { return user }
        if let stored {
            let user: UserID?
            do {
                user = try stored.user(forDigest: digest.description)
            } catch let error as SyncError {
                throw error
            } catch {
                throw SyncError(.serviceUnavailable, "the token store failed: \(error)", retryAfter: .seconds(1))
            }
            if let user { state.withLock { $0.users[digest] = user } }
            return user
        }
        guard file != nil, (try? reloadIfChanged()) == true else { return nil }
        return state.withLock { $0.users[digest] }
    }

    /// Accepts `token` for `user` (in memory; see ``append(token:user:to:)`` for files). Only
    /// the token's digest is kept.
    ///
    /// - Throws: ``FileError`` if the token is not a valid token or already stands for a user,
    ///   or the user ID breaks the rules of `Identifier.userID`.
    public func add(token: String, for user: UserID) throws {
        try Self.checkToken(token, path: file?.path ?? "(memory)", line: 0)
        if let problem = Identifier.userID.violation(user.rawValue) {
            throw FileError(path: file?.path ?? "(memory)", line: 0, problem: "invalid user ID: it \(problem)")
        }
        let digest = TokenDigest(token: token)
        if let stored {
            try stored.add(digest: digest.description, user: user)
            return
        }
        try state.withLock { state in
            if state.users[digest] != nil {
                throw FileError(path: file?.path ?? "(memory)", line: 0, problem: "the token is already in use")
            }
            state.users[digest] = user
        }
    }

    /// How many tokens the store holds.
    public var count: Int { (try? stored?.count()) ?? state.withLock { $0.users.count } }

    /// The lines of the token file (from 1) that hold a token in the clear, as of the last read;
    /// empty for a store in memory. ``rehash(file:)`` replaces them by digests.
    public var clearTokenLines: [Int] { state.withLock { $0.clearTokenLines } }

    /// A new random token: `lsk_` and 43 characters of base64url (256 bits).
    public static func generateToken() -> String {
        "lsk_" + randomBase64URL(bytes: 32)
    }

    /// The first line of a token file this type creates.
    static let header =
        "# logsync-server tokens: \"sha256:<SHA-256 of the token, in hex> <user ID>\", one per line. Keep this file private.\n"

    /// Appends a line for `user` with the digest of `token` to the token file at `file`,
    /// creating it (readable by its owner only) with a header comment if it does not exist. The
    /// token itself is not written: whoever made it hands it to the user once.
    ///
    /// ```swift
    /// let token = TokenStore.generateToken()
    /// try TokenStore.append(token: token, user: "alice", to: tokensFile)   // "sha256:… alice"
    /// print(token)
    /// ```
    ///
    /// - Throws: ``FileError`` for a user ID that breaks the rules of `Identifier.userID`
    ///   (empty, over 511 bytes, a control character, surrounding spaces) or an unusable token, or if the
    ///   file exists and holds the token already (in either form) or a malformed line; file
    ///   system errors.
    public static func append(token: String, user: UserID, to file: URL) throws {
        try checkToken(token, path: file.path, line: 0)
        if let problem = Identifier.userID.violation(user.rawValue) {
            throw FileError(path: file.path, line: 0, problem: "invalid user ID: it \(problem)")
        }
        let digest = TokenDigest(token: token)
        let manager = FileManager.default
        if !manager.fileExists(atPath: file.path) {
            try manager.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            guard manager.createFile(atPath: file.path, contents: Data(header.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw FileError(path: file.path, line: 0, problem: "cannot create the file")
            }
        } else if try parse(String(contentsOf: file, encoding: .utf8), path: file.path).users[digest] != nil {
            throw FileError(path: file.path, line: 0, problem: "the token is already in use")
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\(digest) \(user.rawValue)\n".utf8))
    }

    /// Replaces every line of the token file at `file` that holds a token in the clear by a line
    /// with its digest, keeping the other lines (comments too) and the file's permissions; the
    /// file is replaced atomically, so a running server reads either version. Returns how many
    /// lines changed; with none, the file is left untouched.
    ///
    /// A running server needs no restart: the tokens it accepts are the same.
    ///
    /// - Throws: ``FileError`` if the file is missing or holds a malformed line; file system errors.
    public static func rehash(file: URL) throws -> Int {
        let text: String
        do {
            text = try String(contentsOf: file, encoding: .utf8)
        } catch {
            throw FileError(path: file.path, line: 0, problem: "cannot read it: \(error)")
        }
        let contents = try parse(text, path: file.path)
        guard !contents.clearTokenLines.isEmpty else { return 0 }
        let clear = Set(contents.clearTokenLines)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for index in lines.indices where clear.contains(index + 1) {
            let line = lines[index].trimmingCharacters(in: .whitespaces)
            let space = line.firstIndex(of: " ")!  // parse checked the line
            let user = line[line.index(after: space)...].trimmingCharacters(in: .whitespaces)
            lines[index] = "\(TokenDigest(token: String(line[..<space]))) \(user)"
        }
        let manager = FileManager.default
        let permissions = (try manager.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int) ?? 0o600
        let temporary = file.deletingLastPathComponent().appendingPathComponent(".\(file.lastPathComponent).rehash-\(getpid())")
        guard manager.createFile(
            atPath: temporary.path, contents: Data(lines.joined(separator: "\n").utf8), attributes: [.posixPermissions: permissions])
        else {
            throw FileError(path: temporary.path, line: 0, problem: "cannot create the file")
        }
        guard rename(temporary.path, file.path) == 0 else {
            let code = errno
            try? manager.removeItem(at: temporary)
            throw FileError(path: file.path, line: 0, problem: "cannot replace it: \(String(cString: strerror(code)))")
        }
        return clear.count
    }

    /// What a token file holds.
    package struct Contents: Sendable {
        /// The user of each token, by the token's digest.
        package var users: [TokenDigest: UserID] = [:]
        /// The lines (from 1) that hold a token in the clear.
        package var clearTokenLines: [Int] = []
    }

    /// The tokens of a token file's text: `sha256:<hex> <user>` lines, and `<token> <user>` lines
    /// of the older form.
    ///
    /// - Throws: ``FileError`` naming the first bad line: no user or an invalid one
    ///   (`Identifier.userID`), a digest that is not 64
    ///   hexadecimal digits, a clear token that is not a token, a token given twice (in either form).
    package static func parse(_ text: String, path: String) throws -> Contents {
        var contents = Contents()
        var lineOfDigest: [TokenDigest: Int] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let space = line.firstIndex(of: " ") else {
                throw FileError(path: path, line: number, problem: "expected \"sha256:<64 hex digits> <user ID>\"")
            }
            let key = String(line[..<space])
            let user = line[line.index(after: space)...].trimmingCharacters(in: .whitespaces)
            let digest: TokenDigest
            if key.hasPrefix(TokenDigest.prefix) {
                guard let parsed = TokenDigest(key) else {
                    throw FileError(path: path, line: number, problem: "a digest is \"sha256:\" and 64 hexadecimal digits")
                }
                digest = parsed
            } else {
                try checkToken(key, path: path, line: number)
                digest = TokenDigest(token: key)
                contents.clearTokenLines.append(number)
            }
            guard !user.isEmpty else { throw FileError(path: path, line: number, problem: "the user ID is missing") }
            if let problem = Identifier.userID.violation(user) {
                throw FileError(path: path, line: number, problem: "invalid user ID: it \(problem)")
            }
            if let earlier = lineOfDigest[digest] {
                throw FileError(path: path, line: number, problem: "this token is already given to a user on line \(earlier)")
            }
            lineOfDigest[digest] = number
            contents.users[digest] = UserID(user)
        }
        return contents
    }

    /// Reads the file again; logs a warning if it holds tokens in the clear.
    ///
    /// - Throws: ``FileError``.
    public func reload() throws {
        guard let file else { return }
        let modified = Self.modificationDate(of: file)
        var contents = Contents()
        if modified != nil {
            do {
                contents = try Self.parse(try String(contentsOf: file, encoding: .utf8), path: file.path)
            } catch let error as FileError {
                throw error
            } catch {
                throw FileError(path: file.path, line: 0, problem: "cannot read it: \(error)")
            }
        }
        state.withLock { state in
            state.users = contents.users
            state.clearTokenLines = contents.clearTokenLines
            state.modified = modified
        }
        if !contents.clearTokenLines.isEmpty {
            logger.warning(
                "the token file holds tokens in the clear; `logsync-server user rehash` keeps only their digests",
                metadata: ["tokens": "\(file.path)", "lines": "\(contents.clearTokenLines.map(String.init).joined(separator: ","))"])
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

/// The SHA-256 digest of a bearer token, as the token file keeps it: `sha256:` and 64 lowercase
/// hexadecimal digits.
package struct TokenDigest: Hashable, Sendable, CustomStringConvertible {
    static let prefix = "sha256:"

    /// The digest's 32 bytes as four big-endian words.
    private let words: (UInt64, UInt64, UInt64, UInt64)

    /// The digest of `token`'s UTF-8 bytes.
    package init(token: String) {
        self.init(bytes: Array(SHA256.hash(data: Array(token.utf8))))!
    }

    /// Reads `sha256:<64 hex digits>` (either case); `nil` for anything else.
    package init?(_ text: String) {
        guard text.hasPrefix(Self.prefix) else { return nil }
        let hex = Array(text.utf8.dropFirst(Self.prefix.utf8.count))
        guard hex.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = Self.nibble(hex[index]), let low = Self.nibble(hex[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.init(bytes: bytes)
    }

    private init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        func word(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        words = (word(0), word(8), word(16), word(24))
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    package static func == (lhs: TokenDigest, rhs: TokenDigest) -> Bool {
        lhs.words == rhs.words
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    package var description: String {
        Self.prefix + [words.0, words.1, words.2, words.3].map { word in
            let hex = String(word, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}
