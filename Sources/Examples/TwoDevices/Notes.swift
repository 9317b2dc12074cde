import Foundation
import LogSync
import LogSyncServer
import Synchronization

/// A notes app on one device: its notes (field → text, per note) and the engine's delegate.
final class Notes: SyncEngineDelegate {
    let device: String
    let notes = Mutex<[Record.ID: [String: String]]>([:])
    /// The fields edited here and not yet saved, which a fetched copy must not overwrite.
    let unsaved = Mutex<[Record.ID: Set<String>]>([:])

    init(device: String) { self.device = device }

    /// `two-devices --buggy-merge`: the delegate merges a conflict wrongly, for the walkthrough
    /// of Docs/Debugging.md.
    static let buggyMerge = CommandLine.arguments.contains("--buggy-merge")

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .fetchedRecordZoneChanges(let changes):
            for record in changes.modifications.map(\.record) {
                let mine = unsaved.withLock { $0[record.recordID] } ?? []
                notes.withLock { notes in
                    let local = notes[record.recordID] ?? [:]
                    notes[record.recordID] = record.stringFields.merging(local.filter { mine.contains($0.key) }) { $1 }
                }
                say(device, "fetched", record)
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords {
                unsaved.withLock { $0[record.recordID] = nil }
                say(device, "saved", record)
            }
            for failure in sent.failedRecordSaves where failure.error.code == .serverRecordChanged {
                // Merge into the server's record (its fields and change tag) the keys this device
                // changed, and queue the save again.
                guard var merged = failure.error.serverRecord else { continue }
                for key in failure.record.changedKeys() { merged[key] = failure.record[key] }
                if Self.buggyMerge {
                    // The bug of `--buggy-merge` (Docs/Debugging.md, "Chase a bug"): the whole
                    // local note goes over the server's record, stale fields included, all marked
                    // as edited here.
                    let local = notes.withLock { $0[merged.recordID] } ?? [:]
                    for (key, text) in local { merged[key] = .string(text) }
                    unsaved.withLock { $0[merged.recordID] = Set(local.keys) }
                }
                notes.withLock { $0[merged.recordID] = merged.stringFields }
                say(device, "conflict, merged into the server's record:", merged)
                try? syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(merged.recordID)])
            }
        default:
            break
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = (try? syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)) ?? []
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            guard let fields = self.notes.withLock({ $0[id] }) else { return nil }
            // An edit of the last record the server is known to hold: its system fields, and the
            // fields that differ from it.
            let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id)
            var record = known?.systemFieldsCopy() ?? Record(recordType: "Note", recordID: id)
            for (key, text) in fields where known?[key] != .string(text) { record[key] = .string(text) }
            return record
        }
    }
}

/// A device: the notes app and its engine, whose device log is in `directory/name`.
struct Device {
    let app: Notes
    let engine: SyncEngine

    init(
        _ name: String, server: SyncServer, directory: URL, automatic: Bool = false,
        conditions: any SyncConditionsProvider = AlwaysAvailableConditions()
    ) throws {
        app = Notes(device: name)
        var configuration = SyncEngine.Configuration(
            database: server.database(for: "alice", scope: .private, device: DeviceID(name)),
            logDirectory: directory.appending(path: name), delegate: app)
        configuration.automaticallySync = automatic  // false: sync only when asked
        configuration.conditions = conditions  // the device's network and power
        engine = try SyncEngine(configuration)
    }

    /// Sets one field of a note and queues the note's save.
    func edit(_ id: Record.ID, _ key: String, _ text: String) throws {
        app.notes.withLock { $0[id, default: [:]][key] = text }
        app.unsaved.withLock { _ = $0[id, default: []].insert(key) }
        say(app.device, "sets \(key) to \"\(text)\"")
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }
}
