import Foundation
import LogStore
import LogSync
import SyncModel

/// The state of one replay (see ``ServerReplay``): fed the decoded entries in log order, it
/// re-issues the requests they record and collects the verdicts.
///
/// The device's change tokens are kept as the replayed server issued them, under the rules of
/// the device index (DeviceIndex's doc comment): a page stores its token, a deleted or vanished
/// zone and a `changeTokenReset` drop one, an account change after the first wipes them all.
struct ServerReplayWalk<Database: CloudDatabase> {
    typealias Outcome = ServerReplayOutcome
    typealias ItemID = SyncError.ItemID

    let database: Database
    /// How conflicts the replayed server answers are resolved (``ServerReplayPolicy``).
    let policy: ServerReplayPolicy
    private(set) var requests: [ServerReplayRequest] = []
    private(set) var mismatches: [ServerReplayMismatch] = []
    /// What the device would hold: the last version of each record the replayed server gave it
    /// (saved, a conflict's server record, fetched), without the deleted ones.
    private(set) var held: [Record.ID: Record] = [:]
    /// The policy's merges not sent yet, to go with the device's next batch.
    private var merges: [Record.ID: Record] = [:]
    /// Records whose next recorded resend the policy replaces (its merge) or drops.
    private var overridden: Set<Record.ID> = []

    /// The replayed change tag of each recorded one, per record.
    private var tags: [Record.ID: [String: String]] = [:]
    /// The database change token the device would hold, as the replayed server issued it.
    private var databaseToken: DatabaseChangeToken?
    /// Each zone's change token the device would hold, as the replayed server issued it.
    private var zoneTokens: [RecordZone.ID: ZoneChangeToken] = [:]
    /// The record batch prepared and not answered yet.
    private var batch: PreparedBatch?
    /// Where the fetch under way is.
    private var fetch = FetchProgress()
    /// The accounts the log records.
    private var account = AccountTrack()
    /// The server's side the fresh server is seeded from, if any (``ServerSide``).
    var seeder: ServerSideSeeder?

    struct PreparedBatch {
        var offset: LogOffset
        var records: [Record]
        var deletions: [Record.ID]
        var atomic: Bool
        var requestID: RequestID?

        var items: [ItemID] { records.map { .record($0.recordID) } + deletions.map { .record($0) } }
    }

    struct FetchProgress {
        /// Whether the database's feed was fetched to its end in this fetch (or zones began).
        var databaseDone = false
        /// The last page of the zone being fetched: its zone and `moreComing`.
        var lastZonePage: (zoneID: RecordZone.ID, moreComing: Bool)?
    }

    struct AccountTrack {
        /// Whether an `accountChanged` was met (the next one wipes the device's state).
        var recorded = false
        /// The account signed in at this point of the log, if any.
        var current: Record.ID?
        /// The first account the log records: the one the replay stands for.
        var replayed: Record.ID?
    }

    init(database: Database, policy: ServerReplayPolicy = .asRecorded) {
        self.database = database
        self.policy = policy
    }

    // MARK: Entries

