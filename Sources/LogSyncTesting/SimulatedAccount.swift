import Foundation
import LogSync
import SyncModel
import Synchronization

/// The device's iCloud-like account, for tests of apps and of the engine: a `CloudDatabase`
/// that forwards every request to the database of the user signed in now, and that a test
/// signs in, out, switches, or marks as not ready (F104–F110).
///
/// - Signed in: each request goes to that user's database (of this view's
///   ``databaseScope``); `currentUserRecordID()` answers with that database's answer.
/// - Signed out: every call, `currentUserRecordID()` included, throws `SyncError`
///   `notAuthenticated`, without reaching any database.
/// - Temporarily unavailable (``setTemporarilyUnavailable(_:)``, checked first): every call
///   throws `accountTemporarilyUnavailable` (F109).
///
/// It is also a `SyncConditionsProvider`: give it to the engine's configuration as
/// `conditions`, and each account change signals it, so an automatic engine re-checks the
/// account and emits its `accountChange` event (F86). The network and power conditions are
/// those of ``conditions``, a `ManualConditions` a test may share or set.
///
/// Push hints: ``pushHints()`` forwards the hints of the signed-in user's database. On each
/// account change every open stream drops the previous user's hints and subscribes to the new
/// user's; while signed out it yields nothing. The stream itself stays open until its consumer
/// stops (if the user's own stream ends, for example at a server shutdown, hints stop until the
/// next account change).
///
/// The databases come from a closure (user and scope → database), or a dictionary for one
/// scope; this library knows no server, so any `CloudDatabase` will do.
///
/// ```swift
/// let account = SimulatedAccount<UserID>(signedIn: nil) { user, scope in
///     server.database(for: user, scope: scope, device: "phone")
/// }
/// var configuration = SyncEngine.Configuration(database: account, logDirectory: dir, delegate: app)
/// configuration.conditions = account        // re-check the account on each change
/// configuration.clock = clock                // a TestClock
/// let engine = try SyncEngine(configuration) // dormant: no one is signed in
///
/// account.signIn("alice")                    // → accountChange(signIn), then a fetch
/// account.switch(to: "bob")                  // → accountChange(switchAccounts)
/// account.setTemporarilyUnavailable(true)    // → no event; syncs wait
/// account.signOut()                          // → accountChange(signOut)
///
/// let shared = account.database(for: .shared) // the same account, the shared database
/// ```
public final class SimulatedAccount<User: Hashable & Sendable>: CloudDatabase, ZoneKeyDirectory, SyncConditionsProvider,
    CustomStringConvertible
{
    /// The scope of the databases this view forwards to.
    public let databaseScope: DatabaseScope
    /// The network and power conditions reported to engines, and the signal they listen to;
    /// each account change calls its `signal()`.
    public let conditions: ManualConditions
    private let core: Core

    /// An account whose users' databases come from `databases`.
    ///
    /// - Parameters:
    ///   - user: Who is signed in at first; `nil` (the default) for signed out.
    ///   - scope: The scope of this view's database; ``database(for:)`` gives the others.
    ///   - conditions: The network and power conditions; all favourable by default.
    ///   - databases: The database of a user in a scope, or `nil` if there is none (a request
    ///     then throws `badDatabase`). Called on each request; it should be cheap.
    public init(
        signedIn user: User? = nil, scope: DatabaseScope = .private, conditions: ManualConditions = ManualConditions(),
        databases: @escaping @Sendable (User, DatabaseScope) -> (any CloudDatabase)?
    ) {
        self.databaseScope = scope
        self.conditions = conditions
        self.core = Core(user: user, databases: databases, conditions: conditions)
    }

    /// An account whose users each have one database, all of one scope (the first
    /// database's; private if there are none).
    ///
    /// - Parameters:
    ///   - user: Who is signed in at first; `nil` (the default) for signed out.
    ///   - databases: Each user's database.
    ///   - conditions: The network and power conditions; all favourable by default.
    public convenience init(
        signedIn user: User? = nil, databases: [User: any CloudDatabase],
        conditions: ManualConditions = ManualConditions()
    ) {
        let scope = databases.values.first?.databaseScope ?? .private
        self.init(signedIn: user, scope: scope, conditions: conditions) { user, wanted in
            wanted == scope ? databases[user] : nil
        }
    }

    private init(core: Core, scope: DatabaseScope, conditions: ManualConditions) {
        self.core = core
        self.databaseScope = scope
        self.conditions = conditions
    }

    /// The same account's database of `scope`: signing in or out on either view changes both.
    public func database(for scope: DatabaseScope) -> SimulatedAccount<User> {
        SimulatedAccount(core: core, scope: scope, conditions: conditions)
    }

    // MARK: The account

    /// The user signed in now, or `nil`.
    public var currentUser: User? { core.state.withLock { $0.user } }

    /// Whether the account is marked temporarily unavailable.
    public var isTemporarilyUnavailable: Bool { core.state.withLock { $0.unavailable } }

    /// How many database requests reached a user's database (`currentUserRecordID()` and
    /// `pushHints()` not counted).
    public var requestsForwarded: Int { core.state.withLock { $0.forwarded } }

    /// How many database requests were refused because no account was available
    /// (`currentUserRecordID()` and `pushHints()` not counted). An engine that respects the
    /// account (F78, F86) makes none.
    public var requestsRefused: Int { core.state.withLock { $0.refused } }

    /// Signs `user` in (replacing whoever was signed in), and signals the change.
    public func signIn(_ user: User) { core.change { $0.user = user } }

    /// Signs the user out, and signals the change.
    public func signOut() { core.change { $0.user = nil } }

    /// Replaces the signed-in user with `user` in one step (an engine that was not watching
    /// sees a switch, not a sign-out and a sign-in), and signals the change.
    public func `switch`(to user: User) { core.change { $0.user = user } }

    /// Marks the account as existing but not ready (`accountTemporarilyUnavailable`, F109), or
    /// ready again, and signals the change. The signed-in user is kept.
    public func setTemporarilyUnavailable(_ unavailable: Bool) { core.change { $0.unavailable = unavailable } }

    /// Such as `SimulatedAccount(private, signed in as user "alice")`.
    public var description: String {
        let (user, unavailable) = core.state.withLock { ($0.user, $0.unavailable) }
        let who = user.map { "signed in as \($0)" } ?? "signed out"
        return "SimulatedAccount(\(databaseScope), \(who)\(unavailable ? ", temporarily unavailable" : ""))"
    }

    // MARK: SyncConditionsProvider

    public func currentConditions() async -> SyncEngine.Conditions { await conditions.currentConditions() }

    public func changes() -> AsyncStream<Void> { conditions.changes() }

    // MARK: CloudDatabase

    public func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await core.target(databaseScope, "modifyZones").modifyZones(request)
    }

    public func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await core.target(databaseScope, "fetchZones").fetchZones(request)
    }

    public func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await core.target(databaseScope, "modifyRecords").modifyRecords(request)
    }

    public func fetchDatabaseChanges(
        _ request: FetchDatabaseChangesRequest
    ) async throws -> FetchDatabaseChangesResponse {
        try await core.target(databaseScope, "fetchDatabaseChanges").fetchDatabaseChanges(request)
    }

    public func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try await core.target(databaseScope, "fetchZoneChanges").fetchZoneChanges(request)
    }

    public func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try await core.target(databaseScope, "modifySubscriptions").modifySubscriptions(request)
    }

    public func allSubscriptions() async throws -> [Subscription] {
        try await core.target(databaseScope, "allSubscriptions").allSubscriptions()
    }

    public func currentUserRecordID() async throws -> Record.ID {
        try await core.target(databaseScope, "currentUserRecordID", counted: false).currentUserRecordID()
    }

    public func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await core.target(databaseScope, "uploadAsset").uploadAsset(request)
    }

    public func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try await core.target(databaseScope, "downloadAsset").downloadAsset(request)
    }

    // MARK: Sharing

    /// Forwarded to the signed-in user's database of this scope (which refuses it with
    /// `badDatabase` if it does not implement sharing).
    public func fetchShareMetadata(url: URL) async throws -> Share.Metadata {
        try await core.target(databaseScope, "fetchShareMetadata").fetchShareMetadata(url: url)
    }

    public func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse {
        try await core.target(databaseScope, "acceptShares").acceptShares(request)
    }

    public func fetchShareParticipants(
        _ request: FetchShareParticipantsRequest
    ) async throws -> FetchShareParticipantsResponse {
        try await core.target(databaseScope, "fetchShareParticipants").fetchShareParticipants(request)
    }

    // MARK: ZoneKeyDirectory

    /// Forwarded to the signed-in user's database of this scope, which must keep zone keys.
    public func registerDeviceKey(_ key: DevicePublicKey) async throws {
        try await directory("registerDeviceKey").registerDeviceKey(key)
    }

    public func fetchZoneKeys(_ request: FetchZoneKeysRequest) async throws -> FetchZoneKeysResponse {
        try await directory("fetchZoneKeys").fetchZoneKeys(request)
    }

    public func saveZoneKeys(_ request: SaveZoneKeysRequest) async throws -> SaveZoneKeysResponse {
        try await directory("saveZoneKeys").saveZoneKeys(request)
    }

    private func directory(_ operation: String) throws -> any ZoneKeyDirectory {
        guard let directory = try core.target(databaseScope, operation) as? any ZoneKeyDirectory else {
            throw SyncError(
                .badDatabase, "\(operation): the simulated account's \(databaseScope) database keeps no zone keys")
        }
        return directory
    }

    public func pushHints() -> AsyncStream<PushHint> {
        let (stream, continuation) = AsyncStream<PushHint>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let id = core.subscribe(databaseScope, continuation)
        continuation.onTermination = { [core] _ in core.unsubscribe(id) }
        return stream
    }

    // MARK: The shared state

    /// The account state shared by the views of every scope.
    private final class Core: Sendable {
        struct Subscriber {
            let scope: DatabaseScope
            let continuation: AsyncStream<PushHint>.Continuation
            var forwarder: Task<Void, Never>?
        }

        struct State {
            var user: User?
            var unavailable = false
            var forwarded = 0
            var refused = 0
            var subscribers: [UInt64: Subscriber] = [:]
            var nextID: UInt64 = 0
        }

        let state: Mutex<State>
        let databases: @Sendable (User, DatabaseScope) -> (any CloudDatabase)?
        let conditions: ManualConditions

        init(
            user: User?, databases: @escaping @Sendable (User, DatabaseScope) -> (any CloudDatabase)?,
            conditions: ManualConditions
        ) {
            self.state = Mutex(State(user: user))
            self.databases = databases
            self.conditions = conditions
        }

        /// The database a request goes to, or the error the account gives.
        func target(_ scope: DatabaseScope, _ operation: String, counted: Bool = true) throws -> any CloudDatabase {
            let (user, unavailable) = state.withLock { state -> (User?, Bool) in
                let refused = state.unavailable || state.user == nil
                if counted { if refused { state.refused += 1 } else { state.forwarded += 1 } }
                return (state.user, state.unavailable)
            }
            if unavailable {
                throw SyncError(.accountTemporarilyUnavailable, "\(operation): the account is temporarily unavailable")
            }
            guard let user else { throw SyncError(.notAuthenticated, "\(operation): no account is signed in") }
            guard let database = databases(user, scope) else {
                throw SyncError(
                    .badDatabase, "\(operation): the simulated account has no \(scope) database for \(user)")
            }
            return database
        }

        /// Applies an account change, moves the push streams to the new user, and signals.
        func change(_ body: (inout State) -> Void) {
            let (old, ids) = state.withLock { state -> ([Task<Void, Never>], [UInt64]) in
                body(&state)
                let old = state.subscribers.values.compactMap(\.forwarder)
                for id in state.subscribers.keys { state.subscribers[id]?.forwarder = nil }
                return (old, Array(state.subscribers.keys))
            }
            for task in old { task.cancel() }
            for id in ids { startForwarding(id) }
            conditions.signal()
        }

        func subscribe(_ scope: DatabaseScope, _ continuation: AsyncStream<PushHint>.Continuation) -> UInt64 {
            let id = state.withLock { state -> UInt64 in
                state.nextID += 1
                state.subscribers[state.nextID] = Subscriber(scope: scope, continuation: continuation)
                return state.nextID
            }
            startForwarding(id)
            return id
        }

        func unsubscribe(_ id: UInt64) {
            let removed = state.withLock { $0.subscribers.removeValue(forKey: id) }
            removed?.forwarder?.cancel()
        }

        /// Subscribes stream `id` to the signed-in user's hints (none while signed out).
        private func startForwarding(_ id: UInt64) {
            guard
                let (user, subscriber) = state.withLock({ state -> (User, Subscriber)? in
                    guard let user = state.user, let subscriber = state.subscribers[id] else { return nil }
                    return (user, subscriber)
                }), let database = databases(user, subscriber.scope)
            else { return }
            let hints = database.pushHints()
            let continuation = subscriber.continuation
            let task = Task {
                for await hint in hints {
                    // A hint still buffered when the account changed is the previous user's.
                    guard !Task.isCancelled else { return }
                    continuation.yield(hint)
                }
            }
            let stale = state.withLock { state -> Bool in
                // Another change or an unsubscribe may have come meanwhile: keep only the newest.
                guard state.subscribers[id] != nil, state.user == user, state.subscribers[id]?.forwarder == nil else {
                    return true
                }
                state.subscribers[id]?.forwarder = task
                return false
            }
            if stale { task.cancel() }
        }
    }
}
