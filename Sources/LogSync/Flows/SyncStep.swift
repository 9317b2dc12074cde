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
    /// The group every request of the operation carries (F69): its options' group, or the
    /// engine's default group for it (``SyncEngine/defaultOperationGroup(_:_:)``).
    private(set) var operationGroup = OperationGroup(operationGroupID: "-")

    private init(engine: SyncEngine) { self.engine = engine }

    /// Starts a send or a fetch: appends its first entry, then delivers its `will` event. Its
    /// requests carry `group`, or without one the engine's default group for `operation` and
    /// `reason`.
    static func start(
        _ engine: SyncEngine, _ entry: DeviceEntry, _ event: SyncEngine.Event, group: OperationGroup?,
        operation: String, reason: SyncEngine.SyncReason
    ) async throws -> SyncStep {
        let step = SyncStep(engine: engine)
        try step.append(entry)
        step.operationGroup = group ?? engine.defaultOperationGroup(operation, reason)
        await engine.deliver(event)
        return step
    }

    /// Ends the operation: appends its last entry (with the pending delivery mark), then delivers
    /// a `stateUpdate` reflecting every entry so far (F26, F34) and its `did` event.
    func finish(_ entry: DeviceEntry, _ event: SyncEngine.Event) async throws {
        try append(entry)
        await engine.deliver(.stateUpdate(SyncEngine.Event.StateUpdate(offset: try engine.deviceLog.log.lastOffset)))
        await engine.deliver(event)
    }

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

    /// Appends the entry `make` returns for the offset it will have (after a pending delivery
    /// mark), so the entry can name its own offset, and returns that offset.
    ///
    /// The append is a write transaction of its own, outside group commit: the offset is known
    /// only inside it.
    @discardableResult
    func append(_ make: (LogOffset) throws -> DeviceEntry) throws -> LogOffset {
        let mark = deliveredMark
        let range = try engine.deviceLog.append { first in
            guard let mark else { return [try make(first)] }
            return [.eventsDelivered(through: mark), try make(first.next)]
        }
        deliveredMark = nil
        return range.upperBound.advanced(by: -1)
    }

    /// Appends the entry of a fetched page; if the page has changes to report (`event` is not
    /// `nil`), delivers its event and notes that the entry's events have been handled.
    func append(_ entry: DeviceEntry, delivering event: SyncEngine.Event?) async throws {
        let offset = try append(entry)
        guard let event else { return }
        await engine.deliver(event)
        deliveredMark = offset
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

extension SyncEngine {
    /// The group of a send or fetch whose options name none (F69, F70): one per engine, operation
    /// and reason, named for them (`SyncEngine sendChanges manual`, `SyncEngine fetchChanges
    /// scheduled`), its ID the engine's seeded request-ID prefix, the operation and the reason
    /// (`<prefix>-fetchChanges-scheduled`). Not one per sync: the server writes an entry for each
    /// group it has not seen, and a group per sync would make every fetch write.
    func defaultOperationGroup(_ operation: String, _ reason: SyncReason) -> OperationGroup {
        OperationGroup(operationGroupID: "\(requestIDPrefix)-\(operation)-\(reason)", name: "SyncEngine \(operation) \(reason)")
    }
}
