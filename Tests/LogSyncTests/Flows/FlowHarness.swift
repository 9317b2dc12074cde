import Foundation
import LogStore
import Logging
import SyncModel
import Synchronization
import TemporaryDirectory

@testable import LogSync

/// A delegate gateway that records every event and hands out the batches and fetch options a
/// test queued: the app, as a flow sees it, with no engine.
final class RecordingGateway: DelegateGateway {
    private let state = Mutex(Recorded())

    private struct Recorded {
        var events: [SyncEngine.Event] = []
        var batches: [SyncEngine.RecordZoneChangeBatch] = []
        var batchesAskedFor = 0
        var fetchOptions: [SyncEngine.FetchChangesOptions] = []
    }

    /// Every event delivered, in order.
    var events: [SyncEngine.Event] { state.withLock { $0.events } }

    /// How many times a send asked for a batch.
    var batchesAskedFor: Int { state.withLock { $0.batchesAskedFor } }

    /// Hands out `batches`, one per request for a batch, then `nil`.
    func queue(_ batches: SyncEngine.RecordZoneChangeBatch...) { state.withLock { $0.batches += batches } }

    /// Answers the next requests for fetch options with `options`, one each; then the fetch's own.
    func queue(_ options: SyncEngine.FetchChangesOptions...) { state.withLock { $0.fetchOptions += options } }

    func deliver(_ event: SyncEngine.Event) async { state.withLock { $0.events.append(event) } }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext) async -> SyncEngine.RecordZoneChangeBatch?
    {
        state.withLock { state in
            state.batchesAskedFor += 1
            return state.batches.isEmpty ? nil : state.batches.removeFirst()
        }
    }

    func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext) async -> SyncEngine.FetchChangesOptions {
        state.withLock { $0.fetchOptions.isEmpty ? context.options : $0.fetchOptions.removeFirst() }
    }
}

/// One flow's world: a device log of its own, a ``ScriptedDatabase`` and a ``RecordingGateway``,
/// in the engine context a flow is built from. No engine, no server.
struct FlowHarness {
    let deviceLog: DeviceLog
    let database = ScriptedDatabase()
    let delegate = RecordingGateway()
    let context: EngineContext
    /// The app's view of the device log's state, for the pending changes it adds.
    let state: SyncEngine.State

    /// The request-ID prefix of the harness's flows.
    static let requestIDPrefix = "f10w"

    init(directory: URL) throws {
        deviceLog = try openDeviceLog(directory.appendingPathComponent("device", isDirectory: true))
        state = SyncEngine.State(deviceLog: deviceLog)
        context = EngineContext(
            deviceLog: deviceLog, database: database, delegate: delegate,
            keyring: ZoneKeyring(keyFile: directory.appendingPathComponent("DeviceKey")),
            assetCache: AssetCache(directory: directory.appendingPathComponent("Assets", isDirectory: true)),
            logger: Logger(label: "FlowHarness", factory: { _ in SwiftLogNoOpLogHandler() }),
            requestIDPrefix: Self.requestIDPrefix, fetchResultsLimit: nil)
    }

    /// Runs one send, as `sendChanges()` would.
    func send() async throws {
        try await SendFlow(context).run(SyncEngine.SendChangesContext(reason: .manual, options: .init()))
    }

    /// Runs one fetch, as `fetchChanges()` would.
    func fetch() async throws {
        let subscription = SubscriptionCheck(context, subscriptionID: nil)
        try await FetchFlow(context, subscription: subscription).run(
            SyncEngine.FetchChangesContext(reason: .manual, options: .init()))
    }

    /// The device log's entries from `offset` on, each with its offset.
    func entries(after offset: LogOffset = .zero) throws -> [(offset: LogOffset, entry: DeviceEntry)] {
        var entries: [(offset: LogOffset, entry: DeviceEntry)] = []
        try deviceLog.log.forEachEntry(from: offset.next) {
            entries.append(($0.offset, try DeviceEntry($0, in: deviceLog.log)))
        }
        return entries
    }

    /// The names of the device log's entries from `offset` on, such as `batchPrepared`, without
    /// the delivery marks that ride along with a fetch's entries (`eventsDelivered`).
    func entryNames(after offset: LogOffset = .zero) throws -> [String] {
        try entries(after: offset).map(\.entry.name).filter { $0 != "eventsDelivered" }
    }

    /// Reads the device index.
    func read<R>(_ body: (DeviceSnapshot) throws -> R) throws -> R { try deviceLog.read(body) }
}

/// A fresh ``FlowHarness`` in a temporary directory of its own.
func withFlowHarness(_ body: (FlowHarness) async throws -> Void) async throws {
    try await withTemporaryDirectory { directory in try await body(try FlowHarness(directory: directory)) }
}
