import Foundation
import LogStore
import Synchronization
import SyncModel

extension SyncEngine {
    /// The account as the engine last saw it (F104–F110).
    public enum AccountStatus: Sendable, Hashable, CustomStringConvertible {
        /// Signed in: syncing may run.
        case available
        /// Nobody signed in (`notAuthenticated`): the engine is dormant (F86).
        case noAccount
        /// The account exists but is not ready (`accountTemporarilyUnavailable`, F109): the
        /// engine waits, without an account change.
        case temporarilyUnavailable
        /// The database could not be asked (a network failure): syncs may try, and fail
        /// transiently.
        case couldNotDetermine

        public var description: String {
            switch self {
            case .available: "account available"
            case .noAccount: "no account"
            case .temporarilyUnavailable: "account temporarily unavailable"
            case .couldNotDetermine: "account status unknown"
            }
        }
    }
}

/// What the engine remembers of its run in memory: the account as last seen, whether the
/// subscription was checked this launch.
struct EngineSession: Sendable {
    var accountStatus: SyncEngine.AccountStatus?
    var subscriptionChecked = false
}

extension SyncEngine {
    /// The subscription the engine creates when none is configured or found (F6, F111).
    public static let defaultSubscriptionID: Subscription.ID = "logsync-database"

    /// Appends an entry of the engine's own bookkeeping (a scheduling decision, a push hint).
    /// A failure is logged, not thrown: scheduling goes on, and the next append will fail loudly.
    func record(_ entry: DeviceEntry) {
        do {
            try deviceLog.append(entry)
        } catch {
            logger.error("could not append \(entry.name) to the device log: \(error)")
        }
    }

    /// Whether anything is waiting to be sent (F88).
    func hasWorkToSend() -> Bool {
        (try? deviceLog.read { try $0.hasPendingChanges() || $0.hasPendingUntrackedChanges() }) ?? false
    }

    /// The account status last seen, or `nil` before the first check.
    var knownAccountStatus: AccountStatus? { session.withLock { $0.accountStatus } }

    /// Runs a scheduled send or fetch (F59, F70: reason `.scheduled`, default options) and
    /// returns the error that should be retried, if any.
    func runScheduled(_ work: SyncSchedule.Work) async -> SyncError? {
        do {
            switch work {
            case .send:
                let context = SendChangesContext(reason: .scheduled, options: SendChangesOptions())
                try await operations.run(.send(context.options)) { [self] in
                    try await prepareSync()
                    try await runSend(context)
                }
            case .fetch:
                let context = FetchChangesContext(reason: .scheduled, options: FetchChangesOptions())
                try await operations.run(.fetch(context.options)) { [self] in
                    try await prepareSync()
                    try await runFetch(context)
                }
            }
            return nil
        } catch let error as SyncError {
            guard error.code == .partialFailure else { return error }
            // Item failures are the app's (F91); a transient one is retried (F89).
            return error.partialErrors.values.sorted { $0.code.rawValue < $1.code.rawValue }.first { $0.keepsChangePending }
        } catch {
            return SyncError.from(error, during: "a scheduled \(work)")
        }
    }

    /// Before a sync: the account (F78, F86, F104). It is asked again whenever it was not
    /// available last time (so a sign-in or a ready account is noticed), and before every sync
    /// of a manual engine, which has no scheduler listening for account changes (F105–F109);
    /// an automatic engine re-checks when its conditions provider signals a change. The
    /// question is an account query, not a database request.
    ///
    /// - Throws: `SyncError` `notAuthenticated` with no account, `accountTemporarilyUnavailable`
    ///   while it is not ready; nothing is sent or fetched then, and no event is delivered.
    func prepareSync() async throws {
        if scheduler == nil || knownAccountStatus != .available { try await checkAccountNow() }
        switch knownAccountStatus {
        case .noAccount?:
            throw SyncError(.notAuthenticated, "no account is signed in; the engine syncs once one is")
        case .temporarilyUnavailable?:
            throw SyncError(.accountTemporarilyUnavailable, "the account is not available yet")
        case .available?, .couldNotDetermine?, nil:
            break
        }
    }

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

    /// Checks the account with the database, as its own operation (so that an `accountChange`
    /// event is delivered in order), and returns the status.
    func checkAccount() async -> AccountStatus {
        do {
            try await operations.run(.accountCheck) { [self] in try await checkAccountNow() }
        } catch {
            logger.error("account check failed: \(error)")
        }
        return knownAccountStatus ?? .couldNotDetermine
    }