    /// Handles one entry: re-issues the request it answers, if any, and compares.
    ///
    /// - Throws: ``ServerReplayError`` `requestFailed` when a replayed request fails as a whole
    ///   with a transport failure, a transient code or a cancellation.
    mutating func apply(_ entry: DeviceEntry, at offset: LogOffset) async throws(ServerReplayError) {
        switch entry {
        case .batchPrepared(let records, let deletions, let atomic, let requestID):
            try unanswered("no answer was recorded before the next batch")
            batch = PreparedBatch(
                offset: offset, records: records, deletions: deletions, atomic: atomic, requestID: requestID)
        case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
            try await replayBatch(
                at: offset, saved: saved, deleted: deleted, failedSaves: failedSaves, failedDeletes: failedDeletes)
        case .databaseChangesSent(let savedZones, let deletedZoneIDs, let failedZoneSaves, let failedZoneDeletes):
            try await replayZoneChanges(
                at: offset, saved: savedZones, deleted: deletedZoneIDs, failedSaves: failedZoneSaves,
                failedDeletes: failedZoneDeletes)
        case .sendStarted, .sendFinished:
            try unanswered("no answer was recorded before the send ended")
        case .fetchStarted:
            try unanswered("no answer was recorded before the next fetch")
            fetch = FetchProgress()
        case .databaseChangesFetched(let modifications, let deletions, let token, let moreComing):
            try seeder?.seed(through: LogOffset(token.offset.rawValue), at: offset)
            try await replayDatabasePage(
                at: offset, modifications: modifications, deletions: deletions, moreComing: moreComing)
        case .zoneChangesFetched(let zoneID, let modifications, let deletions, let token, let moreComing):
            try seeder?.seed(through: LogOffset(token.offset.rawValue), at: offset)
            try await replayZonePage(
                at: offset, zoneID: zoneID, modifications: modifications, deletions: deletions, moreComing: moreComing)
        case .zoneFetchFinished(let zoneID, let error):
            try await replayZoneFetchEnd(at: offset, zoneID: zoneID, error: error)
        case .fetchFinished(let error):
            try await replayFetchEnd(at: offset, error: error)
            fetch = FetchProgress()
        case .changeTokenReset(let zoneID):
            try await replayTokenReset(at: offset, zoneID: zoneID)
        case .accountChanged(_, let current):
            if account.recorded {
                databaseToken = nil
                zoneTokens = [:]
            }
            account.recorded = true
            account.current = current
            if account.replayed == nil { account.replayed = current }
        case .pendingRecordZoneChangesAdded, .pendingRecordZoneChangesRemoved, .pendingDatabaseChangesAdded,
            .pendingDatabaseChangesRemoved, .untrackedChangesFlagged, .eventsDelivered, .subscriptionEnsured,
            .pushReceived, .syncScheduled, .syncDeferred:
            break
        }
    }

    /// Ends the walk: a batch still unanswered is reported as such.
    mutating func finish() throws(ServerReplayError) {
        try unanswered("its answer is not among the replayed entries")
    }

    // MARK: Sends

    private mutating func replayBatch(
        at offset: LogOffset, saved: [Record], deleted: [Record.ID], failedSaves: [Record.ID: SyncError],
        failedDeletes: [Record.ID: SyncError]
    ) async throws(ServerReplayError) {
        guard let batch else {
            let items =
                (saved.map(\.recordID) + Self.sorted(Array(failedSaves.keys)) + deleted
                + Self.sorted(Array(failedDeletes.keys))).map { ItemID.record($0) }
            var comparison = Comparison(offset: offset, entry: "batchResult", kind: .modifyRecords, items: items)
            comparison.request.verdict = .notComparable(
                reason: "no batchPrepared precedes it, so the request is unknown")
            record(comparison)
            return
        }
        self.batch = nil
        var comparison = Comparison(offset: offset, entry: "batchResult", kind: .modifyRecords, items: batch.items)
        comparison.request.preparedOffset = batch.offset

        let recordedAll = Self.recordedOutcomes(
            saves: batch.records.map(\.recordID), deletes: batch.deletions,
            saved: saved.map { ($0.recordID, .saved($0)) },
            deleted: deleted, failedSaves: failedSaves, failedDeletes: failedDeletes)

        if let reason = notIssuable(recordedAll) ?? accountReason {
            try seeder?.seedCommit(of: batch.requestID, at: offset)
            comparison.request.verdict = .notComparable(reason: reason)
            record(comparison)
            return
        }
        // The records sent: as recorded (their tags translated), but where the policy settled a
        // conflict otherwise than the recorded delegate, its merge instead of the recorded resend
        // (or nothing), and its merges still waiting.
        var records: [Record] = []
        var sent: [Record] = []  // as the device would hold them before the answer
        for original in batch.records {
            if overridden.remove(original.recordID) != nil {
                if let merge = merges.removeValue(forKey: original.recordID) {
                    records.append(merge)
                    sent.append(merge)
                    comparison.request.notes.append(
                        "\(ItemID.record(original.recordID)): sent the policy's merge instead of the recorded record")
                } else {
                    comparison.request.notes.append(
                        "\(ItemID.record(original.recordID)): not sent, the policy kept the server's record")
                }
                continue
            }
            records.append(translated(original, notes: &comparison.request.notes))
            sent.append(original)
        }
        for id in merges.keys.sorted(by: { $0.description < $1.description })
        where !records.contains(where: { $0.recordID == id }) {
            let merge = merges.removeValue(forKey: id)!
            overridden.remove(id)
            records.append(merge)
            sent.append(merge)
            comparison.request.notes.append(
                "\(ItemID.record(id)): sent the policy's merge, which the recorded log does not hold")
        }
        let saveIDs = records.map(\.recordID)
        let items = saveIDs.map { ItemID.record($0) } + batch.deletions.map { ItemID.record($0) }
        comparison.request.items = items
        let recorded = Self.recordedOutcomes(
            saves: saveIDs, deletes: batch.deletions, saved: saved.map { ($0.recordID, .saved($0)) },
            deleted: deleted, failedSaves: failedSaves, failedDeletes: failedDeletes)
        guard !items.isEmpty else {
            try seeder?.seedCommit(of: batch.requestID, at: offset)
            comparison.request.verdict = .notComparable(reason: "the policy left nothing of this batch to send")
            record(comparison)
            return
        }
        // Seeded from a server's side, the request goes with its own ID, so that its commit
        // lines up with the server side's (``ServerSide``).
        let commit = try seeder?.prepare(batch.requestID, at: offset)
        if seeder != nil {
            // What went out, so a resend's stale field shows (Docs/Debugging.md).
            for record in records {
                comparison.request.notes.append(
                    "sent \(DeviceStateReport.record(record.recordID))  \(DeviceStateReport.recordSummary(record))")
            }
        }
        if let seeder, commit == nil, batch.requestID.flatMap({ seeder.commits[$0] }) == nil {
            comparison.request.notes.append(
                "the server's side holds no outcome of \(batch.requestID.map { "\($0)" } ?? "this request (no request ID)")"
            )
        }
        let requestID =
            seeder != nil
            ? (batch.requestID ?? RequestID("replay-\(batch.offset)")) : RequestID("replay-\(batch.offset)")
        let request = ModifyRecordsRequest(
            recordsToSave: records, recordIDsToDelete: batch.deletions, savePolicy: .ifServerRecordUnchanged,
            atomically: batch.atomic, requestID: requestID)
        let database = self.database
        comparison.request.reissued = true
        let answer = try await ask("modifyRecords", at: offset) { try await database.modifyRecords(request) }
        if let commit { try seeder?.check(commit, at: offset) }
        let replayed = Self.outcomes(of: answer, saves: saveIDs, deletes: batch.deletions) {
            .saved($0)
        }
        for (item, (recordedOutcome, replayedOutcome)) in zip(items, zip(recorded, replayed)) {
            compare(item, recordedOutcome, replayedOutcome, in: &comparison)
        }
        hold(replayed, sent: sent, deletions: batch.deletions)
        record(comparison)
    }

