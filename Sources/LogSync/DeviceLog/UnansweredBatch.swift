import LogStore
import SyncModel

/// The last record batch whose outcome is unknown (F103), as the device index keeps it: sent,
/// and either not answered yet (the app stopped between the request and its answer) or failed as
/// a whole in a way that may have reached the server, its answer lost. A batch equal to it goes
/// out again under its request ID, in this launch or after a relaunch, so that a server that had
/// applied it replays its answer instead of reporting a conflict with the device's own save.
struct UnansweredBatch: Sendable, Equatable {
    /// The offset of its `batchPrepared` entry.
    let offset: LogOffset
    /// The request ID it was sent under.
    let requestID: RequestID
    let recordsToSave: [Record]
    let recordIDsToDelete: [Record.ID]
    let atomicByZone: Bool

    /// Whether `batch` would be the same request (the server compares a resent request's content
    /// with the first one's before replaying its answer, and refuses an ID reused for another).
    func sameRequest(as batch: SyncEngine.RecordZoneChangeBatch) -> Bool {
        recordsToSave == batch.recordsToSave && recordIDsToDelete == batch.recordIDsToDelete
            && atomicByZone == batch.atomicByZone
    }

    /// Whether a request that failed with `code` may have reached the server and been applied,
    /// its answer lost: a failed connection, or an answer the server itself lost.
    static func mayHaveBeenApplied(_ code: SyncError.Code) -> Bool {
        code == .networkFailure || code == .serverResponseLost
    }

    /// Whether a batch's result leaves its outcome unknown: the request failed as a whole (every
    /// item failed, none was saved or deleted) with codes that mean it may have been applied.
    /// The send flow gives every item of a request that failed as a whole the request's error.
    static func outcomeUnknown(saved: Int, deleted: Int, failures: [SyncError]) -> Bool {
        saved == 0 && deleted == 0 && !failures.isEmpty && failures.allSatisfy { mayHaveBeenApplied($0.code) }
    }
}
