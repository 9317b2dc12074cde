import Foundation
import LogStore
import Logging
import SyncModel
import Tracing

/// One send (F47), as `sendChanges()` and the scheduler run it: `willSendChanges`; the pending
/// database changes in scope, in batches, each answered by `sentDatabaseChanges`; then the
/// delegate's record batches, each answered by `sentRecordZoneChanges` (F57), going back to the
/// database changes whenever new ones were added meanwhile; `didSendChanges` once the delegate
/// returns `nil`.
///
/// A failure that keeps its change pending (transient, F89, or cancelled) ends the send after
/// its batch is reported: asking again at once would fail the same way. So does a batch made
/// only of items that already failed in this send: the app re-queued them, and they wait for
/// the next send. One exception, as CKSyncEngine keeps sending while changes are pending: a save
/// that failed with `serverRecordChanged` (F92) and that the app re-added while handling the
/// conflict (merged onto the server's record) goes out once more in the same send; a second
/// failure leaves it for the next send.
///
/// Built from the engine's context for each send, with what a send uses: on the server's side
/// the database, the asset uploads and the zone keys (for the batches' assets and encrypted
/// fields); on the device's, the device log and the delegate; the request-ID prefix and the
/// logger.
struct SendFlow: Sendable {
    /// The server database the changes go to.
    let database: any CloudDatabase
    /// Uploads the contents of a batch's assets before the batch is logged.
    let uploads: AssetUploads
    /// Seals a batch's encrypted fields, and opens the server's record of a conflict.
    let keys: ZoneKeyUpkeep
    /// Delivers the send's events and asks the app for its batches.
    let delegate: any DelegateGateway
    /// Where each step of the send is appended, and the pending changes are read.
    let deviceLog: DeviceLog
    /// The first part of the request IDs the send makes (F103).
    let requestIDPrefix: String
    let logger: Logger
    /// Where the send's spans go (``SyncTracing``).
    let tracer: any Tracer

    /// Runs one send with `context`, in a `sync.send` span.
    ///
    /// - Throws: `SyncError`: the error that stopped the send, else `partialFailure` with each
    ///   failed item's error (F75); `LogStoreError` if the device log cannot be written.
    func run(_ context: SyncEngine.SendChangesContext) async throws {
        try await tracer.withSpan(SyncTracing.sendSpan) { span in try await run(context, span: span) }
    }

