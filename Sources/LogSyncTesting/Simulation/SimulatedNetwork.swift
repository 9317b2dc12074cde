import Foundation
import LogStore
import LogSyncServer
import SyncModel
import Synchronization

/// What the simulated network did with one request.
public enum NetworkFate: String, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    /// It reached the server and the answer came back.
    case delivered
    /// It never reached the server: `networkFailure`.
    case requestDropped
    /// The server applied it and the answer was lost on the way back: `networkFailure`.
    case responseDropped
    /// The server applied it and reported its answer lost: `serverResponseLost` (modify requests only).
    case responseLost
    /// It reached the server twice (a retransmission); the second answer came back.
    case duplicated
    /// It was held until the simulation released it, while other devices' requests overtook it.
    case delayed
    /// The server refused it for now: `requestRateLimited` with a retry-after.
    case throttled
    /// The server was unavailable: `serviceUnavailable` with a retry-after.
    case unavailable
    /// The zone was busy: `zoneBusy` (record modifications and zone fetches only).
    case zoneBusy
    /// The fetch's change token had expired: `changeTokenExpired` (fetches with a token only).
    case tokenExpired

    public var description: String { rawValue }

    public static func < (lhs: NetworkFate, rhs: NetworkFate) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// How often the simulated network misbehaves: each fate's share of requests, in percent.
/// A fate that does not apply to a request (a token expiring on a modification) delivers it.
public struct NetworkFaultRates: Sendable, Hashable {
    public var requestDropped: Int
    public var responseDropped: Int
    public var responseLost: Int
    public var duplicated: Int
    public var delayed: Int
    public var throttled: Int
    public var unavailable: Int
    public var zoneBusy: Int
    public var tokenExpired: Int

    /// The default mix: about one request in three misbehaves.
    public init(
        requestDropped: Int = 4, responseDropped: Int = 4, responseLost: Int = 2, duplicated: Int = 4, delayed: Int = 6,
        throttled: Int = 3, unavailable: Int = 2, zoneBusy: Int = 3, tokenExpired: Int = 4
    ) {
        self.requestDropped = requestDropped
        self.responseDropped = responseDropped
        self.responseLost = responseLost
        self.duplicated = duplicated
        self.delayed = delayed
        self.throttled = throttled
        self.unavailable = unavailable
        self.zoneBusy = zoneBusy
        self.tokenExpired = tokenExpired
    }

    /// A network that delivers everything.
    public static let none = NetworkFaultRates(
        requestDropped: 0, responseDropped: 0, responseLost: 0, duplicated: 0, delayed: 0, throttled: 0, unavailable: 0,
        zoneBusy: 0, tokenExpired: 0)

    var shares: [(NetworkFate, Int)] {
        [
            (.requestDropped, requestDropped), (.responseDropped, responseDropped), (.responseLost, responseLost),
            (.duplicated, duplicated), (.delayed, delayed), (.throttled, throttled), (.unavailable, unavailable),
            (.zoneBusy, zoneBusy), (.tokenExpired, tokenExpired),
        ]
    }
}

/// The requests of a `CloudDatabase`, as the simulated network names them.
enum RequestKind: String, Sendable {
    case modifyZones, fetchZones, modifyRecords, fetchDatabaseChanges, fetchZoneChanges, modifySubscriptions
    case allSubscriptions, fetchShareMetadata, acceptShares, fetchShareParticipants, uploadAsset, downloadAsset
    case registerDeviceKey, fetchZoneKeys, saveZoneKeys
}

/// The network between the simulation's devices and its server: every request of every device
/// goes through it, and one seeded generator decides what happens to each.
///
/// It also restarts the server (requests after a restart reach the new instance) and keeps the
/// ``ServerHistory``: what the server answered it had applied, in order, which the final checks
/// compare with the server's state.
final class SimulatedNetwork: Sendable {
    private let serverConfiguration: SyncServer.Configuration
    private let server: Mutex<SyncServer>
    private let random: Mutex<SeededRandom>
    private let rates: NetworkFaultRates
    private let faultsEnabled = Mutex(true)
    private let fates = Mutex<[NetworkFate: Int]>([:])
    private let parked = Mutex<[String: CheckedContinuation<Void, Never>]>([:])
    let channels: [String: DeviceChannel]
    let history = Mutex(ServerHistory())
    let trace: SimulationTrace
    /// The owners of shared zones, by the owner name their participants see (`_user<N>`).
    let owners = Mutex<[String: UserID]>([:])

