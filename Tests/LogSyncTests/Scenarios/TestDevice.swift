import Foundation
import LogStore
import LogSyncServer
import Synchronization
import SyncModel
import Testing

@testable import LogSync

/// One device of a scenario: an app's local store of notes, a `SyncEngine` on the device's own
/// log, and a delegate that behaves like Apple's CKSyncEngine sample app.
///
/// The app keeps only its notes' titles; the system fields come from the engine's last known
/// server record (`DeviceLog.lastKnownServerRecord(for:)`), so nothing is archived by hand.
/// On conflict the delegate merges into the server's record with `resolve` (server wins unless
/// set) and re-queues the save when the merge differs from the server; on `zoneNotFound` it
/// re-queues the zone and the save; on `unknownItem` it re-queues the save without system fields.
final class TestDevice: SyncEngineDelegate {
    let name: String
    let directory: URL
    let database: InProcessDatabase
    private let engineBox = Mutex<SyncEngine?>(nil)
    private let store = Mutex(Store())

    struct Store {
        var notes: [Record.ID: String] = [:]
        var events: [SyncEngine.Event] = []
        /// Record IDs whose saves must go without system fields (after `unknownItem`).
        var forgetSystemFields: Set<Record.ID> = []
        var resolve: @Sendable (_ local: String, _ server: String) -> String = { _, server in server }
        var onEvent: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?
    }

    /// The engine; a fresh device has one right away, `restart()` replaces it.
    var engine: SyncEngine { engineBox.withLock { $0! } }

    /// A device of `user` on `server`, its log in `directory/name`.
    init(
        _ name: String, server: SyncServer, user: UserID = "alice", scope: DatabaseScope = .private,
        directory: URL, fetchResultsLimit: Int? = nil
    ) throws {
        self.name = name
        self.directory = directory.appendingPathComponent(name, isDirectory: true)
        self.database = server.database(for: user, scope: scope, device: DeviceID(name))
        try startEngine(fetchResultsLimit: fetchResultsLimit)
    }

    /// Opens the engine on the device's log (again).
    func startEngine(fetchResultsLimit: Int? = nil) throws {
        let log = try DeviceLog(
            directory: directory,
            options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20))
        var configuration = SyncEngine.Configuration(database: database, deviceLog: log, delegate: self)
        configuration.automaticallySync = false
        configuration.fetchResultsLimit = fetchResultsLimit
        let engine = try SyncEngine(configuration)
        engineBox.withLock { $0 = engine }
    }

    // MARK: What the user does

    /// Creates (or queues) a zone.
    func createZone(_ zoneID: RecordZone.ID) throws {
        try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zoneID))])
    }

    /// Deletes a zone and the notes in it.
    func deleteZone(_ zoneID: RecordZone.ID) throws {
        store.withLock { store in store.notes = store.notes.filter { $0.key.zoneID != zoneID } }
        try engine.state.add(pendingDatabaseChanges: [.deleteZone(zoneID)])
    }

    /// Writes a note and queues its save.
    func write(_ id: Record.ID, _ title: String) throws {
        store.withLock { $0.notes[id] = title }
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    /// Writes several notes and queues their saves, in this order, with one append.
    func write(_ notes: [(Record.ID, String)]) throws {
        store.withLock { store in for (id, title) in notes { store.notes[id] = title } }
        try engine.state.add(pendingRecordZoneChanges: notes.map { .saveRecord($0.0) })
    }

    /// Deletes a note and queues its deletion.
    func delete(_ id: Record.ID) throws {
        _ = store.withLock { $0.notes.removeValue(forKey: id) }
        try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(id)])
    }

    /// How conflicts are merged: `(local, server) -> merged`.
    func resolveConflicts(with resolve: @escaping @Sendable (_ local: String, _ server: String) -> String) {
        store.withLock { $0.resolve = resolve }
    }

    /// Runs `body` inside `handleEvent`, after the device's own handling.
    func onEvent(_ body: @escaping @Sendable (SyncEngine.Event, SyncEngine) async -> Void) {
        store.withLock { $0.onEvent = body }
    }

    /// Sends, then fetches.
    func sync() async throws {
        try await engine.sendChanges()
        try await engine.fetchChanges()
    }

    // MARK: What the test reads

    /// The title of a note, or `nil`.
    func title(_ id: Record.ID) -> String? { store.withLock { $0.notes[id] } }

    /// Every note.
    var notes: [Record.ID: String] { store.withLock { $0.notes } }

    /// Every event delivered so far, in order.
    var events: [SyncEngine.Event] { store.withLock { $0.events } }

    /// The events delivered so far without `stateUpdate`s.
    var syncEvents: [SyncEngine.Event] { events.filter { $0.kind != .stateUpdate } }

    /// Forgets the events recorded so far.
    func clearEvents() { store.withLock { $0.events.removeAll() } }

    // MARK: SyncEngineDelegate

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        let onEvent = store.withLock { store in
            store.events.append(event)
            return store.onEvent
        }
        switch event {
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
        case .sentRecordZoneChanges(let sent):
            var requeue: [SyncEngine.PendingRecordZoneChange] = []
            var zones: [SyncEngine.PendingDatabaseChange] = []
            for failure in sent.failedRecordSaves {
                let id = failure.record.recordID
                switch failure.error.code {
                case .serverRecordChanged:
                    guard let server = failure.error.serverRecord else { break }
                    let serverTitle = server["title"]?.stringValue ?? ""
                    let merged: String? = store.withLock { store in
                        guard let local = store.notes[id] else { return nil }
                        let merged = store.resolve(local, serverTitle)
                        store.notes[id] = merged
                        return merged
                    }
                    if let merged, merged != serverTitle { requeue.append(.saveRecord(id)) }
                case .zoneNotFound:
                    zones.append(.saveZone(RecordZone(zoneID: id.zoneID)))
                    requeue.append(.saveRecord(id))
                case .unknownItem:
                    store.withLock { _ = $0.forgetSystemFields.insert(id) }
                    requeue.append(.saveRecord(id))
                default:
                    break
                }
            }
            if !zones.isEmpty { try? syncEngine.state.add(pendingDatabaseChanges: zones) }
            if !requeue.isEmpty { try? syncEngine.state.add(pendingRecordZoneChanges: requeue) }
        default:
            break
        }
        await onEvent?(event, syncEngine)
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = ((try? syncEngine.state.pendingRecordZoneChanges) ?? []).filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in self.record(for: id, syncEngine) }
    }

    /// The record to send for a note: its title on the last known server record's system fields
    /// (none after `unknownItem`), or `nil` if the note is gone.
    private func record(for id: Record.ID, _ syncEngine: SyncEngine) -> Record? {
        let (title, fresh) = store.withLock { store in (store.notes[id], store.forgetSystemFields.remove(id) != nil) }
        guard let title else { return nil }
        var record: Record
        if !fresh, let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id) {
            record = known.systemFieldsCopy()
        } else {
            record = Record(recordType: "Note", recordID: id)
        }
        record["title"] = .string(title)
        return record
    }
}

/// A server for one scenario, in `directory/server`, with unflushed commits.
func makeServer(_ directory: URL, maxChangesPerPage: Int = 400) throws -> SyncServer {
    try SyncServer(.init(
        directory: directory.appendingPathComponent("server"), durability: .fast, maxChangesPerPage: maxChangesPerPage))
}

extension RecordValue {
    /// The string, if the value is one.
    var stringValue: String? {
        if case .string(let value) = self { value } else { nil }
    }
}
