import Foundation
import LogSync
import SyncModel
import Synchronization

extension TestDevice {
    /// The delegate of a ``TestDevice``: the notes app's answers to its engine, and the hooks a
    /// test scripts them with. On its own, the delegate of engines a test builds itself.
    ///
    /// With a device's policy it behaves as ``TestDevice`` describes. With
    /// ``Policy/scripted`` (``Policy/reactsOnItsOwn`` off) every reaction is the test's: the
    /// delegate records each event and changes nothing on it; asked for a batch, it sends what is
    /// pending in the send's scope, each note with the title ``setTitle(_:_:)`` gave it, on the
    /// last known server record's system fields. A test may instead queue exact batches
    /// (``queue(_:)``) or answer every call itself (``provideBatches(_:)``,
    /// ``provideFetchOptions(_:)``), and reads the contexts of the calls (``batchContexts``,
    /// ``fetchContexts``).
    ///
    /// ```swift
    /// let delegate = TestDevice.Delegate(policy: .scripted)
    /// var configuration = SyncEngine.Configuration(database: database, deviceLog: log, delegate: delegate)
    /// configuration.automaticallySync = false
    /// let engine = try SyncEngine(configuration)
    /// delegate.queue([SyncEngine.RecordZoneChangeBatch(recordsToSave: [note])])
    /// try await engine.sendChanges()
    /// #expect(delegate.batchContexts.count == 2)  // the queued batch, then nil
    /// ```
    ///
    /// One delegate may serve several engines: each call names its engine (F8, F9). An engine
    /// does not keep its delegate alive (F4).
    public final class Delegate: SyncEngineDelegate, Sendable {
        let store: Mutex<Store>

        /// A delegate with no notes, behaving as `policy` says.
        public init(policy: Policy = Policy()) { store = Mutex(Store(policy: policy)) }

        // MARK: What the test chooses

        /// Changes the policy from now on.
        public func setPolicy(_ change: (inout Policy) -> Void) { store.withLock { change(&$0.policy) } }

        /// Sets a note's title (creating the note) without queuing its save: what the delegate
        /// sends when the engine asks for that save.
        public func setTitle(_ id: Record.ID, _ title: String) { store.withLock { $0.edit(id, ["title": title]) } }

        /// Runs `body` inside `handleEvent`, after the delegate's own handling.
        public func onEvent(_ body: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?) {
            store.withLock { $0.onEvent = body }
        }

        /// Runs `body` inside `handleEvent`, before the delegate's own handling.
        public func beforeEvent(_ body: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?) {
            store.withLock { $0.beforeEvent = body }
        }

        /// Replaces every answer to `nextRecordZoneChangeBatch`, queued batches included (`nil`:
        /// the delegate's own again).
        public func provideBatches(
            _ body: (@Sendable (SyncEngine.SendChangesContext, SyncEngine) async -> SyncEngine.RecordZoneChangeBatch?)?
        ) {
            store.withLock { $0.batches = body }
        }

        /// Hands out exactly these batches, one per `nextRecordZoneChangeBatch`, then `nil`,
        /// in place of the delegate's own answers and of any batches queued before.
        public func queue(_ batches: [SyncEngine.RecordZoneChangeBatch]) { store.withLock { $0.queued = batches } }

        /// Replaces every answer to `nextFetchChangesOptions` (`nil`: the context's options).
        public func provideFetchOptions(
            _ body: (@Sendable (SyncEngine.FetchChangesContext, SyncEngine) async -> SyncEngine.FetchChangesOptions)?
        ) {
            store.withLock { $0.fetchOptions = body }
        }

        // MARK: What the test reads

        /// Every event delivered so far, in order.
        public var events: [SyncEngine.Event] { store.withLock { $0.events } }

        /// Forgets the events recorded so far.
        public func clearEvents() { store.withLock { $0.events.removeAll() } }

        /// The contexts `nextRecordZoneChangeBatch` was called with, in order.
        public var batchContexts: [SyncEngine.SendChangesContext] { store.withLock { $0.batchContexts } }

        /// The contexts `nextFetchChangesOptions` was called with, in order.
        public var fetchContexts: [SyncEngine.FetchChangesContext] { store.withLock { $0.fetchContexts } }

        // MARK: SyncEngineDelegate

