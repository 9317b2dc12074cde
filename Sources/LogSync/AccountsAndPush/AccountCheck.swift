import Foundation
import LogStore
import Logging
import SyncModel
import Synchronization

/// Who is signed in, as the engine last saw it, and the check that asks the database (F78, F86,
/// F104–F110).
///
/// Lives as long as its engine: it remembers the status between syncs, tells an automatic
/// engine's scheduler each status it sees, and on an account change records it, forgets the
/// previous account's zone keys and subscription, and delivers `accountChange`.
final class AccountCheck: Sendable {
    /// The database asked who is signed in.
    let database: any CloudDatabase
    /// Where the last known account is read and an account change recorded.
    let deviceLog: DeviceLog
    /// Delivers `accountChange` and the `stateUpdate` after it.
    let delegate: any DelegateGateway
    /// Forgets the previous account's zone keys.
    let keyring: ZoneKeyring
    /// Made sure of again for a new account.
    let subscription: SubscriptionCheck
    /// The automatic sync planner, if any: told each status seen (it waits while there is no
    /// account), and asked for a catch-up fetch after a sign-in.
    let scheduler: SyncScheduler?
    let logger: Logger
    /// The status last seen, or `nil` before the first check.
    private let status = Mutex<SyncEngine.AccountStatus?>(nil)

    init(_ context: EngineContext, subscription: SubscriptionCheck, scheduler: SyncScheduler?) {
        self.database = context.database
        self.deviceLog = context.deviceLog
        self.delegate = context.delegate
        self.keyring = context.keyring
        self.subscription = subscription
        self.scheduler = scheduler
        self.logger = context.logger
    }

    /// The account status last seen, or `nil` before the first check.
    var knownAccountStatus: SyncEngine.AccountStatus? { status.withLock { $0 } }

    /// Remembers the account status, and tells the scheduler, which waits while there is no
    /// account (F86, F109).
    private func setAccountStatus(_ status: SyncEngine.AccountStatus) {
        self.status.withLock { $0 = status }
        scheduler?.accountChecked(status)
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
                setAccountStatus(.temporarilyUnavailable)
                return
            default:
                setAccountStatus(.couldNotDetermine)
                return
            }
        }
        setAccountStatus(current == nil ? .noAccount : .available)
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
        // Zone keys belong to the account: the next account's come from the server again.
        keyring.forgetAccount()
        let change: SyncEngine.Event.AccountChange.ChangeType
        switch (previous, current) {
        case (nil, let user?): change = .signIn(currentUser: user)
        case (let user?, nil): change = .signOut(previousUser: user)
        case (let old?, let new?): change = .switchAccounts(previousUser: old, currentUser: new)
        case (nil, nil): return
        }
        logger.info("account changed: \(change)")
        // The new account starts from scratch: its database gets its own subscription (so its
        // push hints come, F111), and an automatic engine fetches its data (F86, F106).
        subscription.accountChanged()
        await delegate.deliver(.accountChange(.init(changeType: change)))
        await delegate.deliver(.stateUpdate(.init(offset: try deviceLog.log.lastOffset)))
        if current != nil { scheduler?.fetchNeeded(reason: .catchUp) }
    }
}
