import Foundation
import LogStore
import LogSync
import LogSyncServer
import Logging
import Synchronization
import SyncModel

/// One device of a ``Simulation``: a notes app with its own `SyncEngine`, device log and
/// account, whose delegate behaves like Apple's CKSyncEngine sample app.
///
/// The app keeps each note's title; system fields come from the engine's last known server
/// record. Its policies, all deterministic:
/// - **Conflicts** (`serverRecordChanged`): the larger title wins. If it is the local one, the
///   save is queued again on the server's record; if it is the server's, the local edit is
///   given up (and counted).
/// - **Fetched changes** never overwrite an edit not yet acknowledged: its pending save goes
///   out on the fetched record's system fields. Nor do they bring back a note whose deletion is
///   pending. A fetched deletion of a zone drops its notes, edits included.
/// - `zoneNotFound` queues the zone and the save again; `unknownItem` queues the save again
///   without system fields.
/// - An account change drops every note and edit of the previous account.
///
/// It also tracks each local edit until the server acknowledges it (in a send's results, a
/// conflict's server record or a fetched record carrying it) or the app gives it up for one of
/// the reasons above: at the end, an edit neither acknowledged nor given up was lost.
public final class SimulatedDevice: SyncEngineDelegate, Sendable {
    /// The device's name: `A`, `B`, …
    public let name: String
    /// The device's account; the simulation switches it between users.
    public let account: SimulatedAccount<UserID>
    let directory: URL
    private let seed: UInt64
    private let fetchResultsLimit: Int?
    private let engineBox = Mutex<SyncEngine?>(nil)
    private let store = Mutex(Store())

    struct Store {
        var notes: [Record.ID: String] = [:]
        /// Edits not acknowledged yet, by record: the title the note had when last edited here.
        var unacknowledged: [Record.ID: String] = [:]
        var forgetSystemFields: Set<Record.ID> = []
        var events: [SyncEngine.Event.Kind] = []
        /// Sent or fetched events, to tell a busy sync round from a quiet one.
        var activity = 0
        var acknowledged = 0
        var conflictsLost = 0
        var conflictsWon = 0
        var droppedWithZone = 0
        var droppedByAccountChange = 0
    }

    init(name: String, directory: URL, account: SimulatedAccount<UserID>, seed: UInt64, fetchResultsLimit: Int?) throws {
        self.name = name
        self.directory = directory
        self.account = account
        self.seed = seed
        self.fetchResultsLimit = fetchResultsLimit
        try startEngine()
    }

    /// The engine now (``restartEngine()`` replaces it).
    public var engine: SyncEngine { engineBox.withLock { $0! } }

    /// Every note, by record.
    public var notes: [Record.ID: String] { store.withLock { $0.notes } }

    /// Edits the server has not acknowledged and the app has not given up, by record.
    public var unacknowledgedEdits: [Record.ID: String] { store.withLock { $0.unacknowledged } }

    /// The kinds of every event delivered, in order.
    package var eventKinds: [SyncEngine.Event.Kind] { store.withLock { $0.events } }

    var activity: Int { store.withLock { $0.activity } }
    var counters: Store { store.withLock { $0 } }

    /// Closes the engine and opens a new one on the same device log, as after the app quits
    /// and launches again (the app's notes are its own store, kept).
    func restartEngine() throws {
        engineBox.withLock { $0 = nil }
        try startEngine()
    }

    private func startEngine() throws {
        let log = try DeviceLog(directory: directory, options: LogEnvironment.Options(durability: .fast, initialMapSize: 8 << 20))
        var configuration = SyncEngine.Configuration(database: account, deviceLog: log, delegate: self)
        configuration.automaticallySync = false
        configuration.randomSeed = seed
        configuration.fetchResultsLimit = fetchResultsLimit
        configuration.logger = Logger(label: "LogSyncTesting.Simulation.\(name)") { _ in SwiftLogNoOpLogHandler() }
        let engine = try SyncEngine(configuration)
        engineBox.withLock { $0 = engine }
    }

    // MARK: What the user does