    /// Asks the database who is signed in. A change from the account the log last knew is an
    /// `accountChanged` entry and one `accountChange` event, however many transitions happened
    /// meanwhile (F107, F108); it wipes the state when there was a previous account or an
    /// explicit sign-out (F30, F106). `accountTemporarilyUnavailable` is no change (F109).
    func checkAccountNow() async throws {
        let current: Record.ID?
        do {
            current = try await database.currentUserRecordID()
        } catch {
            let failure = SyncError.from(error, during: "currentUserRecordID")
            switch failure.code {
            case .notAuthenticated:
                current = nil
            case .accountTemporarilyUnavailable:
                session.withLock { $0.accountStatus = .temporarilyUnavailable }
                return
            default:
                session.withLock { $0.accountStatus = .couldNotDetermine }
                return
            }
        }
        session.withLock { $0.accountStatus = current == nil ? .noAccount : .available }
        let known = try deviceLog.read { try $0.lastKnownAccount() }
        let previous: Record.ID?
        switch known {
        case .never:
            // The first account a log sees is recorded without an event (spec choice): the
            // data the app has belongs to it, and there is nothing to wipe.
            try deviceLog.append(.accountChanged(previous: nil, current: current))
            return
        case .signedOut:
            previous = nil
            if current == nil { return }
        case .user(let user):
            previous = user
            if user == current { return }
        }
        try deviceLog.append(.accountChanged(previous: previous, current: current))
        let change: Event.AccountChange.ChangeType
        switch (previous, current) {
        case (nil, let user?): change = .signIn(currentUser: user)
        case (let user?, nil): change = .signOut(previousUser: user)
        case (let old?, let new?): change = .switchAccounts(previousUser: old, currentUser: new)
        case (nil, nil): return
        }
        logger.info("account changed: \(change)")
        // The new account starts from scratch: its database gets its own subscription (so its
        // push hints come, F111), and an automatic engine fetches its data (F86, F106).
        session.withLock { $0.subscriptionChecked = false }
        await deliver(.accountChange(Event.AccountChange(changeType: change)))
        await deliver(.stateUpdate(Event.StateUpdate(offset: try deviceLog.log.lastOffset)))
        if current != nil { scheduler?.fetchNeeded(self, reason: .catchUp) }
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

extension SyncEngine {
    /// Delivers again the fetched changes whose events the delegate may not have handled when
    /// the engine last stopped (F29: at-least-once, never lost): every fetched page after the
    /// delivery offset, in order, framed as a `.scheduled` fetch (will/did, and each zone's
    /// will/did) so the event grammar holds (F46). Costs nothing when all was delivered: the
    /// index keeps the offset of the last fetched page.
    func redeliverUndelivered() async throws {
        let (delivered, fetched) = try deviceLog.read { (try $0.deliveredOffset(), try $0.fetchedThrough()) }
        guard let fetched, fetched > (delivered ?? .zero) else { return }
        // Pages without changes deliver no event, so they are never marked delivered: the fetch
        // that frames the redelivery opens at the first page with changes, and when only empty
        // pages follow the mark (a fetch that found nothing new) the mark catches up without an
        // event.
        let context = FetchChangesContext(reason: .scheduled, options: FetchChangesOptions())
        var opened = false
        var openZone: RecordZone.ID?
        func open() async {
            guard !opened else { return }
            opened = true
            logger.info("delivering again the fetched changes after offset \(delivered?.rawValue ?? 0)")
            await deliver(.willFetchChanges(Event.WillFetchChanges(context: context)))
        }
        func closeZone() async {
            guard let zone = openZone else { return }
            await deliver(.didFetchRecordZoneChanges(Event.DidFetchRecordZoneChanges(zoneID: zone)))
            openZone = nil
        }
        var cursor = try deviceLog.log.entries(from: (delivered ?? .zero).next, through: fetched)
        while let entry = try cursor.next() {
            guard entry.kind == DeviceEntry.Kind.databaseChangesFetched || entry.kind == DeviceEntry.Kind.zoneChangesFetched
            else { continue }
            switch try DeviceEntry(entry) {
            case .databaseChangesFetched(let modifications, let deletions, _, _):
                guard !modifications.isEmpty || !deletions.isEmpty else { continue }
                await open()
                await closeZone()
                await deliver(
                    .fetchedDatabaseChanges(
                        Event.FetchedDatabaseChanges(
                            modifications: modifications.map { DatabaseChange.Modification(zoneID: $0) },
                            deletions: deletions)))
            case .zoneChangesFetched(let zoneID, let modifications, let deletions, _, _):
                guard !modifications.isEmpty || !deletions.isEmpty else { continue }
                await open()
                if openZone != zoneID {
                    await closeZone()
                    await deliver(.willFetchRecordZoneChanges(Event.WillFetchRecordZoneChanges(zoneID: zoneID)))
                    openZone = zoneID
                }
                await deliver(
                    .fetchedRecordZoneChanges(
                        Event.FetchedRecordZoneChanges(
                            modifications: modifications.map { RecordZoneChange.Modification(record: $0) },
                            deletions: deletions)))
            default:
                continue
            }
        }
        await closeZone()
        try deviceLog.append(.eventsDelivered(through: fetched))
        guard opened else { return }
        await deliver(.stateUpdate(Event.StateUpdate(offset: try deviceLog.log.lastOffset)))
        await deliver(.didFetchChanges(Event.DidFetchChanges(context: context)))
    }

    /// Listens to the database's push hints for as long as the engine lives (F83, F113–F115):
    /// each hint is a `pushReceived` entry, which lists its zone as unfetched when the hint
    /// names one (F25), and, with automatic sync, schedules a fetch.
    func startListeningForPushes() -> Task<Void, Never> {
        let hints = database.pushHints()
        let weakEngine = WeakEngine(self)
        return Task {
            for await hint in hints {
                guard let engine = weakEngine.value else { return }
                engine.record(.pushReceived(zoneID: hint.zoneID))
                engine.scheduler?.fetchNeeded(engine, reason: .pushHint)
            }
        }
    }
}