    /// Keeps what a replayed modify answer gives the device, and asks the policy about each
    /// conflict.
    private mutating func hold(_ outcomes: [Outcome], sent: [Record], deletions: [Record.ID]) {
        for (index, outcome) in outcomes.enumerated() {
            let id = index < sent.count ? sent[index].recordID : deletions[index - sent.count]
            switch outcome {
            case .saved(let record): held[id] = record
            case .deleted: held[id] = nil
            case .failed(let error):
                switch error.code {
                case .serverRecordChanged:
                    guard let server = error.serverRecord else { break }
                    held[id] = server
                    guard index < sent.count else { break }
                    switch policy.resolve(sent[index], server) {
                    case .asRecorded:
                        break
                    case .keepServerRecord:
                        overridden.insert(id)
                        merges[id] = nil
                    case .send(let merge):
                        var record = server.systemFieldsCopy()
                        for key in merge.allKeys() { record[key] = merge[key] }
                        overridden.insert(id)
                        merges[id] = record
                    }
                case .unknownItem, .zoneNotFound, .userDeletedZone:
                    held[id] = nil
                default:
                    break
                }
            default:
                break
            }
        }
    }

    /// Sends the policy's merges that no later recorded batch took, as the device would have
    /// at its next send: a request the recorded log does not hold, named by `offset`, the log's
    /// last entry. A conflict it meets in turn is resolved by the policy but not sent again.
    mutating func sendRemainingMerges(at offset: LogOffset) async throws(ServerReplayError) {
        guard !merges.isEmpty, accountReason == nil else { return }
        let records = merges.keys.sorted { $0.description < $1.description }.map { merges[$0]! }
        merges = [:]
        overridden = []
        let ids = records.map(\.recordID)
        var comparison = Comparison(
            offset: offset, entry: "policy", kind: .modifyRecords, items: ids.map { ItemID.record($0) })
        comparison.request.notes.append("the policy's merges, sent after the recorded log ends")
        let request = ModifyRecordsRequest(
            recordsToSave: records, recordIDsToDelete: [], savePolicy: .ifServerRecordUnchanged, atomically: false,
            requestID: RequestID("replay-policy-\(offset)"))
        let database = self.database
        comparison.request.reissued = true
        let answer = try await ask("modifyRecords", at: offset) { try await database.modifyRecords(request) }
        let replayed = Self.outcomes(of: answer, saves: ids, deletes: []) { .saved($0) }
        comparison.request.verdict = .notComparable(reason: "the recorded log holds no such request")
        hold(replayed, sent: records, deletions: [])
        record(comparison)
    }

