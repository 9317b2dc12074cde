import LogStore
import SyncModel

extension SyncEngine {
    /// The subscription the engine creates when none is configured or found (F6, F111).
    public static let defaultSubscriptionID: Subscription.ID = "logsync-database"

    /// After a fetch that completed: makes sure, once per launch, that the database
    /// subscription exists so that push hints come (F85, F111). A failure is logged and tried
    /// again after the next fetch; it does not fail the fetch, whose changes are in.
    func ensureSubscriptionOnce() async {
        guard !session.withLock({ $0.subscriptionChecked }) else { return }
        do {
            try await ensureSubscription()
            session.withLock { $0.subscriptionChecked = true }
        } catch {
            logger.warning("could not make sure the database subscription exists: \(error)")
        }
    }

    /// Makes sure the database subscription exists (F6, F85, F111): the configured one, else
    /// the one the log remembers, else any database subscription on the server, else a new
    /// one named ``defaultSubscriptionID``. Records it when it changes.
    func ensureSubscription() async throws {
        let existing = try await database.allSubscriptions()
        let ids = Set(existing.map(\.subscriptionID))
        let stored = try deviceLog.read { try $0.subscriptionID() }
        let wanted: Subscription.ID
        if let configured = subscriptionID {
            wanted = configured
        } else if let stored, ids.contains(stored) {
            wanted = stored
        } else if let found = existing.filter({ $0.kind == .database }).map(\.subscriptionID)
            .min(by: { $0.rawValue < $1.rawValue })
        {
            wanted = found
        } else {
            wanted = stored ?? Self.defaultSubscriptionID
        }
        if !ids.contains(wanted) {
            let response = try await database.modifySubscriptions(
                saving: [Subscription(subscriptionID: wanted, kind: .database)], deleting: [])
            if case .failure(let error)? = response.saveResults[wanted] { throw error }
        }
        if stored != wanted { try deviceLog.append(.subscriptionEnsured(wanted)) }
    }
}
