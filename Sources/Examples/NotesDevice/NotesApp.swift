import Foundation
import LogSync
import Synchronization

/// The delegate of one of the device's engines: applies fetched notes to the store, merges
/// conflicts, and builds the records to send. Prints one line per thing that happened to a note
/// (standard output, flushed at once, so a program reading it sees each line as it happens).
///
/// A device runs two engines, as a CloudKit app does: one on the private database (the user's
/// own Notes zone and its share) and one on the shared database (the Notes zones other users
/// share with this user, each zone ID carrying its owner's user record name). Each has a
/// `NotesApp` of its `scope`; both keep their notes in the same store.
final class NotesApp: SyncEngineDelegate {
    let device: String
    let store: NotesStore
    /// The database this delegate's engine syncs: `.private` or `.shared`.
    let scope: DatabaseScope
    /// The edits the server refused for good in this run (the note's label and why), which the
    /// command reports as its failure.
    let refusals = Mutex<[String]>([])

    init(device: String, store: NotesStore, scope: DatabaseScope = .private) {
        self.device = device
        self.store = store
        self.scope = scope
    }

    /// What the device's engines both report (an account change) and is said once.
    private static let saidOnce = Mutex<Set<String>>([])

    /// ``say(_:)``, unless either of the device's apps said `text` already.
    func sayOnce(_ text: String) {
        if Self.saidOnce.withLock({ $0.insert(text).inserted }) { say(text) }
    }

    /// Writes `device: text` as one line to standard output, unbuffered.
    func say(_ text: String) {
        FileHandle.standardOutput.write(Data("\(device): \(text)\n".utf8))
    }