    private mutating func replayZoneChanges(
        at offset: LogOffset, saved: [RecordZone], deleted: [RecordZone.ID], failedSaves: [RecordZone.ID: SyncError],
        failedDeletes: [RecordZone.ID: SyncError]
    ) async throws(ServerReplayError) {
        defer { for id in deleted { zoneTokens[id] = nil } }
        let zonesToSave = saved.map(\.zoneID) + Self.sorted(Array(failedSaves.keys))
        let zonesToDelete = deleted + Self.sorted(Array(failedDeletes.keys))
        let items = (zonesToSave + zonesToDelete).map { ItemID.zone($0) }
        var comparison = Comparison(offset: offset, entry: "databaseChangesSent", kind: .modifyZones, items: items)

        let recorded = Self.recordedOutcomes(
            saves: zonesToSave, deletes: zonesToDelete, saved: saved.map { ($0.zoneID, .zoneSaved($0)) },
            deleted: deleted, failedSaves: failedSaves, failedDeletes: failedDeletes)

        if let reason = notIssuable(recorded) ?? accountReason {
            comparison.request.verdict = .notComparable(reason: reason)
            record(comparison)
            return
        }
        if seeder != nil {
            comparison.request.verdict = .notComparable(
                reason:
                    "zone changes carry no request ID: the server's side's entries stand for them; not re-issued")
            record(comparison)
            return
        }
        let request = ModifyZonesRequest(
            zonesToSave: zonesToSave.map { RecordZone(zoneID: $0) }, zoneIDsToDelete: zonesToDelete)
        let database = self.database
        comparison.request.reissued = true
        let answer = try await ask("modifyZones", at: offset) { try await database.modifyZones(request) }
        let replayed = Self.outcomes(of: answer, saves: zonesToSave, deletes: zonesToDelete) { .zoneSaved($0) }
        for (item, (recordedOutcome, replayedOutcome)) in zip(items, zip(recorded, replayed)) {
            compare(item, recordedOutcome, replayedOutcome, in: &comparison)
        }
        record(comparison)
    }

    /// The recorded outcome of each item of a modify request, its saves then its deletions in
    /// the order asked: `saved` (each item's outcome), `deleted`, or the item's error (`.absent`
    /// for an item the entry does not name).
    private static func recordedOutcomes<ID: Hashable>(
        saves: [ID], deletes: [ID], saved: [(ID, Outcome)], deleted: [ID], failedSaves: [ID: SyncError],
        failedDeletes: [ID: SyncError]
    ) -> [Outcome] {
        var recordedSaves: [ID: Outcome] = [:]
        for (id, outcome) in saved { recordedSaves[id] = outcome }
        for (id, error) in failedSaves { recordedSaves[id] = .failed(error) }
        var recordedDeletes: [ID: Outcome] = [:]
        for id in deleted { recordedDeletes[id] = .deleted }
        for (id, error) in failedDeletes { recordedDeletes[id] = .failed(error) }
        return saves.map { recordedSaves[$0] ?? .absent } + deletes.map { recordedDeletes[$0] ?? .absent }
    }

    /// The replayed outcome of each item of a modify request, its saves then its deletions in
    /// the order asked; a request that failed as a whole gives every item its error, as the
    /// engine records it.
    private static func outcomes<ID: Hashable & Sendable & Codable, Saved: Hashable & Sendable & Codable>(
        of answer: Result<ModifyResponse<ID, Saved>, SyncError>, saves: [ID], deletes: [ID],
        saved: (Saved) -> Outcome
    ) -> [Outcome] {
        switch answer {
        case .success(let response):
            let savedOutcomes = saves.map { id -> Outcome in
                switch response.saveResults[id] {
                case .success(let value)?: saved(value)
                case .failure(let error)?: .failed(error)
                case nil: .absent
                }
            }
            let deletedOutcomes = deletes.map { id -> Outcome in
                switch response.deleteResults[id] {
                case .success?: .deleted
                case .failure(let error)?: .failed(error)
                case nil: .absent
                }
            }
            return savedOutcomes + deletedOutcomes
        case .failure(let error):
            return (saves + deletes).map { _ in .failed(error) }
        }
    }

