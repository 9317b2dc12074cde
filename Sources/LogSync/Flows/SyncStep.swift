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
    private let deviceLog: DeviceLog
    private let delegate: any DelegateGateway
    private var deliveredMark: LogOffset?
    /// The group every request of the operation carries (F69): its options' group, or the
    /// engine's default group for it (``defaultOperationGroup(_:_:_:)``).
    let operationGroup: OperationGroup
    /// The offset of the operation's first entry (`sendStarted`, `fetchStarted`), which its span
    /// names (`logsync.device_log.offset`).
    private(set) var startOffset: LogOffset?

    private init(deviceLog: DeviceLog, delegate: any DelegateGateway, operationGroup: OperationGroup) {
        self.deviceLog = deviceLog
        self.delegate = delegate
        self.operationGroup = operationGroup
    }

    /// What a step starts: a send or a fetch, with its context.
    enum Sync {
        case send(SyncEngine.SendChangesContext)
        case fetch(SyncEngine.FetchChangesContext)
    }

    /// Starts a send or a fetch: appends its first entry (`sendStarted`, `fetchStarted`) to
    /// `deviceLog`, then delivers its `will` event through `delegate`. Its requests carry the
    /// options' group, or the engine's default group for the operation and its reason.
    static func start(
        _ sync: Sync, deviceLog: DeviceLog, delegate: any DelegateGateway, requestIDPrefix: String
    ) async throws -> SyncStep {
        let (entry, event, group): (DeviceEntry, SyncEngine.Event, OperationGroup)
        switch sync {
        case .send(let context):
            (entry, event) = (.sendStarted(context), .willSendChanges(.init(context: context)))
            group =
                context.options.operationGroup ?? defaultOperationGroup(requestIDPrefix, "sendChanges", context.reason)
        case .fetch(let context):
            (entry, event) = (.fetchStarted(context), .willFetchChanges(.init(context: context)))
            group =
                context.options.operationGroup ?? defaultOperationGroup(requestIDPrefix, "fetchChanges", context.reason)
        }
        let step = SyncStep(deviceLog: deviceLog, delegate: delegate, operationGroup: group)
        step.startOffset = try step.append(entry)
        await delegate.deliver(event)
        return step
    }

    /// The group of a send or fetch whose options name none (F69, F70): one per engine, operation
    /// and reason, named for them (`SyncEngine sendChanges manual`, `SyncEngine fetchChanges
    /// scheduled`), its ID the engine's seeded request-ID prefix, the operation and the reason
    /// (`<prefix>-fetchChanges-scheduled`). Not one per sync: the server writes an entry for each
    /// group it has not seen, and a group per sync would make every fetch write.
    private static func defaultOperationGroup(
        _ requestIDPrefix: String, _ operation: String, _ reason: SyncEngine.SyncReason
    ) -> OperationGroup {
        OperationGroup(
            operationGroupID: "\(requestIDPrefix)-\(operation)-\(reason)", name: "SyncEngine \(operation) \(reason)")
    }

    /// Ends the operation: appends its last entry (with the pending delivery mark), then delivers
    /// a `stateUpdate` reflecting every entry so far (F26, F34) and its `did` event. Returns the
    /// last entry's offset.
    @discardableResult
    func finish(_ entry: DeviceEntry, _ event: SyncEngine.Event) async throws -> LogOffset {
        let offset = try append(entry)
        await delegate.deliver(.stateUpdate(SyncEngine.Event.StateUpdate(offset: try deviceLog.log.lastOffset)))
        await delegate.deliver(event)
        return offset
    }

    /// Appends `entry` (after a pending delivery mark) and returns its offset; `traceHeaders`,
    /// the trace context of the request the entry describes, is recorded with it. A
    /// `batchResult` is written against `preparedBatch` when given (kind 15); a fetched page's
    /// records as `recordBytes`, the bytes they were read from, when given.
    @discardableResult
    func append(
        _ entry: DeviceEntry, traceHeaders: [String: String] = [:], preparedBatch: PreparedBatchReference? = nil,
        recordBytes: [ArraySlice<UInt8>]? = nil
    ) throws -> LogOffset {
        var entries: [DeviceEntry] = []
        if let mark = deliveredMark { entries.append(.eventsDelivered(through: mark)) }
        entries.append(entry)
        let range = try deviceLog.append(
            entries, traceHeaders: traceHeaders, preparedBatch: preparedBatch, recordBytes: recordBytes)
        deliveredMark = nil
        return range.upperBound.advanced(by: -1)
    }

    /// Appends the entry `make` returns for the offset it will have (after a pending delivery
    /// mark), so the entry can name its own offset, and returns that offset.
    ///
    /// The append is a write transaction of its own, outside group commit: the offset is known
    /// only inside it.
    @discardableResult
    func append(traceHeaders: [String: String] = [:], _ make: (LogOffset) throws -> DeviceEntry) throws -> LogOffset {
        let mark = deliveredMark
        let range = try deviceLog.append(traceHeaders: traceHeaders) { first in
            guard let mark else { return [try make(first)] }
            return [.eventsDelivered(through: mark), try make(first.next)]
        }
        deliveredMark = nil
        return range.upperBound.advanced(by: -1)
    }

    /// Appends the entry of a fetched page; if the page has changes to report (`event` is not
    /// `nil`), delivers its event and notes that the entry's events have been handled. Returns
    /// the entry's offset; `traceHeaders` is the trace context of the page's request, and
    /// `recordBytes` the bytes its records were read from (written instead of encoding them).
    @discardableResult
    func append(
        _ entry: DeviceEntry, traceHeaders: [String: String] = [:], recordBytes: [ArraySlice<UInt8>]? = nil,
        delivering event: SyncEngine.Event?
    ) async throws -> LogOffset {
        let offset = try append(entry, traceHeaders: traceHeaders, recordBytes: recordBytes)
        guard let event else { return offset }
        await delegate.deliver(event)
        deliveredMark = offset
        return offset
    }

    /// Reads from the device log's index.
    func read<R>(_ body: (DeviceSnapshot) throws -> R) throws -> R { try deviceLog.read(body) }
}
