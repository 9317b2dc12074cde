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

/// What the engine remembers of its run in memory: the account as last seen.
struct EngineSession: Sendable {
    var accountStatus: SyncEngine.AccountStatus?
}

extension SyncEngine {
    /// The account status last seen, or `nil` before the first check.
    var knownAccountStatus: AccountStatus? { session.withLock { $0.accountStatus } }

    /// Remembers the account status, and tells the scheduler, which waits while there is no
    /// account (F86, F109).
    private func setAccountStatus(_ status: AccountStatus) {
        session.withLock { $0.accountStatus = status }
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
        subscription.accountChanged()
        await deliver(.accountChange(Event.AccountChange(changeType: change)))
        await deliver(.stateUpdate(Event.StateUpdate(offset: try deviceLog.log.lastOffset)))
        if current != nil { scheduler?.fetchNeeded(reason: .catchUp) }
    }
}
