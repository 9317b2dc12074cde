import SyncModel

extension SyncEngine {
    /// Listens to the database's push hints for as long as the engine lives (F83, F113–F115):
    /// each hint is a `pushReceived` entry, which lists its zone as unfetched when the hint
    /// names one (F25); with automatic sync, the scheduler hears it and plans a fetch.
    func startListeningForPushes() -> Task<Void, Never> {
        let hints = database.pushHints()
        let weakEngine = WeakEngine(self)
        return Task {
            for await hint in hints {
                guard let engine = weakEngine.value else { return }
                engine.deviceLog.note(.pushReceived(zoneID: hint.zoneID), logger: engine.logger)
            }
        }
    }
}
