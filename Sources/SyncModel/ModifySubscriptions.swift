/// A request to save and delete subscriptions (F111, F155).
public struct ModifySubscriptionsRequest: Sendable, Hashable, Codable {
    /// The subscriptions to save; saving an existing ID again is idempotent.
    public var subscriptionsToSave: [Subscription]
    /// The subscriptions to delete.
    public var subscriptionIDsToDelete: [Subscription.ID]

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - subscriptionsToSave: The subscriptions to save.
    ///   - subscriptionIDsToDelete: The subscriptions to delete.
    public init(subscriptionsToSave: [Subscription] = [], subscriptionIDsToDelete: [Subscription.ID] = []) {
        self.subscriptionsToSave = subscriptionsToSave
        self.subscriptionIDsToDelete = subscriptionIDsToDelete
    }

    /// Checks the request as a whole: at most 400 items, and no subscription named twice.
    ///
    /// - Throws: ``SyncError`` `limitExceeded` or `invalidArguments`.
    public func validate() throws(SyncError) {
        try RequestChecks.checkItemCount(
            subscriptionsToSave.count + subscriptionIDsToDelete.count, operation: "modifySubscriptions")
        try RequestChecks.checkNoDuplicates(
            subscriptionsToSave.map(\.subscriptionID) + subscriptionIDsToDelete, operation: "modifySubscriptions",
            item: { .subscription($0) })
    }
}

/// The per-subscription outcomes of a ``ModifySubscriptionsRequest``.
public struct ModifySubscriptionsResponse: Sendable, Equatable, Codable {
    /// The outcome of each subscription save.
    public var saveResults: [Subscription.ID: Result<Subscription, SyncError>]
    /// The outcome of each subscription deletion.
    public var deleteResults: [Subscription.ID: Result<Void, SyncError>]

    /// Creates a response.
    public init(
        saveResults: [Subscription.ID: Result<Subscription, SyncError>] = [:],
        deleteResults: [Subscription.ID: Result<Void, SyncError>] = [:]
    ) {
        self.saveResults = saveResults
        self.deleteResults = deleteResults
    }

    /// Whether two responses hold the same items with the same outcomes.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.saveResults == rhs.saveResults && ResultCoding.equal(lhs.deleteResults, rhs.deleteResults)
    }

    private enum CodingKeys: String, CodingKey { case saveResults, deleteResults }

    /// Decodes a response whose results are arrays of `{id, value}` or `{id, error}` entries.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        saveResults = try ResultCoding.results(
            container.decode([ResultEntry<Subscription.ID, Subscription>].self, forKey: .saveResults),
            codingPath: container.codingPath)
        deleteResults = try ResultCoding.voidResults(
            container.decode([ResultEntry<Subscription.ID, Bool>].self, forKey: .deleteResults),
            codingPath: container.codingPath)
    }

    /// Encodes the results as arrays of `{id, value}` or `{id, error}` entries.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ResultCoding.entries(saveResults), forKey: .saveResults)
        try container.encode(ResultCoding.entries(deleteResults), forKey: .deleteResults)
    }
}
