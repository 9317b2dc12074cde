import LogStore
import SyncModel

extension SyncEngine {
    /// What the engine has to send, and the flags that steer it: a view of the device log.
    ///
    /// Mirrors `CKSyncEngine.State` (F16–F32) with one deliberate difference: every mutation
    /// appends an entry to the device log and **throws** if the append fails (a full disk, for
    /// example), instead of failing silently. When a mutation returns, its entry is committed
    /// (on disk, with the default `.durable` log) and every read reflects it. Reads come from the
    /// log's projections (O(result), not O(log)); they throw only if the log cannot be read.
    ///
    /// Thread-safe (F31): use it from any task or thread. Concurrent mutations share commits
    /// (group commit) and are applied in the order of the log; a mutation blocks its caller's
    /// thread for at most the commits ahead of it.
    ///
    /// ```swift
    /// try engine.state.add(pendingRecordZoneChanges: [.saveRecord(a), .deleteRecord(b)])
    /// try engine.state.pendingRecordZoneChanges   // [saveRecord(a), deleteRecord(b)]
    /// try engine.state.remove(pendingRecordZoneChanges: [.deleteRecord(b)])
    /// ```
    ///
    /// **From many tasks at once, use ``suspending``**, the same mutations as `async` methods:
    /// `try await engine.state.suspending.add(pendingRecordZoneChanges: [.saveRecord(a)])`. A
    /// task waiting for its commit there is suspended instead of blocking its thread. Swift's
    /// cooperative pool has one thread per core, so only that many blocking mutations can wait
    /// for a commit at once (and share it), while any number of suspended tasks share one. The
    /// effect on the state, the log and the `stateUpdate` events is the same either way. (The
    /// `async` methods live on a view of their own rather than beside these: Swift prefers an
    /// `async` overload of the same name inside `async` code, which would turn every
    /// `try engine.state.add(…)` there into a compile error asking for `await`.)
    ///
    /// List rules (`DeviceIndex` documents them in full):
    /// - adding a change already pending neither duplicates nor moves it (F18);
    /// - adding the opposite of a pending change (delete after save, save after delete) replaces
    ///   it, and the new change goes to the end of the list (F19; the place is a spec choice);
    /// - removing takes exact matches only: same case and ID (F20);
    /// - database changes follow the same rules, keyed on zone ID (F22).
    public final class State: Sendable {
        let deviceLog: DeviceLog

        init(deviceLog: DeviceLog) {
            self.deviceLog = deviceLog
        }

        /// Appends an app's edit of the state. The device log announces it: the engine delivers
        /// a `stateUpdate` (F26), and with automatic sync the scheduler plans a send (F17).
        private func record(_ entry: DeviceEntry) throws {
            try deviceLog.append(entry, by: .app)
        }

        /// Appends an app's edit of a pending list, unless it lists no changes.
        private func record<Change>(_ changes: [Change], as entry: ([Change]) -> DeviceEntry) throws {
            guard !changes.isEmpty else { return }
            try record(entry(changes))
        }

        // MARK: Record zone changes

        /// The record changes waiting to be sent, in order (F16). IDs only: the delegate supplies
        /// the records' contents when a batch is built.
        ///
        /// - Throws: `LogStoreError` if the log cannot be read.
        public var pendingRecordZoneChanges: [PendingRecordZoneChange] {
            get throws { try deviceLog.read { try $0.pendingRecordZoneChanges(cache: deviceLog.pendingChangeCache) } }
        }

        /// The record changes waiting to be sent that `scope` covers, in order: what a send
        /// with those options may send. A delegate builds its batch from them, as
        /// `CKSyncEngine` apps filter the list by `context.options.scope` themselves.
        ///
        /// ```swift
        /// let pending = try syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)
        /// ```
        ///
        /// - Throws: `LogStoreError` if the log cannot be read.
        public func pendingRecordZoneChanges(
            in scope: SendChangesOptions.Scope
        ) throws -> [PendingRecordZoneChange] {
            try pendingRecordZoneChanges.filter { scope.contains($0) }
        }

        /// Adds record changes to send, in order; returns once they are committed to the log.
        ///
        /// - Parameter pendingRecordZoneChanges: the changes; an empty list does nothing.
        /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
        public func add(pendingRecordZoneChanges: [PendingRecordZoneChange]) throws {
            try record(pendingRecordZoneChanges, as: DeviceEntry.pendingRecordZoneChangesAdded)
        }

        /// Removes record changes that are pending exactly (same case and ID, F20); returns
        /// once the removal is committed. Changes not pending are ignored.
        ///
        /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
        public func remove(pendingRecordZoneChanges: [PendingRecordZoneChange]) throws {
            try record(pendingRecordZoneChanges, as: DeviceEntry.pendingRecordZoneChangesRemoved)
        }

        // MARK: Database changes

        /// The zone saves and deletions waiting to be sent, in order (F22). The engine sends
        /// them itself, before record changes (F23).
        ///
        /// - Throws: `LogStoreError` if the log cannot be read.
        public var pendingDatabaseChanges: [PendingDatabaseChange] {
            get throws { try deviceLog.read { try $0.pendingDatabaseChanges() } }
        }

