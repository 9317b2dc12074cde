import Foundation
import LogSyncWire
import SyncModel

/// The credential of the app's own backend on the admin routes (Docs/Protocol.md, "Admin
/// API"): one or more admin tokens, kept as their SHA-256 digests.
///
/// An admin token is never a user's: it is not in the ``TokenStore``, so it opens no database
/// route, and a user's token or session opens no admin route. Admin tokens begin with `lsadm_`
/// (``generateToken()``) so that one pasted in the wrong place is recognisable; any token of 16
/// to 512 printable ASCII characters is accepted.
///
/// ```swift
/// let token = AdminCredential.generateToken()
/// try AdminCredential.append(token: token, to: adminFile)   // keeps "sha256:…" only
/// let admin = try AdminCredential(contentsOf: adminFile)
/// ```
public struct AdminCredential: Sendable {
    /// The digests of the accepted tokens.
    let digests: Set<TokenDigest>

    /// A credential accepting `tokens`.
    ///
    /// - Throws: ``TokenStore/FileError`` for a token that is not 16 to 512 printable ASCII
    ///   characters.
    public init(tokens: [String]) throws {
        for token in tokens { try TokenStore.checkToken(token, path: "(memory)", line: 0) }
        digests = Set(tokens.map(TokenDigest.init(token:)))
    }

    /// A credential accepting the tokens of the admin token file at `file`: one per line, as
    /// `sha256:<64 hex digits>` (what ``append(token:to:)`` writes) or the token itself;
    /// blank lines and lines beginning with `#` are skipped.
    ///
    /// - Throws: ``TokenStore/FileError`` naming the line that is neither, or a file with no
    ///   token at all; file system errors.
    public init(contentsOf file: URL) throws {
        let text = try TokenStore.readText(of: file)
        var digests: Set<TokenDigest> = []
        for (index, raw) in TokenStore.lines(of: text).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix(TokenDigest.prefix) {
                guard let digest = TokenDigest(line) else {
                    throw TokenStore.FileError(
                        path: file.path, line: index + 1, problem: "a digest is sha256: and 64 hexadecimal digits")
                }
                digests.insert(digest)
            } else {
                try TokenStore.checkToken(line, path: file.path, line: index + 1)
                digests.insert(TokenDigest(token: line))
            }
        }
        guard !digests.isEmpty else {
            throw TokenStore.FileError(path: file.path, line: 0, problem: "the file holds no admin token")
        }
        self.digests = digests
    }

    /// Whether `token` is one of the admin tokens.
    public func accepts(_ token: String) -> Bool {
        digests.contains(TokenDigest(token: token))
    }

    /// A new random admin token: `lsadm_` and 43 characters of base64url (256 bits).
    public static func generateToken() -> String {
        "lsadm_" + randomBase64URL(bytes: 32)
    }

    /// Appends the digest of `token` to the admin token file at `file`, creating it (readable
    /// by its owner only) if it does not exist. The token itself is not written.
    ///
    /// - Throws: ``TokenStore/FileError`` for an unusable token; file system errors.
    public static func append(token: String, to file: URL) throws {
        try TokenStore.checkToken(token, path: file.path, line: 0)
        let manager = FileManager.default
        if !manager.fileExists(atPath: file.path) {
            try manager.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            let header =
                "# logsync-server admin tokens: \"sha256:<SHA-256 of the token, in hex>\", one per line. Keep this file private.\n"
            guard
                manager.createFile(
                    atPath: file.path, contents: Data(header.utf8), attributes: [.posixPermissions: 0o600])
            else {
                throw TokenStore.FileError(path: file.path, line: 0, problem: "cannot create the file")
            }
        }
        let text = try TokenStore.readText(of: file)
        let prefix = text.isEmpty || text.hasSuffix("\n") ? "" : "\n"
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((prefix + "\(TokenDigest(token: token))\n").utf8))
    }
}
