import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync

// Helpers of the account suites: a server with a device's simulated account, devices of a notes
// app that follows Apple's sample policy on account changes, and a bounded wait without sleeps.

/// An ``AccountWorld`` whose device is signed in as `user` (or signed out), in a fresh temporary
/// directory removed when `body` returns.
func withAccountWorld(signedIn user: UserID?, _ body: (_ world: AccountWorld) async throws -> Void) async throws {
    try await withTemporaryDirectory { directory in try await body(try AccountWorld(directory, signedIn: user)) }
}

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

    /// A device of the notes app on its own log in `directory/name`, syncing `database` (the
    /// account's private view by default): manual, or automatic on `clock` with the account as
    /// its conditions. The app follows Apple's sample on account changes (F105, F106): on
    /// `signIn` it queues its zones and every note again; on `signOut` and `switchAccounts` it
    /// deletes its local data.
    func device(_ name: String, clock: TestClock? = nil, database: (any CloudDatabase)? = nil) throws -> TestDevice {
        let account = self.account
        return try TestDevice(
            name, database: database ?? account, directory: directory.appendingPathComponent(name, isDirectory: true),
            policy: TestDevice.Policy(accountChanges: .uploadOnSignIn)
        ) { configuration in
            guard let clock else { return }
            configuration.automaticallySync = true
            configuration.clock = clock
            configuration.conditions = account
            configuration.randomSeed = 7
        }
    }

    /// The manual notes app on `name` after its first fetch, which records the signed-in account.
    func fetchedDevice(_ name: String = "phone") async throws -> TestDevice {
        let app = try device(name)
        try await app.engine.fetchChanges()
        return app
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
    func seedServer(_ user: UserID, _ notes: [(Record.ID, String)], zoneID: RecordZone.ID = Fixtures.notes) async throws
    {
        let database = server.database(for: user, device: "seeder")
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
        let response = try await database.modifyRecords(
            saving: notes.map { newNote($0.0, $0.1) }, deleting: [], savePolicy: .allKeys)
        for (id, _) in notes {
            if case .failure(let error)? = response.saveResults[id] { throw error }
        }
    }
}

extension TestDevice {
    /// Writes a note and queues its zone with it, as the app of the account suites does.
    func writeNote(_ id: Record.ID, _ title: String) throws {
        try createZone(id.zoneID)
        try write(id, title)
    }

    /// The account changes delivered so far.
    var accountChanges: [SyncEngine.Event.AccountChange.ChangeType] {
        events.compactMap { if case .accountChange(let change) = $0 { change.changeType } else { nil } }
    }

    /// A sink that records, from now on, each event with the engine that delivered it.
    func recordingEngines() -> EventSink {
        let sink = EventSink()
        onEvent { event, engine in sink.append(event, engine) }
        return sink
    }
}

/// The engine's pending lists (records, zones) as a device saw them when each account change
/// arrived, before the app's own handling.
final class PendingAtAccountChange: Sendable {
    private let seen = Mutex<[(records: Int, zones: Int)]>([])

    init(_ device: TestDevice) {
        device.beforeEvent { event, engine in
            guard case .accountChange = event else { return }
            let records = (try? engine.state.pendingRecordZoneChanges.count) ?? -1
            let zones = (try? engine.state.pendingDatabaseChanges.count) ?? -1
            self.seen.withLock { $0.append((records, zones)) }
        }
    }

    var counts: [(records: Int, zones: Int)] { seen.withLock { $0 } }
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
