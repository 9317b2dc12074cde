import Foundation
import LogStore
import Logging
import SyncModel
import Synchronization

/// Syncs an app's records and zones with a server database, on a device log.
///
/// Mirrors `CKSyncEngine` without the `CK` prefix (`Docs/Porting.md` maps every name). Everything the engine knows is kept in its ``DeviceLog``: ``state`` reads from it,
/// every mutation and every step of a sync is appended to it, and the records sent and received
/// are in it, so a device's timeline can be read and replayed with `logtool`.
///
/// ```swift
/// var configuration = SyncEngine.Configuration(
///     database: database, logDirectory: appSupport.appending(path: "sync"), delegate: notes)
/// configuration.automaticallySync = false
/// let engine = try SyncEngine(configuration)
/// try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneName: "Notes"))])
/// try engine.state.add(pendingRecordZoneChanges: [.saveRecord(noteID)])
/// try await engine.sendChanges()     // zones first, then the delegate's batches
/// try await engine.fetchChanges()    // database changes, then each changed zone
/// ```
///
/// Syncs run one at a time, and their events reach the delegate one at a time, awaited (F10).
/// `sendChanges()` and `fetchChanges()` return once every event they caused has been handled
/// (F73, F74), and throw when items failed (F75); overlapping calls coalesce (F77).
///
/// With ``Configuration/automaticallySync`` (the default) a scheduler on the configured clock
/// sends after a debounce, fetches at start and on push hints, and retries transient failures
/// (`Docs/Engine.md`, Automatic sync); the account is checked with the database, and a change is
/// one `accountChange` event that wipes the previous account's state.
///
/// Inside, information flows one way: the ``DeviceLog`` announces each append; the scheduler
/// listens and decides when to sync; the engine runs the work and reports how it ended.
public final class SyncEngine: Sendable, CustomStringConvertible {
    /// The database the engine syncs with (F1).
    public let database: any CloudDatabase
    /// The engine's state: pending changes and flags, read from and written to the device log.
    public let state: State
    /// The log holding everything the engine knows.
    public let deviceLog: DeviceLog
    /// Whether the configuration asked for automatic sync (F5).
    public let automaticallySync: Bool
    /// The subscription the configuration named, if any (F6).
    public let subscriptionID: Subscription.ID?
    /// The subscription the engine creates when none is configured or found (F6, F111).
    public static let defaultSubscriptionID: Subscription.ID = "logsync-database"
    /// Where the contents of fetched assets are kept (``Configuration/assetCacheDirectory``, or
    /// its default inside the device log's directory).
    public var assetCacheDirectory: URL { engineContext.assetCache.directory }

    /// What the flows work with: the device log, the database, the delegate, the keys, the asset
    /// cache, the logger and the request-ID prefix (F103).
    let engineContext: EngineContext
    /// Runs the syncs one at a time (F10, F77).
    let operations = SyncOperations()
    /// The database subscription, made sure of once per launch (F111).
    let subscription: SubscriptionCheck
    /// The account as last seen, checked before syncs (F104–F110).
    let accounts: AccountCheck
    /// The automatic sync planner, with `automaticallySync` (F5).
    let scheduler: SyncScheduler?
    /// Whether the engine serves a shipping app or development (F118).
    public let environment: Environment
    /// A production engine's hold on its database and device log, released with the engine (F118).
    private let productionClaim: ProductionEngineClaim?
    /// What runs for the engine's whole life, stopped when it goes: the push listener, the
    /// automatic sync loop, the device log's announcements of the app's edits.
    private let lifetime = Mutex(Lifetime())

    private struct Lifetime {
        var tasks: [Task<Void, Never>] = []
        var appEdits: DeviceLog.Listening?
    }

