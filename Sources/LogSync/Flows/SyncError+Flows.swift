import SyncModel

extension SyncError {
    /// The `SyncError` for anything a database call threw: itself, `operationCancelled` for
    /// task cancellation, else `networkFailure` with the error as its cause, so the change is
    /// kept and retried.
    static func from(_ error: any Error, during operation: String) -> SyncError {
        if let error = error as? SyncError { return error }
        if error is CancellationError {
            return SyncError(.operationCancelled, "\(operation) was cancelled")
        }
        return SyncError(.networkFailure, "\(operation) failed", cause: String(describing: error))
    }

    /// Throws what a send or a fetch ended with: `stop`, the error that stopped it, else a
    /// `partialFailure` listing the items that failed, its message made from their count.
    static func throwEnding(stop: SyncError?, failures: [ItemID: SyncError], _ message: (Int) -> String) throws {
        if let stop { throw stop }
        if !failures.isEmpty { throw SyncError(.partialFailure, message(failures.count), partialErrors: failures) }
    }

    /// `operationCancelled`, for a sync stopped by `cancelOperations()` (F79).
    static func cancelled(_ operation: String) -> SyncError {
        SyncError(.operationCancelled, "\(operation) was cancelled by cancelOperations()")
    }
}
