import SyncModel

/// A record batch made ready to send: its assets uploaded, and the items that failed before
/// the request set apart.
struct PreparedBatch {
    /// What goes into `batchPrepared` and the request: the records with every asset's
    /// digest and size (their local files kept; the request leaves them out), the deletions,
    /// without the items that failed.
    var batch: SyncEngine.RecordZoneChangeBatch
    /// Each save of the app's batch, in order, as reported back: prepared, or as the app
    /// gave it when it failed.
    var recordsToReport: [Record]
    /// The saves that failed before the request (a file gone or changed, an asset too large,
    /// a failed upload), and, in an atomic zone, the zone's other items.
    var failedSaves: [Record.ID: SyncError] = [:]
    var failedDeletes: [Record.ID: SyncError] = [:]
    /// The records of ``batch`` with encrypted fields, sealed, as the request carries them
    /// (``ZoneKeyUpkeep/sealEncryptedValues(_:)``); the batch itself keeps them opened.
    var sealed: [Record.ID: Record] = [:]

    /// Moves the items that share an atomic zone with an item that failed before the request
    /// into the failures (F55): `batchRequestFailed`, or the failure's own transient code.
    mutating func failZoneMates() {
        var causes: [RecordZone.ID: (id: Record.ID, error: SyncError)] = [:]
        for (id, error) in failedSaves.sorted(by: { $0.key.description < $1.key.description })
        where causes[id.zoneID] == nil {
            causes[id.zoneID] = (id, error)
        }
        guard !causes.isEmpty else { return }
        func mate(_ id: Record.ID) -> SyncError? {
            guard let cause = causes[id.zoneID] else { return nil }
            let message =
                "not sent: \(cause.id) of the same atomic zone failed before the request (\(cause.error.code))"
            if cause.error.keepsChangePending {
                return SyncError(cause.error.code, message, item: .record(id), retryAfter: cause.error.retryAfter)
            }
            return SyncError(.batchRequestFailed, message, item: .record(id))
        }
        batch.recordsToSave.removeAll { record in
            guard let error = mate(record.recordID) else { return false }
            failedSaves[record.recordID] = error
            return true
        }
        batch.recordIDsToDelete.removeAll { id in
            guard let error = mate(id) else { return false }
            failedDeletes[id] = error
            return true
        }
    }
}