    /// Creates an engine (F1). Nothing is sent or fetched until asked.
    ///
    /// - Throws: ``UnsupportedDatabaseError`` for a public database (F2); for a
    ///   ``Configuration/environment`` of ``Environment/production``, ``DuplicateEngineError`` while
    ///   another production engine syncs the same database or uses the same device log (F118);
    ///   `LogStoreError` if the device log cannot be opened (see
    ///   ``DeviceLog/init(directory:options:clock:)``).
    public init(_ configuration: Configuration) throws {
        guard configuration.database.databaseScope != .public else {
            throw UnsupportedDatabaseError(scope: configuration.database.databaseScope)
        }
        let deviceLog: DeviceLog
        switch configuration.storage {
        case .directory(let url): deviceLog = try DeviceLog(directory: url)
        case .deviceLog(let log): deviceLog = log
        }
        self.environment = configuration.environment
        self.productionClaim =
            configuration.environment == .production
            ? try ProductionEngineClaim(
                database: configuration.database.databaseIdentity, logDirectory: deviceLog.log.environment.path,
                engine:
                    "SyncEngine(\(configuration.database.databaseScope) database, log \(deviceLog.log.environment.path))"
            )
            : nil
        self.database = configuration.database
        self.deviceLog = deviceLog
        self.automaticallySync = configuration.automaticallySync
        self.subscriptionID = configuration.subscriptionID
        var random = SeededRandom(seed: configuration.randomSeed ^ 0x5245_5155_4553_5453)
        let delegate = EngineDelegate(configuration.delegate, logger: configuration.logger)
        self.engineContext = EngineContext(
            deviceLog: deviceLog, database: configuration.database, delegate: delegate,
            keyring: ZoneKeyring(
                keyFile: configuration.deviceKeyFile
                    ?? URL(fileURLWithPath: deviceLog.log.environment.path, isDirectory: true).appendingPathComponent(
                        "DeviceKey")),
            assetCache: AssetCache(
                directory: configuration.assetCacheDirectory
                    ?? URL(fileURLWithPath: deviceLog.log.environment.path, isDirectory: true)
                    .appendingPathComponent("Assets", isDirectory: true)),
            logger: configuration.logger, requestIDPrefix: String(random.next(), radix: 16),
            fetchResultsLimit: configuration.fetchResultsLimit, tracer: configuration.tracer,
            metrics: EngineMetrics(factory: configuration.metricsFactory, scope: configuration.database.databaseScope))
        self.subscription = SubscriptionCheck(engineContext, subscriptionID: configuration.subscriptionID)
        self.state = State(deviceLog: deviceLog)
        self.scheduler =
            configuration.automaticallySync
            ? SyncScheduler(
                deviceLog: deviceLog, clock: configuration.clock, policy: configuration.schedulePolicy,
                seed: configuration.randomSeed, conditions: configuration.conditions, logger: configuration.logger,
                retries: engineContext.metrics.retries)
            : nil
        self.accounts = AccountCheck(engineContext, subscription: subscription, scheduler: scheduler)
        delegate.attach(self)
        start()
    }

    /// Starts what runs for the engine's whole life: re-delivering fetched changes the delegate
    /// may not have handled (F29), a `stateUpdate` after each of the app's edits (F26), listening
    /// for push hints (F83, F115), and with automatic sync the scheduler, which catches up with a
    /// fetch (F85, F87) and sends what is pending (F88), and the loop that runs what it decides.
    private func start() {
        let weakSelf = WeakEngine(self)
        Task {
            try? await weakSelf.value?.operations.run(.redelivery) {
                try await weakSelf.value?.redeliverUndelivered()
            }
        }
        let stateUpdateQueued = StateUpdateQueued()
        let appEdits = deviceLog.listen { [operations] appended in
            guard appended.author == .app else { return }
            Self.queueStateUpdate(weakSelf, operations, stateUpdateQueued)
        }
        var tasks = [PushListener(engineContext).start()]
        if let scheduler {
            scheduler.start()
            tasks.append(Task { await Self.runAutomatically(weakSelf, scheduler) })
        }
        lifetime.withLock { lifetime in
            lifetime.appEdits = appEdits
            lifetime.tasks = tasks
        }
    }

    deinit {
        scheduler?.stop()
        lifetime.withLock { lifetime in
            lifetime.appEdits?.cancel()
            for task in lifetime.tasks { task.cancel() }
        }
    }

    /// The engine's database scope and log directory, such as
    /// `SyncEngine(private database, log /data/sync)`.
    public var description: String {
        "SyncEngine(\(database.databaseScope) database, log \(deviceLog.log.environment.path))"
    }

    // MARK: Manual sync

