import LogStore
import SyncModel

/// A user of the server: the owner of a private database.
public struct UserID: TypedValue, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { "user \"\(rawValue)\"" }

    /// Checks the rules of `Identifier.userID`: 1 to 511 bytes of UTF-8 (the user registry's
    /// key is the ID alone, within LMDB's key limit), without control characters or surrounding
    /// spaces (the token file could not keep them).
    ///
    /// - Throws: `SyncError` `invalidArguments` naming the ID and the broken rule.
    public func validate() throws(SyncError) {
        try Identifier.userID.validate(rawValue)
    }
}
