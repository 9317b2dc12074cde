import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync

// What the engine's test targets share: servers and devices of their own in a temporary
// directory, engines of a delegate whose every answer a test scripts, a one-shot signal for
// making callbacks wait (no sleeps), a server with a ticking clock, and readers of event lists.

/// A server whose clock advances one second per reading, so dates differ deterministically.
public func makeTickingServer(_ directory: URL, maxChangesPerPage: Int = 400) throws -> SyncServer {
    let ticks = Atomic<Int>(0)
    return try SyncServer(
        .init(
            directory: directory.appendingPathComponent("server"), durability: .fast,
            now: { Date(timeIntervalSince1970: 1_700_000_000 + Double(ticks.add(1, ordering: .relaxed).newValue)) },
            maxChangesPerPage: maxChangesPerPage))
}

/// A one-shot signal: `wait()` returns once `fire()` has been called (before or after).
public actor Signal {
    public init() {}

    private var fired = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    public func fire() {
        fired = true
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }

    public func wait() async {
        if fired { return }
        await withCheckedContinuation { waiters.append($0) }
    }
}

/// Holds an event callback until a test lets it go on: inside the callback ``hold()`` fires
/// ``reached`` and waits for ``release()``.
public struct Gate: Sendable {
    /// Fires once a callback is held.
    public let reached = Signal()
    private let released = Signal()

    public init() {}

    /// Called inside the callback: says it is reached, then waits until released.
    public func hold() async {
        await reached.fire()
        await released.wait()
    }

    /// Lets the held callback, and every later one, go on.
    public func release() async { await released.fire() }

    /// An event callback that holds every event of `kind` here.
    public func holding(_ kind: SyncEngine.Event.Kind) -> @Sendable (SyncEngine.Event, SyncEngine) async -> Void {
        { event, _ in if event.kind == kind { await hold() } }
    }
}

/// Where a test records the events a delegate saw, each with the engine that delivered it; it
/// may outlive the delegate (F4).
public final class EventSink: Sendable {
    private let recorded = Mutex<[(event: SyncEngine.Event, engine: SyncEngine)]>([])

    public init() {}

    public func append(_ event: SyncEngine.Event, _ engine: SyncEngine) {
        recorded.withLock { $0.append((event, engine)) }
    }

    /// Every event, with the engine that delivered it.
    public var entries: [(event: SyncEngine.Event, engine: SyncEngine)] { recorded.withLock { $0 } }

    /// Every event, in delivery order.
    public var events: [SyncEngine.Event] { entries.map(\.event) }

    public func clear() { recorded.withLock { $0.removeAll() } }
}

/// An engine for `delegate` on a log of its own in `directory/name`, syncing manually with
/// `user`'s database of `scope`.
public func makeScriptedEngine(
    _ name: String, server: SyncServer, user: UserID = "alice", scope: DatabaseScope = .private, directory: URL,
    delegate: any SyncEngineDelegate, fetchResultsLimit: Int? = nil
) throws -> SyncEngine {
    let log = try DeviceLog(
        directory: directory.appendingPathComponent(name, isDirectory: true),
        options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20))
    var configuration = SyncEngine.Configuration(
        database: server.database(for: user, scope: scope, device: DeviceID(name)), deviceLog: log, delegate: delegate)
    configuration.automaticallySync = false
    configuration.fetchResultsLimit = fetchResultsLimit
    return try SyncEngine(configuration)
}

/// The engine `name` of alice's with a scripted delegate (`TestDevice.Delegate` of policy
/// `.scripted`), on a server of its own (see ``withServer(maxChangesPerPage:shutsDown:_:)``):
/// the set-up of a scenario that drives one engine step by step and scripts its delegate's
/// answers.
public func withScriptedEngine(
    _ name: String,
    _ body: (
        _ engine: SyncEngine, _ delegate: TestDevice.Delegate, _ server: SyncServer, _ directory: URL
    ) async throws -> Void
) async throws {
    try await withServer { directory, server in
        let delegate = TestDevice.Delegate(policy: .scripted)
        let engine = try makeScriptedEngine(name, server: server, directory: directory, delegate: delegate)
        try await body(engine, delegate, server, directory)
    }
}

