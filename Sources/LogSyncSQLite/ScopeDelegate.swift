import Foundation
import GRDB
import LogSync
import Logging

/// The delegate of one of the store's engines (private or shared).
final class ScopeDelegate: SyncEngineDelegate, @unchecked Sendable {
    let scope: DatabaseScope
    /// Set once, before the engine starts.
    weak var store: SyncedDatabase?

    init(scope: DatabaseScope) { self.scope = scope }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        guard let store else { return }
        do {
            try store.handle(event, shared: scope == .shared, engine: syncEngine)
        } catch {
            syncEngine.logIssue("the synced database could not take \(event.kind): \(error)")
        }
        store.notify(event, scope: scope)
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        guard let store else { return nil }
        return try? await SyncEngine.RecordZoneChangeBatch(state: syncEngine.state, scope: context.options.scope) {
            id in
            store.recordToSend(id, engine: syncEngine)
        }
    }
}

extension SyncEngine {
    /// Logs what the store could not do with an event (its events cannot throw).
    func logIssue(_ message: String) {
        storeLogger.error("\(message)")
    }
}

let storeLogger = Logger(label: "LogSync.SyncedDatabase")

extension SyncedDatabase {
    func handle(_ event: SyncEngine.Event, shared: Bool, engine: SyncEngine) throws {
        switch event {
        case .fetchedRecordZoneChanges(let changes):
            let (requeue, drop, rows) = try apply(changes, shared: shared)
            try engine.state.remove(pendingRecordZoneChanges: drop.map { .saveRecord($0) })
            if !requeue.isEmpty { try handOff() }  // the merged rows, from the outbox
            if !rows.isEmpty {
                notify(
                    AppliedChanges(
                        reason: .serverChange, rows: rows, initialSync: try isInitialFetch(changes, shared),
                        shared: shared))
            }
        case .willFetchRecordZoneChanges(let will):
            // A zone never fetched to its end is in its first fetch until it is.
            try writer.write { db in
                try db.execute(
                    sql: "INSERT OR IGNORE INTO logsync_fetched(zone, owner, shared, done) VALUES (?, ?, ?, 0)",
                    arguments: [will.zoneID.zoneName, will.zoneID.ownerName, shared])
            }
        case .didFetchRecordZoneChanges(let did) where did.error == nil:
            try writer.write { db in
                try db.execute(
                    sql: "UPDATE logsync_fetched SET done = 1 WHERE zone = ? AND owner = ? AND shared = ?",
                    arguments: [did.zoneID.zoneName, did.zoneID.ownerName, shared])
            }
        case .fetchedDatabaseChanges(let changes):
            var rows: [String: Set<String>] = [:]
            try applying { db in
                for deletion in changes.deletions {
                    rows.merge(try deleteZone(deletion.zoneID, shared: shared, db)) { $0.union($1) }
                }
            }
            if !rows.isEmpty { notify(AppliedChanges(reason: .serverChange, rows: rows, shared: shared)) }
        case .sentRecordZoneChanges(let sent):
            try saved(sent.savedRecords, shared: shared)
            for failure in sent.failedRecordSaves { try failed(failure, shared: shared, engine: engine) }
            for (id, error) in sent.failedRecordDeletes { try failedDelete(id, error, shared: shared, engine: engine) }
        case .sentDatabaseChanges(let sent):
            for failure in sent.failedZoneSaves {
                engine.logIssue("the zone \(failure.zone.zoneID.zoneName) could not be created: \(failure.error)")
            }
        case .accountChange(let change):
            // The engine forgot its change tokens (F106): the next fetch is the new account's first.
            try writer.write {
                try $0.execute(sql: "DELETE FROM logsync_fetched WHERE shared = ?", arguments: [shared])
            }
            notify(AppliedChanges(reason: .accountChange, rows: [:], accountChange: change.changeType, shared: shared))
        default:
            break
        }
    }