    private func run(_ context: SyncEngine.SendChangesContext, span: any Span) async throws {
        logger.debug("send started: \(context)")
        let step = try await SyncStep.start(
            .send(context), deviceLog: deviceLog, delegate: delegate, requestIDPrefix: requestIDPrefix)
        if let start = step.startOffset { span.attributes[SyncTracing.deviceLogOffset] = SyncTracing.attribute(start) }

        var failures: [SyncError.ItemID: SyncError] = [:]
        // Saves sent again in this send after a conflict: once each.
        var conflictRetries = Set<SyncError.ItemID>()
        var stop: SyncError?
        var attemptedZoneChanges = Set<SyncEngine.PendingDatabaseChange>()
        let untrackedAtStart = try step.read { try $0.hasPendingUntrackedChanges() }
        var lastAsked = try deviceLog.log.lastOffset  // the log's end when the delegate was last asked

        func zoneChangesToSend() throws -> [SyncEngine.PendingDatabaseChange] {
            try step.read { try $0.pendingDatabaseChanges() }.filter {
                context.options.scope.contains($0.zoneID) && !attemptedZoneChanges.contains($0)
            }
        }

        sending: while true {
            // Database changes first (F23, F47 step 2).
            while case let pending = try zoneChangesToSend(), !pending.isEmpty {
                if Task.isCancelled {
                    stop = .cancelled("sendChanges")
                    break sending
                }
                let batch = Array(pending.prefix(Limits.maxItemsPerRequest))
                attemptedZoneChanges.formUnion(batch)
                let outcome = try await sendZoneChanges(batch, step)
                // A change settled by the server is no longer pending; if the app adds it again
                // later in this send (after a zoneNotFound, say), it is a new change to send.
                let stillPending = Set(try step.read { try $0.pendingDatabaseChanges() })
                attemptedZoneChanges.formIntersection(stillPending)
                failures.merge(outcome.failures) { first, _ in first }
                if let halt = outcome.halt {
                    stop = halt
                    break sending
                }
            }
            // Then one record batch from the delegate (F12, F47 step 3).
            if Task.isCancelled {
                stop = .cancelled("sendChanges")
                break sending
            }
            lastAsked = try deviceLog.log.lastOffset
            guard let batch = await delegate.nextRecordZoneChangeBatch(context),
                !batch.recordsToSave.isEmpty || !batch.recordIDsToDelete.isEmpty
            else {
                // Zone changes added while the delegate was asked: send them too (F47 step 4).
                if try !zoneChangesToSend().isEmpty { continue sending }
                break sending
            }
            // A batch of nothing but items that already failed in this send (a delegate that
            // re-queues its failures, F91) would fail the same way again, forever: the send ends
            // here, and they stay pending for the next one.
            let items =
                batch.recordsToSave.map { SyncError.ItemID.record($0.recordID) }
                + batch.recordIDsToDelete.map { .record($0) }
            // A save re-added after its conflict may go once more (F92): the app merged it onto the
            // server's record, and it is expected to succeed.
            func retriesConflict(_ item: SyncError.ItemID) -> Bool {
                failures[item]?.code == .serverRecordChanged && !conflictRetries.contains(item)
            }
            if items.allSatisfy({ failures[$0] != nil && !retriesConflict($0) }) { break sending }
            let retried = batch.recordsToSave.map { SyncError.ItemID.record($0.recordID) }.filter(retriesConflict)
            conflictRetries.formUnion(retried)
            let outcome = try await sendRecordBatch(batch, step)
            failures.merge(outcome.failures) { first, _ in first }
            if let halt = outcome.halt {
                stop = halt
                break sending
            }
        }

        // F24 (spec choice): the untracked flag is cleared once the delegate had nothing more and
        // everything sent succeeded — unless the app set it again since the delegate's last
        // answer, for changes that answer could not include.
        if stop == nil, failures.isEmpty, untrackedAtStart, try step.read({ try $0.hasPendingUntrackedChanges() }),
            try !untrackedChangesFlagged(after: lastAsked)
        {
            try step.append(.untrackedChangesFlagged(false))
        }
        let end = try await step.finish(.sendFinished(error: stop), .didSendChanges(.init(context: context)))
        span.attributes[SyncTracing.deviceLogEndOffset] = SyncTracing.attribute(end)
        logger.debug(
            "send finished: \(failures.count) failed items, stopped by \(stop.map(String.init(describing:)) ?? "nothing")"
        )

        try SyncError.throwEnding(stop: stop, failures: failures) {
            "\($0) of the changes sent failed; see partialErrors and the sent events"
        }
    }

    /// Whether the app set ``State/hasPendingUntrackedChanges`` after `offset` (F24).
    private func untrackedChangesFlagged(after offset: LogOffset) throws -> Bool {
        var flagged = false
        try deviceLog.log.forEachEntry(from: offset.next) { entry in
            guard entry.kind == DeviceEntry.Kind.untrackedChangesFlagged else { return }
            if case .untrackedChangesFlagged(true) = try DeviceEntry(entry) { flagged = true }
        }
        return flagged
    }

    /// What one request of a send ended with: the items that failed, and the error that should
    /// end the send, if any.
    struct SendOutcome {
        var failures: [SyncError.ItemID: SyncError] = [:]
        var halt: SyncError?
        /// The offset of the entry that reported the answer (`batchResult`, `databaseChangesSent`).
        var reportOffset: LogOffset?

        mutating func failed(_ item: SyncError.ItemID, _ error: SyncError) {
            failures[item] = error
            if halt == nil, error.keepsChangePending { halt = error }
        }
    }

    /// Sends one batch of zone changes and reports it (F23, F43), in a `sync.send.zones` span.
    private func sendZoneChanges(
        _ changes: [SyncEngine.PendingDatabaseChange], _ step: SyncStep
    ) async throws -> SendOutcome {
        try await tracer.withSpan(SyncTracing.zonesSpan) { span in
            let outcome = try await sendZoneChangesTraced(changes, step)
            if let offset = outcome.reportOffset {
                span.attributes[SyncTracing.deviceLogOffset] = SyncTracing.attribute(offset)
            }
            return outcome
        }
    }