    /// Writes a note and queues its save.
    func write(_ id: Record.ID, _ title: String) throws {
        store.withLock { store in
            store.notes[id] = title
            store.unacknowledged[id] = title
        }
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    /// Deletes a note and queues its deletion.
    func delete(_ id: Record.ID) throws {
        store.withLock { store in
            store.notes[id] = nil
            store.unacknowledged[id] = nil
        }
        try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(id)])
    }

    /// Queues a zone's save.
    func createZone(_ zoneID: RecordZone.ID) throws {
        try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zoneID))])
    }

    /// Deletes a zone with its notes and queues the deletion.
    func deleteZone(_ zoneID: RecordZone.ID) throws {
        store.withLock { store in
            store.notes = store.notes.filter { $0.key.zoneID != zoneID }
            store.unacknowledged = store.unacknowledged.filter { $0.key.zoneID != zoneID }
        }
        try engine.state.add(pendingDatabaseChanges: [.deleteZone(zoneID)])
    }

    // MARK: SyncEngineDelegate

    public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        var requeue: [SyncEngine.PendingRecordZoneChange] = []
        var zones: [SyncEngine.PendingDatabaseChange] = []
        var deleting: Set<Record.ID> = []
        if case .fetchedRecordZoneChanges = event {
            for case .deleteRecord(let id) in (try? syncEngine.state.pendingRecordZoneChanges) ?? [] { deleting.insert(id) }
        }
        store.withLock { store in
            store.events.append(event.kind)
            switch event {
            case .accountChange:
                store.droppedByAccountChange += store.unacknowledged.count
                store.notes = [:]
                store.unacknowledged = [:]
                store.forgetSystemFields = []
            case .fetchedDatabaseChanges(let changes):
                store.activity += 1
                let gone = Set(changes.deletions.map(\.zoneID))
                store.notes = store.notes.filter { !gone.contains($0.key.zoneID) }
                let dropped = store.unacknowledged.filter { gone.contains($0.key.zoneID) }
                store.droppedWithZone += dropped.count
                for id in dropped.keys { store.unacknowledged[id] = nil }
            case .fetchedRecordZoneChanges(let changes):
                store.activity += 1
                // A note deleted here whose deletion is not sent yet stays deleted: the
                // deletion goes out next and wins.
                for modification in changes.modifications where !deleting.contains(modification.record.recordID) {
                    let id = modification.record.recordID
                    let title = Self.title(of: modification.record)
                    if let edit = store.unacknowledged[id] {
                        if edit == title {  // the server has the edit: an earlier answer was lost
                            store.unacknowledged[id] = nil
                            store.acknowledged += 1
                        }
                    } else {
                        store.notes[id] = title
                    }
                }
                for deletion in changes.deletions where store.unacknowledged[deletion.recordID] == nil {
                    store.notes[deletion.recordID] = nil
                }
            case .sentDatabaseChanges:
                store.activity += 1
            case .sentRecordZoneChanges(let sent):
                store.activity += 1
                for record in sent.savedRecords where store.unacknowledged[record.recordID] == Self.title(of: record) {
                    store.unacknowledged[record.recordID] = nil
                    store.acknowledged += 1
                }
                for failure in sent.failedRecordSaves {
                    let id = failure.record.recordID
                    switch failure.error.code {
                    case .serverRecordChanged:
                        guard let server = failure.error.serverRecord else { break }
                        let serverTitle = Self.title(of: server)
                        guard let edit = store.unacknowledged[id] else {
                            if store.notes[id] != nil { store.notes[id] = serverTitle }
                            break
                        }
                        if edit == serverTitle {  // an earlier send of this edit did reach the server
                            store.unacknowledged[id] = nil
                            store.acknowledged += 1
                        } else if edit > serverTitle {
                            store.conflictsWon += 1
                            requeue.append(.saveRecord(id))
                        } else {
                            store.conflictsLost += 1
                            store.unacknowledged[id] = nil
                            store.notes[id] = serverTitle
                        }
                    case .zoneNotFound, .userDeletedZone:
                        if store.notes[id] != nil {
                            zones.append(.saveZone(RecordZone(zoneID: id.zoneID)))
                            requeue.append(.saveRecord(id))
                        }
                    case .unknownItem:
                        if store.notes[id] != nil {
                            store.forgetSystemFields.insert(id)
                            requeue.append(.saveRecord(id))
                        }
                    default:
                        break
                    }
                }
            default:
                break
            }
        }
        if !zones.isEmpty { try? syncEngine.state.add(pendingDatabaseChanges: zones) }
        if !requeue.isEmpty { try? syncEngine.state.add(pendingRecordZoneChanges: requeue) }
    }

    public func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = ((try? syncEngine.state.pendingRecordZoneChanges) ?? []).filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in self.record(for: id, syncEngine) }
    }

    /// The record to send for a note: its title on the last known server record's system
    /// fields (none after `unknownItem`), or `nil` if the note is gone (its save is then
    /// removed from the pending list).
    private func record(for id: Record.ID, _ syncEngine: SyncEngine) -> Record? {
        let (title, fresh) = store.withLock { store in (store.notes[id], store.forgetSystemFields.remove(id) != nil) }
        guard let title else {
            // As in Apple's sample: a pending save of a note that no longer exists is dropped.
            try? syncEngine.state.remove(pendingRecordZoneChanges: [.saveRecord(id)])
            return nil
        }
        var record: Record
        if !fresh, let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id) {
            record = known.systemFieldsCopy()
        } else {
            record = Record(recordType: "Note", recordID: id)
        }
        record["title"] = .string(title)
        return record
    }

    /// A note's title: the record's `title` string, or empty.
    static func title(of record: Record) -> String {
        if case .string(let title)? = record["title"] { title } else { "" }
    }
}
