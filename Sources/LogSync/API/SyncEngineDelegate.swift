import SyncModel

/// What a ``SyncEngine`` asks of the app: handle its events, supply records to send, and steer
/// fetches (F9–F15).
///
/// Mirrors `CKSyncEngineDelegate`. The engine holds its delegate weakly (F4): keep the delegate
/// alive as long as the engine should deliver events. The protocol is `AnyObject & Sendable`
/// (F15): a final class with its own locking, or an actor.
///
/// ```swift
/// final class Notes: SyncEngineDelegate {
///     func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
///         switch event {
///         case .fetchedRecordZoneChanges(let changes): apply(changes)
///         case .sentRecordZoneChanges(let sent): resolveConflicts(in: sent)
///         default: break
///         }
///     }
///
///     func nextRecordZoneChangeBatch(
///         _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
///     ) async -> SyncEngine.RecordZoneChangeBatch? {
///         let pending = (try? syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)) ?? []
///         return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { recordID in
///             self.record(for: recordID)
///         }
///     }
/// }
/// ```
///
/// With thousands of pending changes, build each batch with
/// `SyncEngine.RecordZoneChangeBatch(state:scope:recordProvider:)` instead: the same batch,
/// read from a cursor over the pending list rather than the whole list each time.
public protocol SyncEngineDelegate: AnyObject, Sendable {
    /// Handles one event (F9). Events arrive one at a time, in order: the next is delivered only
    /// after this call returns, even if it suspends (F10).
    ///
    /// Do not call `sendChanges`, `fetchChanges` or anything else that waits for events from
    /// here: the engine would wait for itself. Such a call fails at once with
    /// ``SyncEngine/ReentrantCallError`` (F11). Adding pending changes is fine.
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async

    /// The next batch of record changes to send, or `nil` when there is nothing more for now
    /// (F12). Asked repeatedly during every send, manual or scheduled, until it returns `nil`.
    ///
    /// Return only changes inside `context.options.scope` (F13): the engine does not filter.
    /// ``SyncEngine/RecordZoneChangeBatch/init(pendingChanges:recordProvider:)`` builds a batch
    /// within the server's limits from the pending list.
    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch?

    /// The options for the rest of a fetch (F14), asked before each zone is fetched: change the
    /// scope or put the zone on screen first (`prioritizedZoneIDs`). The default returns
    /// `context.options`.
    func nextFetchChangesOptions(
        _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.FetchChangesOptions
}

extension SyncEngineDelegate {
    /// Returns `context.options` unchanged (F14).
    public func nextFetchChangesOptions(
        _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.FetchChangesOptions {
        context.options
    }
}
