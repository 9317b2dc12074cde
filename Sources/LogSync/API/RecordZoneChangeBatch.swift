import SyncModel

extension SyncEngine {
    /// The record saves and deletions the engine sends in one request.
    ///
    /// Mirrors `CKSyncEngine.RecordZoneChangeBatch` (F51–F58). The delegate returns one from
    /// `nextRecordZoneChangeBatch`, usually built from the pending changes with
    /// ``init(pendingChanges:recordProvider:)``, which keeps it within the server's limits. A
    /// batch may mix records of several zones of one database (F58).
    ///
    /// ```swift
    /// let pending = try engine.state.pendingRecordZoneChanges(in: context.options.scope)
    /// return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
    ///     store.record(for: id)        // nil: the app has no such record any more; skipped
    /// }
    /// ```
    public struct RecordZoneChangeBatch: Sendable, Hashable, CustomStringConvertible {
        /// The records to save, with their contents and (for known records) system fields.
        public var recordsToSave: [Record]
        /// The IDs of the records to delete.
        public var recordIDsToDelete: [Record.ID]
        /// Whether the changes to each zone in the batch succeed or fail together (F55).
        ///
        /// When `true`, a failing item in a zone gets its own error and the zone's other items get
        /// `batchRequestFailed`; other zones are unaffected. `false` by default.
        public var atomicByZone: Bool

        /// Creates a batch of exactly these changes.
        ///
        /// Does **not** check the server's limits (F52): a batch of more than
        /// `Limits.maxItemsPerRequest` items or `Limits.maxRequestBytes` bytes is sent as is,
        /// and the server rejects it with `limitExceeded`.
        ///
        /// - Parameters:
        ///   - recordsToSave: The records to save.
        ///   - recordIDsToDelete: The IDs of the records to delete.
        ///   - atomicByZone: Whether each zone's changes succeed or fail together.
        public init(recordsToSave: [Record] = [], recordIDsToDelete: [Record.ID] = [], atomicByZone: Bool = false) {
            self.recordsToSave = recordsToSave
            self.recordIDsToDelete = recordIDsToDelete
            self.atomicByZone = atomicByZone
        }

        /// Builds a batch from the front of a list of pending changes, within the server's limits
        /// (F53, F54).
        ///
        /// Walks `pendingChanges` in order:
        /// - a deletion goes into ``recordIDsToDelete``; `recordProvider` is not called for it;
        /// - a save asks `recordProvider` for the record and goes into ``recordsToSave``; if the
        ///   provider returns `nil`, the change is skipped and the walk goes on.
        ///
        /// The walk stops before the change that would take the batch beyond
        /// `Limits.maxItemsPerRequest` items (saves plus deletions), `Limits.maxRequestBytes`
        /// bytes (the sum of the saved records' `Record.estimatedSize`; deletions weigh nothing)
        /// or `Limits.maxElementsPerRequest` elements (records of many fields or long lists).
        /// The provider is not asked for a save once the batch is full by count, but it is asked
        /// for the save that turns out too heavy, since its size is known only then. The first
        /// change taken is always taken, even a record heavier than the whole byte limit (spec
        /// choice): the server then rejects that record, rather than the batch stalling on it.
        ///
        /// To send everything, build batches until this returns `nil`, removing what each batch
        /// took — or let the engine remove it when the batch is sent.
        ///
        /// - Parameters:
        ///   - pendingChanges: The changes to take from, in order; typically
        ///     ``State/pendingRecordZoneChanges`` filtered by the send scope.
        ///   - recordProvider: The record to save for an ID, or `nil` to skip the change.
        /// - Returns: `nil` if no change was taken: the list was empty, or the provider returned
        ///   `nil` for every save and there was no deletion.
        /// - Complexity: O(n) in the changes taken, plus one provider call per save looked at.
        public init?(
            pendingChanges: [PendingRecordZoneChange],
            recordProvider: (Record.ID) async -> Record?
        ) async {
            var builder = Builder()
            for change in pendingChanges {
                guard await builder.take(change, recordProvider) else { break }
            }
            guard let batch = builder.batch else { return nil }
            self = batch
        }

