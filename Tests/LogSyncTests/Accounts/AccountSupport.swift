import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import Synchronization
import SyncModel
import Testing

@testable import LogSync

// Helpers of the account suites: a server with a device's simulated account, an app delegate
// that follows Apple's sample policy on account changes, and a bounded wait without sleeps.

/// One server and one device whose account a test signs in, out and switches.
struct AccountWorld {
    let directory: URL
    let server: SyncServer
    let account: SimulatedAccount<UserID>

    /// A fresh server in `directory/server` and a device `device` signed in as `user` (or
    /// signed out).
    init(_ directory: URL, signedIn user: UserID?, device: DeviceID = "phone") throws {
        self.directory = directory
        let server = try makeServer(directory)
        self.server = server
        self.account = SimulatedAccount(signedIn: user) { user, scope in
            server.database(for: user, scope: scope, device: device)
        }
    }

    /// The user record ID the server gives `user`.
    func userRecordID(_ user: UserID) throws -> Record.ID { try server.userRecordID(for: user) }

    /// An engine on its own log in `directory/name`, syncing `database` (the account's private
    /// view by default): manual, or automatic on `clock` with the account as its conditions.
    func engine(
        _ name: String, delegate: any SyncEngineDelegate, clock: TestClock? = nil, database: (any CloudDatabase)? = nil
    ) throws -> SyncEngine {
        let log = try DeviceLog(
            directory: directory.appendingPathComponent(name, isDirectory: true),
            options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20))
        var configuration = SyncEngine.Configuration(database: database ?? account, deviceLog: log, delegate: delegate)
        if let clock {
            configuration.automaticallySync = true
            configuration.clock = clock
            configuration.conditions = account
            configuration.randomSeed = 7
        } else {
            configuration.automaticallySync = false
        }
        return try SyncEngine(configuration)
    }

    /// The titles of the notes in `user`'s private zone `zoneID` on the server (empty if the zone
    /// does not exist), read directly from the server.
    func serverNotes(_ user: UserID, in zoneID: RecordZone.ID = Fixtures.notes) async throws -> [Record.ID: String] {
        let database = server.database(for: user)
        let zones = try await database.fetchAllZones().map(\.zoneID)
        guard zones.contains(zoneID) else { return [:] }
        var notes: [Record.ID: String] = [:]
        var token: ZoneChangeToken?
        while true {
            let page = try await database.fetchZoneChanges(zoneID: zoneID, since: token)
            for modification in page.modifications {
                notes[modification.record.recordID] = modification.record["title"]?.stringValue ?? ""
            }
            for deletion in page.deletions { notes[deletion.recordID] = nil }
            token = page.changeToken
            if !page.moreComing { return notes }
        }
    }

    /// Writes notes straight to `user`'s server database (as another device would), creating
    /// the zone.
    func seedServer(_ user: UserID, _ notes: [(Record.ID, String)], zoneID: RecordZone.ID = Fixtures.notes) async throws {
        let database = server.database(for: user, device: "seeder")
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
        let response = try await database.modifyRecords(
            saving: notes.map { newNote($0.0, $0.1) }, deleting: [], savePolicy: .allKeys)
        for (id, _) in notes {
            if case .failure(let error)? = response.saveResults[id] { throw error }
        }
    }
}

/// An app's notes and its delegate, with the policy of Apple's sample on account changes
/// (F105, F106): on `signIn` it re-adds its zone and every note (unless told not to); on
/// `signOut` and `switchAccounts` it deletes its local data.
final class AccountApp: SyncEngineDelegate {
    let sink = EventSink()
    let zoneID: RecordZone.ID
    private let store = Mutex(Store())

    struct Store {
        var notes: [Record.ID: String] = [:]
        var reuploadsOnSignIn = true
        /// The engine's pending lists (records, zones) as seen when each account change arrived.
        var pendingAtAccountChange: [(records: Int, zones: Int)] = []
        /// What ran inside `handleEvent` after the app's own handling.
        var onEvent: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?
    }

    init(zoneID: RecordZone.ID = Fixtures.notes) { self.zoneID = zoneID }

    /// Writes a note and queues its zone and its save on `engine`.
    func write(_ id: Record.ID, _ title: String, on engine: SyncEngine) throws {
        store.withLock { $0.notes[id] = title }
        try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zoneID))])
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    var notes: [Record.ID: String] { store.withLock { $0.notes } }

    var events: [SyncEngine.Event] { sink.events }

    /// The account changes delivered so far.
    var accountChanges: [SyncEngine.Event.AccountChange.ChangeType] {
        events.compactMap { if case .accountChange(let change) = $0 { change.changeType } else { nil } }
    }

    var pendingAtAccountChange: [(records: Int, zones: Int)] { store.withLock { $0.pendingAtAccountChange } }

    func setReuploadsOnSignIn(_ value: Bool) { store.withLock { $0.reuploadsOnSignIn = value } }

    func onEvent(_ body: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?) { store.withLock { $0.onEvent = body } }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        sink.append(event, syncEngine)
        switch event {
        case .accountChange(let change):
            let records = (try? syncEngine.state.pendingRecordZoneChanges.count) ?? -1
            let zones = (try? syncEngine.state.pendingDatabaseChanges.count) ?? -1
            store.withLock { $0.pendingAtAccountChange.append((records, zones)) }
            switch change.changeType {
            case .signIn:
                let (notes, reupload) = store.withLock { ($0.notes, $0.reuploadsOnSignIn) }
                if reupload, !notes.isEmpty {
                    try? syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zoneID))])
                    try? syncEngine.state.add(
                        pendingRecordZoneChanges: notes.keys.sorted { $0.recordName < $1.recordName }.map { .saveRecord($0) })
                }
            case .signOut, .switchAccounts:
                store.withLock { $0.notes.removeAll() }
            }
        case .fetchedDatabaseChanges(let changes):
            let gone = Set(changes.deletions.map(\.zoneID))
            store.withLock { store in store.notes = store.notes.filter { !gone.contains($0.key.zoneID) } }
        case .fetchedRecordZoneChanges(let changes):
            store.withLock { store in
                for modification in changes.modifications {
                    store.notes[modification.record.recordID] = modification.record["title"]?.stringValue ?? ""
                }
                for deletion in changes.deletions { store.notes.removeValue(forKey: deletion.recordID) }
            }
        default:
            break
        }
        let onEvent = store.withLock { $0.onEvent }
        await onEvent?(event, syncEngine)
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = ((try? syncEngine.state.pendingRecordZoneChanges) ?? []).filter { context.options.scope.contains($0) }
        let notes = self.notes
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            guard let title = notes[id] else { return nil }
            var record = (try? syncEngine.deviceLog.lastKnownServerRecord(for: id))?.systemFieldsCopy()
                ?? Record(recordType: "Note", recordID: id)
            record["title"] = .string(title)
            return record
        }
    }
}

/// Waits, yielding and never sleeping, until `condition` holds or `limit` of wall-clock time
/// has passed; with a `clock`, moves it one second forward on each round so scheduled syncs
/// come due. Returns whether the condition holds.
func eventually(
    advancing clock: TestClock? = nil, limit: Duration = .seconds(120), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now.advanced(by: limit)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        if let clock { await clock.advance(by: .seconds(1)) } else { for _ in 0..<20 { await Task.yield() } }
    }
    return try await condition()
}

extension Array where Element == SyncEngine.Event {
    /// The position of the first event of `kind`, or `nil`.
    func firstIndex(of kind: SyncEngine.Event.Kind) -> Int? { firstIndex { $0.kind == kind } }
}
