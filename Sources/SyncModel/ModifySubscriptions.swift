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
public typealias ModifySubscriptionsResponse = ModifyResponse<Subscription.ID, Subscription>
