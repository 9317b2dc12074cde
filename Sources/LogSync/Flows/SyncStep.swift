import Foundation
import LogStore
import SyncModel

/// The bookkeeping of one running send or fetch: its appends, and the delivery offset that
/// rides along with them (F29).
///
/// After the delegate handled the event of a fetched page, the page's offset is remembered and
/// written as `eventsDelivered(through:)` in the same commit as the operation's next entry, so
/// delivery costs no commit of its own; the operation's last entry carries the final one.
final class SyncStep {
    let engine: SyncEngine
    private var deliveredMark: LogOffset?

    init(engine: SyncEngine) { self.engine = engine }

    /// Appends `entry` (after a pending delivery mark) and returns its offset.
    @discardableResult
    func append(_ entry: DeviceEntry) throws -> LogOffset {
        var entries: [DeviceEntry] = []
        if let mark = deliveredMark { entries.append(.eventsDelivered(through: mark)) }
        entries.append(entry)
        let range = try engine.deviceLog.append(entries)
        deliveredMark = nil
        return range.upperBound.advanced(by: -1)
    }

    /// Notes that the events of the entry at `offset` have been handled.
    func delivered(through offset: LogOffset) { deliveredMark = offset }

    /// Delivers a `stateUpdate` reflecting every entry so far (F26, F34).
    func deliverStateUpdate() async throws {
        await engine.deliver(.stateUpdate(SyncEngine.Event.StateUpdate(offset: try engine.deviceLog.log.lastOffset)))
    }

    /// Reads from the device log's index.
    func read<R>(_ body: (DeviceSnapshot) throws -> R) throws -> R { try engine.deviceLog.read(body) }
}

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

    /// `operationCancelled`, for a sync stopped by `cancelOperations()` (F79).
    static func cancelled(_ operation: String) -> SyncError {
        SyncError(.operationCancelled, "\(operation) was cancelled by cancelOperations()")
    }
}