    init(
        server configuration: SyncServer.Configuration, seed: UInt64, rates: NetworkFaultRates, devices: [String],
        trace: SimulationTrace
    ) throws {
        serverConfiguration = configuration
        server = Mutex(try SyncServer(configuration))
        random = Mutex(SeededRandom(seed: seed))
        self.rates = rates
        self.trace = trace
        channels = Dictionary(uniqueKeysWithValues: devices.map { ($0, DeviceChannel()) })
    }

    /// The server instance running now.
    var currentServer: SyncServer { server.withLock { $0 } }

    /// Stops the server and starts a new instance on the same data directory: what it had
    /// committed must survive, what it held in memory does not.
    func restartServer() throws {
        try server.withLock { server in
            server.shutdown()
            server = try SyncServer(serverConfiguration)
        }
    }

    /// Turns faults on or off (off while the devices settle at the end).
    func setFaults(_ enabled: Bool) { faultsEnabled.withLock { $0 = enabled } }

    /// How many requests met each fate so far.
    var fateCounts: [NetworkFate: Int] { fates.withLock { $0 } }

    // MARK: Delayed requests

    /// The devices with a request held by the network, in name order.
    var parkedDevices: [String] { parked.withLock { $0.keys.sorted() } }

    /// Lets the held request of `device` go on to the server. Returns `false` if none is held.
    func release(_ device: String) -> Bool {
        guard let continuation = parked.withLock({ $0.removeValue(forKey: device) }) else { return false }
        continuation.resume()
        return true
    }

    private func park(_ device: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            parked.withLock { $0[device] = continuation }
            channels[device]?.send(.parked)
        }
    }

    // MARK: Forwarding

    private func decide(_ kind: RequestKind, hasToken: Bool) -> NetworkFate {
        guard faultsEnabled.withLock({ $0 }) else { return .delivered }
        let roll = random.withLock { Int.random(in: 0..<100, using: &$0) }
        var threshold = 0
        var fate = NetworkFate.delivered
        for (candidate, share) in rates.shares {
            threshold += share
            if roll < threshold {
                fate = candidate
                break
            }
        }
        switch fate {
        case .responseLost where kind != .modifyRecords && kind != .modifyZones: return .delivered
        case .zoneBusy where kind != .modifyRecords && kind != .fetchZoneChanges: return .delivered
        case .tokenExpired where !hasToken: return .delivered
        default: return fate
        }
    }

    /// Sends one request of `device` (signed in as `user`) through the network.
    func forward<Response: Sendable>(
        _ kind: RequestKind, of device: String, user: UserID, scope: DatabaseScope = .private, hasToken: Bool = false,
        _ call: @Sendable (InProcessDatabase) async throws -> Response
    ) async throws -> Response {
        let fate = decide(kind, hasToken: hasToken)
        fates.withLock { $0[fate, default: 0] += 1 }
        if fate != .delivered { trace.add("  network: \(device)'s \(kind) \(fate)") }
        func database() -> InProcessDatabase {
            currentServer.database(for: user, scope: scope, device: DeviceID(device))
        }
        switch fate {
        case .delivered:
            return try await call(database())
        case .requestDropped:
            throw SyncError(.networkFailure, "simulated: the \(kind) request of \(device) was lost")
        case .responseDropped:
            _ = try await call(database())
            throw SyncError(.networkFailure, "simulated: the answer to \(device)'s \(kind) was lost")
        case .responseLost:
            _ = try await call(database())
            throw SyncError(.serverResponseLost, "simulated: the server lost its answer to \(device)'s \(kind)")
        case .duplicated:
            _ = try? await call(database())
            return try await call(database())
        case .delayed:
            await park(device)
            trace.add("  network: \(device)'s delayed \(kind) reaches the server")
            return try await call(database())
        case .throttled:
            throw SyncError(.requestRateLimited, "simulated: throttled", retryAfter: .seconds(2))
        case .unavailable:
            throw SyncError(.serviceUnavailable, "simulated: unavailable", retryAfter: .seconds(1))
        case .zoneBusy:
            throw SyncError(.zoneBusy, "simulated: zone busy", retryAfter: .seconds(1))
        case .tokenExpired:
            throw SyncError(.changeTokenExpired, "simulated: the change token of \(device)'s \(kind) expired")
        }
    }
}

