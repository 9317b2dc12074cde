import Foundation
import LogSync
import LogSyncSQLite
import Synchronization

/// What the device says about its notes: one line per thing that happened to a note (standard
/// output, flushed at once, so a program reading it sees each line as it happens).
///
/// Nothing here syncs: the store has applied each fetched row, settled each conflict (field by
/// field, F53) and put back each row the server refused (a read-only share, F121) before its
/// engine's event reaches ``handle(_:scope:)``, which reads the rows as they now are and says
/// what happened to them.
final class NotesApp: Sendable {
    let device: String
    let store: NotesStore
    /// The changes the server refused for good in this run (the note's label and why), which
    /// the command reports as its failure.
    let refusals = Mutex<[String]>([])
    /// What the device's two engines both report (an account change) and is said once.
    private let saidOnce = Mutex<Set<String>>([])

    init(device: String, store: NotesStore) {
        self.device = device
        self.store = store
        store.database.addEventObserver { [self] event, scope in handle(event, scope: scope) }
    }

    /// Writes `device: text` as one line to standard output, unbuffered.
    func say(_ text: String) {
        FileHandle.standardOutput.write(Data("\(device): \(text)\n".utf8))
    }

    private func sayOnce(_ text: String) {
        if saidOnce.withLock({ $0.insert(text).inserted }) { say(text) }
    }

    /// The primary key of the note a record is, if it is one.
    private func noteKey(_ id: SyncModel.Record.ID) -> String? {
        store.database.row(of: id).flatMap { $0.table == "notes" ? $0.primaryKey : nil }
    }

    /// Whether a record is the share of a folder.
    private func isShare(_ id: SyncModel.Record.ID) -> Bool { store.database.isShare(id) }

    private func isNotes(_ zoneID: RecordZone.ID) -> Bool { zoneID.zoneName == "Notes" }

