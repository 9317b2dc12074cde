import SyncModel

extension SyncEngine {
    /// The automatic sync loop (F5, F81–F90): the scheduler decides what is next and when; the
    /// engine does it and reports how it went. Ends when the engine or the scheduler stops.
    static func runAutomatically(_ engine: WeakEngine, _ scheduler: SyncScheduler) async {
        while let decision = await scheduler.nextDecision() {
            guard let engine = engine.value else { return }
            switch decision {
            case .checkAccount:
                scheduler.accountChecked(await engine.checkAccount())
            case .run(let work):
                scheduler.finished(work, error: await engine.runScheduled(work))
            }
        }
    }

    /// Runs a scheduled send or fetch (F59, F70: reason `.scheduled`, default options) and
    /// returns the error that should be retried, if any.
    func runScheduled(_ work: SyncSchedule.Work) async -> SyncError? {
        do {
            switch work {
            case .send:
                let context = SendChangesContext(reason: .scheduled, options: SendChangesOptions())
                try await runSync(.send(context.options)) { [self] in try await runSend(context) }
            case .fetch:
                let context = FetchChangesContext(reason: .scheduled, options: FetchChangesOptions())
                try await runSync(.fetch(context.options)) { [self] in try await runFetch(context) }
            }
            return nil
        } catch let error as SyncError {
            guard error.code == .partialFailure else { return error }
            // Item failures are the app's (F91); a transient one is retried (F89).
            return error.partialErrors.values.sorted { $0.code.rawValue < $1.code.rawValue }.first {
                $0.keepsChangePending
            }
        } catch {
            return SyncError.from(error, during: "a scheduled \(work)")
        }
    }
}