    /// Whether a fetched page belongs to the first fetch of its zone.
    private func isInitialFetch(_ changes: SyncEngine.Event.FetchedRecordZoneChanges, _ shared: Bool) throws -> Bool {
        let zones = Set(changes.modifications.map(\.record.recordID.zoneID) + changes.deletions.map(\.recordID.zoneID))
        return try writer.read { db in
            try zones.contains { zone in
                try Bool.fetchOne(
                    db, sql: "SELECT done = 0 FROM logsync_fetched WHERE zone = ? AND owner = ? AND shared = ?",
                    arguments: [zone.zoneName, zone.ownerName, shared]) ?? false
            }
        }
    }

    /// Deletes every row of a zone the server deleted (or that is no longer shared with the
    /// user); returns them.
    private func deleteZone(_ zoneID: RecordZone.ID, shared: Bool, _ db: Database) throws -> [String: Set<String>] {
        var rows: [String: Set<String>] = [:]
        let inZone = try Row.fetchAll(
            db, sql: "SELECT tbl, pk FROM logsync_rows WHERE zone = ? AND owner = ? AND shared = ?",
            arguments: [zoneID.zoneName, zoneID.ownerName, shared])
        for table in order.reversed() {
            guard let schema = schemas[table] else { continue }
            for row in inZone where row["tbl"] as String == table {
                let key: DatabaseValue = row["pk"]
                try deleteRow(schema, key, db)
                if let text = TableSchema.text(key) { rows[table, default: []].insert(text) }
            }
        }
        for table in ["logsync_kept", "logsync_shares", "logsync_fetched"] {
            try db.execute(
                sql: "DELETE FROM \(table) WHERE zone = ? AND owner = ? AND shared = ?",
                arguments: [zoneID.zoneName, zoneID.ownerName, shared])
        }
        if !shared { try db.execute(sql: "DELETE FROM logsync_zones WHERE zone = ?", arguments: [zoneID.zoneName]) }
        return rows
    }

    // MARK: Sending

    /// The record to save for a pending save: the engine's last known server record (system
    /// fields and change tag) with the columns that differ from it or are unsaved; `nil` (and
    /// the save dropped) for a row gone since.
    func recordToSend(_ id: Record.ID, engine: SyncEngine) -> Record? {
        do {
            // Only a share's name (`shareID(rootedAt:)`) can name a kept share: every other
            // record is sent without a read of its own for the share.
            if isShare(id), let share = try writer.read({ db in try shareRecord(id, db) }) {
                return share
            }
            guard let (keyText, table) = TableSchema.split(id.recordName), let schema = schemas[table] else {
                return nil
            }
            let key = schema.keyValue(keyText)
            let known = try engine.deviceLog.lastKnownServerRecord(for: id)
            // Without a transaction of its own: a queue's accesses take turns anyway, and a
            // transaction per record (GRDB compiling BEGIN, COMMIT and query_only each time) was
            // a tenth of a send's time. Its two reads seeing two states of a pool's file at
            // worst send a column that was already saved.
            let record: Record? = try writer.unsafeRead { db in
                guard let row = try schema.row(key, db) else { return nil }
                let unsaved = Set(
                    try String.fetchAll(
                        db.cachedStatement(sql: "SELECT col FROM logsync_unsaved WHERE tbl = ? AND pk = ?"),
                        arguments: [table, key]))
                var record =
                    known?.systemFieldsCopy() ?? Record(recordType: schema.declaration.recordType, recordID: id)
                func zone(_ target: String, _ key: String) -> RecordZone.ID? {
                    guard let targetSchema = schemas[target] else { return nil }
                    return (try? place(of: target, targetSchema.keyValue(key), db))?.zoneID
                }
                for (column, position) in zip(schema.columns, schema.positions) {
                    let value: DatabaseValue = row[position]
                    if let known, !unsaved.contains(column.name), schema.same(column, value, known[column.name]) {
                        continue
                    }
                    let field = try schema.field(column, value, referenceZone: zone, assets: assetDirectory)
                    if known == nil, field == nil { continue }
                    record[column.name] = field
                    if column.name == schema.declaration.parent {
                        let parent: Record.Reference? =
                            if case .reference(let reference)? = field { reference } else { nil }
                        if known?.parent?.recordID != parent?.recordID { record.parent = parent }
                    }
                }
                return record
            }
            if record == nil { try engine.state.remove(pendingRecordZoneChanges: [.saveRecord(id)]) }
            return record
        } catch {
            engine.logIssue("the record \(id) could not be read from the synced database: \(error)")
            return nil
        }
    }