    /// Reports the batch prepared and never answered, if any, as not comparable: the original
    /// server may or may not have applied it, so it is not re-issued.
    private mutating func unanswered(_ why: String) throws(ServerReplayError) {
        guard let batch else { return }
        self.batch = nil
        try seeder?.seedCommit(of: batch.requestID, at: batch.offset)
        var comparison = Comparison(
            offset: batch.offset, entry: "batchPrepared", kind: .modifyRecords, items: batch.items)
        comparison.request.preparedOffset = batch.offset
        comparison.request.verdict = .notComparable(
            reason: "\(why); not re-issued, since the original server may or may not have applied it")
        record(comparison)
    }

    // MARK: Fetches

    private mutating func replayDatabasePage(
        at offset: LogOffset, modifications: [RecordZone.ID], deletions: [DatabaseChange.Deletion], moreComing: Bool
    ) async throws(ServerReplayError) {
        defer {
            if !moreComing { fetch.databaseDone = true }
            for deletion in deletions { zoneTokens[deletion.zoneID] = nil }
        }
        let comparison = Comparison(
            offset: offset, entry: "databaseChangesFetched", kind: .fetchDatabaseChanges, items: [])
        let count = modifications.count + deletions.count
        let request = FetchDatabaseChangesRequest(since: databaseToken, resultsLimit: moreComing ? max(1, count) : nil)
        let database = self.database
        var recorded = Keyed<RecordZone.ID>()
        for id in modifications { recorded.add(id, .zoneModified) }
        for deletion in deletions { recorded.add(deletion.zoneID, .zoneDeleted(deletion.reason)) }
        let page = try await replayPage(
            comparison, operation: "fetchDatabaseChanges", recorded: recorded, moreComing: moreComing,
            item: ItemID.zone,
            fetch: { try await database.fetchDatabaseChanges(request) }
        ) { page in
            var replayed = Keyed<RecordZone.ID>()
            for modification in page.modifications { replayed.add(modification.zoneID, .zoneModified) }
            for deletion in page.deletions { replayed.add(deletion.zoneID, .zoneDeleted(deletion.reason)) }
            return (replayed, page.moreComing)
        }
        if let page { databaseToken = page.changeToken }
    }

    private mutating func replayZonePage(
        at offset: LogOffset, zoneID: RecordZone.ID, modifications: [Record], deletions: [RecordZoneChange.Deletion],
        moreComing: Bool
    ) async throws(ServerReplayError) {
        fetch.databaseDone = true
        // After a listing from scratch the engine appends a page of its own: the records it knew
        // that the listing left out, deleted meanwhile (F100). It follows the zone's last page.
        if let last = fetch.lastZonePage, last.zoneID == zoneID, !last.moreComing { return }
        fetch.lastZonePage = (zoneID, moreComing)
        let comparison = Comparison(
            offset: offset, entry: "zoneChangesFetched", kind: .fetchZoneChanges, items: [.zone(zoneID)])
        let count = modifications.count + deletions.count
        let request = FetchZoneChangesRequest(
            zoneID: zoneID, since: zoneTokens[zoneID], resultsLimit: moreComing ? max(1, count) : nil)
        let database = self.database
        var recorded = Keyed<Record.ID>()
        for record in modifications { recorded.add(record.recordID, .modified(record)) }
        for deletion in deletions { recorded.add(deletion.recordID, .recordDeleted(deletion.recordType)) }
        let page = try await replayPage(
            comparison, operation: "fetchZoneChanges", recorded: recorded, moreComing: moreComing, item: ItemID.record,
            fetch: { try await database.fetchZoneChanges(request) }
        ) { page in
            var replayed = Keyed<Record.ID>()
            for modification in page.modifications {
                replayed.add(modification.record.recordID, .modified(modification.record))
            }
            for deletion in page.deletions { replayed.add(deletion.recordID, .recordDeleted(deletion.recordType)) }
            return (replayed, page.moreComing)
        }
        if let page {
            zoneTokens[zoneID] = page.changeToken
            for modification in page.modifications { held[modification.record.recordID] = modification.record }
            for deletion in page.deletions { held[deletion.recordID] = nil }
        }
    }