    private func sendZoneChangesTraced(
        _ changes: [SyncEngine.PendingDatabaseChange], _ step: SyncStep
    ) async throws -> SendOutcome {
        var zonesToSave: [RecordZone] = []
        var zoneIDsToDelete: [RecordZone.ID] = []
        for change in changes {
            switch change {
            case .saveZone(let zone): zonesToSave.append(zone)
            case .deleteZone(let id): zoneIDsToDelete.append(id)
            }
        }
        let response: ModifyZonesResponse
        do {
            response = try await database.modifyZones(
                ModifyZonesRequest(
                    zonesToSave: zonesToSave, zoneIDsToDelete: zoneIDsToDelete, operationGroup: step.operationGroup))
        } catch {
            let failure = SyncError.from(error, during: "modifyZones")
            response = ModifyZonesResponse(
                saveResults: Dictionary(uniqueKeysWithValues: zonesToSave.map { ($0.zoneID, .failure(failure)) }),
                deleteResults: Dictionary(uniqueKeysWithValues: zoneIDsToDelete.map { ($0, .failure(failure)) }))
        }
        return try await report(
            response, saving: zonesToSave, id: \.zoneID, deleting: zoneIDsToDelete, as: SyncError.ItemID.zone, step
        ) {
            .databaseChangesSent(
                savedZones: $0.saved, deletedZoneIDs: $0.deleted, failedZoneSaves: $0.failedSaveErrors,
                failedZoneDeletes: $0.failedDeletes)
        } event: {
            .sentDatabaseChanges(
                .init(
                    savedZones: $0.saved, failedZoneSaves: $0.failedSaves.map { .init(zone: $0.item, error: $0.error) },
                    deletedZoneIDs: $0.deleted, failedZoneDeletes: $0.failedDeletes))
        }
    }

    /// Sends one record batch and reports it (F44, F55–F58). The assets' contents are uploaded
    /// first (F134, ``AssetUploads/prepareAssets(_:group:)``); then the records, with their assets' digests and
    /// sizes, go into the log (`batchPrepared`, marking them in flight, F32, with the request
    /// ID), the server's answer after. Items that failed before the request are not sent, and are
    /// reported in the same `batchResult` and `sentRecordZoneChanges` as the server's answer.
    ///
    /// The request runs in a `sync.send.batch` span, tagged with the offset of the
    /// `batchPrepared` entry, the request ID and the offset of the `batchResult`; the
    /// `batchPrepared` records the span's trace context.
    private func sendRecordBatch(
        _ appBatch: SyncEngine.RecordZoneChangeBatch, _ step: SyncStep
    ) async throws -> SendOutcome {
        try await tracer.withSpan(SyncTracing.batchSpan) { span in
            let outcome = try await sendRecordBatch(appBatch, step, span: span)
            if let offset = outcome.reportOffset {
                span.attributes[SyncTracing.deviceLogEndOffset] = SyncTracing.attribute(offset)
            }
            return outcome
        }
    }