/// One device's view of one user's database (private, or shared) through the simulated network,
/// with the server's sharing operations.
struct SimulatedLink: CloudDatabase, ShareOperations, ZoneKeyDirectory {
    let network: SimulatedNetwork
    let device: String
    let user: UserID
    var scope: DatabaseScope = .private

    var databaseScope: DatabaseScope { scope }

    private func forward<Response: Sendable>(
        _ kind: RequestKind, hasToken: Bool = false, _ call: @Sendable (InProcessDatabase) async throws -> Response
    ) async throws -> Response {
        try await network.forward(kind, of: device, user: user, scope: scope, hasToken: hasToken, call)
    }

    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await forward(.modifyZones) { [user, scope] database in
            let response = try await database.modifyZones(request)
            if scope == .private { network.history.withLock { $0.record(response, of: user) } }
            return response
        }
    }

    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await forward(.fetchZones) { try await $0.fetchZones(request) }
    }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await forward(.modifyRecords) { [user, scope] database in
            let response = try await database.modifyRecords(request)
            let owners = scope == .shared ? network.owners.withLock { $0 } : [:]
            network.history.withLock { $0.record(response, to: request.requestID, by: user, owners: owners) }
            return response
        }
    }

    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        try await forward(.fetchDatabaseChanges, hasToken: request.since != nil) {
            try await $0.fetchDatabaseChanges(request)
        }
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try await forward(.fetchZoneChanges, hasToken: request.since != nil) { try await $0.fetchZoneChanges(request) }
    }

    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try await forward(.modifySubscriptions) { try await $0.modifySubscriptions(request) }
    }

    func allSubscriptions() async throws -> [Subscription] {
        try await forward(.allSubscriptions) { try await $0.allSubscriptions() }
    }

    func fetchShareMetadata(url: URL) async throws -> Share.Metadata {
        try await forward(.fetchShareMetadata) { try await $0.fetchShareMetadata(url: url) }
    }

    func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse {
        try await forward(.acceptShares) { try await $0.acceptShares(request) }
    }

    func fetchShareParticipants(
        _ request: FetchShareParticipantsRequest
    ) async throws -> FetchShareParticipantsResponse {
        try await forward(.fetchShareParticipants) { try await $0.fetchShareParticipants(request) }
    }

    func registerDeviceKey(_ key: DevicePublicKey) async throws {
        try await forward(.registerDeviceKey) { try await $0.registerDeviceKey(key) }
    }

    func fetchZoneKeys(_ request: FetchZoneKeysRequest) async throws -> FetchZoneKeysResponse {
        try await forward(.fetchZoneKeys) { try await $0.fetchZoneKeys(request) }
    }

    func saveZoneKeys(_ request: SaveZoneKeysRequest) async throws -> SaveZoneKeysResponse {
        try await forward(.saveZoneKeys) { try await $0.saveZoneKeys(request) }
    }

    /// An account question, not a database request: never faulted.
    func currentUserRecordID() async throws -> Record.ID {
        try await network.currentServer.database(for: user, scope: scope, device: DeviceID(device))
            .currentUserRecordID()
    }

    /// No push channel: the simulation drives every fetch itself, so that a seed replays exactly.
    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await forward(.uploadAsset) { try await $0.uploadAsset(request) }
    }

    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try await forward(.downloadAsset) { try await $0.downloadAsset(request) }
    }

    func pushHints() -> AsyncStream<PushHint> { AsyncStream { $0.finish() } }
}

/// Where a device's operation tells the simulation it finished, or that the network is holding
/// its request.
final class DeviceChannel: Sendable {
    enum Signal: Sendable {
        case parked
        case finished(String)
    }

    private struct State {
        var signal: Signal?
        var waiter: CheckedContinuation<Signal, Never>?
    }

    private let state = Mutex(State())

    func send(_ signal: Signal) {
        let waiter = state.withLock { state -> CheckedContinuation<Signal, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.signal = signal
            return nil
        }
        waiter?.resume(returning: signal)
    }

    func next() async -> Signal {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Signal? in
                if let signal = state.signal {
                    state.signal = nil
                    return signal
                }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// The simulation's trace: one line per operation and per network fault, in order.
final class SimulationTrace: Sendable {
    private let lines = Mutex<[String]>([])
    func add(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