    /// Whether a zone is one this delegate's engine keeps notes of: the user's own Notes zone
    /// (private), or another user's Notes zone (shared).
    func keeps(_ zoneID: RecordZone.ID) -> Bool {
        scope == .private ? zoneID == NotesStore.zoneID : NotesStore.isNotesZone(zoneID) && zoneID != NotesStore.zoneID
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
            // Deletions first: a zone both deleted and modified was deleted, then created again
            // (a participant removed and invited back, the owner's zone deleted and re-created).
            // Its old notes go, and the zone stays for the notes fetched next.
            for deletion in changes.deletions where keeps(deletion.zoneID) {
                if scope == .private {
                    // The zone is gone on the server, and every note in it with it, and its share.
                    try store.update {
                        $0.notes = [:]
                        $0.unsaved = [:]
                        $0.share = nil
                        $0.zoneCreated = false
                    }
                    say("the Notes zone was deleted (\(deletion.reason)): no notes left")
                } else if changes.modifications.contains(where: { $0.zoneID == deletion.zoneID }) {
                    // Removed, then invited back and accepted again: the old notes go, the
                    // acceptance (owner, permission) stays, and the notes come back with the fetch.
                    let owner = store.ownerLabel(deletion.zoneID.ownerName)
                    try store.update {
                        $0.shared?[deletion.zoneID.ownerName]?.notes = [:]
                        $0.shared?[deletion.zoneID.ownerName]?.unsaved = [:]
                    }
                    say(
                        "\(owner) shares Notes with this user again (zone \(deletion.reason) meanwhile): fetching its notes anew"
                    )
                } else {
                    // Removed from the share, the share deleted, or the owner's zone deleted (F124).
                    let owner = store.ownerLabel(deletion.zoneID.ownerName)
                    try store.update { $0.shared?[deletion.zoneID.ownerName] = nil }
                    say(
                        "\(owner) no longer shares Notes with this user (zone \(deletion.reason)): its notes are gone from this device"
                    )
                }
            }
            for zoneID in changes.modifications.map(\.zoneID) where keeps(zoneID) {
                if scope == .private {
                    try store.update { $0.zoneCreated = true }
                } else if try store.update({ contents in
                    guard contents.shared?[zoneID.ownerName] == nil else { return false }
                    contents.shared = (contents.shared ?? [:]).merging([zoneID.ownerName: .init()]) { $1 }
                    return true
                }) {
                    say("\(store.ownerLabel(zoneID.ownerName)) shares Notes with this user")
                }
            }
        case .fetchedRecordZoneChanges(let changes):
            for record in changes.modifications.map(\.record) where keeps(record.recordID.zoneID) {
                if record.recordType == Share.recordType {
                    try fetched(share: record)
                } else if let merged = try store.merge(record) {
                    say("fetched \(describe(store.label(record.recordID), merged))")
                }
            }
            for deletion in changes.deletions where keeps(deletion.recordID.zoneID) {
                let id = deletion.recordID
                if deletion.recordType == Share.recordType {
                    guard scope == .private else { continue }
                    try store.update { $0.share = nil }
                    say("the share of Notes was deleted: no other user sees these notes now")
                } else {
                    try store.update(zone: id.zoneID) {
                        $0.notes[id.recordName] = nil
                        $0.unsaved[id.recordName] = nil
                    }
                    say("fetched the deletion of \(store.label(id))")
                }
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
                if record.recordID == NotesStore.shareID {
                    try saved(share: record)
                    continue
                }
                let id = record.recordID
                let name = id.recordName
                try store.update(zone: id.zoneID) { notebook in
                    // Saved: an edited field whose text the server now holds is no longer unsaved.
                    let saved = record.noteFields
                    let local = notebook.notes[name] ?? [:]
                    notebook.unsaved[name] = notebook.unsaved[name]?.filter { saved[$0] != local[$0] }
                    if notebook.unsaved[name]?.isEmpty == true { notebook.unsaved[name] = nil }
                }
                say("saved \(describe(store.label(id), store.note(id) ?? [:]))")
            }
            for id in sent.deletedRecordIDs {
                if id == NotesStore.shareID {
                    say("deleted the share of Notes: no other user sees these notes now")
                } else {
                    say("deleted \(store.label(id)) on the server")
                }
            }
            for failure in sent.failedRecordSaves {
                try await failed(failure, syncEngine: syncEngine)
            }
            for (id, error) in sent.failedRecordDeletes {
                try failedDelete(id, error, syncEngine: syncEngine)
            }
        case .accountChange(let change):
            // Whichever engine notices first says it. The notes stay on the device; they sync
            // again once the same user signs in.
            switch change.changeType {
            case .signOut:
                sayOnce("signed out: the server no longer accepts this device's session; `notes-device sign-in` again")
            case .signIn(let user):
                sayOnce("signed in as \(user.recordName)")
            case .switchAccounts(_, let user):
                sayOnce("another user signed in (\(user.recordName))")
            }
        default:
            break
        }
    }

    /// A save the server refused: a conflict is merged and sent again (F53); a missing zone is
    /// created and the save sent again; an edit the user may not make (a read-only share, F121)
    /// is undone; anything else is reported.
    private func failed(
        _ failure: SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave, syncEngine: SyncEngine
    ) async throws {
        let id = failure.record.recordID
        if id == NotesStore.shareID { return try failed(share: failure, syncEngine: syncEngine) }
        let name = id.recordName
        let label = store.label(id)
        switch failure.error.code {
        case .serverRecordChanged:
            // Another device (or user) saved the note first. Keep its fields, put this device's
            // unsaved edits on top, and send that on the server's change tag.
            guard let server = failure.error.serverRecord, let merged = try store.merge(server) else { fallthrough }
            say(
                "conflict on \(label): another device saved it first; merged into the server's copy: \(describe(label, merged))"
            )
            try syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
        case .zoneNotFound, .userDeletedZone:
            if scope == .private {
                say("the Notes zone is missing on the server: creating it and saving \(name) again")
                try syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: NotesStore.zoneID))])
                try syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            } else {
                // The zone is no longer shared with this user (F124): the next fetch removes it.
                try store.update(zone: id.zoneID) { $0.unsaved[name] = nil }
                refuse(
                    label,
                    "\(store.ownerLabel(id.zoneID.ownerName)) no longer shares Notes with this user (\(failure.error.code))"
                )
            }
        case .permissionFailure:
            try undoReadOnly(id, syncEngine: syncEngine)
        case .unknownItem:
            // Deleted on the server since this device last saw it: the deletion wins.
            try store.update(zone: id.zoneID) {
                $0.notes[name] = nil
                $0.unsaved[name] = nil
            }
            say("\(label) was deleted by another device; dropping this device's edit")
        case _ where failure.error.isTransient:
            break  // still pending: the engine sends it again (the command says so)
        default:
            say("could not save \(label): \(failure.error.code) (\(failure.error.message))")
        }
    }

    /// A deletion the server refused.
    private func failedDelete(_ id: Record.ID, _ error: SyncError, syncEngine: SyncEngine) throws {
        if error.code == .permissionFailure, id != NotesStore.shareID {
            try undoReadOnly(id, deletion: true, syncEngine: syncEngine)
        } else {
            say("could not delete \(store.label(id)): \(error.code) (\(error.message))")
        }
    }

    /// An edit or deletion refused because the owner shares the zone read-only (F121): the
    /// server keeps its copy of the note, and so does the device (its last known server record),
    /// dropping this device's edits.
    private func undoReadOnly(_ id: Record.ID, deletion: Bool = false, syncEngine: SyncEngine) throws {
        let known = try syncEngine.deviceLog.lastKnownServerRecord(for: id)
        try store.update(zone: id.zoneID) { notebook in
            notebook.unsaved[id.recordName] = nil
            notebook.notes[id.recordName] = known?.noteFields
        }
        let label = store.label(id)
        refuse(
            label, "\(store.ownerLabel(id.zoneID.ownerName)) shares Notes with this user read-only (permissionFailure)",
            deletion: deletion)
        say("\(describe(label, store.note(id) ?? [:])) is back to the server's copy")
    }

    /// Reports an edit the server refused for good, and keeps it for the command's status.
    private func refuse(_ label: String, _ why: String, deletion: Bool = false) {
        say("could not \(deletion ? "delete" : "save") \(label): \(why)")
        refusals.withLock { $0.append("\(label): \(why)") }
    }

    // MARK: The share of the user's Notes zone

    /// The share's participants but the owner, as one phrase.
    private func participants(_ share: Share) -> [String: String] {
        Dictionary(
            share.participants.filter { $0.role != .owner }.map { ($0.label, $0.standing) }, uniquingKeysWith: { $1 })
    }

    private func phrase(_ participants: [String: String]) -> String {
        participants.isEmpty
            ? "nobody yet"
            : participants.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    /// The share as another device of the user saved it, or as the server changed it (a
    /// participant accepted or left), or, in a shared zone, the owner's share: who owns it.
    private func fetched(share record: Record) throws {
        let share = try Share(record: record)
        guard scope == .private else {
            if let email = share.owner?.userIdentity.emailAddress {
                try store.update { $0.shared?[record.recordID.zoneID.ownerName]?.owner = email }
            }
            return
        }
        let now = participants(share)
        let changed = try store.update { contents in
            var state = contents.share ?? .init()
            defer { contents.share = state }
            guard state.participants != now || state.url != share.url?.absoluteString else { return false }
            state.participants = now
            state.url = share.url?.absoluteString
            return true
        }
        if changed { say("the share of Notes: \(phrase(now))") }
    }

    /// The share saved: its participants as the server holds them, its URL.
    private func saved(share record: Record) throws {
        let share = try Share(record: record)
        let now = participants(share)
        try store.update { contents in
            var state = contents.share ?? .init()
            state.participants = now
            state.url = share.url?.absoluteString
            // A change is saved once the server's share shows it.
            state.unsaved = state.unsaved.filter { who, change in
                let found = share.participants.first { $0.userIdentity.matches(Self.identity(who)) }
                return change == "remove" ? found != nil : found?.permission.spelled != change
            }
            contents.share = state
        }
        say("saved the share of Notes: \(phrase(now))")
        if let url = share.url { say("the share's URL: \(url.absoluteString)") }
    }

    /// A save of the share the server refused: on a conflict the changes made here go again on
    /// the server's copy; otherwise (an unknown address, say) they are dropped, and reported.
    private func failed(
        share failure: SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave, syncEngine: SyncEngine
    ) throws {
        switch failure.error.code {
        case .serverRecordChanged where failure.error.serverRecord != nil:
            try fetched(share: failure.error.serverRecord!)
            say("the share of Notes changed on the server: saving this device's changes on its copy")
            try syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(NotesStore.shareID)])
        case _ where failure.error.isTransient:
            break
        default:
            try store.update { $0.share?.unsaved = [:] }
            refusals.withLock { $0.append("the share of Notes: \(failure.error.code.name) (\(failure.error.message))") }
            say(
                "could not save the share of Notes: \(failure.error.code.name) (\(failure.error.message)); its changes are dropped"
            )
        }
    }

    /// A participant as the command line names them: an e-mail address, or a user record name.
    static func identity(_ who: String) -> UserIdentity {
        who.contains("@") ? UserIdentity(emailAddress: who) : UserIdentity(userRecordName: who)
    }

    /// The share to send: the server's last known copy (or a new zone-wide share) with the
    /// participant changes made here.
    private func shareRecord(known: Record?) -> Record? {
        guard let changes = store.read({ $0.share?.unsaved }) else { return nil }
        var share = known.flatMap { try? Share(record: $0) } ?? Share(recordZoneID: NotesStore.zoneID)
        for (who, change) in changes.sorted(by: { $0.key < $1.key }) {
            if let permission = Share.Participant.Permission(spelled: change) {
                share.addParticipant(Share.Participant(userIdentity: Self.identity(who), permission: permission))
            } else {
                share.removeParticipant(Self.identity(who))
            }
        }
        return share.record
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = (try? syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)) ?? []
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            // The last record the server is known to hold (its change tag).
            let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id)
            if id == NotesStore.shareID { return self.shareRecord(known: known) }
            guard let fields = self.store.note(id) else { return nil }
            // The fields that differ from the server's copy; the attachment is a file, sent as an
            // asset (the engine uploads its content).
            var record = known?.systemFieldsCopy() ?? Record(recordType: "Note", recordID: id)
            for (key, text) in fields {
                if key == Record.attachmentKey {
                    if known?.noteFields[key] != text {
                        record[key] = .asset(Asset(fileURL: URL(fileURLWithPath: text)))
                    }
                } else if known?[key] != .string(text) {
                    record[key] = .string(text)
                }
            }
            return record
        }
    }
}