    /// Re-issues the fetch of a page whose recorded items are `recorded` (unless the account
    /// rules it out) and compares each item's outcome, then `moreComing`, with the replayed
    /// page's (`replayed`). Returns the replayed page, or `nil` when the fetch was not re-issued
    /// or failed.
    private mutating func replayPage<Key: Hashable, Page>(
        _ comparison: Comparison, operation: String, recorded: Keyed<Key>, moreComing: Bool, item: (Key) -> ItemID,
        fetch: () async throws -> Page, replayed: (Page) -> (items: Keyed<Key>, moreComing: Bool)
    ) async throws(ServerReplayError) -> Page? {
        var comparison = comparison
        if let reason = accountReason {
            comparison.request.verdict = .notComparable(reason: reason)
            record(comparison)
            return nil
        }
        comparison.request.reissued = true
        var answer: Page?
        switch try await ask(operation, at: comparison.request.offset, fetch) {
        case .failure(let error):
            compare(nil, .answered, .failed(error), in: &comparison)
        case .success(let page):
            let (items, replayedMoreComing) = replayed(page)
            for key in recorded.keys(with: items) {
                compare(item(key), recorded[key], items[key], in: &comparison)
            }
            compare(nil, .moreComing(moreComing), .moreComing(replayedMoreComing), in: &comparison)
            answer = page
        }
        record(comparison)
        return answer
    }

    /// A zone's fetch ended; with an error, the request that failed is re-issued from the same token.
    private mutating func replayZoneFetchEnd(
        at offset: LogOffset, zoneID: RecordZone.ID, error: SyncError?
    ) async throws(ServerReplayError) {
        fetch.databaseDone = true
        fetch.lastZonePage = nil
        guard let error else { return }
        defer {
            if error.code == .zoneNotFound || error.code == .userDeletedZone { zoneTokens[zoneID] = nil }
        }
        let request = FetchZoneChangesRequest(zoneID: zoneID, since: zoneTokens[zoneID])
        let database = self.database
        try await replayFailedFetch(
            at: offset, entry: "zoneFetchFinished", kind: .fetchZoneChanges, item: .zone(zoneID), error: error,
            operation: "fetchZoneChanges"
        ) { _ = try await database.fetchZoneChanges(request) }
    }

    /// A fetch ended; with an error before the database's feed was fetched to its end, the
    /// database fetch that failed is re-issued from the same token.
    private mutating func replayFetchEnd(at offset: LogOffset, error: SyncError?) async throws(ServerReplayError) {
        guard let error, !fetch.databaseDone else { return }
        let request = FetchDatabaseChangesRequest(since: databaseToken)
        let database = self.database
        try await replayFailedFetch(
            at: offset, entry: "fetchFinished", kind: .fetchDatabaseChanges, item: nil, error: error,
            operation: "fetchDatabaseChanges"
        ) { _ = try await database.fetchDatabaseChanges(request) }
    }

    /// A fetch was refused with `changeTokenExpired` (F100): it is re-issued from the same token,
    /// then the token is dropped.
    private mutating func replayTokenReset(at offset: LogOffset, zoneID: RecordZone.ID?) async throws(ServerReplayError)
    {
        defer {
            if let zoneID { zoneTokens[zoneID] = nil } else { databaseToken = nil }
        }
        let expired = SyncError(.changeTokenExpired, "the change token expired")
        let database = self.database
        if let zoneID {
            let request = FetchZoneChangesRequest(zoneID: zoneID, since: zoneTokens[zoneID])
            try await replayFailedFetch(
                at: offset, entry: "changeTokenReset", kind: .fetchZoneChanges, item: .zone(zoneID), error: expired,
                operation: "fetchZoneChanges", answeredIsComparable: false
            ) { _ = try await database.fetchZoneChanges(request) }
        } else {
            let request = FetchDatabaseChangesRequest(since: databaseToken)
            try await replayFailedFetch(
                at: offset, entry: "changeTokenReset", kind: .fetchDatabaseChanges, item: nil, error: expired,
                operation: "fetchDatabaseChanges", answeredIsComparable: false
            ) { _ = try await database.fetchDatabaseChanges(request) }
        }
    }