    func handle(_ event: SyncEngine.Event, scope: DatabaseScope) {
        switch event {
        case .fetchedDatabaseChanges(let changes):
            for deletion in changes.deletions where isNotes(deletion.zoneID) {
                let ownerName = deletion.zoneID.ownerName
                if scope == .private {
                    try? store.setValue(nil, "share")
                    say("the Notes zone was deleted (\(deletion.reason)): no notes left")
                } else if changes.modifications.contains(where: { $0.zoneID == deletion.zoneID }) {
                    // Removed, then invited back and accepted again: the old notes went, the
                    // acceptance (owner, permission) stays, and the notes come back with the fetch.
                    say(
                        "\(store.ownerLabel(ownerName)) shares Notes with this user again (zone \(deletion.reason) meanwhile): fetching its notes anew"
                    )
                } else {
                    // Removed from the share, the share deleted, or the owner's zone deleted (F124).
                    say(
                        "\(store.ownerLabel(ownerName)) no longer shares Notes with this user (zone \(deletion.reason)): its notes are gone from this device"
                    )
                    try? store.forgetShared(ownerName: ownerName)
                }
            }
            for zoneID in changes.modifications.map(\.zoneID) where scope == .shared && isNotes(zoneID) {
                guard (try? store.isShared(ownerName: zoneID.ownerName)) == false else { continue }
                try? store.keepShared(ownerName: zoneID.ownerName, email: nil, permission: nil)
                say("\(store.ownerLabel(zoneID.ownerName)) shares Notes with this user")
            }
        case .fetchedRecordZoneChanges(let changes):
            for record in changes.modifications.map(\.record) where isNotes(record.recordID.zoneID) {
                if record.recordType == Share.recordType {
                    fetched(share: record, scope: scope)
                } else if let key = noteKey(record.recordID), let fields = store.note(key) {
                    say("fetched \(describe(store.label(key), fields))")
                }
            }
            for deletion in changes.deletions where isNotes(deletion.recordID.zoneID) {
                if deletion.recordType == Share.recordType {
                    guard scope == .private else { continue }
                    try? store.setValue(nil, "share")
                    say("the share of Notes was deleted: no other user sees these notes now")
                } else if let key = noteKey(deletion.recordID) {
                    say("fetched the deletion of \(store.label(key))")
                }
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords {
                if record.recordType == Share.recordType {
                    saved(share: record)
                } else if let key = noteKey(record.recordID) {
                    say("saved \(describe(store.label(key), store.note(key) ?? [:]))")
                }
            }
            for id in sent.deletedRecordIDs {
                if isShare(id) {
                    try? store.setValue(nil, "share")
                    say("deleted the share of Notes: no other user sees these notes now")
                } else if let key = noteKey(id) {
                    say("deleted \(store.label(key)) on the server")
                }
            }
            for failure in sent.failedRecordSaves { failed(failure, scope: scope) }
            for (id, error) in sent.failedRecordDeletes {
                guard let key = noteKey(id) else { continue }
                if error.code == .permissionFailure {
                    readOnly(key, deletion: true)
                } else if !error.isTransient, error.code != .unknownItem {
                    say("could not delete \(store.label(key)): \(error.code) (\(error.message))")
                }
            }
        case .accountChange(let change):
            // Whichever engine notices first says it. The notes stay on the device; they sync
            // again once the same user signs in.
            switch change.changeType {
            case .signOut:
                sayOnce("signed out: the server no longer accepts this device's session; `notes-device sign-in` again")
            case .signIn(let user):
                try? store.remember(me: user.recordName)
                sayOnce("signed in as \(user.recordName)")
            case .switchAccounts(_, let user):
                sayOnce("another user signed in (\(user.recordName))")
            }
        default:
            break
        }
    }

    /// A save the server refused; the store has already done what there is to do (merged a
    /// conflict and queued the merge, F53; put a read-only row back, F121; queued a missing
    /// zone), so this says what it did.
    private func failed(_ failure: SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave, scope: DatabaseScope) {
        let error = failure.error
        if failure.record.recordType == Share.recordType {
            // On a conflict the store put this device's changes on the server's copy, to send
            // again; otherwise it went back to the server's last copy (or to none).
            guard !error.isTransient else { return }
            if error.code == .serverRecordChanged, error.serverRecord != nil {
                say("the share of Notes changed on the server: saving this device's changes on its copy")
                return
            }
            refusals.withLock { $0.append("the share of Notes: \(error.code.name) (\(error.message))") }
            say("could not save the share of Notes: \(error.code.name) (\(error.message)); its changes are dropped")
            return
        }
        guard let key = noteKey(failure.record.recordID) else {
            if !error.isTransient, error.code != .serverRecordChanged {
                say("could not save the folder of Notes: \(error.code) (\(error.message))")
            }
            return
        }
        let label = store.label(key)
        let owner = store.ownerLabel(NotesStore.split(key).owner)
        switch error.code {
        case .serverRecordChanged:
            say(
                "conflict on \(label): another device saved it first; merged into the server's copy: \(describe(label, store.note(key) ?? [:]))"
            )
        case .zoneNotFound, .userDeletedZone:
            if scope == .private {
                say("the Notes zone is missing on the server: creating it and saving \(label) again")
            } else {
                refuse(label, "\(owner) no longer shares Notes with this user (\(error.code))")
            }
        case .permissionFailure:
            readOnly(key)
        case .unknownItem:
            say("\(label) was deleted by another device; dropping this device's edit")
        case _ where error.isTransient:
            break  // still pending: the engine sends it again (the command says so)
        default:
            say("could not save \(label): \(error.code) (\(error.message))")
        }
    }

    /// An edit or deletion refused because the owner shares the zone read-only (F121): the
    /// store put the server's copy back.
    private func readOnly(_ key: String, deletion: Bool = false) {
        let label = store.label(key)
        let owner = store.ownerLabel(NotesStore.split(key).owner)
        refuse(label, "\(owner) shares Notes with this user read-only (permissionFailure)", deletion: deletion)
        say("\(describe(label, store.note(key) ?? [:])) is back to the server's copy")
    }

    /// Reports a change the server refused for good, and keeps it for the command's status.
    private func refuse(_ label: String, _ why: String, deletion: Bool = false) {
        say("could not \(deletion ? "delete" : "save") \(label): \(why)")
        refusals.withLock { $0.append("\(label): \(why)") }
    }

    // MARK: The share of the user's Notes folder

    /// The share as another device of the user saved it, or as the server changed it (a
    /// participant accepted or left); in a shared zone, the owner's share: who owns it.
    private func fetched(share record: SyncModel.Record, scope: DatabaseScope) {
        guard let share = try? Share(record: record) else { return }
        guard scope == .private else {
            let ownerName = record.recordID.zoneID.ownerName
            if let email = share.owner?.userIdentity.emailAddress {
                try? store.keepShared(ownerName: ownerName, email: email, permission: nil)
            }
            return
        }
        let now = share.participantsPhrase
        guard store.value("share") != now else { return }
        try? store.setValue(now, "share")
        say("the share of Notes: \(now)")
    }

    /// The share saved: its participants as the server holds them, its URL.
    private func saved(share record: SyncModel.Record) {
        guard let share = try? Share(record: record) else { return }
        try? store.setValue(share.participantsPhrase, "share")
        say("saved the share of Notes: \(share.participantsPhrase)")
        if let url = share.url { say("the share's URL: \(url.absoluteString)") }
    }
}
