import Foundation
import LogStore
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// The projection rule (Docs/LogFormat.md, Projections): the device index built incrementally
/// equals its rebuild from offset 1, and equals an independent replay of the log
/// (`ReferenceState`), over random histories of adds, removes, batches and results, sends,
/// fetches and deliveries (every kind of `DeviceEntry.Kind.inUse`).
@Suite("Projection rule")
struct ProjectionRuleTests {
    typealias F = Fixtures

    /// Generates random device entries over a small ID space, so that changes collide often.
    struct HistoryGenerator {
        var random: SeededRandom
        var model = ReferenceState()
        var tag = 0
        /// The number of entries generated so far: the offset of the last one.
        var generated: UInt64 = 0
        /// The last batchPrepared generated, and, when the entry just generated is a result to
        /// write against it (`batchSaved`, kind 15: every other result that saved records), it.
        var lastPrepared: PreparedBatchReference?
        var resultAgainst: PreparedBatchReference?
        static let zones = [F.notes, F.photos, F.shared, RecordZone.ID(zoneName: String(repeating: "L", count: 300))]
        static let ids = zones.flatMap { zone in (0..<8).map { F.id("r\($0)", zone) } }
        static let codes: [SyncError.Code] =
            SyncError.Code.transient.sorted { $0.rawValue < $1.rawValue } + [
                .serverRecordChanged, .unknownItem, .zoneNotFound, .quotaExceeded, .batchRequestFailed,
                .userDeletedZone,
            ]

        init(seed: UInt64) { random = SeededRandom(seed: seed) }

        mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &random)] }
        mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }

        mutating func recordChange() -> RecordChange {
            let id = pick(Self.ids)
            return chance(60) ? .saveRecord(id) : .deleteRecord(id)
        }

        mutating func zoneChange() -> DatabaseChange {
            let zone = pick(Self.zones)
            return chance(60) ? .saveZone(RecordZone(zoneID: zone)) : .deleteZone(zone)
        }

        mutating func error() -> SyncError {
            let code = pick(Self.codes)
            if code == .serverRecordChanged && chance(80) {
                tag += 1
                let id = pick(Self.ids)
                return .serverRecordChanged(
                    serverRecord: F.serverRecord(id, tag: "c\(tag)"), clientRecord: F.clientRecord(id))
            }
            return SyncError(code)
        }

        /// A zone's fetch ended: fetched to the end, gone, or stopped by another error.
        mutating func zoneFetchError() -> SyncError? {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5: nil
            case 5..<7: SyncError(pick([.zoneNotFound, .userDeletedZone] as [SyncError.Code]))
            default: SyncError(pick(Self.codes + [.changeTokenExpired, .operationCancelled]))
            }
        }

        /// Some distinct zones, in a random order.
        mutating func someZones(_ max: Int) -> [RecordZone.ID] {
            Array(Self.zones.shuffled(using: &random).prefix(Int.random(in: 0...max, using: &random)))
        }

        /// A zone to fetch: mostly one the model has as unfetched, so fetches drain it (F25).
        mutating func zoneToFetch() -> RecordZone.ID {
            let unfetched = model.unfetchedZones.sorted { $0.zoneName < $1.zoneName }
            return !unfetched.isEmpty && chance(70) ? pick(unfetched) : pick(Self.zones)
        }

        mutating func reason() -> SyncEngine.SyncReason { chance(50) ? .scheduled : .manual }

        /// An entry of a send or a fetch that carries no state (F36, F41, F42, F45).
        mutating func timelineMark() -> DeviceEntry {
            let error: SyncError? = chance(60) ? nil : SyncError(pick(Self.codes + [.operationCancelled]))
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                let scope: SyncEngine.SendChangesOptions.Scope =
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: .all
                    case 1: .zoneIDs(someZones(2))
                    case 2: .allExcluding(someZones(2))
                    default: .recordIDs([pick(Self.ids), pick(Self.ids)])
                    }
                return .sendStarted(SyncEngine.SendChangesContext(reason: reason(), options: .init(scope: scope)))
            case 1:
                return .sendFinished(error: error)
            case 2:
                let scope: SyncEngine.FetchChangesOptions.Scope =
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: .all
                    case 1: .zoneIDs(someZones(3))
                    default: .allExcluding(someZones(2))
                    }
                return .fetchStarted(
                    SyncEngine.FetchChangesContext(
                        reason: reason(), options: .init(scope: scope, prioritizedZoneIDs: someZones(2))))
            default:
                return .fetchFinished(error: error)
            }
        }

        /// The next entry, applied to the model.
        mutating func next() -> DeviceEntry {
            let entry: DeviceEntry
            generated += 1
            resultAgainst = nil
            switch Int.random(in: 0..<137, using: &random) {
            case 0..<35:
                entry = .pendingRecordZoneChangesAdded(
                    (0..<Int.random(in: 1...4, using: &random)).map { _ in recordChange() })
            case 35..<45:
                // Mostly changes that are pending, so removals bite.
                let pending = model.records
                entry = .pendingRecordZoneChangesRemoved(
                    (0..<Int.random(in: 1...3, using: &random)).map { _ in
                        !pending.isEmpty && chance(70) ? pick(pending) : recordChange()
                    })
            case 45..<53:
                entry = .pendingDatabaseChangesAdded(
                    (0..<Int.random(in: 1...3, using: &random)).map { _ in zoneChange() })
            case 53..<57:
                entry = .pendingDatabaseChangesRemoved([zoneChange()])
            case 57..<61:
                entry = .untrackedChangesFlagged(chance(50))
            case 61..<75:
                // A batch of some pending changes, and now and then one that is not pending.
                var saves: [Record.ID] = []
                var deletions: [Record.ID] = []
                for change in model.records.prefix(Int.random(in: 0...6, using: &random))
                    + (chance(20) ? [recordChange()] : [])
                {
                    switch change {
                    case .saveRecord(let id) where !saves.contains(id) && !deletions.contains(id): saves.append(id)
                    case .deleteRecord(let id) where !saves.contains(id) && !deletions.contains(id):
                        deletions.append(id)
                    default: break
                    }
                }
                // Mostly with the request ID it is sent under (F103); now and then without, as in
                // a log written before the ID was recorded.
                entry = .batchPrepared(
                    recordsToSave: saves.map { F.clientRecord($0) }, recordIDsToDelete: deletions,
                    atomicByZone: chance(30),
                    requestID: chance(80) ? RequestID("p-\(generated)") : nil)
                lastPrepared = PreparedBatchReference(
                    offset: LogOffset(generated), recordsToSave: saves.map { F.clientRecord($0) })
            case 75..<92:
                // A result for the batch in flight: each item saved, deleted, failed or unmentioned.
                var saved: [Record] = []
                var deleted: [Record.ID] = []
                var failedSaves: [Record.ID: SyncError] = [:]
                var failedDeletes: [Record.ID: SyncError] = [:]
                let flying = model.inFlight.keys.sorted { $0.description < $1.description }
                // Now and then the request fails as a whole on the way: its outcome stays unknown.
                let codes: [SyncError.Code] = [.networkFailure, .serverResponseLost]
                let whole: SyncError? = chance(15) ? SyncError(pick(codes)) : nil
                for change in flying {
                    if let whole {
                        switch change {
                        case .saveRecord(let id): failedSaves[id] = whole
                        case .deleteRecord(let id): failedDeletes[id] = whole
                        }
                        continue
                    }
                    let outcome = Int.random(in: 0..<10, using: &random)
                    switch (change, outcome) {
                    case (_, 9): break  // not mentioned
                    case (.saveRecord(let id), 0..<5):
                        tag += 1
                        saved.append(F.serverRecord(id, tag: "s\(tag)"))
                    case (.deleteRecord(let id), 0..<5): deleted.append(id)
                    case (.saveRecord(let id), _): failedSaves[id] = error()
                    case (.deleteRecord(let id), _): failedDeletes[id] = error()
                    }
                }
                entry = .batchResult(
                    saved: saved, deleted: deleted, failedSaves: failedSaves, failedDeletes: failedDeletes)
                // Every other result that saved records is written against its batchPrepared.
                if !saved.isEmpty, generated % 2 == 0 { resultAgainst = lastPrepared }
            case 100..<104:
                entry = timelineMark()
            case 104..<110:
                // A page of the database's feed: zones modified, zones deleted (a zone deleted and
                // re-created since the token is in both lists, deletion first: F149).
                tag += 1
                let deletions = someZones(2).map { zone in
                    SyncModel.DatabaseChange.Deletion(zoneID: zone, reason: pick(ZoneDeletionReason.allCases))
                }
                entry = .databaseChangesFetched(
                    modifications: someZones(3), deletions: deletions,
                    changeToken: DatabaseChangeToken(offset: ChangeOffset(UInt64(tag))), moreComing: chance(20))
            case 110..<118:
                // A page of a zone's feed: records of the zone saved and deleted on the server.
                let zone = zoneToFetch()
                let ids = Self.ids.filter { $0.zoneID == zone }
                var modifications: [Record] = []
                for _ in 0..<Int.random(in: 0...3, using: &random) {
                    tag += 1
                    modifications.append(F.serverRecord(pick(ids), tag: "f\(tag)"))
                }
                let deletions = (0..<Int.random(in: 0...2, using: &random)).map { _ in
                    RecordZoneChange.Deletion(recordID: pick(ids), recordType: "Note")
                }
                tag += 1
                entry = .zoneChangesFetched(
                    zoneID: zone, modifications: modifications, deletions: deletions,
                    changeToken: ZoneChangeToken(zoneID: zone, incarnation: 1, offset: ChangeOffset(UInt64(tag))),
                    moreComing: chance(20))
            case 118..<124:
                entry = .zoneFetchFinished(zoneID: zoneToFetch(), error: zoneFetchError())
            case 124..<127:
                entry = .changeTokenReset(zoneID: chance(30) ? nil : pick(Self.zones))
            case 127..<130:
                entry = .eventsDelivered(through: LogOffset(UInt64.random(in: 1...generated, using: &random)))
            case 130:
                let users: [Record.ID?] = [nil, F.userA, F.userB]
                entry = .accountChanged(previous: pick(users), current: pick(users))
            case 131:
                entry = .subscriptionEnsured(pick(["logsync-database", "legacy-sub"]))
            case 132..<134:
                entry = .pushReceived(zoneID: chance(40) ? nil : pick(Self.zones))
            case 134..<136:
                let cause: SyncSchedule.Cause = pick([
                    .localChanges, .pushHint, .catchUp,
                    .retry(failures: 2, after: .seconds(4), serverRetryAfter: false),
                ])
                entry = .syncScheduled(
                    work: chance(50) ? .send : .fetch, reason: cause,
                    after: .milliseconds(Int64.random(in: 0...5_000, using: &random)))
            case 136:
                entry = .syncDeferred(reason: pick(["no account", "network down, power ok"]))
            default:
                var saved: [RecordZone] = []
                var deleted: [RecordZone.ID] = []
                var failedSaves: [RecordZone.ID: SyncError] = [:]
                var failedDeletes: [RecordZone.ID: SyncError] = [:]
                for change in model.zones {
                    switch (change, Int.random(in: 0..<4, using: &random)) {
                    case (_, 3): break
                    case (.saveZone(let zone), 0):
                        saved.append(RecordZone(zoneID: zone.zoneID, capabilities: .customZoneDefault))
                    case (.deleteZone(let id), 0): deleted.append(id)
                    case (.saveZone(let zone), _): failedSaves[zone.zoneID] = error()
                    case (.deleteZone(let id), _): failedDeletes[id] = error()
                    }
                }
                entry = .databaseChangesSent(
                    savedZones: saved, deletedZoneIDs: deleted, failedZoneSaves: failedSaves,
                    failedZoneDeletes: failedDeletes)
            }
            model.apply(entry, at: LogOffset(generated))
            return entry
        }
    }

    @Test("Random histories of 5,000 entries: incremental equals rebuild and replay", arguments: [1, 2, 3] as [UInt64])
    func randomHistories(seed: UInt64) async throws {
        try withTemporaryDirectory { directory in
            let deviceLog = try openDeviceLog(directory)
            var generator = HistoryGenerator(seed: seed)
            var written = 0
            var commits = 0
            while written < 5000 {
                // Mostly one entry per commit, sometimes several in one transaction.
                let count = generator.chance(10) ? Int.random(in: 2...5, using: &generator.random) : 1
                var entries: [DeviceEntry] = []
                for _ in 0..<count {
                    let entry = generator.next()
                    guard let prepared = generator.resultAgainst else {
                        entries.append(entry)
                        continue
                    }
                    // A result written against its batchPrepared is appended alone.
                    try deviceLog.append(entries)
                    entries = []
                    try deviceLog.append([entry], preparedBatch: prepared)
                }
                try deviceLog.append(entries)
                written += count
                commits += 1
                // The projection agrees with the model, checked every few commits (each check
                // decodes the whole state) and at the end.
                guard commits % 8 == 0 || written >= 5000 else { continue }
                let stored = try deviceLog.read { try $0.referenceState(recordIDs: HistoryGenerator.ids) }
                if stored != generator.model {
                    Issue.record("seed \(seed): the index differs from the model after offset \(written)")
                    #expect(stored.records == generator.model.records)
                    #expect(stored.zones == generator.model.zones)
                    #expect(stored.inFlight == generator.model.inFlight)
                    #expect(stored.serverRecords == generator.model.serverRecords)
                    #expect(stored.knownZones == generator.model.knownZones)
                    #expect(stored.unfetchedZones == generator.model.unfetchedZones)
                    #expect(stored.databaseToken == generator.model.databaseToken)
                    #expect(stored.zoneTokens == generator.model.zoneTokens)
                    #expect(stored.delivered == generator.model.delivered)
                    #expect(stored.unanswered == generator.model.unanswered)
                    return
                }
            }
            #expect(try deviceLog.log.lastOffset == LogOffset(UInt64(written)))
            #expect(try deviceLog.log.verifyProjections() == nil)
            #expect(try ReferenceState.replaying(deviceLog) == generator.model)
            // The history exercised every rule.
            var kinds: [EntryKind: Int] = [:]
            try deviceLog.log.forEachEntry { kinds[$0.kind, default: 0] += 1 }
            #expect(Set(kinds.keys) == Set(DeviceEntry.Kind.inUse))
        }
    }

    @Test("A rebuilt index equals the one kept incrementally")
    func rebuildEqualsIncremental() async throws {
        try withTemporaryDirectory { directory in
            let deviceLog = try openDeviceLog(directory)
            var generator = HistoryGenerator(seed: 42)
            for _ in 0..<500 { try deviceLog.append(generator.next()) }
            let before = try deviceLog.read { try $0.referenceState(recordIDs: HistoryGenerator.ids) }
            try deviceLog.log.rebuildProjections()
            let after = try deviceLog.read { try $0.referenceState(recordIDs: HistoryGenerator.ids) }
            #expect(after == before)
            #expect(try deviceLog.log.verifyProjections() == nil)
        }
    }
}
