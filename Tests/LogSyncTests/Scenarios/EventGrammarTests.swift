import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync

/// The event grammar (F46, F47 with F38–F45, F61) over generated multi-device histories, with
/// convergence at the end and the projection rule on every device log.
@Suite("Event grammar")
struct EventGrammarTests {
    /// The seeds of `swift test`; `EVENT_GRAMMAR_SEEDS=17,123` runs those instead.
    static let seeds: [UInt64] = {
        if let list = ProcessInfo.processInfo.environment["EVENT_GRAMMAR_SEEDS"] {
            let seeds = list.split(separator: ",").compactMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
            if !seeds.isEmpty { return seeds }
        }
        return Array(1...40)
    }()

    // F33–F47, F16–F32 (pending lists, in flight, tokens), F89–F102 (faults), F144, F149, F150
    @Test("Generated histories: every stream follows F46/F47, devices converge, projections hold", arguments: seeds)
    func generatedHistory(seed: UInt64) async throws {
        try await withTemporaryDirectory { directory in
            let history = try GeneratedHistory(seed: seed, directory: directory)
            try await history.runAndCheck()
        }
    }

    // Requirement: a failing seed reproduces exactly.
    @Test("A seed replays exactly: the same operations, outcomes, events and final notes")
    func seedReplays() async throws {
        var runs: [GeneratedHistory.Fingerprint] = []
        for _ in 0..<2 {
            try await withTemporaryDirectory { directory in
                let history = try GeneratedHistory(seed: 11, directory: directory)
                try await history.runAndCheck()
                runs.append(try history.fingerprint())
            }
        }
        #expect(runs[0].trace == runs[1].trace, "seed 11: the operation traces differ between two runs")
        #expect(runs[0].events == runs[1].events, "seed 11: the event kinds differ between two runs")
        #expect(runs[0].notes == runs[1].notes, "seed 11: the final notes differ between two runs")
    }

    // Coverage: the generator reaches the situations it is meant to (across a few seeds).
    @Test("The generator reaches conflicts, faults, purges, expired tokens and failed zone fetches")
    func coverage() async throws {
        var total = GeneratedHistory.Stats()
        for seed in EventGrammarTests.seeds.prefix(10) {
            try await withTemporaryDirectory { directory in
                let history = try GeneratedHistory(seed: seed, directory: directory)
                try await history.runAndCheck()
                total.add(history.stats)
            }
        }
        #expect(total.sends > 0 && total.fetches > 0 && total.zoneFetches > 0)
        #expect(total.conflicts > 0, "no serverRecordChanged in \(total)")
        #expect(total.transientFaults > 0 && total.permanentFaults > 0, "\(total)")
        #expect(total.purges > 0, "\(total)")
        #expect(total.compactions > 0, "\(total)")
        #expect(total.tokenResets > 0, "no token expired in \(total)")
        #expect(total.failedZoneFetches > 0, "\(total)")
    }
}

extension EventGrammarTests {
    // Seeds with pages of 1–2 changes, which found two server bugs (now fixed): seed 1 (a paged
    // database feed lost a zone's deletion, F140, F149) and seed 5 (a zone listed from nil in
    // pages could not be fetched after a compaction, F100, F144).
    @Test("Seeds with pages smaller than the zone count", arguments: [UInt64(1), 5])
    func smallPageSeeds(seed: UInt64) async throws {
        try await withTemporaryDirectory { directory in
            let history = try GeneratedHistory(seed: seed, directory: directory, smallPages: true)
            try await history.runAndCheck()
        }
    }