    /// Fetches the server's changes now (F73): database changes, then the record changes of each
    /// changed zone in the options' scope, prioritized zones first (F46, F66, F67). Returns once
    /// the delegate has handled every event of the fetch.
    ///
    /// A call made while a fetch with the same options is queued or running joins it (F48, F77).
    ///
    /// - Parameter options: The scope and the zones to fetch first; copied at the call (F71).
    /// - Throws: ``ReentrantCallError`` from inside the engine's delegate (F11); `SyncError`:
    ///   `invalidArguments` naming the field of a malformed ``FetchChangesOptions/operationGroup``
    ///   (F69), before anything is fetched; the error that stopped the fetch
    ///   (`operationCancelled` after ``cancelOperations()``), or `partialFailure` with the zones
    ///   that failed, keyed `.zone(id)`, while the other zones were fetched (F102);
    ///   `LogStoreError` if the device log cannot be written.
    public func fetchChanges(_ options: FetchChangesOptions = FetchChangesOptions()) async throws {
        try options.operationGroup?.validate()
        let context = FetchChangesContext(reason: .manual, options: options)
        try await runManually("fetchChanges", .fetch(options)) { [self] in try await runFetch(context) }
    }

    /// Sends the pending changes now (F74): database changes first, then the delegate's record
    /// batches until it returns `nil` (F47). Returns once the delegate has handled every event of
    /// the send.
    ///
    /// A call made while an equal send is queued joins it; one made while a send is running
    /// queues behind it (F77).
    ///
    /// - Parameter options: The scope handed to the delegate; copied at the call (F71).
    /// - Throws: ``ReentrantCallError`` from inside the engine's delegate (F11); `SyncError`:
    ///   `invalidArguments` naming the field of a malformed ``SendChangesOptions/operationGroup``
    ///   (F69), before anything is sent; `partialFailure` whose `partialErrors` hold each failed
    ///   item's error (F75; the details are in the `sent…Changes` events too), or the error that
    ///   stopped the send (a transient failure, `operationCancelled`); `LogStoreError` if the
    ///   device log cannot be written.
    public func sendChanges(_ options: SendChangesOptions = SendChangesOptions()) async throws {
        try options.operationGroup?.validate()
        let context = SendChangesContext(reason: .manual, options: options)
        try await runManually("sendChanges", .send(options)) { [self] in try await runSend(context) }
    }

    /// Cancels the running and queued syncs (F79). A running sync stops at its next step: a
    /// request already made still has its answer applied and reported, the changes not sent stay
    /// pending, and the sync's will/did events still pair. Calls waiting on cancelled syncs throw
    /// `operationCancelled`. The engine stays usable (F80).
    public func cancelOperations() async {
        await operations.cancelAll()
    }

    // MARK: Assets

    /// Fetches the content of `asset` (of a record in `zoneID`) into the engine's asset cache,
    /// unless it is there already, and returns the asset with `Asset/fileURL` set to the
    /// cached file: for records fetched with
    /// ``FetchChangesOptions/ZoneConfiguration/shouldFetchAssetContents`` `false`, or whose
    /// cached file the app deleted.
    ///
    /// Not in CKSyncEngine, whose private `shouldFetchAssetContents` leaves the app to fetch
    /// contents with a `CKFetchRecordsOperation`.
    ///
    /// ```swift
    /// let photo = try await engine.fetchAssetContents(asset, in: note.recordID.zoneID)
    /// let image = try Data(contentsOf: photo.fileURL!)
    /// ```
    ///
    /// A call runs beside syncs (it does not wait for them); two downloads of the same content
    /// never run at once, the second finds the first's file.
    ///
    /// - Throws: `SyncError`: `invalidArguments` for an asset without digest or size (one not
    ///   sent yet); the database's `assetNotAvailable` (the server keeps no such content for the
    ///   zone), `zoneNotFound`; transport errors, after which a later call resumes the download;
    ///   `operationCancelled`.
    public func fetchAssetContents(_ asset: Asset, in zoneID: RecordZone.ID) async throws(SyncError) -> Asset {
        try await AssetDownloads(engineContext).contents(of: asset, in: zoneID)
    }

    // MARK: Running the flows

    /// The engine whose delegate callback the current task is in, if any (F11).
    @TaskLocal static var callbackEngine: ObjectIdentifier?

