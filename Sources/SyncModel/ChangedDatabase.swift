/// One database that changed, as the admin change stream tells it (Docs/Protocol.md, "Admin
/// change stream"): whose, which, and its change token after the change, the token a device's
/// `fetchDatabaseChanges` would return then. A reader whose saved token for the database equals
/// it has nothing to fetch.
public struct ChangedDatabase: Sendable, Hashable, CustomStringConvertible {
    /// The user whose database it is (their user ID).
    public var user: String
    public var scope: DatabaseScope
    /// The database's change token as of the change.
    public var token: DatabaseChangeToken

    public init(user: String, scope: DatabaseScope, token: DatabaseChangeToken) {
        self.user = user
        self.scope = scope
        self.token = token
    }

    public var description: String { "\(user)'s \(scope) database at \(token)" }
}
