import Foundation
import LogSyncPlatform
import LogSyncServer
import Logging
import SyncModel

/// The token file: its format, its edits (`user add`, `user rehash`, `user revoke`), and how a
/// running store follows its changes without ever losing the tokens it had.
extension TokenStore {
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
        var separator = "\n"
        var prefix = ""
        if !manager.fileExists(atPath: file.path) {
            try manager.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            guard
                manager.createFile(
                    atPath: file.path, contents: Data(header.utf8), attributes: [.posixPermissions: 0o600])
            else {
                throw FileError(path: file.path, line: 0, problem: "cannot create the file")
            }
        } else {
            let text = try readText(of: file)
            if try parse(text, path: file.path).users[digest] != nil {
                throw FileError(path: file.path, line: 0, problem: "the token is already in use")
            }
            separator = lineSeparator(of: text)
            // A last line without its line end would run into the new one.
            if let last = text.unicodeScalars.last, last != "\n" { prefix = separator }
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((prefix + "\(digest) \(user.rawValue)" + separator).utf8))
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
        let text = try readText(of: file)
        let contents = try parse(text, path: file.path)
        guard !contents.clearTokenLines.isEmpty else { return 0 }
        let clear = Set(contents.clearTokenLines)
        try rewrite(file, text: text) { number, line in
            guard clear.contains(number) else { return line }
            let line = line.trimmingCharacters(in: .whitespaces)
            let space = line.firstIndex(of: " ")!  // parse checked the line
            let user = line[line.index(after: space)...].trimmingCharacters(in: .whitespaces)
            return "\(TokenDigest(token: String(line[..<space]))) \(user)"
        }
        return clear.count
    }

    /// Removes from the token file at `file` the lines of the tokens `revocation` names (a
    /// token's digest, or every token of a user), keeping the other lines and the file's
    /// permissions; the file is replaced atomically, so a running server reads either version,
    /// and stops accepting the tokens within its ``checkInterval``. Returns how many tokens were
    /// removed; with none, the file is left untouched.
    ///
    /// - Throws: ``FileError`` if the file is missing, cannot be read or holds a malformed line
    ///   (it is not edited then); file system errors.
    public static func revoke(_ revocation: Revocation, inFile file: URL) throws -> Int {
        let text = try readText(of: file)
        let contents = try parse(text, path: file.path)
        let revoked = Set(
            contents.digestOfLine.compactMap { number, digest in
                contents.users[digest].map { revocation.covers(credential: digest.description, of: $0) } == true
                    ? number : nil
            })
        guard !revoked.isEmpty else { return 0 }
        try rewrite(file, text: text) { number, line in revoked.contains(number) ? nil : line }
        return revoked.count
    }

    /// What a token file holds.
    package struct Contents: Sendable {
        /// The user of each token, by the token's digest.
        package var users: [TokenDigest: UserID] = [:]
        /// The lines (from 1) that hold a token in the clear.
        package var clearTokenLines: [Int] = []
        /// The digest of the token on each line (from 1) that holds one.
        package var digestOfLine: [Int: TokenDigest] = [:]
    }

    /// The tokens of a token file's text: `sha256:<hex> <user>` lines, and `<token> <user>` lines
    /// of the older form. Lines end with LF or CRLF; a byte order mark at the start is skipped.
    ///
    /// - Throws: ``FileError`` naming the first bad line: no user or an invalid one
    ///   (`Identifier.userID`), a digest that is not 64
    ///   hexadecimal digits, a clear token that is not a token, a token given twice (in either form).
    package static func parse(_ text: String, path: String) throws -> Contents {
        var contents = Contents()
        var lineOfDigest: [TokenDigest: Int] = [:]
        for (index, rawLine) in lines(of: text).enumerated() {
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
                    throw FileError(
                        path: path, line: number, problem: "a digest is \"sha256:\" and 64 hexadecimal digits")
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
                throw FileError(
                    path: path, line: number, problem: "this token is already given to a user on line \(earlier)")
            }
            lineOfDigest[digest] = number
            contents.users[digest] = UserID(user)
            contents.digestOfLine[number] = digest
        }
        return contents
    }

    /// The lines of `text` without their ends: split at each LF, a CR before it dropped, and a
    /// UTF-8 byte order mark at the start skipped. Split by Unicode scalars, not Characters, for
    /// which CR LF is one Character, not an LF.
    static func lines(of text: String) -> [String] {
        var scalars = Substring(text).unicodeScalars
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        return scalars.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            String(Substring(line.last == "\r" ? line.dropLast() : line))
        }
    }

    /// How the first line of `text` ends, CR LF or LF (LF for a single line): how lines written
    /// into that file end.
    static func lineSeparator(of text: String) -> String {
        var previous: UInt8 = 0
        for byte in text.utf8 {
            if byte == 0x0A { return previous == 0x0D ? "\r\n" : "\n" }
            previous = byte
        }
        return "\n"
    }

    /// The text of the token file at `file`, which must be UTF-8, byte order mark included
    /// (Foundation's decoding would drop it, and a rewrite would lose it).
    ///
    /// - Throws: ``FileError`` saying why it cannot be read.
    static func readText(of file: URL) throws(FileError) -> String {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw FileError(path: file.path, line: 0, problem: "cannot read it: \(error.localizedDescription)")
        }
        guard let text = String(validating: data, as: UTF8.self) else {
            throw FileError(path: file.path, line: 0, problem: "cannot read it: it is not UTF-8 text")
        }
        return text
    }

    /// Replaces the token file at `file`, whose text is `text`, atomically by the lines
    /// `transform` keeps (`nil` drops a line), with the same line ends, byte order mark and
    /// permissions.
    static func rewrite(_ file: URL, text: String, _ transform: (_ number: Int, _ line: String) -> String?) throws {
        let separator = lineSeparator(of: text)
        let kept = lines(of: text).enumerated().compactMap { index, line in transform(index + 1, line) }
        let bom = text.unicodeScalars.first == "\u{FEFF}" ? "\u{FEFF}" : ""
        let manager = FileManager.default
        let permissions = (try manager.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int) ?? 0o600
        let temporary = file.deletingLastPathComponent().appendingPathComponent(
            ".\(file.lastPathComponent).new-\(getpid())")
        guard
            manager.createFile(
                atPath: temporary.path, contents: Data((bom + kept.joined(separator: separator)).utf8),
                attributes: [.posixPermissions: permissions])
        else {
            throw FileError(path: temporary.path, line: 0, problem: "cannot create the file")
        }
        guard rename(temporary.path, file.path) == 0 else {
            let code = errno
            try? manager.removeItem(at: temporary)
            throw FileError(path: file.path, line: 0, problem: "cannot replace it: \(String(cString: strerror(code)))")
        }
    }

    // MARK: Following the file

    /// Reads the file again and takes its tokens; logs a warning if it holds tokens in the clear.
    /// Push channels of tokens the file no longer holds end.
    ///
    /// A file that is missing before any read is an empty store; once a read succeeded, a
    /// missing file is an error.
    ///
    /// - Throws: ``FileError`` naming the line of a malformed entry, or saying why the file cannot
    ///   be read; the tokens last read are kept then.
    public func reload() throws {
        guard let file else { return }
        let clearTokenLines = try reads.withLock { _ in
            let identity = FileStatus(path: file.path)
            let wasRead = state.withLock { state in
                state.file = identity  // looked at, whatever comes of it: not read again unchanged
                return state.fileRead
            }
            let contents: Contents
            if identity == nil {
                if wasRead { throw FileError(path: file.path, line: 0, problem: "it is missing") }
                contents = Contents()  // not there yet: no tokens until it appears
            } else {
                contents = try Self.parse(try Self.readText(of: file), path: file.path)
            }
            let ended = state.withLock { state in
                state.users = contents.users
                state.clearTokenLines = contents.clearTokenLines
                if identity != nil { state.fileRead = true }
                return state.removeChannels { contents.users[$0.digest] != $0.user }
            }
            for channel in ended { channel.finish() }
            return contents.clearTokenLines
        }
        if !clearTokenLines.isEmpty {
            logger.warning(
                "the token file holds tokens in the clear; `logsync-server user rehash` keeps only their digests",
                metadata: [
                    "tokens": "\(file.path)", "lines": "\(clearTokenLines.map(String.init).joined(separator: ","))",
                ])
        }
    }

    /// Reads the file again if it changed since it was last looked at (another file in its
    /// place, another size, modification or change time); a read that fails is logged as an
    /// error and the tokens last read are kept. Returns whether the tokens were read.
    @discardableResult
    func refreshIfChanged() -> Bool {
        guard let file, FileStatus(path: file.path) != state.withLock({ $0.file }) else { return false }
        do {
            try reload()
            logger.info("the token file changed", metadata: ["tokens": "\(file.path)", "users": "\(count)"])
            return true
        } catch {
            logger.error(
                "the token file cannot be read; the tokens last read are kept",
                metadata: ["tokens": "\(file.path)", "error": "\(error)", "kept": "\(count)"])
            return false
        }
    }

    /// Looks at the token file every ``checkInterval`` and reads it when it changed, until the
    /// calling task is cancelled; returns at once for a store without a file. `HTTPSyncServer`
    /// runs it while it serves.
    public func watchFile() async {
        guard file != nil else { return }
        while !Task.isCancelled {
            refreshIfChanged()
            do {
                try await Task.sleep(for: checkInterval)
            } catch {
                return
            }
        }
    }
}