    /// Runs an app-requested sync: refused from inside a delegate callback (F11), else queued.
    private func runManually(
        _ operation: String, _ kind: SyncOperations.Kind, _ body: @escaping @Sendable () async throws -> Void
    ) async throws {
        try checkNotReentrant(operation)
        try await runSync(kind, body)
    }

    /// Runs a sync through the operation queue, once the account allows it
    /// (``AccountCheck/prepareSync()``).
    func runSync(_ kind: SyncOperations.Kind, _ body: @escaping @Sendable () async throws -> Void) async throws {
        try await operations.run(kind) { [accounts] in
            try await accounts.prepareSync()
            try await body()
        }
    }

    private func checkNotReentrant(_ operation: String) throws {
        if Self.callbackEngine == ObjectIdentifier(self) { throw ReentrantCallError(operation: operation) }
    }

    /// Runs one send (``SendFlow``).
    func runSend(_ context: SendChangesContext) async throws {
        let metrics = engineContext.metrics
        defer { notePendingChanges() }
        do {
            try await metrics.sendDuration.measure { try await SendFlow(engineContext).run(context) }
        } catch {
            metrics.countConflicts(in: error)
            throw error
        }
    }

    /// Runs one fetch (``FetchFlow``).
    func runFetch(_ context: FetchChangesContext) async throws {
        let metrics = engineContext.metrics
        defer { notePendingChanges() }
        try await metrics.fetchDuration.measure {
            try await FetchFlow(engineContext, subscription: subscription).run(context)
        }
    }

    /// Sets the pending changes gauge, when a metrics backend records it.
    private func notePendingChanges() {
        let metrics = engineContext.metrics
        guard metrics.isRecording,
            let count = try? state.pendingRecordZoneChanges.count + state.pendingDatabaseChanges.count
        else { return }
        metrics.pendingChanges.record(count)
    }

    /// Delivers again the fetched changes the delegate may not have handled (``Redelivery``).
    func redeliverUndelivered() async throws {
        try await Redelivery(engineContext).run()
    }

    /// Checks the account with the database, as its own operation (so that an `accountChange`
    /// event is delivered in order), and returns the status.
    func checkAccount() async -> AccountStatus {
        do {
            try await operations.run(.accountCheck) { [accounts] in try await accounts.checkAccountNow() }
        } catch {
            engineContext.logger.error("account check failed: \(error)")
        }
        return accounts.knownAccountStatus ?? .couldNotDetermine
    }

    /// The account status last seen, or `nil` before the first check.
    var knownAccountStatus: AccountStatus? { accounts.knownAccountStatus }

    /// The first part of every request ID this engine makes (F103).
    var requestIDPrefix: String { engineContext.requestIDPrefix }

    /// After the app changed the ``state``: queues a `stateUpdate` (F26), coalesced with one
    /// already queued. The task holds the engine weakly: an engine the app dropped gets no more
    /// events (F4, F110), and its log closes.
    ///
    /// While one is queued and has not started, an edit needs nothing more (it will read the
    /// offset after the edit's commit), so `queued` spares the edit a task and a hop to the
    /// operations' actor that would only join the queued one (at many edits a second, those
    /// were a tenth of the profile).
    private static func queueStateUpdate(
        _ engine: WeakEngine, _ operations: SyncOperations, _ queued: StateUpdateQueued
    ) {
        guard !queued.value.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Task {
            do {
                try await operations.run(.stateUpdate) {
                    // Cleared before reading the offset: an edit that finds it set is covered.
                    queued.value.store(false, ordering: .releasing)
                    guard let engine = engine.value else { return }
                    await engine.engineContext.delegate.deliver(
                        .stateUpdate(Event.StateUpdate(offset: try engine.deviceLog.log.lastOffset)))
                }
            } catch {
                // Cancelled before it started (or it failed): the next edit queues one anew.
                queued.value.store(false, ordering: .releasing)
            }
        }
    }
}

/// Whether an app-triggered `stateUpdate` is queued and has not started reading the offset.
private final class StateUpdateQueued: Sendable {
    let value = Atomic<Bool>(false)
}

/// An engine held weakly by the tasks that serve it, so that an engine the app dropped stops.
struct WeakEngine: Sendable {
    weak let value: SyncEngine?

    init(_ value: SyncEngine?) { self.value = value }
}
