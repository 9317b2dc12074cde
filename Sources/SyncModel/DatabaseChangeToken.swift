import Foundation

/// A position in a server database's change feed: everything before it has been fetched.
///
/// The analogue of the `CKServerChangeToken` of a database change fetch (F140, F142). It wraps
/// an offset in the server database's log; clients treat it as opaque, store it with ``data`` and
/// hand it back. It is typed: it cannot be read as a ``ZoneChangeToken``, nor the reverse.
///
/// ```swift
/// let saved = token.data                               // persist
/// let token = try DatabaseChangeToken(data: saved)     // restore; throws on garbage
/// ```
public struct DatabaseChangeToken: ChangeToken {
    /// The offset in the server database's log up to which changes have been fetched.
    ///
    /// For the server and for debugging; clients must not infer anything from it (F142).
    public let offset: ChangeOffset

    /// The identity of the database that issued the token, so a server can refuse another
    /// database's token (0: unspecified). The server's choice; clients never look at it.
    package let database: UInt64

    /// Creates a token at an offset of the server database's log; only the server makes tokens.
    package init(offset: ChangeOffset, database: UInt64 = 0) {
        self.offset = offset
        self.database = database
    }

    /// Reads a token from its stable binary form.
    ///
    /// - Parameter data: Bytes made by ``data``.
    /// - Throws: ``SyncError`` with code `invalidArguments` naming the problem: too short, not a
    ///   token, an unsupported version, a checksum mismatch, a zone token, trailing bytes.
    public init(data: Data) throws(SyncError) {
        let (_, database, offset, body) = try TokenCoding.decode(data, expecting: .database)
        guard body.isAtEnd else {
            throw SyncError(.invalidArguments, "invalid database token: \(body.remaining) unexpected trailing bytes")
        }
        self.init(offset: ChangeOffset(offset), database: database)
    }

    /// The token's stable binary form, which ``init(data:)`` reads back.
    public var data: Data {
        TokenCoding.encode(kind: .database, database: database, offset: offset.rawValue)
    }

    /// A one-line rendering, such as `DatabaseChangeToken(offset 42)`.
    public var description: String { "DatabaseChangeToken(offset \(offset))" }
}