    private func sendRecordBatch(
        _ appBatch: SyncEngine.RecordZoneChangeBatch, _ step: SyncStep, span: any Span
    ) async throws -> SendOutcome {
        var prepared = await uploads.prepareAssets(appBatch, group: step.operationGroup)
        await keys.sealEncryptedValues(&prepared)
        let batch = prepared.batch
        let failedBeforeRequest = ModifyRecordsResponse(
            saveResults: prepared.failedSaves.mapValues { .failure($0) },
            deleteResults: prepared.failedDeletes.mapValues { .failure($0) })
        guard !batch.recordsToSave.isEmpty || !batch.recordIDsToDelete.isEmpty else {
            // Every item failed before the request: nothing was sent or put in flight, and the
            // result reports the failures alone (an unanswered earlier batch stays unanswered).
            return try await report(failedBeforeRequest, appBatch, prepared, nil, step)
        }
        // The request ID names this batch: the engine's launch prefix (seeded) and the offset of
        // its batchPrepared entry, so the server can replay its answer to a resend (F103). A
        // batch equal to the last one whose outcome is unknown (its request failed on the way,
        // or the app stopped before the answer came: the index keeps it across launches) goes
        // out under that one's ID: if the server had applied it, it replays its answer rather
        // than report a conflict with the device's own save.
        let unanswered = try step.read { try $0.unansweredBatch() }
        let reused = unanswered.flatMap { $0.sameRequest(as: batch) ? $0.requestID : nil }
        var requestID = reused ?? RequestID("")
        let preparedOffset = try step.append(traceHeaders: SyncTracing.injectedHeaders(tracer)) {
            [requestIDPrefix] offset in
            requestID = reused ?? RequestID("\(requestIDPrefix)-\(offset.rawValue)")
            return .batchPrepared(
                recordsToSave: batch.recordsToSave, recordIDsToDelete: batch.recordIDsToDelete,
                atomicByZone: batch.atomicByZone, requestID: requestID)
        }
        span.attributes[SyncTracing.deviceLogOffset] = SyncTracing.attribute(preparedOffset)
        span.attributes[SyncTracing.requestID] = requestID.rawValue
        if let unanswered, reused != nil {
            logger.debug(
                "sending batch \(preparedOffset.rawValue) again under the request ID of batch \(unanswered.offset.rawValue)"
            )
        }
        let request = ModifyRecordsRequest(
            recordsToSave: batch.recordsToSave.map { (prepared.sealed[$0.recordID] ?? $0).withoutAssetFiles },
            recordIDsToDelete: batch.recordIDsToDelete,
            savePolicy: .ifServerRecordUnchanged, atomically: batch.atomicByZone,
            requestID: requestID, operationGroup: step.operationGroup)
        let response: ModifyRecordsResponse
        do {
            do {
                response = try await database.modifyRecords(request)
            } catch let error as SyncError where error.code == .serverResponseLost {
                // The server may have applied the batch and the answer been lost (F103): the same
                // request, with the same ID, is sent once more, and the server replays its answer
                // instead of reporting a false conflict.
                logger.debug(
                    "resending \(request.requestID.map(String.init(describing:)) ?? "a batch") after \(error.code)")
                response = try await database.modifyRecords(request)
            }
        } catch {
            // The request as a whole failed (F52: a manual batch over the limits fails here with
            // limitExceeded): every item carries the error.
            let failure = SyncError.from(error, during: "modifyRecords")
            var saveResults: [Record.ID: Result<Record, SyncError>] = [:]
            var deleteResults: [Record.ID: Result<Void, SyncError>] = [:]
            for record in batch.recordsToSave { saveResults[record.recordID] = .failure(failure) }
            for id in batch.recordIDsToDelete { deleteResults[id] = .failure(failure) }
            response = ModifyRecordsResponse(saveResults: saveResults, deleteResults: deleteResults)
        }
        // A saved record keeps pointing at the app's files of its assets (the server keeps no
        // local path); the items that failed before the request join the answer.
        // Encrypted fields come back sealed: the saved record gets the opened values it was sent
        // with, and the server's record of a conflict is opened when this device can (F129).
        var answer = failedBeforeRequest
        for record in batch.recordsToSave {
            switch response.saveResults[record.recordID] {
            case .success(let saved)?:
                answer.saveResults[record.recordID] = .success(
                    ZoneKeyUpkeep.restoringOpenedValues(saved.restoringAssetFiles(from: record), from: record))
            case .failure(var error)?:
                if let serverRecord = error.serverRecord, serverRecord.hasEncryptedValues {
                    do throws(SyncError) {
                        error.serverRecord = try await keys.openingEncryptedValues(serverRecord)
                    } catch let failure {
                        logger.warning("the server's copy of \(record.recordID) stays sealed: \(failure)")
                    }
                }
                answer.saveResults[record.recordID] = .failure(error)
            case nil:
                break
            }
        }
        for id in batch.recordIDsToDelete { answer.deleteResults[id] = response.deleteResults[id] }
        // The result says whether the outcome stays unknown (the index's rule, in
        // UnansweredBatch.outcomeUnknown): then the next equal batch reuses the request ID. It is
        // written against the batchPrepared entry, which holds the records as sent: each saved
        // record is stored as what the server changed in it.
        return try await report(
            answer, appBatch, prepared,
            PreparedBatchReference(offset: preparedOffset, recordsToSave: batch.recordsToSave), step)
    }