        /// Builds a batch from the front of the engine's pending record changes inside `scope`,
        /// reading the pending list only as far as the batch needs: the same batch as
        /// ``init(pendingChanges:recordProvider:)`` given
        /// `state.pendingRecordZoneChanges.filter { scope.contains($0) }`, at the cost of the
        /// changes looked at instead of the whole list (an incremental cursor over the device
        /// log's pending table).
        ///
        /// ```swift
        /// func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        ///     try? await SyncEngine.RecordZoneChangeBatch(state: syncEngine.state, scope: context.options.scope) { id in
        ///         store.record(for: id)
        ///     }
        /// }
        /// ```
        ///
        /// Not in CKSyncEngine, whose delegate reads the whole list for every batch: sending n
        /// changes that way reads about n²/800 list entries (Docs/Performance.md).
        ///
        /// - Returns: `nil` if no change was taken, as for ``init(pendingChanges:recordProvider:)``.
        /// - Throws: `LogStoreError` if the device log cannot be read.
        /// - Complexity: O(changes looked at), read in chunks of `Limits.maxItemsPerRequest`.
        public init?(
            state: State, scope: SendChangesOptions.Scope = .all,
            recordProvider: (Record.ID) async -> Record?
        ) async throws {
            var builder = Builder()
            var after: Position?
            read: while true {
                let chunk = try state.deviceLog.read {
                    try $0.pendingRecordZoneChanges(after: after, in: scope, limit: Limits.maxItemsPerRequest)
                }
                for (position, change) in chunk {
                    guard await builder.take(change, recordProvider) else { break read }
                    after = position
                }
                if chunk.count < Limits.maxItemsPerRequest { break }
            }
            guard let batch = builder.batch else { return nil }
            self = batch
        }

        /// The walk of both builders: takes changes in order until the server's limits.
        private struct Builder {
            var recordsToSave: [Record] = []
            var recordIDsToDelete: [Record.ID] = []
            var bytes = 0
            /// The elements of the request so far, room kept for the request's own message and
            /// its operation group.
            var elements = 8

            /// Takes `change` if it fits (a save whose provider returns `nil` is skipped);
            /// returns `false` once the batch is full, without taking it.
            mutating func take(
                _ change: PendingRecordZoneChange, _ recordProvider: (Record.ID) async -> Record?
            ) async -> Bool {
                let count = recordsToSave.count + recordIDsToDelete.count
                guard count < Limits.maxItemsPerRequest else { return false }
                switch change {
                case .deleteRecord(let id):
                    // A record ID and its zone ID.
                    guard elements + 2 <= Limits.maxElementsPerRequest else { return false }
                    recordIDsToDelete.append(id)
                    elements += 2
                case .saveRecord(let id):
                    guard let record = await recordProvider(id) else { return true }
                    let size = record.estimatedSize
                    if count > 0, bytes + size > Limits.maxRequestBytes { return false }
                    let recordElements = record.requestElements
                    if count > 0, elements + recordElements > Limits.maxElementsPerRequest { return false }
                    recordsToSave.append(record)
                    bytes += size
                    elements += recordElements
                }
                return true
            }

            var batch: RecordZoneChangeBatch? {
                guard !recordsToSave.isEmpty || !recordIDsToDelete.isEmpty else { return nil }
                return RecordZoneChangeBatch(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
            }
        }

        /// A one-line rendering naming the records, such as
        /// `RecordZoneChangeBatch(save [record "A" in zone "Notes"], delete [record "B" in zone "Notes"], atomicByZone)`.
        ///
        /// Lists of more than ten items name the first ten and count the rest.
        public var description: String {
            var parts = [
                "save \(describeItems(recordsToSave.map(\.recordID)))",
                "delete \(describeItems(recordIDsToDelete))",
            ]
            if atomicByZone { parts.append("atomicByZone") }
            return "RecordZoneChangeBatch(\(parts.joined(separator: ", ")))"
        }
    }
}

/// `[a, b, c]`, naming at most `limit` items and counting the rest, for one-line descriptions.
func describeItems<T>(_ items: [T], limit: Int = 10) -> String {
    let shown = items.prefix(limit).map { String(describing: $0) }
    let more = items.count > limit ? ", … \(items.count - limit) more" : ""
    return "[\(shown.joined(separator: ", "))\(more)]"
}