    /// The columns the server saved with the value the row still has are no longer unsaved.
    private func saved(_ records: [Record], shared: Bool) throws {
        try writer.write { db in
            for record in records {
                if record.recordType == Share.recordType {
                    try keepShare(record, shared: shared, db)
                    continue
                }
                guard let (keyText, table) = TableSchema.split(record.recordID.recordName), let schema = schemas[table]
                else {
                    continue
                }
                let key = schema.keyValue(keyText)
                let unsaved = Set(
                    try String.fetchAll(
                        db.cachedStatement(sql: "SELECT col FROM logsync_unsaved WHERE tbl = ? AND pk = ?"),
                        arguments: [table, key]))
                guard !unsaved.isEmpty, let row = try schema.row(key, db) else { continue }
                let done = zip(schema.columns, schema.positions).filter { column, position in
                    unsaved.contains(column.name) && schema.same(column, row[position], record[column.name])
                }
                // Usually every unsaved column was saved as it is: one statement for the row.
                if done.count == unsaved.count {
                    try db.cachedExecute("DELETE FROM logsync_unsaved WHERE tbl = ? AND pk = ?", [table, key])
                    continue
                }
                for (column, _) in done {
                    try db.cachedExecute(
                        "DELETE FROM logsync_unsaved WHERE tbl = ? AND pk = ? AND col = ?", [table, key, column.name])
                }
            }
        }
    }