        public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            if let before = store.withLock({ $0.beforeEvent }) { await before(event, syncEngine) }
            let reacts = store.withLock { $0.policy.reactsOnItsOwn }
            var deleting: Set<Record.ID> = []
            if reacts, case .fetchedRecordZoneChanges = event {
                for case .deleteRecord(let id) in (try? syncEngine.state.pendingRecordZoneChanges) ?? [] {
                    deleting.insert(id)
                }
            }
            // What the server holds of each change it refused for want of permission: shown again.
            var refused: [Record.ID: TestDevice.Fields] = [:]
            // The server's share of each share save it refused for good: shown again.
            var refusedShares: [Record.ID: Share] = [:]
            if reacts, case .sentRecordZoneChanges(let sent) = event {
                for failure in sent.failedRecordSaves where failure.record.recordType == Share.recordType {
                    if let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: failure.record.recordID),
                        let share = try? Share(record: known)
                    {
                        refusedShares[failure.record.recordID] = share
                    }
                }
                let ids =
                    sent.failedRecordSaves.filter { $0.error.code == .permissionFailure }.map(\.record.recordID)
                    + sent.failedRecordDeletes.filter { $0.value.code == .permissionFailure }.map(\.key)
                for id in ids {
                    if let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id) {
                        refused[id] = Store.fields(of: known)
                    }
                }
            }
            let onSharedDatabase = syncEngine.database.databaseScope == .shared
            let (zones, requeue, onEvent, events) = store.withLock { store in
                store.events.append(event)
                let (zones, requeue) =
                    reacts
                    ? store.handle(
                        event, pendingDeletions: deleting, serverFields: refused, serverShares: refusedShares,
                        onSharedDatabase: onSharedDatabase)
                    : ([], [])
                return (zones, requeue, store.onEvent, store.events)
            }
            if !zones.isEmpty { try? syncEngine.state.add(pendingDatabaseChanges: zones) }
            if !requeue.isEmpty { try? syncEngine.state.add(pendingRecordZoneChanges: requeue) }
            await onEvent?(event, syncEngine)
            resumeWaiters(events)
        }

        public func nextRecordZoneChangeBatch(
            _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
        ) async -> SyncEngine.RecordZoneChangeBatch? {
            enum Answer {
                case provided(
                    @Sendable (SyncEngine.SendChangesContext, SyncEngine) async -> SyncEngine.RecordZoneChangeBatch?)
                case queued(SyncEngine.RecordZoneChangeBatch?)
                case pending
            }
            let answer: Answer = store.withLock { store in
                store.batchContexts.append(context)
                if let batches = store.batches { return .provided(batches) }
                guard var queued = store.queued else { return .pending }
                defer { store.queued = queued }
                return .queued(queued.isEmpty ? nil : queued.removeFirst())
            }
            switch answer {
            case .provided(let batches): return await batches(context, syncEngine)
            case .queued(let batch): return batch
            case .pending:
                let pending = (try? syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)) ?? []
                return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
                    self.record(for: id, syncEngine)
                }
            }
        }

        public func nextFetchChangesOptions(
            _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
        ) async -> SyncEngine.FetchChangesOptions {
            let fetchOptions = store.withLock { store in
                store.fetchContexts.append(context)
                return store.fetchOptions
            }
            guard let fetchOptions else { return context.options }
            return await fetchOptions(context, syncEngine)
        }

        /// The record to send for a note: its fields on the last known server record's system
        /// fields (none after `unknownItem`), or `nil` if the note is gone (reacting on its own,
        /// the delegate then removes its save from the pending list, as in Apple's sample).
        private func record(for id: Record.ID, _ syncEngine: SyncEngine) -> Record? {
            let (fields, attachments, share, fresh, recordType, reacts, parent) = store.withLock { store in
                (
                    store.notes[id], store.attachments[id] ?? [:], store.shares[id],
                    store.forgetSystemFields.remove(id) != nil,
                    store.policy.recordType, store.policy.reactsOnItsOwn,
                    store.keepServerParent.contains(id) ? nil : store.policy.parent
                )
            }
            if let share {
                // A share: its fields on the last known server record's system fields.
                var record = Record(recordType: Share.recordType, recordID: id)
                if !fresh, let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id) {
                    record = known.systemFieldsCopy()
                }
                for key in share.record.allKeys() { record[key] = share.record[key] }
                return record
            }
            guard let fields else {
                if reacts { try? syncEngine.state.remove(pendingRecordZoneChanges: [.saveRecord(id)]) }
                return nil
            }
            var record: Record
            if !fresh, let known = try? syncEngine.deviceLog.lastKnownServerRecord(for: id) {
                record = known.systemFieldsCopy()
            } else {
                record = Record(recordType: recordType, recordID: id)
            }
            for (key, text) in fields { record[key] = .string(text) }
            for (key, value) in attachments { record[key] = value }
            if let parent {
                let parentID = parent(id, fields)
                if record.parent?.recordID != parentID {
                    record.parent = parentID.map { Record.Reference(recordID: $0) }
                }
            }
            return record
        }

        // MARK: Waiting for events

        /// Resumes the waiters whose condition `events` satisfies. The conditions run outside the
        /// delegate's lock, so that one may read the device (its notes, its tally).
        func resumeWaiters(_ events: [SyncEngine.Event]) {
            let waiting = store.withLock { $0.waiters.map { (id: $0.id, check: $0.check) } }
            let satisfied = Set(waiting.filter { $0.check(events) }.map(\.id))
            guard !satisfied.isEmpty else { return }
            let ready = store.withLock { store in
                let ready = store.waiters.filter { satisfied.contains($0.id) }
                store.waiters.removeAll { satisfied.contains($0.id) }
                return ready
            }
            for waiter in ready { waiter.continuation.resume() }
        }

        /// Resumes the waiter `id` if it still waits (its time is up).
        func resumeWaiter(_ id: UUID) {
            let waiter = store.withLock { store -> CheckedContinuation<Void, Never>? in
                guard let index = store.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return store.waiters.remove(at: index).continuation
            }
            waiter?.resume()
        }
    }
}
