import LogSync

/// A delegate that handles no event and sends nothing: for an engine whose state a test reads
/// or writes directly, or that opens a log without ever syncing.
///
/// ```swift
/// var configuration = SyncEngine.Configuration(
///     database: database, deviceLog: deviceLog, delegate: IdleDelegate.shared)
/// configuration.automaticallySync = false
/// let engine = try SyncEngine(configuration)
/// ```
public final class IdleDelegate: SyncEngineDelegate, Sendable {
    /// The one idle delegate; it holds nothing, so every engine may share it.
    public static let shared = IdleDelegate()

    /// An idle delegate of its own.
    public init() {}

    public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}

    /// Always `nil`: there is nothing to send.
    public func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? { nil }
}