        /// Adds zone changes to send, in order; returns once they are committed to the log.
        ///
        /// - Parameter pendingDatabaseChanges: the changes; an empty list does nothing.
        /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
        public func add(pendingDatabaseChanges: [PendingDatabaseChange]) throws {
            try record(pendingDatabaseChanges, as: DeviceEntry.pendingDatabaseChangesAdded)
        }

        /// Removes zone changes that are pending exactly (same case and zone ID); returns once
        /// the removal is committed. Changes not pending are ignored.
        ///
        /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
        public func remove(pendingDatabaseChanges: [PendingDatabaseChange]) throws {
            try record(pendingDatabaseChanges, as: DeviceEntry.pendingDatabaseChangesRemoved)
        }

        // MARK: Flags

        /// Whether the app has changes of its own to send that are not in the pending list (F24):
        /// while it is true, a send asks the delegate for a batch even with an empty list.
        ///
        /// Set it with ``setHasPendingUntrackedChanges(_:)``: setting appends to the log and can
        /// fail, which a property setter could not report.
        ///
        /// - Throws: `LogStoreError` if the log cannot be read.
        public var hasPendingUntrackedChanges: Bool {
            get throws { try deviceLog.read { try $0.hasPendingUntrackedChanges() } }
        }

        /// Sets ``hasPendingUntrackedChanges``; returns once the change is committed to the log.
        ///
        /// - Throws: `LogStoreError` if the append fails; the flag is then unchanged.
        public func setHasPendingUntrackedChanges(_ value: Bool) throws {
            try record(.untrackedChangesFlagged(value))
        }

        /// The zones the engine knows to have server changes it has not fetched yet (F25), in a
        /// stable order. Filled by the database changes a fetch reads, drained as each zone is
        /// fetched to the end; a zone outside a scoped fetch stays listed (F67).
        ///
        /// - Throws: `LogStoreError` if the log cannot be read.
        public var zoneIDsWithUnfetchedServerChanges: [RecordZone.ID] {
            get throws { try deviceLog.read { try $0.zoneIDsWithUnfetchedServerChanges() } }
        }

        // MARK: Suspending mutations

        /// The state's mutations as `async` methods, which suspend the calling task until their
        /// entry is committed instead of blocking its thread. Use them from many concurrent tasks.
        ///
        /// ```swift
        /// try await withThrowingTaskGroup(of: Void.self) { group in
        ///     for id in editedIDs {
        ///         group.addTask { try await engine.state.suspending.add(pendingRecordZoneChanges: [.saveRecord(id)]) }
        ///     }
        ///     try await group.waitForAll()
        /// }
        /// ```
        public var suspending: Suspending { Suspending(deviceLog: deviceLog) }

        /// ``State``'s mutations as `async` methods (see ``State/suspending``): same names, same
        /// rules, same entries and `stateUpdate` events; each returns once its entry is committed.
        ///
        /// Concurrent calls share commits with each other and with the blocking mutations, in the
        /// order they reach the log. A task's cancellation does not stop a mutation already
        /// called: it completes (or fails) and returns its outcome, so the caller always knows
        /// whether the change is in the state.
        public struct Suspending: Sendable {
            let deviceLog: DeviceLog

            private func record<Change>(_ changes: [Change], as entry: ([Change]) -> DeviceEntry) async throws {
                guard !changes.isEmpty else { return }
                try await deviceLog.appendSuspending([entry(changes)], by: .app)
            }

            /// ``State/add(pendingRecordZoneChanges:)``, suspending until committed.
            ///
            /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
            public func add(pendingRecordZoneChanges: [PendingRecordZoneChange]) async throws {
                try await record(pendingRecordZoneChanges, as: DeviceEntry.pendingRecordZoneChangesAdded)
            }

            /// ``State/remove(pendingRecordZoneChanges:)``, suspending until committed.
            ///
            /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
            public func remove(pendingRecordZoneChanges: [PendingRecordZoneChange]) async throws {
                try await record(pendingRecordZoneChanges, as: DeviceEntry.pendingRecordZoneChangesRemoved)
            }

            /// ``State/add(pendingDatabaseChanges:)``, suspending until committed.
            ///
            /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
            public func add(pendingDatabaseChanges: [PendingDatabaseChange]) async throws {
                try await record(pendingDatabaseChanges, as: DeviceEntry.pendingDatabaseChangesAdded)
            }

            /// ``State/remove(pendingDatabaseChanges:)``, suspending until committed.
            ///
            /// - Throws: `LogStoreError` if the append fails; the state is then unchanged.
            public func remove(pendingDatabaseChanges: [PendingDatabaseChange]) async throws {
                try await record(pendingDatabaseChanges, as: DeviceEntry.pendingDatabaseChangesRemoved)
            }

            /// ``State/setHasPendingUntrackedChanges(_:)``, suspending until committed.
            ///
            /// - Throws: `LogStoreError` if the append fails; the flag is then unchanged.
            public func setHasPendingUntrackedChanges(_ value: Bool) async throws {
                try await deviceLog.appendSuspending([.untrackedChangesFlagged(value)], by: .app)
            }
        }
    }
}