    /// Reports the answer to a record batch: each save as prepared (or as the app gave it, when
    /// it failed before the request), in the app's order.
    private func report(
        _ answer: ModifyRecordsResponse, _ appBatch: SyncEngine.RecordZoneChangeBatch, _ prepared: PreparedBatch,
        _ preparedBatch: PreparedBatchReference?, _ step: SyncStep
    ) async throws -> SendOutcome {
        try await report(
            answer, saving: prepared.recordsToReport, id: \.recordID, deleting: appBatch.recordIDsToDelete,
            as: SyncError.ItemID.record, step, preparedBatch: preparedBatch
        ) {
            .batchResult(
                saved: $0.saved, deleted: $0.deleted, failedSaves: $0.failedSaveErrors, failedDeletes: $0.failedDeletes)
        } event: {
            .sentRecordZoneChanges(
                .init(
                    savedRecords: $0.saved,
                    failedRecordSaves: $0.failedSaves.map { .init(record: $0.item, error: $0.error) },
                    deletedRecordIDs: $0.deleted, failedRecordDeletes: $0.failedDeletes))
        }
    }

    /// Reports the server's answer to one request: sorts it item by item, in the order the items
    /// were sent, into what was saved and deleted and what failed and why (an item the answer
    /// leaves out failed, ``unanswered(_:)``); appends the log entry `entry` makes of it, then
    /// delivers the event `event` makes of it.
    ///
    /// - Returns: the failures, and the one that ends the send, if any.
    private func report<ID, Saved, Item>(
        _ response: ModifyResponse<ID, Saved>, saving items: [Item], id: (Item) -> ID, deleting ids: [ID],
        as itemID: (ID) -> SyncError.ItemID, _ step: SyncStep, preparedBatch: PreparedBatchReference? = nil,
        entry: (SortedAnswer<ID, Saved, Item>) -> DeviceEntry,
        event: (SortedAnswer<ID, Saved, Item>) -> SyncEngine.Event
    ) async throws -> SendOutcome {
        var outcome = SendOutcome()
        var answer = SortedAnswer<ID, Saved, Item>()
        for item in items {
            let id = id(item)
            switch response.saveResults[id] ?? .failure(Self.unanswered(itemID(id))) {
            case .success(let saved): answer.saved.append(saved)
            case .failure(let error):
                answer.failedSaves.append((item, error))
                answer.failedSaveErrors[id] = error
                outcome.failed(itemID(id), error)
            }
        }
        for id in ids {
            switch response.deleteResults[id] ?? .failure(Self.unanswered(itemID(id))) {
            case .success: answer.deleted.append(id)
            case .failure(let error):
                answer.failedDeletes[id] = error
                outcome.failed(itemID(id), error)
            }
        }
        outcome.reportOffset = try step.append(entry(answer), preparedBatch: preparedBatch)
        await delegate.deliver(event(answer))
        return outcome
    }

    /// A request's answer, sorted by ``report(_:saving:id:deleting:as:_:entry:event:)``.
    struct SortedAnswer<ID: Hashable, Saved, Item> {
        var saved: [Saved] = []
        /// The items whose save failed, as sent, with their errors.
        var failedSaves: [(item: Item, error: SyncError)] = []
        /// The same failures by ID, as the device log records them.
        var failedSaveErrors: [ID: SyncError] = [:]
        var deleted: [ID] = []
        var failedDeletes: [ID: SyncError] = [:]
    }

    /// The error of an item the server's response left out.
    private static func unanswered(_ item: SyncError.ItemID) -> SyncError {
        SyncError(.internalError, "the server's response has no result for \(item)", item: item)
    }
}

extension SendFlow {
    /// A send built from the engine's context, with asset uploads and zone keys made from it.
    init(_ context: EngineContext) {
        self.init(
            database: context.database, uploads: AssetUploads(context), keys: ZoneKeyUpkeep(context),
            delegate: context.delegate, deviceLog: context.deviceLog, requestIDPrefix: context.requestIDPrefix,
            logger: context.logger, tracer: context.tracer)
    }
}