    // F100, F141, F144: the minimal case behind seed 5 with small pages.
    @Test("Server: a zone listed from nil in pages can be fetched to the end after a compaction")
    func pagedZoneListingPastHorizon() async throws {
        try await withServer(maxChangesPerPage: 1) { _, server in
            let database = server.database(for: "alice")
            let zone = RecordZone.ID(zoneName: "Z")
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
            let notes = ["a", "b", "c"].map { name in
                var note = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
                note["title"] = .string(name)
                return note
            }
            _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: notes))
            try server.admin.compactTombstones(of: "alice", before: try server.admin.currentToken(of: "alice"))
            var since: ZoneChangeToken?
            var fetched: [String] = []
            var failure: SyncError?
            do {
                while true {
                    let page = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone, since: since))
                    fetched += page.modifications.map(\.record.recordID.recordName)
                    since = page.changeToken
                    if !page.moreComing { break }
                }
            } catch let error as SyncError {
                failure = error
            }
            // The first page's token is the offset of the last record it returned, older than the
            // horizon; it continues a listing from nil, so the server still accepts it.
            #expect(failure == nil)
            #expect(fetched.sorted() == ["a", "b", "c"])
        }
    }

    // F140, F149: the minimal case behind seed 1 with small pages.
    @Test("Server: a paged database feed still reports a zone deleted and re-created since the token (F149)")
    func pagedDatabaseFeedKeepsDeletions() async throws {
        try await withServer(maxChangesPerPage: 1) { _, server in
            let database = server.database(for: "alice")
            let z1 = RecordZone.ID(zoneName: "Z1")
            let z2 = RecordZone.ID(zoneName: "Z2")
            _ = try await database.modifyZones(
                ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: z1), RecordZone(zoneID: z2)]))
            let token = try server.admin.currentToken(of: "alice")
            // Z2 deleted, then Z1 changed, then Z2 re-created: the feed holds Z1, then Z2.
            _ = try await database.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [z2]))
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n", zoneID: z1))
            note["title"] = .string("x")
            _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [note]))
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: z2)]))

            var since: DatabaseChangeToken? = token
            var deleted: [RecordZone.ID] = []
            var modified: [RecordZone.ID] = []
            while true {
                let page = try await database.fetchDatabaseChanges(FetchDatabaseChangesRequest(since: since))
                deleted += page.deletions.map(\.zoneID)
                modified += page.modifications.map(\.zoneID)
                since = page.changeToken
                if !page.moreComing { break }
            }
            #expect(Set(modified) == [z1, z2])
            // The second page's token is past Z2's deletion; the deletion is still reported, so a
            // client holding Z2's old records learns to drop them.
            #expect(deleted == [z2])
        }
    }

    // F100, F140, F143: found by seed 48 (before the generator fetched after such sends).
    @Test("A note deleted by another device before its creator's first fetch of the zone is deleted there too")
    func deletionBeforeFirstZoneFetch() async throws {
        try await withDevices("A", "B") { server, a, b in
            let zone = RecordZone.ID(zoneName: "Z")
            let note = Record.ID(recordName: "n", zoneID: zone)
            // B creates the zone and the note, and has never fetched the zone.
            try b.createZone(zone)
            try b.write(note, "x")
            try await b.engine.sendChanges()
            // A fetches the note and deletes it.
            try await a.sync()
            #expect(a.title(note) == "x")
            try a.delete(note)
            try await a.engine.sendChanges()
            // B's first fetch of the zone has no token: the server returns live records only, and
            // the engine reports as deleted the records B knew that the listing left out.
            try await b.engine.fetchChanges()
            #expect(b.title(note) == nil)
        }
    }

    // F21, F47: the livelock seed 9 hit when the app re-added failed zone changes from handleEvent
    // (fixed in SendFlow meanwhile; kept as a regression test).
    @Test("Engine: a zone save that failed and was re-added from handleEvent does not make the send loop")
    func zoneSaveReaddedInEventDoesNotLoop() async throws {
        try await withDevice("A") { server, device in
            let zone = RecordZone.ID(zoneName: "Z")
            let counter = GeneratedHistory.Budget()  // counts record batches up to a cut-off
            counter.add(20)
            let readded = GeneratedHistory.Budget()
            readded.add(1)
            device.onEvent { event, engine in
                switch event {
                case .sentDatabaseChanges(let sent):
                    // The app adds the failed zone save back once, at once (F21).
                    if !sent.failedZoneSaves.isEmpty, readded.take() {
                        try? engine.state.add(pendingDatabaseChanges: sent.failedZoneSaves.map { .saveZone($0.zone) })
                    }
                case .sentRecordZoneChanges:
                    if !counter.take() { await engine.cancelOperations() }
                default:
                    break
                }
            }
            server.admin.failNextRequests(of: "alice", count: 1, with: SyncError(.internalError, "injected"))
            try device.createZone(zone)
            try device.write(Record.ID(recordName: "n", zoneID: zone), "x")
            _ = try? await device.engine.sendChanges()
            let batches = device.events.filter { $0.kind == .sentRecordZoneChanges }.count
            // Before SendFlow ended a send on a batch of items that all failed in it already, the
            // note's save (zoneNotFound, re-queued with its zone by the app) was asked for again
            // at once while its zone save waited for the next send: the send never ended.
            #expect(batches <= 2, "\(batches) record batches in one send: \(device.syncEvents)")
            #expect(counter.take(), "the send was cut off")
            // The next send creates the zone, then saves the note.
            try await device.engine.sendChanges()
            #expect(try device.engine.state.pendingRecordZoneChanges == [])
            #expect(
                try device.engine.deviceLog.lastKnownServerRecord(for: Record.ID(recordName: "n", zoneID: zone)) != nil)
        }
    }
}

// MARK: The recorder on hand-made streams

@Suite("Event grammar: the recorder")
struct EventRecorderTests {
    typealias Event = SyncEngine.Event
    static let z1 = RecordZone.ID(zoneName: "Z1")
    static let z2 = RecordZone.ID(zoneName: "Z2")
    static let fetch = SyncEngine.FetchChangesContext(reason: .manual, options: .init())
    static let send = SyncEngine.SendChangesContext(reason: .manual, options: .init())
    static let state = Event.stateUpdate(.init(offset: LogOffset(1)))

    static func record(_ name: String, _ zone: RecordZone.ID) -> Record {
        Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
    }
    static func willZone(_ zone: RecordZone.ID) -> Event { .willFetchRecordZoneChanges(.init(zoneID: zone)) }
    static func didZone(_ zone: RecordZone.ID) -> Event { .didFetchRecordZoneChanges(.init(zoneID: zone)) }
    static func fetched(_ records: Record...) -> Event {
        .fetchedRecordZoneChanges(.init(modifications: records.map { .init(record: $0) }))
    }
    static let willFetch = Event.willFetchChanges(.init(context: fetch))
    static let didFetch = Event.didFetchChanges(.init(context: fetch))
    static let willSend = Event.willSendChanges(.init(context: send))
    static let didSend = Event.didSendChanges(.init(context: send))
    static let dbChanges = Event.fetchedDatabaseChanges(.init(modifications: [.init(zoneID: z1)]))