/// The zones and record IDs a scenario suite names: `Self.notes`, `Self.photos`,
/// `Self.note("n1")`, `Self.note("p1", Self.photos)`. A suite adopts it instead of declaring them.
public protocol NoteIDs {}

extension NoteIDs {
    /// The zone `Notes` of the current user.
    public static var notes: RecordZone.ID { RecordZone.ID(zoneName: "Notes") }
    /// The zone `Photos` of the current user.
    public static var photos: RecordZone.ID { RecordZone.ID(zoneName: "Photos") }

    /// The record `name` in `zone` (`Notes` by default).
    public static func note(_ name: String, _ zone: RecordZone.ID = RecordZone.ID(zoneName: "Notes")) -> Record.ID {
        Record.ID(recordName: name, zoneID: zone)
    }
}

/// A note record as an app builds it before its first save.
public func newNote(_ id: Record.ID, _ title: String) -> Record {
    var record = Record(recordType: "Note", recordID: id)
    record["title"] = .string(title)
    return record
}

/// `record` with a new title, keeping its system fields (its change tag).
public func retitled(_ record: Record, _ title: String) -> Record {
    var copy = record.systemFieldsCopy()
    copy["title"] = .string(title)
    return copy
}

// MARK: Reading events

extension Array where Element == SyncEngine.Event {
    /// Without `stateUpdate`s, which may come anywhere.
    public var withoutStateUpdates: [SyncEngine.Event] { filter { $0.kind != .stateUpdate } }

    public var kinds: [SyncEngine.Event.Kind] { map(\.kind) }

    public func count(of kind: SyncEngine.Event.Kind) -> Int { filter { $0.kind == kind }.count }

    public var sentRecordZoneChanges: [SyncEngine.Event.SentRecordZoneChanges] {
        compactMap { if case .sentRecordZoneChanges(let sent) = $0 { sent } else { nil } }
    }

    public var sentDatabaseChanges: [SyncEngine.Event.SentDatabaseChanges] {
        compactMap { if case .sentDatabaseChanges(let sent) = $0 { sent } else { nil } }
    }

    public var fetchedDatabaseChanges: [SyncEngine.Event.FetchedDatabaseChanges] {
        compactMap { if case .fetchedDatabaseChanges(let fetched) = $0 { fetched } else { nil } }
    }

    public var fetchedRecordZoneChanges: [SyncEngine.Event.FetchedRecordZoneChanges] {
        compactMap { if case .fetchedRecordZoneChanges(let fetched) = $0 { fetched } else { nil } }
    }

    /// The zones of the `willFetchRecordZoneChanges` events, in order.
    public var zonesFetched: [RecordZone.ID] {
        compactMap { if case .willFetchRecordZoneChanges(let will) = $0 { will.zoneID } else { nil } }
    }

    /// The `didFetchRecordZoneChanges` payloads, in order.
    public var zoneFetchResults: [SyncEngine.Event.DidFetchRecordZoneChanges] {
        compactMap { if case .didFetchRecordZoneChanges(let did) = $0 { did } else { nil } }
    }

    public var willSendContexts: [SyncEngine.SendChangesContext] {
        compactMap { if case .willSendChanges(let will) = $0 { will.context } else { nil } }
    }

    public var didSendContexts: [SyncEngine.SendChangesContext] {
        compactMap { if case .didSendChanges(let did) = $0 { did.context } else { nil } }
    }

    public var willFetchContexts: [SyncEngine.FetchChangesContext] {
        compactMap { if case .willFetchChanges(let will) = $0 { will.context } else { nil } }
    }

