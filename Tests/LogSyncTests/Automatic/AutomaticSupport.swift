import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import Metrics
import SyncModel
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

// Helpers of the automatic-sync suites: a database that counts requests (and can sign its user
// out), an engine launch on a test clock with manual conditions, readers of the scheduling
// entries, and a bounded wait that never sleeps.

/// A `CloudDatabase` that forwards to an in-process database and counts every request by name
/// (`modifyRecords`, `fetchDatabaseChanges`, …, `currentUserRecordID`).
///
/// With ``signedIn`` false, `currentUserRecordID()` throws `notAuthenticated` (F86, F104).
final class CountingDatabase: CloudDatabase {
    let base: InProcessDatabase
    private struct Counts {
        var byName: [String: Int] = [:]
        var databaseTokens: [DatabaseChangeToken?] = []
        var signedIn = true
    }
    private let counts = Mutex(Counts())

    init(_ base: InProcessDatabase) { self.base = base }

    var databaseScope: DatabaseScope { base.databaseScope }

    /// How many requests named `name` were made.
    func count(_ name: String) -> Int { counts.withLock { $0.byName[name] ?? 0 } }

    /// Every request, the account query included.
    var total: Int { counts.withLock { $0.byName.values.reduce(0, +) } }

    /// The `since` token of each `fetchDatabaseChanges`, in order.
    var databaseTokens: [DatabaseChangeToken?] { counts.withLock { $0.databaseTokens } }

    /// Whether the user is signed in (the account query answers).
    var signedIn: Bool {
        get { counts.withLock { $0.signedIn } }
        set { counts.withLock { $0.signedIn = newValue } }
    }

    private func note(_ name: String) { counts.withLock { $0.byName[name, default: 0] += 1 } }

    /// Counts a request named `name`, then makes it.
    private func counted<Response>(_ name: String, _ request: () async throws -> Response) async throws -> Response {
        note(name)
        return try await request()
    }

    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await counted("modifyZones") { try await base.modifyZones(request) }
    }

    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await counted("fetchZones") { try await base.fetchZones(request) }
    }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await counted("modifyRecords") { try await base.modifyRecords(request) }
    }

    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        counts.withLock {
            $0.byName["fetchDatabaseChanges", default: 0] += 1
            $0.databaseTokens.append(request.since)
        }
        return try await base.fetchDatabaseChanges(request)
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try await counted("fetchZoneChanges") { try await base.fetchZoneChanges(request) }
    }

    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try await counted("modifySubscriptions") { try await base.modifySubscriptions(request) }
    }

    func allSubscriptions() async throws -> [Subscription] {
        try await counted("allSubscriptions") { try await base.allSubscriptions() }
    }

    func currentUserRecordID() async throws -> Record.ID {
        note("currentUserRecordID")
        guard signedIn else { throw SyncError(.notAuthenticated, "no account is signed in (test)") }
        return try await base.currentUserRecordID()
    }

    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await counted("uploadAsset") { try await base.uploadAsset(request) }
    }

    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try await counted("downloadAsset") { try await base.downloadAsset(request) }
    }

    func pushHints() -> AsyncStream<PushHint> { base.pushHints() }
}

/// One launch of an engine: the engine, its counted database, its delegate, its clock and
/// conditions, and what its device log looked like when it was opened.
struct Launch {
    let engine: SyncEngine
    let database: CountingDatabase
    let delegate: TestDevice.Delegate
    let clock: TestClock
    let conditions: ManualConditions
    /// The log's last offset when it was opened, before the engine appended anything.
    let lastOffsetAtOpen: LogOffset
    /// The projections' applied offsets when the log was opened.
    let appliedAtOpen: [String: LogOffset]

    var events: [SyncEngine.Event] { delegate.events }
}

/// Launches an engine on the device log in `directory/name` (created if missing), syncing
/// `user`'s private database through a ``CountingDatabase``, on a fresh ``TestClock``.
func launch(
    _ name: String = "phone", server: SyncServer, directory: URL, automatic: Bool = true, user: UserID = "alice",
    subscriptionID: Subscription.ID? = nil, conditions: ManualConditions = ManualConditions(),
    policy: SyncEngine.SchedulePolicy = SyncEngine.SchedulePolicy(),
    delegate: TestDevice.Delegate = TestDevice.Delegate(policy: .scripted),
    signedIn: Bool = true, seed: UInt64 = 42, metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance
) throws -> Launch {
    let log = try DeviceLog(
        directory: directory.appendingPathComponent(name, isDirectory: true),
        options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20))
    let lastOffset = try log.log.lastOffset
    let applied = try log.log.appliedOffsets()
    let database = CountingDatabase(server.database(for: user, device: DeviceID(name)))
    database.signedIn = signedIn
    let clock = TestClock()
    var configuration = SyncEngine.Configuration(database: database, deviceLog: log, delegate: delegate)
    configuration.automaticallySync = automatic
    configuration.clock = clock
    configuration.conditions = conditions
    configuration.schedulePolicy = policy
    configuration.randomSeed = seed
    configuration.subscriptionID = subscriptionID
    configuration.metricsFactory = metricsFactory
    let engine = try SyncEngine(configuration)
    return Launch(
        engine: engine, database: database, delegate: delegate, clock: clock, conditions: conditions,
        lastOffsetAtOpen: lastOffset, appliedAtOpen: applied)
}