/// `groceries {body: "milk", title: "Groceries"}`; an attachment as its size and file,
/// `{attachment: 48213 bytes at /…/assets/1f2e…, title: "Trip"}`, or `not fetched`.
func describe(_ name: String, _ fields: [String: String]) -> String {
    name + " {"
        + fields.sorted { $0.key < $1.key }.map { key, value in
            guard key == Record.attachmentKey else { return "\(key): \"\(value)\"" }
            guard value != Record.notFetched,
                let size = (try? FileManager.default.attributesOfItem(atPath: value))?[.size] as? NSNumber
            else { return "\(key): \(value == Record.notFetched ? value : "missing file \(value)")" }
            return "\(key): \(size) bytes at \(value)"
        }.joined(separator: ", ") + "}"
}

extension Record {
    /// The field of a note holding its attachment, an asset.
    static let attachmentKey = "attachment"
    /// What the notes keep for an attachment whose content is not on the device.
    static let notFetched = "not fetched"

    /// A note's fields as the notes store keeps them: each text, and the attachment as the path
    /// of its local file (the engine's cached copy of a fetched one).
    var noteFields: [String: String] {
        var fields = stringFields
        if case .asset(let asset)? = self[Self.attachmentKey] {
            fields[Self.attachmentKey] = asset.fileURL?.path ?? Self.notFetched
        }
        return fields
    }
}