    /// Re-issues a fetch whose recorded outcome is `error` and compares. Its page, if the replay
    /// gets one, is not applied: the device stored nothing.
    ///
    /// - Parameter answeredIsComparable: `false` when a page instead of the error says nothing
    ///   about the server's rules (an expired token on the original server).
    private mutating func replayFailedFetch(
        at offset: LogOffset, entry: String, kind: ServerReplayRequest.Kind, item: ItemID?, error: SyncError,
        operation: String, answeredIsComparable: Bool = true, _ body: () async throws -> Void
    ) async throws(ServerReplayError) {
        var comparison = Comparison(offset: offset, entry: entry, kind: kind, items: item.map { [$0] } ?? [])
        if let reason = notIssuable([.failed(error)]) ?? accountReason {
            comparison.request.verdict = .notComparable(reason: reason)
            record(comparison)
            return
        }
        comparison.request.reissued = true
        let replayed: Outcome =
            switch try await ask(operation, at: offset, body) {
            case .success: .answered
            case .failure(let replayedError): .failed(replayedError)
            }
        if case .answered = replayed, !answeredIsComparable {
            comparison.request.verdict = .notComparable(
                reason:
                    "the original server had dropped the tombstones behind this token (F144); the replayed one answers")
        } else {
            compare(item, .failed(error), replayed, in: &comparison)
        }
        record(comparison)
    }

    // MARK: Comparing

    /// A request being compared: its report line and its mismatches.
    struct Comparison {
        var request: ServerReplayRequest
        var mismatches: [ServerReplayMismatch] = []

        init(offset: LogOffset, entry: String, kind: ServerReplayRequest.Kind, items: [ItemID]) {
            request = ServerReplayRequest(
                offset: offset, entry: entry, preparedOffset: nil, kind: kind, items: items, reissued: false,
                verdict: .matched, notes: [])
        }
    }

    /// Compares one item's outcomes, notes a recorded outcome that cannot be compared, and maps
    /// the change tags of the record versions both sides hold.
    private mutating func compare(
        _ item: ItemID?, _ recorded: Outcome, _ replayed: Outcome, in comparison: inout Comparison
    ) {
        if case .failed(let error) = recorded, !Self.reproducible(error) {
            comparison.request.notes.append(
                "\(item.map { "\($0)" } ?? "the answer"): recorded \(error.code), not compared (a transport failure or cancellation)"
            )
            return
        }
        mapTags(recorded, replayed)
        guard !Self.same(recorded, replayed) else { return }
        comparison.mismatches.append(
            ServerReplayMismatch(
                offset: comparison.request.offset, entry: comparison.request.entry, kind: comparison.request.kind,
                requestItems: comparison.request.items, item: item, recorded: recorded, replayed: replayed))
    }

    /// Files a compared request (its verdict from its mismatches, unless it is not comparable).
    private mutating func record(_ comparison: Comparison) {
        var request = comparison.request
        if request.verdict == .matched, !comparison.mismatches.isEmpty { request.verdict = .mismatched }
        requests.append(request)
        mismatches += comparison.mismatches
    }

    /// Whether two outcomes agree by content (see ``ServerReplayOutcome``).
    static func same(_ recorded: Outcome, _ replayed: Outcome) -> Bool {
        switch (recorded, replayed) {
        case (.saved(let a), .saved(let b)), (.modified(let a), .modified(let b)):
            sameContent(a, b)
        case (.failed(let a), .failed(let b)):
            a.code == b.code && a.zoneDeletionReason == b.zoneDeletionReason
                && (a.serverRecord == nil) == (b.serverRecord == nil)
                && zip([a.serverRecord].compactMap { $0 }, [b.serverRecord].compactMap { $0 }).allSatisfy(sameContent)
        case (.zoneSaved(let a), .zoneSaved(let b)):
            a.zoneID == b.zoneID && a.capabilities == b.capabilities && (a.share == nil) == (b.share == nil)
        default:
            recorded == replayed
        }
    }

    /// Whether two records have the same ID, type, fields and parent (system fields aside).
    static func sameContent(_ a: Record, _ b: Record) -> Bool {
        a.recordID == b.recordID && a.recordType == b.recordType && a.fields == b.fields && a.parent == b.parent
    }

