/// A silent notice that a database changed: a hint to fetch, never the changes themselves.
///
/// Pushes may be coalesced, pruned, or skip the device that made the change (F113, F114, F154);
/// a client reacts by fetching with its tokens, never by reading data from the hint.
public struct PushHint: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The scope of the database that changed.
    public var databaseScope: DatabaseScope
    /// The subscription that caused the hint, if any.
    public var subscriptionID: Subscription.ID?
    /// The zone that changed, when the server names one.
    public var zoneID: RecordZone.ID?
    /// The database's change token as of the commit behind the hint, when the server sends it.
    ///
    /// A client whose stored database token equals it has nothing new to fetch.
    public var changeToken: DatabaseChangeToken?

    /// Creates a push hint.
    ///
    /// - Parameters:
    ///   - databaseScope: The scope of the database that changed.
    ///   - subscriptionID: The subscription that caused the hint.
    ///   - zoneID: The zone that changed.
    ///   - changeToken: The database's change token after the commit.
    public init(
        databaseScope: DatabaseScope, subscriptionID: Subscription.ID? = nil, zoneID: RecordZone.ID? = nil,
        changeToken: DatabaseChangeToken? = nil
    ) {
        self.databaseScope = databaseScope
        self.subscriptionID = subscriptionID
        self.zoneID = zoneID
        self.changeToken = changeToken
    }

    /// A one-line rendering, such as `PushHint(private, subscription "engine", zone "Notes")`.
    public var description: String {
        var parts = ["\(databaseScope)"]
        if let subscriptionID { parts.append("subscription \(quoted(subscriptionID.rawValue))") }
        if let zoneID { parts.append(zoneID.description) }
        if let changeToken { parts.append(changeToken.description) }
        return "PushHint(\(parts.joined(separator: ", ")))"
    }
}