    @Test("F46, F47: a send and a fetch with stateUpdates anywhere are accepted")
    func accepts() {
        var recorder = EventRecorder(name: "good")
        recorder.record([
            Self.state, Self.willSend, Self.state, .sentDatabaseChanges(.init()), .sentRecordZoneChanges(.init()),
            Self.state,
            Self.didSend, Self.willFetch, Self.dbChanges, Self.state, Self.dbChanges, Self.willZone(Self.z1),
            Self.state,
            Self.fetched(Self.record("a", Self.z1)), Self.didZone(Self.z1), Self.willZone(Self.z2),
            Self.didZone(Self.z2),
            Self.state, Self.didFetch, Self.state,
        ])
        recorder.finish()
        #expect(recorder.report() == nil)
    }

    struct Bad: Sendable, CustomStringConvertible {
        let description: String
        let events: [Event]
        let position: Int
        let rule: String
    }

    static let bad: [Bad] = [
        Bad(
            description: "fetch nested in a send", events: [willSend, willFetch, didFetch, didSend], position: 1,
            rule: "nested"),
        Bad(
            description: "send nested in a fetch", events: [willFetch, willSend, didSend, didFetch], position: 1,
            rule: "nested"),
        Bad(description: "did without will", events: [state, didSend], position: 1, rule: "without a willSendChanges"),
        Bad(
            description: "did with another context",
            events: [willSend, .didSendChanges(.init(context: .init(reason: .scheduled, options: .init())))],
            position: 1,
            rule: "context"),
        Bad(
            description: "unterminated fetch", events: [willFetch, willZone(z1), didZone(z1)], position: 3,
            rule: "ends inside"),
        Bad(
            description: "database changes after zones",
            events: [willFetch, willZone(z1), didZone(z1), dbChanges, didFetch],
            position: 3, rule: "after the fetch began"),
        Bad(
            description: "a zone twice",
            events: [willFetch, willZone(z1), didZone(z1), willZone(z1), didZone(z1), didFetch],
            position: 3, rule: "second time"),
        Bad(
            description: "zones overlap",
            events: [willFetch, willZone(z1), willZone(z2), didZone(z2), didZone(z1), didFetch],
            position: 2, rule: "still being fetched"),
        Bad(
            description: "records of another zone",
            events: [willFetch, willZone(z1), fetched(record("a", z1), record("b", z2)), didZone(z1), didFetch],
            position: 2,
            rule: "other zones"),
        Bad(
            description: "records outside a zone", events: [willFetch, fetched(record("a", z1)), didFetch], position: 1,
            rule: "outside"),
        Bad(
            description: "sent outside a send", events: [willFetch, .sentRecordZoneChanges(.init()), didFetch],
            position: 1, rule: "outside a send"),
        Bad(
            description: "did of another zone", events: [willFetch, willZone(z1), didZone(z2), didFetch], position: 2,
            rule: "does not pair"),
    ]

    @Test("Broken streams are rejected, naming the position and the events around it", arguments: bad)
    func rejects(_ bad: Bad) {
        var recorder = EventRecorder(name: bad.description)
        recorder.record(bad.events)
        recorder.finish()
        let first = recorder.violations.first
        #expect(first?.position == bad.position)
        #expect(first?.rule.contains(bad.rule) == true, "\(first?.rule ?? "no violation")")
        let report = recorder.report() ?? ""
        #expect(report.contains("at #\(bad.position)"))
        if bad.position < bad.events.count {
            #expect(report.contains("→ #\(bad.position) \(bad.events[bad.position])"))
        }
    }
}

// MARK: The generator

/// One generated history: 2–3 devices of one user on one server, each doing operations drawn
/// from a `SeededRandom`, with server faults, purges and tombstone compaction in between; then
/// every device syncs to quiescence.
///
/// **Why the end state is well defined.** The devices behave like `TestDevice`'s notes app, and
/// the generator keeps to a few rules so that "every device's notes equal the server's records"
/// must hold at the end:
/// - A note is written into a zone the device does not know only with a `saveZone` queued first
///   (never while a `deleteZone` of it is pending, which would cancel that deletion after the app
///   already dropped the zone's notes). So after a purge (`userDeletedZone` until the zone is
///   saved again) a device that has fetched the purge re-creates the zone rather than losing the
///   note; one that has not yet fetched it drops the save and, at the next fetch, the zone's notes.
/// - Injected non-transient failures (`internalError`, `serverRejectedRequest`) drop the failed
///   changes (F21); the app re-adds them, as F21 asks it to (bounded by the number injected).
/// - Tombstone compaction loses the deletions a device has not fetched: after a token reset it is
///   sent the live records only (F100, F144) and cannot tell which of its notes are stale. So the
///   generator compacts only when every device has fetched past the last deletion the server
///   may hold (`lastDeletion`); tokens still expire (compaction is at the server's current
///   offset), and the full refetch then has nothing to miss.
/// - Conflicts merge server-wins or by the larger title (both deterministic, and neither
///   re-queues forever).
final class GeneratedHistory {
    static let user: UserID = "alice"
    static let zones = (0..<3).map { RecordZone.ID(zoneName: "Z\($0)") }
    static let names = (0..<4).map { "n\($0)" }
    static let recordIDs: [Record.ID] = zones.flatMap { zone in names.map { Record.ID(recordName: $0, zoneID: zone) } }
    static let transientCodes: [SyncError.Code] = [
        .networkFailure, .serviceUnavailable, .zoneBusy, .requestRateLimited,
    ]
    static let permanentCodes: [SyncError.Code] = [.internalError, .serverRejectedRequest]
    static let steps = 40
    static let maxQuiescenceRounds = 12
    /// `EVENT_GRAMMAR_VERBOSE=1`: failures quote the whole trace and every device's events.
    static let verbose = ProcessInfo.processInfo.environment["EVENT_GRAMMAR_VERBOSE"] != nil

