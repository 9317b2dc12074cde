import Logging
import SyncModel

/// Listens to the database's push hints (F83, F113–F115): each hint is a `pushReceived` entry,
/// which lists its zone as unfetched when the hint names one (F25); with automatic sync, the
/// scheduler hears it and plans a fetch.
struct PushListener: Sendable {
    /// The database whose push hints are heard.
    let database: any CloudDatabase
    /// Where each hint is noted.
    let deviceLog: DeviceLog
    let logger: Logger

    /// Starts listening, until the returned task is cancelled (the engine cancels it when it
    /// goes). The task holds the device log weakly, so it never keeps a log open.
    func start() -> Task<Void, Never> {
        let hints = database.pushHints()
        let deviceLog = self.deviceLog
        let logger = self.logger
        return Task { [weak deviceLog] in
            for await hint in hints {
                guard !Task.isCancelled, let deviceLog else { return }
                deviceLog.note(.pushReceived(zoneID: hint.zoneID), logger: logger)
            }
        }
    }
}

extension PushListener {
    /// The push listener of an engine, from its context.
    init(_ context: EngineContext) {
        self.init(database: context.database, deviceLog: context.deviceLog, logger: context.logger)
    }
}