    public var didFetchContexts: [SyncEngine.FetchChangesContext] {
        compactMap { if case .didFetchChanges(let did) = $0 { did.context } else { nil } }
    }

    /// Whether the events (stateUpdates ignored) are whole fetches and sends, one after the
    /// other, each following its grammar (F46, F47).
    public var isSequenceOfSyncs: Bool {
        var rest = withoutStateUpdates[...]
        while let first = rest.first {
            let end: SyncEngine.Event.Kind = first.kind == .willFetchChanges ? .didFetchChanges : .didSendChanges
            guard first.kind == .willFetchChanges || first.kind == .willSendChanges,
                let last = rest.firstIndex(where: { $0.kind == end })
            else { return false }
            let sync = Array(rest[...last])
            guard end == .didFetchChanges ? sync.isFetchSequence : sync.isSendSequence else { return false }
            rest = rest[(last + 1)...]
        }
        return true
    }

    /// Whether the events (stateUpdates ignored) are one fetch in the order of F46:
    /// `willFetchChanges`, `fetchedDatabaseChanges`*, then per zone `willFetchRecordZoneChanges`,
    /// `fetchedRecordZoneChanges`* and `didFetchRecordZoneChanges` of the same zone, and
    /// `didFetchChanges`.
    public var isFetchSequence: Bool {
        let events = withoutStateUpdates
        guard events.count >= 2, events.first?.kind == .willFetchChanges, events.last?.kind == .didFetchChanges else {
            return false
        }
        let end = events.count - 1
        var index = 1
        while index < end, events[index].kind == .fetchedDatabaseChanges { index += 1 }
        while index < end {
            guard case .willFetchRecordZoneChanges(let will) = events[index] else { return false }
            index += 1
            while index < end, events[index].kind == .fetchedRecordZoneChanges { index += 1 }
            guard index < end, case .didFetchRecordZoneChanges(let did) = events[index], did.zoneID == will.zoneID
            else {
                return false
            }
            index += 1
        }
        return true
    }

    /// Whether the events (stateUpdates ignored) are one send (F47): `willSendChanges`, any
    /// `sent…Changes`, `didSendChanges`.
    public var isSendSequence: Bool {
        let events = withoutStateUpdates
        guard events.count >= 2, events.first?.kind == .willSendChanges, events.last?.kind == .didSendChanges else {
            return false
        }
        return events.dropFirst().dropLast().allSatisfy {
            $0.kind == .sentDatabaseChanges || $0.kind == .sentRecordZoneChanges
        }
    }
}

/// Checks the projection rule on a device log: every projection equals a replay
/// (Docs/LogFormat.md, Projections).
public func expectProjectionsHold(_ engines: SyncEngine..., sourceLocation: SourceLocation = #_sourceLocation) throws {
    for engine in engines {
        #expect(try engine.deviceLog.log.verifyProjections() == nil, sourceLocation: sourceLocation)
    }
}

extension TestDevice {
    /// The projection rule on the device's log.
    public func expectProjectionsHold(sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try engine.deviceLog.log.verifyProjections() == nil, "device \(name)", sourceLocation: sourceLocation)
    }

    /// The device shows the same notes as `other`, and the projection rule holds on both logs.
    public func expectConverged(with other: TestDevice, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(notes == other.notes, "devices \(name) and \(other.name)", sourceLocation: sourceLocation)
        try expectProjectionsHold(sourceLocation: sourceLocation)
        try other.expectProjectionsHold(sourceLocation: sourceLocation)
    }

    /// Writes `title` to the note `id` and sends: the send throws a partial failure in which the
    /// save of `id` failed with `code`. Returns the error.
    @discardableResult
    public func writeExpectingFailedSave(
        _ id: Record.ID, _ title: String, _ code: SyncError.Code, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> SyncError? {
        try write(id, title)
        let error = await #expect(throws: SyncError.self, sourceLocation: sourceLocation) {
            try await engine.sendChanges()
        }
        #expect(error?.code == .partialFailure, sourceLocation: sourceLocation)
        #expect(error?.partialErrors[.record(id)]?.code == code, sourceLocation: sourceLocation)
        return error
    }

    /// Fetches, then ``expectConverged(with:sourceLocation:)``.
    public func fetchAndExpectConverged(
        with other: TestDevice, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await engine.fetchChanges()
        try expectConverged(with: other, sourceLocation: sourceLocation)
    }
}