    struct Stats: CustomStringConvertible {
        var sends = 0, fetches = 0, zoneFetches = 0, failedZoneFetches = 0
        var conflicts = 0, transientFaults = 0, permanentFaults = 0, purges = 0, resets = 0
        var compactions = 0, skippedCompactions = 0, tokenResets = 0, quiescenceRounds = 0

        /// The counts that add up over runs; the quiescence rounds take the largest instead.
        static var summed: [WritableKeyPath<Stats, Int>] {
            [
                \.sends, \.fetches, \.zoneFetches, \.failedZoneFetches, \.conflicts, \.transientFaults,
                \.permanentFaults, \.purges, \.resets, \.compactions, \.skippedCompactions, \.tokenResets,
            ]
        }

        mutating func add(_ other: Stats) {
            for count in Self.summed { self[keyPath: count] += other[keyPath: count] }
            quiescenceRounds = max(quiescenceRounds, other.quiescenceRounds)
        }

        var description: String {
            "sends \(sends), fetches \(fetches), zone fetches \(zoneFetches) (\(failedZoneFetches) failed), "
                + "conflicts \(conflicts), faults \(transientFaults) transient + \(permanentFaults) permanent, "
                + "purges \(purges), resets \(resets), compactions \(compactions) (\(skippedCompactions) skipped), "
                + "token resets \(tokenResets), quiescence rounds \(quiescenceRounds)"
        }
    }

    /// What two runs of one seed must share.
    struct Fingerprint: Equatable {
        let trace: [String]
        let events: [[SyncEngine.Event.Kind]]
        let notes: [[String]]
    }

    /// How many changes the apps may still re-add after injected non-transient failures.
    final class Budget: Sendable {
        private let value = Mutex(0)
        func add(_ count: Int) { value.withLock { $0 += count } }
        func take() -> Bool {
            value.withLock { value in
                guard value > 0 else { return false }
                value -= 1
                return true
            }
        }
    }

    let seed: UInt64
    private var random: SeededRandom
    let server: SyncServer
    let devices: [TestDevice]
    private(set) var recorders: [EventRecorder]
    private var consumed: [Int]
    private(set) var trace: [String] = [] {
        didSet { if Self.verbose, let last = trace.last { print("[seed \(seed)] \(last)") } }
    }
    private(set) var stats = Stats()
    private let budget: Budget
    private let midFetch: MidFetchFaults
    private let setAside: [SetAside]
    /// The server offset after the last operation that may have deleted something.
    private var lastDeletion = ChangeOffset.zero
    private var step = 0

    init(seed: UInt64, directory: URL, smallPages: Bool = false) throws {
        self.seed = seed
        let budget = Budget()
        self.budget = budget
        let midFetch = MidFetchFaults()
        self.midFetch = midFetch
        var random = SeededRandom(seed: seed)
        // Pages smaller than the number of zones (3) would page the database feed, where the
        // server loses deletions (`pagedDatabaseFeedKeepsDeletions`), and zones listed from nil in pages
        // fail after a compaction (`pagedZoneListingPastHorizon`); `smallPages` allows them.
        let pageSize = (smallPages ? [1, 2, 3, 400] : [3, 4, 5, 400])[Int.random(in: 0..<4, using: &random)]
        let server = try makeServer(directory, maxChangesPerPage: pageSize)
        self.server = server
        let count = Int.random(in: 2...3, using: &random)
        var devices: [TestDevice] = []
        var setAside: [SetAside] = []
        var setup = ["server page size \(pageSize)"]
        for index in 0..<count {
            let name = ["A", "B", "C"][index]
            let limit: Int? =
                Bool.random(using: &random) ? nil : Int.random(in: 1...3, using: &random) + (smallPages ? 0 : 2)
            let device = try TestDevice(name, server: server, directory: directory, fetchResultsLimit: limit)
            let mergesByMax = Bool.random(using: &random)
            if mergesByMax { device.resolveConflicts { local, server in max(local, server) } }
            let aside = SetAside()
            Self.setAsideInjectedFailures(device, budget, aside, midFetch, server)
            setAside.append(aside)
            devices.append(device)
            setup.append(
                "\(name): fetch limit \(limit.map(String.init) ?? "none"), conflicts \(mergesByMax ? "max" : "server wins")"
            )
        }
        self.devices = devices
        self.setAside = setAside
        self.random = random
        recorders = devices.map { EventRecorder(name: "seed \(seed), device \($0.name)") }
        consumed = devices.map { _ in 0 }
        trace.append(setup.joined(separator: "; "))
    }

