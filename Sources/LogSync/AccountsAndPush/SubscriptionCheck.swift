import LogStore
import Logging
import SyncModel
import Synchronization

/// The engine's database subscription, which makes push hints come (F6, F85, F111): made sure
/// of once per launch, after the first fetch that completes, and again after an account change.
///
/// Lives as long as its engine: it remembers whether this launch has checked.
final class SubscriptionCheck: Sendable {
    /// The database whose subscriptions are read and saved.
    let database: any CloudDatabase
    /// Where the subscription in use is recorded (`subscriptionEnsured`).
    let deviceLog: DeviceLog
    let logger: Logger
    /// The subscription the configuration named, if any (F6).
    let subscriptionID: Subscription.ID?
    /// Whether the subscription was made sure of in this launch, for this account.
    private let checked = Mutex(false)

    init(_ context: EngineContext, subscriptionID: Subscription.ID?) {
        self.database = context.database
        self.deviceLog = context.deviceLog
        self.logger = context.logger
        self.subscriptionID = subscriptionID
    }

    /// The account changed: its database gets its own subscription, made sure of after the next
    /// fetch.
    func accountChanged() {
        checked.withLock { $0 = false }
    }

    /// After a fetch that completed: makes sure, once per launch, that the database
    /// subscription exists so that push hints come (F85, F111). A failure is logged and tried
    /// again after the next fetch; it does not fail the fetch, whose changes are in.
    func ensureSubscriptionOnce() async {
        guard !checked.withLock({ $0 }) else { return }
        do {
            try await ensureSubscription()
            checked.withLock { $0 = true }
        } catch {
            logger.warning("could not make sure the database subscription exists: \(error)")
        }
    }

    /// Makes sure the database subscription exists (F6, F85, F111): the configured one, else
    /// the one the log remembers, else any database subscription on the server, else a new
    /// one named ``SyncEngine/defaultSubscriptionID``. Records it when it changes.
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
            wanted = stored ?? SyncEngine.defaultSubscriptionID
        }
        if !ids.contains(wanted) {
            let response = try await database.modifySubscriptions(
                saving: [Subscription(subscriptionID: wanted, kind: .database)], deleting: [])
            if case .failure(let error)? = response.saveResults[wanted] { throw error }
        }
        if stored != wanted { try deviceLog.append(.subscriptionEnsured(wanted)) }
    }
}