extension Launch {
    /// Waits for the launch's catch-up fetch (F85, F87) and what follows it (the subscription
    /// check) to end.
    func waitForCatchUp(sourceLocation: SourceLocation = #_sourceLocation) async {
        await waitUntil("the catch-up fetch ended", sourceLocation: sourceLocation) {
            database.count("fetchDatabaseChanges") >= 1 && events.willFetchContexts.contains { $0.reason == .scheduled }
                && events.count(of: .didFetchChanges) >= 1
        }
        await engine.operations.drain()
    }

    /// Waits until the clock has a sleeper (the scheduler waiting for due work), or records an
    /// issue.
    func waitForScheduler(sourceLocation: SourceLocation = #_sourceLocation) async {
        await waitUntil("the scheduler sleeps on the clock", sourceLocation: sourceLocation) {
            !clock.sleepingDeadlines.isEmpty
        }
    }
}

/// A scheduling decision read from the device log.
struct Scheduled: Equatable {
    let work: SyncSchedule.Work
    let reason: SyncSchedule.Cause
    let after: Duration
}

extension SyncEngine {
    /// Every entry of the device log, decoded.
    func logEntries(from start: LogOffset = .first) throws -> [DeviceEntry] {
        var entries: [DeviceEntry] = []
        try deviceLog.log.forEachEntry(from: start) { entries.append(try DeviceEntry($0, in: deviceLog.log)) }
        return entries
    }

    /// The `syncScheduled` entries, in order.
    func scheduled(from start: LogOffset = .first) throws -> [Scheduled] {
        try logEntries(from: start).compactMap {
            if case .syncScheduled(let work, let reason, let after) = $0 {
                Scheduled(work: work, reason: reason, after: after)
            } else {
                nil
            }
        }
    }

    /// The `syncScheduled` entries of `work`, in order.
    func scheduled(_ work: SyncSchedule.Work, from start: LogOffset = .first) throws -> [Scheduled] {
        try scheduled(from: start).filter { $0.work == work }
    }

    /// The retries scheduled for `work`, in order.
    func retries(_ work: SyncSchedule.Work, from start: LogOffset = .first) throws -> [Scheduled] {
        try scheduled(work, from: start).filter { if case .retry = $0.reason { true } else { false } }
    }

    /// The reasons of the `syncDeferred` entries, in order.
    func deferrals(from start: LogOffset = .first) throws -> [String] {
        try logEntries(from: start).compactMap { if case .syncDeferred(let reason) = $0 { reason } else { nil } }
    }

    /// The subscriptions of the `subscriptionEnsured` entries, in order.
    func ensuredSubscriptions() throws -> [Subscription.ID] {
        try logEntries().compactMap { if case .subscriptionEnsured(let id) = $0 { id } else { nil } }
    }

    /// The zones of the `pushReceived` entries (`nil` for a hint naming none), in order.
    func pushesReceived() throws -> [RecordZone.ID?] {
        try logEntries().compactMap { if case .pushReceived(let zoneID) = $0 { zoneID } else { nil } }
    }
}

extension Array where Element == SyncEngine.Event {
    /// The IDs of every record fetched, in order (repeats included).
    var fetchedRecordIDs: [Record.ID] {
        fetchedRecordZoneChanges.flatMap { $0.modifications.map(\.record.recordID) }
    }

    /// The IDs of every record saved by sends.
    var savedRecordIDs: [Record.ID] {
        sentRecordZoneChanges.flatMap { $0.savedRecords.map(\.recordID) }
    }
}

/// What another device of the same user does on the server directly, without an engine.
struct OtherDevice {
    let database: InProcessDatabase

    init(server: SyncServer, user: UserID = "alice", name: String = "laptop") {
        database = server.database(for: user, device: DeviceID(name))
    }

    func createZones(_ zoneIDs: RecordZone.ID...) async throws {
        let response = try await database.modifyZones(saving: zoneIDs.map { RecordZone(zoneID: $0) }, deleting: [])
        for result in response.saveResults.values { _ = try result.get() }
    }

    func write(_ ids: [Record.ID], title: String = "from the laptop") async throws {
        let response = try await database.modifyRecords(
            saving: ids.map { newNote($0, title) }, deleting: [], atomically: false)
        for result in response.saveResults.values { _ = try result.get() }
    }

    func subscriptions() async throws -> [Subscription.ID] {
        try await database.allSubscriptions().map(\.subscriptionID)
    }

    func saveSubscription(_ id: Subscription.ID) async throws {
        let response = try await database.modifySubscriptions(
            saving: [Subscription(subscriptionID: id, kind: .database)], deleting: [])
        for result in response.saveResults.values { _ = try result.get() }
    }

    func deleteSubscription(_ id: Subscription.ID) async throws {
        _ = try await database.modifySubscriptions(saving: [], deleting: [id])
    }
}

/// A delegate that stops inside `handleEvent` at the first `fetchedRecordZoneChanges` until
/// released: an app killed between a fetched page and the end of its handling (F29).
final class StallingDelegate: SyncEngineDelegate {
    let sink = EventSink()
    private let stall = Mutex<(waiting: CheckedContinuation<Void, Never>?, stalled: Bool, released: Bool)>(
        (nil, false, false))

    /// Whether a `fetchedRecordZoneChanges` is being held.
    var isStalled: Bool { stall.withLock { $0.stalled } }

    /// Lets the held event (and every later one) through.
    func release() {
        let waiting = stall.withLock { state -> CheckedContinuation<Void, Never>? in
            state.released = true
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume()
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        sink.append(event, syncEngine)
        guard case .fetchedRecordZoneChanges = event else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = stall.withLock { state -> Bool in
                if state.released { return true }
                state.waiting = continuation
                state.stalled = true
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? { nil }
}