    /// Faults to inject as a zone's fetch starts, so that the zone's request fails (F102).
    final class MidFetchFaults: Sendable {
        let pending = Mutex<[SyncError]>([])
    }

    /// The changes an app set aside after injected non-transient failures, to add again once
    /// the send has returned (F21: "re-add them after resolving the problem").
    final class SetAside: Sendable {
        let records = Mutex<[RecordChange]>([])
        let zones = Mutex<[DatabaseChange]>([])
    }

    /// Collects the changes that failed with an injected non-transient code, in a stable order.
    /// Bounded by the failures injected, so a real persistent error cannot loop.
    private static func setAsideInjectedFailures(
        _ device: TestDevice, _ budget: Budget, _ aside: SetAside, _ midFetch: MidFetchFaults, _ server: SyncServer
    ) {
        device.onEvent { event, _ in
            switch event {
            case .willFetchRecordZoneChanges:
                if let error = midFetch.pending.withLock({ $0.popLast() }) {
                    server.admin.failNextRequests(of: user, count: 1, with: error)
                }
            case .sentRecordZoneChanges(let sent):
                var again: [RecordChange] = sent.failedRecordSaves
                    .filter { permanentCodes.contains($0.error.code) }.map { .saveRecord($0.record.recordID) }
                again += sent.failedRecordDeletes.filter { permanentCodes.contains($0.value.code) }.map(\.key)
                    .sorted { $0.description < $1.description }.map { .deleteRecord($0) }
                if !again.isEmpty, budget.take() { aside.records.withLock { $0 += again } }
            case .sentDatabaseChanges(let sent):
                var again: [DatabaseChange] = sent.failedZoneSaves
                    .filter { permanentCodes.contains($0.error.code) }.map { .saveZone($0.zone) }
                again += sent.failedZoneDeletes.filter { permanentCodes.contains($0.value.code) }.map(\.key)
                    .sorted { $0.description < $1.description }.map { .deleteZone($0) }
                if !again.isEmpty, budget.take() { aside.zones.withLock { $0 += again } }
            default:
                break
            }
        }
    }

    /// Adds back what device `index` set aside during its last send.
    private func addBackSetAside(_ index: Int) throws {
        let aside = setAside[index]
        let zones = aside.zones.withLock { zones in
            defer { zones = [] }
            return zones
        }
        let records = aside.records.withLock { records in
            defer { records = [] }
            return records
        }
        if !zones.isEmpty { try devices[index].engine.state.add(pendingDatabaseChanges: zones) }
        if !records.isEmpty { try devices[index].engine.state.add(pendingRecordZoneChanges: records) }
        if !zones.isEmpty || !records.isEmpty {
            trace.append(
                "#\(step) \(devices[index].name) adds back \(zones.count + records.count) changes after injected failures"
            )
        }
    }

    // MARK: Running

    /// Runs the history, syncs to quiescence and checks grammar, convergence and projections,
    /// recording an issue naming the seed for each failure.
    func runAndCheck() async throws {
        for _ in 0..<Self.steps {
            step += 1
            try await randomStep()
            guard checkGrammar() else { return }
        }
        step += 1
        guard try await syncToQuiescence() else { return }
        guard checkGrammar(final: true) else { return }
        try await checkConvergence()
        try checkProjections()
        for recorder in recorders {
            stats.sends += recorder.sends
            stats.fetches += recorder.fetches
            stats.zoneFetches += recorder.zoneFetches
            stats.failedZoneFetches += recorder.failedZoneFetches
        }
        for device in devices {
            try device.engine.deviceLog.log.forEachEntry { entry in
                if case .changeTokenReset = try DeviceEntry(entry, in: device.engine.deviceLog.log) {
                    stats.tokenResets += 1
                }
            }
        }
    }

