/// A standing request to be told, by a push hint, when a database or zone changes.
///
/// Mirrors `CKDatabaseSubscription` and `CKRecordZoneSubscription` (F111, F116, F155); query
/// subscriptions are not modelled because the engine never uses them. Subscriptions are stored
/// per user and per database under a stable ID, and saving the same ID twice is idempotent.
///
/// ```swift
/// let subscription = Subscription(subscriptionID: "engine", kind: .database)
/// ```
public struct Subscription: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The stable identifier of a subscription, chosen by the client.
    public struct ID: TypedRawValue, CustomStringConvertible, ExpressibleByStringLiteral {
        /// The identifier's text.
        public let rawValue: String

        /// Creates a subscription ID from its text.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The identifier's text.
        public var description: String { rawValue }
    }

    /// What a subscription watches.
    public enum Kind: Sendable, Hashable, Codable {
        /// Every custom zone of the database (F112); private and shared databases only.
        case database
        /// One zone; private database only.
        case recordZone(RecordZone.ID)
    }

    /// The subscription's stable identifier.
    public var subscriptionID: ID
    /// What the subscription watches.
    public var kind: Kind

    /// Creates a subscription.
    ///
    /// - Parameters:
    ///   - subscriptionID: The stable identifier.
    ///   - kind: What to watch; defaults to the whole database.
    public init(subscriptionID: ID, kind: Kind = .database) {
        self.subscriptionID = subscriptionID
        self.kind = kind
    }

    /// Whether a database of this scope accepts this kind of subscription (F116).
    ///
    /// Database subscriptions live in private and shared databases, zone subscriptions in the
    /// private database only; a server answers others with `invalidArguments`.
    public func isAllowed(in scope: DatabaseScope) -> Bool {
        switch kind {
        case .database: scope == .private || scope == .shared
        case .recordZone: scope == .private
        }
    }

    /// A one-line rendering, such as `Subscription("engine", database)`.
    public var description: String {
        switch kind {
        case .database: "Subscription(\(quoted(subscriptionID.rawValue)), database)"
        case .recordZone(let zoneID): "Subscription(\(quoted(subscriptionID.rawValue)), \(zoneID))"
        }
    }
}