/// A server for one scenario, in `directory/server`, with unflushed commits.
public func makeServer(_ directory: URL, maxChangesPerPage: Int = 400) throws -> SyncServer {
    try SyncServer(
        .init(
            directory: directory.appendingPathComponent("server"), durability: .fast,
            maxChangesPerPage: maxChangesPerPage))
}

/// A server of its own (see ``makeServer(_:maxChangesPerPage:)``) in a fresh temporary
/// directory, both handed to `body`; the directory is removed when `body` returns, and with
/// `shutsDown` the server is shut down first (``SyncServer/shutdown()``: its push streams end).
@discardableResult
public func withServer<R>(
    maxChangesPerPage: Int = 400, shutsDown: Bool = false,
    _ body: (_ directory: URL, _ server: SyncServer) async throws -> R
) async throws -> R {
    try await withTemporaryDirectory { directory in
        let server = try makeServer(directory, maxChangesPerPage: maxChangesPerPage)
        defer { if shutsDown { server.shutdown() } }
        return try await body(directory, server)
    }
}

/// The device `name` of alice's, on a server of its own (see
/// ``withServer(maxChangesPerPage:shutsDown:_:)``).
public func withDevice(
    _ name: String, _ body: (_ server: SyncServer, _ device: TestDevice) async throws -> Void
) async throws {
    try await withServer { directory, server in
        try await body(server, try TestDevice(name, server: server, directory: directory))
    }
}

/// The devices `first` and `second` of alice's, on a server of their own (see
/// ``withServer(maxChangesPerPage:shutsDown:_:)``); `second` fetches pages of
/// `secondFetchResultsLimit` (`nil`: the server's page size).
public func withDevices(
    _ first: String, _ second: String, maxChangesPerPage: Int = 400, secondFetchResultsLimit: Int? = nil,
    _ body: (_ server: SyncServer, _ first: TestDevice, _ second: TestDevice) async throws -> Void
) async throws {
    try await withServer(maxChangesPerPage: maxChangesPerPage) { directory, server in
        let firstDevice = try TestDevice(first, server: server, directory: directory)
        let secondDevice = try TestDevice(
            second, server: server, directory: directory, fetchResultsLimit: secondFetchResultsLimit)
        try await body(server, firstDevice, secondDevice)
    }
}

extension RecordValue {
    /// The string, if the value is one.
    public var stringValue: String? {
        if case .string(let value) = self { value } else { nil }
    }
}

/// Waits, yielding (never sleeping), until `condition` holds; gives up after `seconds` of wall
/// time and records an issue (as it does for an error the condition throws). Returns whether it
/// holds.
@discardableResult
public func waitUntil(
    _ description: String, seconds: Double = 120, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: .seconds(seconds))
    var round = 0
    while true {
        do {
            if try await condition() { return true }
        } catch {
            Issue.record(error, "while waiting until \(description)", sourceLocation: sourceLocation)
            return false
        }
        if ContinuousClock.now >= deadline {
            Issue.record("timed out waiting until \(description)", sourceLocation: sourceLocation)
            return false
        }
        round += 1
        for _ in 0..<(round < 100 ? 1 : 20) { await Task.yield() }
    }
}

/// Lets other tasks run for a while (yields only), for checks that something did *not* happen.
public func letOthersRun(_ yields: Int = 2_000) async {
    for _ in 0..<yields { await Task.yield() }
}
