import Logging
import Synchronization

/// How the engine's flows reach the app: they deliver events and ask for record batches and
/// fetch options through this, never through the ``SyncEngine`` (F9–F14).
///
/// ``EngineDelegate`` is the engine's: it calls the app's ``SyncEngineDelegate``. A test of a
/// flow gives it one of its own that records the events and scripts the answers.
protocol DelegateGateway: Sendable {
    /// Hands `event` to the delegate and returns once it has been handled (F9, F10).
    func deliver(_ event: SyncEngine.Event) async

    /// The delegate's next batch of record changes to send, or `nil` (F12).
    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext) async -> SyncEngine.RecordZoneChangeBatch?

    /// The delegate's options for the rest of a fetch, asked before each zone (F14).
    func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext) async -> SyncEngine.FetchChangesOptions
}

/// The app's delegate as an engine's flows reach it: held weakly (F4), each call marked as a
/// callback of its engine so that a `sendChanges()` or `fetchChanges()` from inside it is
/// refused (F11), and handed the engine the delegate's methods take.
///
/// The engine is attached once, at the end of its initializer (a part cannot name its owner
/// before the owner exists), and held weakly: this is the one place that knows the engine, only
/// to pass it to the delegate as the `syncEngine` argument CKSyncEngine's API has.
final class EngineDelegate: DelegateGateway {
    private let delegateReference: WeakDelegate
    private let engine = Mutex(WeakEngine(nil))
    private let logger: Logger

    init(_ delegate: (any SyncEngineDelegate)?, logger: Logger) {
        self.delegateReference = WeakDelegate(delegate)
        self.logger = logger
    }

    /// Makes `engine` the one the delegate's calls name; called once, by the engine's initializer.
    func attach(_ engine: SyncEngine) {
        self.engine.withLock { $0 = WeakEngine(engine) }
    }

    /// The delegate and the engine, while both are alive (F4).
    private var parties: (delegate: any SyncEngineDelegate, engine: SyncEngine)? {
        guard let delegate = delegateReference.value, let engine = engine.withLock({ $0.value }) else { return nil }
        return (delegate, engine)
    }

    /// Dropped if the delegate is gone (F4).
    func deliver(_ event: SyncEngine.Event) async {
        guard case (let delegate, let engine)? = parties else { return }
        logger.trace("delivering \(event.kind)")
        await SyncEngine.$callbackEngine.withValue(ObjectIdentifier(engine)) {
            await delegate.handleEvent(event, syncEngine: engine)
        }
    }

    /// `nil` if the delegate is gone (F4).
    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext) async -> SyncEngine.RecordZoneChangeBatch?
    {
        guard case (let delegate, let engine)? = parties else { return nil }
        return await SyncEngine.$callbackEngine.withValue(ObjectIdentifier(engine)) {
            await delegate.nextRecordZoneChangeBatch(context, syncEngine: engine)
        }
    }

    /// `context.options` if the delegate is gone (F4).
    func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext) async -> SyncEngine.FetchChangesOptions {
        guard case (let delegate, let engine)? = parties else { return context.options }
        return await SyncEngine.$callbackEngine.withValue(ObjectIdentifier(engine)) {
            await delegate.nextFetchChangesOptions(context, syncEngine: engine)
        }
    }
}

/// The delegate, held weakly (F4).
private final class WeakDelegate: Sendable {
    weak let value: (any SyncEngineDelegate)?

    init(_ value: (any SyncEngineDelegate)?) { self.value = value }
}