    /// Whether a recorded failure could come again from a server's rules: not a transport
    /// failure, a transient code (F89), a cancellation or a lost response.
    static func reproducible(_ error: SyncError) -> Bool {
        !(error.isTransient || error.code == .operationCancelled || error.code == .serverResponseLost)
    }

    /// Why a request whose recorded outcomes are `recorded` is not re-issued: every item failed
    /// in a way no server's rules reproduce. `nil` when it is re-issued.
    private func notIssuable(_ recorded: [Outcome]) -> String? {
        var codes: [SyncError.Code] = []
        for outcome in recorded {
            guard case .failed(let error) = outcome, !Self.reproducible(error) else { return nil }
            if !codes.contains(error.code) { codes.append(error.code) }
        }
        guard !codes.isEmpty else { return nil }
        let which = codes.map(\.description).joined(separator: ", ")
        return recorded.count == 1
            ? "it failed with \(which), a transport failure or cancellation a server cannot reproduce; not re-issued"
            : "every item failed with \(which), a transport failure or cancellation a server cannot reproduce; not re-issued"
    }

    /// Why requests are not re-issued at this point of the log: another account than the
    /// replayed one was signed in. `nil` when they are.
    private var accountReason: String? {
        guard let current = account.current, let replayed = account.replayed, current != replayed else { return nil }
        return
            "recorded while the account \(current.recordName) was signed in; the replay stands for \(replayed.recordName), the first account the log records"
    }

    // MARK: Translating

    /// `record` with its change tag translated to the replayed server's (see ``ServerReplay``).
    private func translated(_ record: Record, notes: inout [String]) -> Record {
        guard let tag = record.recordChangeTag else { return record }
        let replayed = tags[record.recordID]?[tag]
        if replayed == nil {
            notes.append("change tag \(String(reflecting: tag)) of \(record.recordID) has no replayed counterpart")
        }
        var copy = record
        let fields = record.systemFields
        copy.systemFields = fields.with(tag: replayed ?? "unmapped-\(tag)", share: fields.share)
        return copy
    }

    /// Maps the recorded change tag to the replayed one where both outcomes hold a version of
    /// the same record of the same kind.
    private mutating func mapTags(_ recorded: Outcome, _ replayed: Outcome) {
        let pair: (Record, Record)? =
            switch (recorded, replayed) {
            case (.saved(let a), .saved(let b)), (.modified(let a), .modified(let b)): (a, b)
            case (.failed(let a), .failed(let b)):
                if let a = a.serverRecord, let b = b.serverRecord { (a, b) } else { nil }
            default: nil
            }
        guard let (a, b) = pair, a.recordID == b.recordID, let from = a.recordChangeTag, let to = b.recordChangeTag
        else {
            return
        }
        tags[a.recordID, default: [:]][from] = to
    }

    // MARK: Helpers

    /// Sends a request; a whole-request failure the server's rules explain is returned, any
    /// other stops the replay.
    private func ask<R>(
        _ operation: String, at offset: LogOffset, _ body: () async throws -> R
    ) async throws(ServerReplayError) -> Result<R, SyncError> {
        do {
            return .success(try await body())
        } catch {
            let failure: SyncError =
                switch error {
                case let error as SyncError: error
                case is CancellationError: SyncError(.operationCancelled, "\(operation) was cancelled")
                default: SyncError(.networkFailure, "\(operation) failed", cause: String(describing: error))
                }
            guard Self.reproducible(failure) else {
                throw ServerReplayError.serverReplay(
                    .requestFailed, "the replayed \(operation) for this entry failed: \(failure)", offset: offset,
                    requestError: failure)
            }
            return .failure(failure)
        }
    }

    /// IDs in a stable order (by description), for lists built from dictionaries.
    static func sorted<ID: CustomStringConvertible>(_ ids: [ID]) -> [ID] {
        ids.sorted { $0.description < $1.description }
    }

    /// Outcomes by ID, in the order added.
    struct Keyed<Key: Hashable> {
        private(set) var order: [Key] = []
        private var outcomes: [Key: Outcome] = [:]

        mutating func add(_ key: Key, _ outcome: Outcome) {
            if outcomes.updateValue(outcome, forKey: key) == nil { order.append(key) }
        }

        subscript(key: Key) -> Outcome { outcomes[key] ?? .absent }

        /// These keys in order, then the other's keys not among them.
        func keys(with other: Keyed<Key>) -> [Key] {
            order + other.order.filter { outcomes[$0] == nil }
        }
    }
}