    private func next(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    private func pick<T>(_ items: [T]) -> T { items[next(0...(items.count - 1))] }

    private func randomStep() async throws {
        let index = next(0...(devices.count - 1))
        let roll = next(0...99)
        switch roll {
        case 0..<24: try write(index)
        case 24..<32: try deleteNote(index)
        case 32..<36: try createZone(index)
        case 36..<40: try deleteZone(index)
        case 40..<56: await send(index, sendOptions())
        case 56..<71: await fetch(index, fetchOptions())
        case 71..<77: try await conflictingSends()
        case 77..<85: injectFault()
        case 85..<88: try purge()
        case 88: try resetEncryptedData()
        case 89..<95: try await compact()
        default:
            trace.append("#\(step) every device fetches")
            for index in devices.indices { await fetch(index, .init()) }
        }
    }

    private func sendOptions() -> SyncEngine.SendChangesOptions {
        switch next(0...7) {
        case 0: .init(scope: .zoneIDs([pick(Self.zones)]))
        case 1: .init(scope: .allExcluding([pick(Self.zones)]))
        case 2: .init(scope: .recordIDs([pick(Self.recordIDs), pick(Self.recordIDs)]))
        default: .init()
        }
    }

    private func fetchOptions() -> SyncEngine.FetchChangesOptions {
        switch next(0...7) {
        case 0: .init(scope: .zoneIDs([pick(Self.zones)]))
        case 1: .init(scope: .allExcluding([pick(Self.zones)]))
        case 2, 3: .init(prioritizedZoneIDs: Array(Self.zones.shuffled(using: &random).prefix(next(1...3))))
        default: .init()
        }
    }

    // MARK: Operations

    private func read<R>(_ device: TestDevice, _ body: (DeviceSnapshot) throws -> R) throws -> R {
        try device.engine.deviceLog.read(body)
    }

    /// Queues a save of `zoneID` if the device does not know it, unless its deletion is pending.
    private func ensureZone(_ device: TestDevice, _ zoneID: RecordZone.ID) throws -> String? {
        let (known, pending) = try read(device) { (try $0.knownZoneIDs(), try $0.pendingDatabaseChanges()) }
        // A note written into a zone whose deletion is pending is lost if the zone was purged
        // meanwhile (userDeletedZone, not re-queued): the user does not write there.
        if pending.contains(.deleteZone(zoneID)) { return nil }
        if known.contains(zoneID) || pending.contains(where: { $0.zoneID == zoneID }) { return "" }
        try device.createZone(zoneID)
        return " (+ save zone)"
    }

    private func write(_ index: Int) throws {
        let device = devices[index]
        let id = pick(Self.recordIDs)
        let title = "\(device.name)\(step)"
        guard let zone = try ensureZone(device, id.zoneID) else {
            return trace.append("#\(step) \(device.name) does not write into \(id.zoneID.zoneName), being deleted")
        }
        try device.write(id, title)
        trace.append("#\(step) \(device.name) writes \(Self.name(id)) = \(title)\(zone)")
    }

    private func deleteNote(_ index: Int) throws {
        let device = devices[index]
        guard let id = device.noteID(pickedBy: pick) else { return try write(index) }
        try device.delete(id)
        trace.append("#\(step) \(device.name) deletes \(Self.name(id))")
    }

    private func createZone(_ index: Int) throws {
        let device = devices[index]
        let zoneID = pick(Self.zones)
        let pending = try read(device) { try $0.pendingDatabaseChanges() }
        guard !pending.contains(.deleteZone(zoneID)) else { return }
        try device.createZone(zoneID)
        trace.append("#\(step) \(device.name) creates \(zoneID.zoneName)")
    }

    private func deleteZone(_ index: Int) throws {
        let device = devices[index]
        let known = try read(device) { try $0.knownZoneIDs() }
        let zoneID = known.isEmpty ? pick(Self.zones) : pick(known)
        try device.deleteZone(zoneID)
        trace.append("#\(step) \(device.name) deletes zone \(zoneID.zoneName)")
    }

    /// Sends, noting when the send may have deleted something on the server.
    private func send(_ index: Int, _ options: SyncEngine.SendChangesOptions) async {
        let device = devices[index]
        let deletes =
            (try? read(device) { snapshot in
                try snapshot.pendingRecordZoneChanges().contains { if case .deleteRecord = $0 { true } else { false } }
                    || snapshot.pendingDatabaseChanges().contains { if case .deleteZone = $0 { true } else { false } }
            }) ?? true
        let outcome = await Self.outcome { try await device.engine.sendChanges(options) }
        if outcome.contains("serverRecordChanged") { stats.conflicts += 1 }
        if deletes { noteDeletion() }
        trace.append("#\(step) \(device.name) sends \(options.scope): \(outcome)")
        try? addBackSetAside(index)
        // A zone the device knows without a change token is fetched from nil, which returns live
        // records only (F100): a note the device saved there and another device deleted before
        // that first fetch would stay on this device for ever (`deletionBeforeFirstZoneFetch`).
        // So the device fetches at once, until a fetch succeeds (the faults injected are finite).
        for _ in 0..<8 {
            let tokenless =
                (try? read(device) { snapshot in
                    try snapshot.knownZoneIDs().contains { try snapshot.zoneChangeToken(for: $0) == nil }
                }) ?? true
            guard tokenless else { break }
            if await fetch(index, .init()) == "ok" { break }
        }
    }

    @discardableResult
    private func fetch(_ index: Int, _ options: SyncEngine.FetchChangesOptions) async -> String {
        let device = devices[index]
        let outcome = await Self.outcome { try await device.engine.fetchChanges(options) }
        trace.append("#\(step) \(device.name) fetches \(options): \(outcome)")
        return outcome
    }

    /// Two devices write the same note, each without fetching the other's, and send.
    private func conflictingSends() async throws {
        let first = next(0...(devices.count - 1))
        let second = (first + next(1...(devices.count - 1))) % devices.count
        let id = pick(Self.recordIDs)
        for index in [first, second] {
            let device = devices[index]
            let title = "\(device.name)\(step)"
            guard let zone = try ensureZone(device, id.zoneID) else {
                trace.append("#\(step) \(device.name) does not write into \(id.zoneID.zoneName), being deleted")
                continue
            }
            try device.write(id, title)
            trace.append("#\(step) \(device.name) writes \(Self.name(id)) = \(title)\(zone), to conflict")
        }
        await send(first, .init())
        await send(second, .init())
    }

    private func injectFault() {
        let count = next(1...3)
        let transient = next(0...2) > 0
        let code = transient ? pick(Self.transientCodes) : pick(Self.permanentCodes)
        let retryAfter: Duration? = code == .serviceUnavailable || code == .requestRateLimited ? .seconds(1) : nil
        if next(0...3) == 0 {
            // The next zone fetch to start, on any device, fails (F102).
            midFetch.pending.withLock { $0.insert(SyncError(code, "injected mid-fetch by seed \(seed)"), at: 0) }
            if transient { stats.transientFaults += 1 } else { stats.permanentFaults += 1 }
            return trace.append("#\(step) the next zone fetch fails with \(code.name)")
        }
        server.admin.failNextRequests(
            of: Self.user, count: count, with: SyncError(code, "injected by seed \(seed)", retryAfter: retryAfter))
        if transient {
            stats.transientFaults += count
        } else {
            stats.permanentFaults += count
            budget.add(count)
        }
        trace.append("#\(step) the next \(count) requests fail with \(code.name)")
    }

    private func purge() throws {
        let zoneID = pick(Self.zones)
        do {
            try server.admin.purgeZone(zoneID, of: Self.user)
            stats.purges += 1
            noteDeletion()
            trace.append("#\(step) the user purges \(zoneID.zoneName)")
        } catch let error as SyncError where error.code == .zoneNotFound {
            trace.append("#\(step) no \(zoneID.zoneName) to purge")
        }
    }

    private func resetEncryptedData() throws {
        try server.admin.resetEncryptedData(of: Self.user)
        stats.resets += 1
        noteDeletion()
        trace.append("#\(step) the user resets encrypted data")
    }

    private func noteDeletion() {
        if let token = try? server.admin.currentToken(of: Self.user) { lastDeletion = token.offset }
    }

    /// Compacts every tombstone, if no device can miss a deletion by it (see the type's comment).
    private func compact() async throws {
        for device in devices {
            let caughtUp = try read(device) { snapshot in
                guard lastDeletion > .zero else { return true }
                guard let token = try snapshot.databaseChangeToken(), token.offset >= lastDeletion else { return false }
                return try snapshot.zoneIDsWithUnfetchedServerChanges().isEmpty
            }
            if !caughtUp {
                stats.skippedCompactions += 1
                trace.append("#\(step) no compaction: \(device.name) has not fetched past offset \(lastDeletion)")
                return
            }
        }
        // Twice: the first compaction's own entry puts the horizon past every device's database
        // token, so every device's database token expires, and with it (through the refetch of
        // every live zone) every zone token older than the horizon.
        try server.admin.compactTombstones(of: Self.user, before: try server.admin.currentToken(of: Self.user))
        let token = try server.admin.currentToken(of: Self.user)
        try server.admin.compactTombstones(of: Self.user, before: token)
        stats.compactions += 1
        trace.append("#\(step) the server compacts tombstones through offset \(token.offset)")
        // A refetch from nil returns live records only (F100), so a deletion made while a device
        // still holds an expired token would be lost to it: every device refetches now, until a
        // fetch succeeds (the faults injected are finite).
        for index in devices.indices {
            for _ in 0..<8 {
                if await fetch(index, .init()) == "ok" { break }
            }
        }
    }

    /// `ok`, or the error's code with its item errors' codes, sorted.
    private static func outcome(_ body: () async throws -> Void) async -> String {
        do {
            try await body()
            return "ok"
        } catch let error as SyncError {
            guard !error.partialErrors.isEmpty else { return error.code.name }
            let items = error.partialErrors.map { "\($0.key): \($0.value.code.name)" }.sorted()
            return "\(error.code.name) [\(items.joined(separator: ", "))]"
        } catch {
            return "\(error)"
        }
    }

    static func name(_ id: Record.ID) -> String { "\(id.zoneID.zoneName)/\(id.recordName)" }

    // MARK: Checks

    /// The seed, how to rerun it, and the last operations.
    private func header(_ what: String) -> String {
        let shown = Self.verbose ? trace.count : 25
        var tail = trace.suffix(shown).joined(separator: "\n  ")
        if Self.verbose {
            for device in devices {
                tail += "\n  events of \(device.name):\n    "
                tail += device.events.enumerated().filter { $0.element.kind != .stateUpdate }
                    .map { "#\($0.offset) \($0.element)" }.joined(separator: "\n    ")
            }
        }
        return """
            seed \(seed): \(what)
            rerun: EVENT_GRAMMAR_SEEDS=\(seed) swift test --filter EventGrammar
            trace (last \(min(shown, trace.count)) of \(trace.count)):
              \(tail)
            """
    }

    /// Feeds each device's new events to its recorder. Returns `false` (after recording an
    /// issue) at the first stream that broke the grammar.
    private func checkGrammar(final: Bool = false) -> Bool {
        for (index, device) in devices.enumerated() {
            let events = device.events
            recorders[index].record(events[consumed[index]...])
            consumed[index] = events.count
            if final { recorders[index].finish() }
            if let report = recorders[index].report() {
                Issue.record(
                    Comment(rawValue: header("device \(device.name)'s events break the grammar") + "\n" + report))
                return false
            }
        }
        return true
    }

    /// Send + fetch on every device until a round in which nothing was sent or fetched and
    /// nothing failed.
    private func syncToQuiescence() async throws -> Bool {
        trace.append("#\(step) every device syncs to quiescence")
        let busy: Set<SyncEngine.Event.Kind> = [
            .sentDatabaseChanges, .sentRecordZoneChanges, .fetchedDatabaseChanges, .fetchedRecordZoneChanges,
        ]
        for round in 1...Self.maxQuiescenceRounds {
            var quiet = true
            var outcomes: [String] = []
            for (index, device) in devices.enumerated() {
                let before = device.events.count
                let sent = await Self.outcome { try await device.engine.sendChanges() }
                try addBackSetAside(index)
                let fetched = await Self.outcome { try await device.engine.fetchChanges() }
                if sent != "ok" || fetched != "ok"
                    || device.events[before...].contains(where: { busy.contains($0.kind) })
                {
                    quiet = false
                }
                outcomes.append("\(device.name) send \(sent), fetch \(fetched)")
            }
            trace.append("  round \(round): \(outcomes.joined(separator: "; "))")
            if quiet {
                stats.quiescenceRounds = round
                return true
            }
        }
        Issue.record(Comment(rawValue: header("no quiescence after \(Self.maxQuiescenceRounds) rounds")))
        return false
    }

    /// The server's notes, read straight from the database (every zone from the start).
    func serverNotes() async throws -> [Record.ID: String] {
        try await Simulation.notes(in: server.database(for: Self.user, device: "observer"))
    }

    static func describe(_ notes: [Record.ID: String]) -> [String] {
        notes.map { "\(name($0.key)) = \($0.value)" }.sorted()
    }

    private func checkConvergence() async throws {
        let server = Self.describe(try await serverNotes())
        for device in devices {
            let notes = Self.describe(device.notes)
            if notes != server {
                let missing = Set(server).subtracting(notes).sorted()
                let extra = Set(notes).subtracting(server).sorted()
                Issue.record(
                    Comment(
                        rawValue: header(
                            "device \(device.name) did not converge: lacks \(missing), has besides the server's \(extra); server \(server)"
                        )))
            }
        }
    }

    /// F-projection rule: incremental == rebuilt == the reference replay, on every device log.
    private func checkProjections() throws {
        for device in devices {
            let log = device.engine.deviceLog
            if let mismatch = try log.log.verifyProjections() {
                Issue.record(
                    Comment(rawValue: header("device \(device.name): incremental index != rebuilt: \(mismatch)")))
            }
            let replayed = try ReferenceState.replaying(log)
            let indexed = try log.read { try $0.referenceState(recordIDs: Self.recordIDs) }
            if replayed != indexed {
                Issue.record(
                    Comment(
                        rawValue: header(
                            "device \(device.name): index != ReferenceState replay: \(Self.difference(indexed, replayed))"
                        )))
            }
        }
    }

    private static func difference(_ indexed: ReferenceState, _ replayed: ReferenceState) -> String {
        var parts: [String] = []
        func compare<T: Equatable>(_ name: String, _ a: T, _ b: T) {
            if a != b { parts.append("\(name): index \(a), reference \(b)") }
        }
        compare("records", indexed.records, replayed.records)
        compare("zones", indexed.zones, replayed.zones)
        compare("untracked", indexed.untracked, replayed.untracked)
        compare("inFlight", indexed.inFlight, replayed.inFlight)
        compare(
            "serverRecords", indexed.serverRecords.keys.sorted { $0.description < $1.description },
            replayed.serverRecords.keys.sorted { $0.description < $1.description })
        if indexed.serverRecords.keys.sorted(by: { $0.description < $1.description })
            == replayed.serverRecords.keys.sorted(by: { $0.description < $1.description }),
            indexed.serverRecords != replayed.serverRecords
        {
            parts.append("serverRecords: same IDs, different records")
        }
        compare(
            "knownZones", indexed.knownZones.sorted { $0.description < $1.description },
            replayed.knownZones.sorted { $0.description < $1.description })
        compare(
            "unfetchedZones", indexed.unfetchedZones.sorted { $0.description < $1.description },
            replayed.unfetchedZones.sorted { $0.description < $1.description })
        compare("databaseToken", indexed.databaseToken, replayed.databaseToken)
        compare(
            "zoneTokens",
            indexed.zoneTokens.sorted { $0.key.description < $1.key.description }.map { "\($0.key): \($0.value)" },
            replayed.zoneTokens.sorted { $0.key.description < $1.key.description }.map { "\($0.key): \($0.value)" })
        compare("delivered", indexed.delivered, replayed.delivered)
        return parts.joined(separator: "; ")
    }

    /// What must be equal between two runs of the seed.
    func fingerprint() throws -> Fingerprint {
        Fingerprint(
            trace: trace,
            events: devices.map { $0.events.map(\.kind).filter { $0 != .stateUpdate } },
            notes: devices.map { Self.describe($0.notes) })
    }
}