    private func failed(
        _ failure: SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave, shared: Bool, engine: SyncEngine
    ) throws {
        let id = failure.record.recordID
        let error = failure.error
        if failure.record.recordType == Share.recordType, !error.isTransient {
            if error.code == .serverRecordChanged, let server = error.serverRecord,
                let rebased = try rebase(failure.record, on: server, engine: engine)
            {
                // Changed on the server since (a participant accepted, say): this device's
                // changes of the participants go again, on the server's copy.
                try writer.write { db in try keepShare(rebased, shared: shared, db) }
                try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
                return
            }
            try failedShare(id, error, shared: shared, engine: engine)
            try refuse(id, error, deletion: false)
            return
        }
        switch error.code {
        case .serverRecordChanged:
            guard let server = error.serverRecord else { return try refuse(id, error, deletion: false) }
            let applied = try applying { db in try apply(server, shared: shared, db) }
            if case .applied(true) = applied { try handOff() }  // the merged row, from the outbox
            if let (key, table) = TableSchema.split(id.recordName) {
                notify(AppliedChanges(reason: .serverChange, rows: [table: [key]], shared: shared))
            }
        case .zoneNotFound where !shared, .userDeletedZone where !shared:
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: id.zoneID))])
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
        case .unknownItem:
            // Deleted on the server since this device saw it: the deletion wins.
            guard let (key, table) = TableSchema.split(id.recordName), let schema = schemas[table] else { return }
            try applying { db in try deleteRow(schema, schema.keyValue(key), db) }
            notify(AppliedChanges(reason: .serverChange, rows: [table: [key]], shared: shared))
        case .referenceViolation:
            // The parent is not on the server. Sent before the parent (the parent's save still
            // pending): again, after it. Deleted there by another device: the fetch brings the
            // deletion, whose cascade takes this row too (and the server never had it).
            if let parent = failure.record.parent?.recordID,
                try engine.state.pendingRecordZoneChanges.contains(.saveRecord(parent))
            {
                try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            }
        case .permissionFailure:
            // A read-only share: the row goes back to the server's copy.
            try restore(id, engine: engine, shared: shared)
            try refuse(id, error, deletion: false)
        case .quotaExceeded:
            try refuse(id, error, deletion: false)
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            if let (key, table) = TableSchema.split(id.recordName) {
                notify(AppliedChanges(reason: .quotaViolation, rows: [table: [key]], shared: shared))
            }
        case _ where error.isTransient:
            break  // still pending: the engine sends it again
        default:
            try refuse(id, error, deletion: false)
        }
    }

    /// The server's copy of a share with the participant changes made here: those added or
    /// whose permission changed since the last copy the server saved, and those removed.
    private func rebase(_ mine: Record, on server: Record, engine: SyncEngine) throws -> Record? {
        guard let local = try? Share(record: mine), var rebased = try? Share(record: server) else { return nil }
        let before = try engine.deviceLog.lastKnownServerRecord(for: mine.recordID).flatMap { try? Share(record: $0) }
        for participant in local.participants where participant.role != .owner {
            let previous = before?.participants.first { $0.userIdentity.matches(participant.userIdentity) }
            guard previous?.permission != participant.permission else { continue }
            var changed =
                rebased.participants.first { $0.userIdentity.matches(participant.userIdentity) } ?? participant
            changed.permission = participant.permission
            rebased.addParticipant(changed)
        }
        for participant in before?.participants ?? [] where participant.role != .owner {
            if !local.participants.contains(where: { $0.userIdentity.matches(participant.userIdentity) }) {
                rebased.removeParticipant(participant.userIdentity)
            }
        }
        return rebased.record
    }

    /// A share save the server refused for good: the share kept here goes back to the server's
    /// copy (on a conflict, the one the error carries; otherwise the last one it saved), or is
    /// forgotten if it never saved one, so that the refused changes (an unknown participant,
    /// say) are not sent again with the next change of the share.
    private func failedShare(_ id: Record.ID, _ error: SyncError, shared: Bool, engine: SyncEngine) throws {
        let server =
            error.code == .serverRecordChanged
            ? error.serverRecord : try engine.deviceLog.lastKnownServerRecord(for: id)
        try writer.write { db in
            if let server {
                try keepShare(server, shared: shared, db)
            } else {
                try forget(id, in: .shares, db)
            }
        }
    }

    private func failedDelete(_ id: Record.ID, _ error: SyncError, shared: Bool, engine: SyncEngine) throws {
        switch error.code {
        case .unknownItem: break  // already gone
        case .permissionFailure:
            try restore(id, engine: engine, shared: shared)
            try refuse(id, error, deletion: true)
        case _ where error.isTransient: break
        default: try refuse(id, error, deletion: true)
        }
    }

    /// Puts the engine's last known server record back into the row.
    private func restore(_ id: Record.ID, engine: SyncEngine, shared: Bool) throws {
        guard let known = try engine.deviceLog.lastKnownServerRecord(for: id) else { return }
        try applying { db in
            if let (key, table) = TableSchema.split(id.recordName), let schema = schemas[table] {
                try db.execute(
                    sql: "DELETE FROM logsync_unsaved WHERE tbl = ? AND pk = ?",
                    arguments: [table, schema.keyValue(key)])
            }
            _ = try apply(known, shared: shared, db)
        }
    }

    /// Keeps a refusal for ``refusals()``.
    private func refuse(_ id: Record.ID, _ error: SyncError, deletion: Bool) throws {
        // A share's refusal names its root row, and says it was the share.
        let share = isShare(id)
        let name = share ? String(id.recordName.dropLast(Self.shareSuffix.count)) : id.recordName
        let (key, table) = TableSchema.split(name) ?? (name, "")
        try writer.write { db in
            try db.execute(
                sql: "INSERT INTO logsync_refusals(tbl, pk, deletion, code, message) VALUES (?, ?, ?, ?, ?)",
                arguments: [
                    table, key, deletion, error.code.rawValue, (share ? "the row's share: " : "") + error.message,
                ])
        }
    }
}
