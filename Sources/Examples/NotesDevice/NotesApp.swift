import Foundation
import LogSync
import Synchronization

/// The engine's delegate: applies fetched notes to the store, merges conflicts, and builds the
/// records to send. Prints one line per thing that happened to a note (standard output, flushed
/// at once, so a program reading it sees each line as it happens).
final class NotesApp: SyncEngineDelegate {
    let device: String
    let store: NotesStore

    init(device: String, store: NotesStore) {
        self.device = device
        self.store = store
    }

    /// Writes `device: text` as one line to standard output, unbuffered.
    func say(_ text: String) {
        FileHandle.standardOutput.write(Data("\(device): \(text)\n".utf8))
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        do {
            try await handle(event, syncEngine: syncEngine)
        } catch {
            say("cannot save notes.json: \(error)")
        }
    }

    private func handle(_ event: SyncEngine.Event, syncEngine: SyncEngine) async throws {
        switch event {
        case .fetchedDatabaseChanges(let changes):
            if changes.modifications.contains(where: { $0.zoneID == NotesStore.zoneID }) {
                try store.update { $0.zoneCreated = true }
            }
            for deletion in changes.deletions where deletion.zoneID == NotesStore.zoneID {
                // The zone is gone on the server, and every note in it with it.
                try store.update { $0 = NotesStore.Contents(); $0.zoneCreated = false }
                say("the Notes zone was deleted (\(deletion.reason)): no notes left")
            }
        case .fetchedRecordZoneChanges(let changes):
            for record in changes.modifications.map(\.record) where record.recordID.zoneID == NotesStore.zoneID {
                let name = record.recordID.recordName
                let merged = try store.merge(record)
                say("fetched \(describe(name, merged))")
            }
            for deletion in changes.deletions where deletion.recordID.zoneID == NotesStore.zoneID {
                let name = deletion.recordID.recordName
                try store.update { $0.notes[name] = nil; $0.unsaved[name] = nil }
                say("fetched the deletion of \(name)")
            }
        case .sentDatabaseChanges(let sent):
            if sent.savedZones.contains(where: { $0.zoneID == NotesStore.zoneID }) {
                try store.update { $0.zoneCreated = true }
            }
            for failure in sent.failedZoneSaves {
                say("could not create the zone \(failure.zone.zoneID.zoneName): \(failure.error.code)")
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords {
                let name = record.recordID.recordName
                try store.update { contents in
                    // Saved: an edited field whose text the server now holds is no longer unsaved.
                    let saved = record.stringFields
                    let local = contents.notes[name] ?? [:]
                    contents.unsaved[name] = contents.unsaved[name]?.filter { saved[$0] != local[$0] }
                    if contents.unsaved[name]?.isEmpty == true { contents.unsaved[name] = nil }
                }
                say("saved \(describe(name, store.note(name) ?? [:]))")
            }
            for id in sent.deletedRecordIDs { say("deleted \(id.recordName) on the server") }
            for failure in sent.failedRecordSaves {
                try await failed(failure, syncEngine: syncEngine)
            }
            for (id, error) in sent.failedRecordDeletes {
                say("could not delete \(id.recordName): \(error.code) (\(error.message))")
            }
        default:
            break
        }
    }

    /// A save the server refused: a conflict is merged and sent again (F53); a missing zone is
    /// created and the save sent again; anything else is reported.
    private func failed(_ failure: SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave, syncEngine: SyncEngine) async throws {
        let name = failure.record.recordID.recordName
        switch failure.error.code {
        case .serverRecordChanged:
            // Another device saved the note first. Keep its fields, put this device's unsaved
            // edits on top, and send that on the server's change tag.
            guard let server = failure.error.serverRecord else { fallthrough }
            let merged = try store.merge(server)
            say("conflict on \(name): another device saved it first; merged into the server's copy: \(describe(name, merged))")
            try syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(failure.record.recordID)])
        case .zoneNotFound, .userDeletedZone:
            say("the Notes zone is missing on the server: creating it and saving \(name) again")
            try syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: NotesStore.zoneID))])
            try syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(failure.record.recordID)])
        case .unknownItem:
            // Deleted on the server since this device last saw it: the deletion wins.
            try store.update { $0.notes[name] = nil; $0.unsaved[name] = nil }
            say("\(name) was deleted by another device; dropping this device's edit")
        case _ where failure.error.isTransient:
            break  // still pending: the engine sends it again (the command says so)
        default:
            say("could not save \(name): \(failure.error.code) (\(failure.error.message))")
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = ((try? syncEngine.state.pendingRecordZoneChanges) ?? []).filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            guard let fields = self.store.note(id.recordName) else { return nil }
            // The last record the server is known to hold (its change tag), with the fields
            // that differ from it.
            let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id)
            var record = known?.systemFieldsCopy() ?? Record(recordType: "Note", recordID: id)
            for (key, text) in fields where known?[key] != .string(text) { record[key] = .string(text) }
            return record
        }
    }
}

/// `groceries {body: "milk", title: "Groceries"}`.
func describe(_ name: String, _ fields: [String: String]) -> String {
    name + " {" + fields.sorted { $0.key < $1.key }.map { "\($0.key): \"\($0.value)\"" }.joined(separator: ", ") + "}"
}
