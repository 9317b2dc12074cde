import LogStore
import Logging
import SyncModel

/// Delivers again the fetched changes whose events the delegate may not have handled when
/// the engine last stopped (F29: at-least-once, never lost): every fetched page after the
/// delivery offset, in order, framed as a `.scheduled` fetch (will/did, and each zone's
/// will/did) so the event grammar holds (F46). Costs nothing when all was delivered: the
/// index keeps the offset of the last fetched page.
///
/// Run once when an engine starts, from the engine's context: it reads the device log and
/// delivers through the delegate gateway.
struct Redelivery: Sendable {
    /// Where the fetched pages and the delivery offset are read, and the new offset appended.
    let deviceLog: DeviceLog
    /// Delivers the events again.
    let delegate: any DelegateGateway
    let logger: Logger

    /// Delivers what is undelivered, if anything.
    ///
    /// - Throws: `LogStoreError` if the device log cannot be read or written.
    func run() async throws {
        let (delivered, fetched) = try deviceLog.read { (try $0.deliveredOffset(), try $0.fetchedThrough()) }
        guard let fetched, fetched > (delivered ?? .zero) else { return }
        // Pages without changes deliver no event, so they are never marked delivered: the fetch
        // that frames the redelivery opens at the first page with changes, and when only empty
        // pages follow the mark (a fetch that found nothing new) the mark catches up without an
        // event.
        let context = SyncEngine.FetchChangesContext(reason: .scheduled, options: SyncEngine.FetchChangesOptions())
        var opened = false
        var openZone: RecordZone.ID?
        func open() async {
            guard !opened else { return }
            opened = true
            logger.info("delivering again the fetched changes after offset \(delivered?.rawValue ?? 0)")
            await delegate.deliver(.willFetchChanges(.init(context: context)))
        }
        func closeZone() async {
            guard let zone = openZone else { return }
            await delegate.deliver(.didFetchRecordZoneChanges(.init(zoneID: zone)))
            openZone = nil
        }
        var cursor = try deviceLog.log.entries(from: (delivered ?? .zero).next, through: fetched)
        while let entry = try cursor.next() {
            guard
                entry.kind == DeviceEntry.Kind.databaseChangesFetched
                    || entry.kind == DeviceEntry.Kind.zoneChangesFetched
            else { continue }
            switch try DeviceEntry(entry) {
            case .databaseChangesFetched(let modifications, let deletions, _, _):
                guard !modifications.isEmpty || !deletions.isEmpty else { continue }
                await open()
                await closeZone()
                await delegate.deliver(
                    .fetchedDatabaseChanges(
                        .init(
                            modifications: modifications.map { DatabaseChange.Modification(zoneID: $0) },
                            deletions: deletions)))
            case .zoneChangesFetched(let zoneID, let modifications, let deletions, _, _):
                guard !modifications.isEmpty || !deletions.isEmpty else { continue }
                await open()
                if openZone != zoneID {
                    await closeZone()
                    await delegate.deliver(.willFetchRecordZoneChanges(.init(zoneID: zoneID)))
                    openZone = zoneID
                }
                await delegate.deliver(
                    .fetchedRecordZoneChanges(
                        .init(
                            modifications: modifications.map { RecordZoneChange.Modification(record: $0) },
                            deletions: deletions)))
            default:
                continue
            }
        }
        await closeZone()
        try deviceLog.append(.eventsDelivered(through: fetched))
        guard opened else { return }
        await delegate.deliver(.stateUpdate(.init(offset: try deviceLog.log.lastOffset)))
        await delegate.deliver(.didFetchChanges(.init(context: context)))
    }
}

extension Redelivery {
    /// The redelivery of an engine's start, from its context.
    init(_ context: EngineContext) {
        self.init(deviceLog: context.deviceLog, delegate: context.delegate, logger: context.logger)
    }
}
