import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

/// The fetch side of the engine, as device timelines: a writer device changes the server, a
/// reader device fetches.
@Suite("Scenario: fetching")
struct FetchScenarios {
    static let zoneA = RecordZone.ID(zoneName: "A")
    static let zoneB = RecordZone.ID(zoneName: "B")
    static let zoneC = RecordZone.ID(zoneName: "C")
    static let zoneD = RecordZone.ID(zoneName: "D")
    static let zoneX = RecordZone.ID(zoneName: "X")

    static func note(_ name: String, _ zone: RecordZone.ID = zoneA) -> Record.ID {
        Record.ID(recordName: name, zoneID: zone)
    }

    /// The writer creates `zones` and writes `perZone` notes in each, then sends.
    static func seed(_ writer: TestDevice, zones: [RecordZone.ID], perZone: Int = 1) async throws {
        for zone in zones { try writer.createZone(zone) }
        try writer.write(
            zones.flatMap { zone in
                (0..<perZone).map { (note("\(zone.zoneName)-\($0)", zone), "\(zone.zoneName) \($0)") }
            })
        try await writer.engine.sendChanges()
    }

    /// The writer `W`, which has seeded `zones` (see ``seed(_:zones:perZone:)``), and the
    /// reader `R`, which has fetched nothing yet and fetches pages of `readerFetchResultsLimit`
    /// (`nil`: the server's page size), on a server of their own.
    static func withSeeded(
        _ zones: [RecordZone.ID], perZone: Int = 1, readerFetchResultsLimit: Int? = nil,
        _ body: (_ server: SyncServer, _ writer: TestDevice, _ reader: TestDevice) async throws -> Void
    ) async throws {
        try await withDevices("W", "R", secondFetchResultsLimit: readerFetchResultsLimit) { server, writer, reader in
            try await seed(writer, zones: zones, perZone: perZone)
            try await body(server, writer, reader)
        }
    }

    // MARK: Construction (F1, F2)

    // F1, F7
    @Test("A new engine: its database, empty state, no untracked changes")
    func construction() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            #expect(engine.database.databaseScope == .private)
            #expect((engine.database as? InProcessDatabase)?.user == "alice")
            #expect(try engine.state.pendingRecordZoneChanges == [])
            #expect(try engine.state.pendingDatabaseChanges == [])
            #expect(try engine.state.zoneIDsWithUnfetchedServerChanges == [])
            #expect(try engine.state.hasPendingUntrackedChanges == false)
            #expect(!engine.description.isEmpty)
            #expect(delegate.events.isEmpty)
            try expectProjectionsHold(engine)
        }
    }

    // F2
    @Test("A public database is refused with UnsupportedDatabaseError; private and shared are accepted")
    func databaseScopes() async throws {
        try await withServer { directory, server in
            let delegate = TestDevice.Delegate(policy: .scripted)
            let error = #expect(throws: SyncEngine.UnsupportedDatabaseError.self) {
                try makeScriptedEngine(
                    "public", server: server, scope: .public, directory: directory, delegate: delegate)
            }
            #expect(error?.scope == .public)
            let privateEngine = try makeScriptedEngine(
                "private", server: server, directory: directory, delegate: delegate)
            let sharedEngine = try makeScriptedEngine(
                "shared", server: server, scope: .shared, directory: directory, delegate: delegate)
            #expect(privateEngine.database.databaseScope == .private)
            #expect(sharedEngine.database.databaseScope == .shared)
        }
    }

    // MARK: Options (F14, F66, F67, F71)

    // F14, F61, F66
    @Test(
        "nextFetchChangesOptions: the default returns the context's options; prioritizing a zone midway fetches it next"
    )
    func nextFetchOptions() async throws {
        try await withServer { directory, server in
            let writer = try TestDevice("W", server: server, directory: directory)
            try await Self.seed(writer, zones: [Self.zoneA, Self.zoneB, Self.zoneC, Self.zoneD])

            let delegate = TestDevice.Delegate(policy: .scripted)
            let engine = try makeScriptedEngine("R", server: server, directory: directory, delegate: delegate)
            struct Midway {
                var calls = 0
                var remaining: [RecordZone.ID] = []
                var target: RecordZone.ID?
            }
            let midway = Mutex(Midway())
            delegate.provideFetchOptions { context, syncEngine in
                let fetched = delegate.events.zonesFetched
                let unfetched = ((try? syncEngine.state.zoneIDsWithUnfetchedServerChanges) ?? []).filter {
                    !fetched.contains($0)
                }
                return midway.withLock { midway in
                    midway.calls += 1
                    var options = context.options
                    if midway.calls == 2 {  // after the first zone: put the last remaining one first
                        midway.remaining = unfetched
                        midway.target = unfetched.last
                    }
                    if let target = midway.target { options.prioritizedZoneIDs = [target] }
                    return options
                }
            }
            let options = SyncEngine.FetchChangesOptions()
            try await engine.fetchChanges(options)

            let state = midway.withLock { $0 }
            let zones = delegate.events.zonesFetched
            #expect(Set(zones) == [Self.zoneA, Self.zoneB, Self.zoneC, Self.zoneD])
            #expect(state.remaining.count == 3)
            #expect(state.target != state.remaining.first)
            #expect(zones.count == 4 && zones[1] == state.target)
            // One context for the whole fetch, given to every call (F61).
            let context = try #require(delegate.events.willFetchContexts.first)
            #expect(context.options == options)
            #expect(delegate.fetchContexts.count >= 4)
            #expect(delegate.fetchContexts.allSatisfy { $0 == context })
            #expect(delegate.events.didFetchContexts == [context])

            // The default implementation hands back context.options.
            #expect(await IdleDelegate.shared.nextFetchChangesOptions(context, syncEngine: engine) == context.options)
            try expectProjectionsHold(engine, writer.engine)
        }
    }

    // F66
    @Test("prioritizedZoneIDs [C, X]: C is fetched first, X (no changes) never")
    func prioritizedZones() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB, Self.zoneC]) { _, writer, reader in
            try await reader.engine.fetchChanges(.init(prioritizedZoneIDs: [Self.zoneC, Self.zoneX]))
            let zones = reader.events.zonesFetched
            #expect(zones.first == Self.zoneC)
            #expect(!zones.contains(Self.zoneX))
            #expect(Set(zones) == [Self.zoneA, Self.zoneB, Self.zoneC])
            #expect(reader.notes == writer.notes)
            try reader.expectProjectionsHold()
        }
    }

    // F25, F67
    @Test("A fetch scoped to zone A fetches only A; B stays unfetched until a full fetch")
    func scopedFetch() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB]) { _, writer, reader in
            try await reader.engine.fetchChanges(.init(scope: .zoneIDs([Self.zoneA])))
            #expect(reader.events.zonesFetched == [Self.zoneA])
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [Self.zoneB])
            #expect(reader.notes.keys.allSatisfy { $0.zoneID == Self.zoneA })
            #expect(reader.notes.count == 1)

            reader.clearEvents()
            try await reader.engine.fetchChanges()
            #expect(reader.events.zonesFetched == [Self.zoneB])
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])
            #expect(reader.notes == writer.notes)
            try reader.expectProjectionsHold()
        }
    }

    // F71
    @Test("Options changed after fetchChanges was called do not change the running fetch")
    func fetchOptionsAreCopied() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB]) { _, writer, reader in
            let gate = Gate()
            reader.onEvent(gate.holding(.willFetchChanges))

            var options = SyncEngine.FetchChangesOptions(scope: .zoneIDs([Self.zoneA]))
            let original = options
            let fetch = Task { [options] in try await reader.engine.fetchChanges(options) }
            await gate.reached.wait()
            options.scope = .all
            options.prioritizedZoneIDs = [Self.zoneB]
            #expect(options != original)
            await gate.release()
            try await fetch.value

            #expect(reader.events.willFetchContexts.map(\.options) == [original])
            #expect(reader.events.didFetchContexts.map(\.options) == [original])
            #expect(reader.events.zonesFetched == [Self.zoneA])
            try reader.expectProjectionsHold()
        }
    }

    // MARK: Unfetched zones (F25)

    // F25
    @Test("zoneIDsWithUnfetchedServerChanges is filled by the database changes and drained by the zone fetches")
    func unfetchedZonesFillAndDrain() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB]) { _, writer, reader in
            let seen = Mutex<[String: [RecordZone.ID]]>([:])
            reader.onEvent { event, engine in
                let unfetched = (try? engine.state.zoneIDsWithUnfetchedServerChanges) ?? []
                switch event {
                case .fetchedDatabaseChanges: seen.withLock { $0["database"] = unfetched }
                case .didFetchRecordZoneChanges(let did):
                    seen.withLock { $0["after \(did.zoneID.zoneName)"] = unfetched }
                default: break
                }
            }
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])

            try await reader.engine.fetchChanges()
            let states = seen.withLock { $0 }
            #expect(Set(states["database"] ?? []) == [Self.zoneA, Self.zoneB])
            let first = try #require(reader.events.zonesFetched.first)
            #expect(states["after \(first.zoneName)"]?.contains(first) == false)
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])
            try reader.expectProjectionsHold()
        }
    }

    // MARK: Events (F37–F41, F46, F49)

    // F37, F49 (deleted)
    @Test("Zone changes with a page size of 1: three or more events whose union is the two new zones and one deletion")
    func databaseChangesPaged() async throws {
        try await withDevices("W", "R", secondFetchResultsLimit: 1) { _, writer, reader in
            try writer.createZone(Self.zoneC)
            try await writer.engine.sendChanges()
            try await reader.engine.fetchChanges()

            try writer.createZone(Self.zoneA)
            try writer.createZone(Self.zoneB)
            try writer.deleteZone(Self.zoneC)
            try await writer.engine.sendChanges()

            reader.clearEvents()
            try await reader.engine.fetchChanges()
            let pages = reader.events.fetchedDatabaseChanges
            #expect(pages.count >= 3)
            #expect(Set(pages.flatMap(\.modifications).map(\.zoneID)) == [Self.zoneA, Self.zoneB])
            let deletions = pages.flatMap(\.deletions)
            #expect(deletions.map(\.zoneID) == [Self.zoneC])
            #expect(deletions.first?.reason == .deleted)
            #expect(reader.events.isFetchSequence)
            try reader.expectProjectionsHold()
        }
    }

    // F38, F40
    @Test("willFetchRecordZoneChanges once for each zone with changes, never for a zone without")
    func zoneFetchesOnlyWhereChanged() async throws {
        try await withDevices("W", "R") { _, writer, reader in
            for zone in [Self.zoneA, Self.zoneB, Self.zoneC] { try writer.createZone(zone) }
            try await writer.engine.sendChanges()
            try await reader.engine.fetchChanges()

            try writer.write([(Self.note("a"), "a"), (Self.note("b", Self.zoneB), "b")])
            try await writer.engine.sendChanges()
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            let zones = reader.events.zonesFetched
            #expect(zones.count == 2)
            #expect(Set(zones) == [Self.zoneA, Self.zoneB])
            #expect(reader.events.zoneFetchResults.map(\.zoneID) == zones)
            #expect(reader.events.zoneFetchResults.allSatisfy { $0.error == nil })
            try reader.expectProjectionsHold()
        }
    }

    // F39, F139
    @Test(
        "250 writes with a page size of 100: three fetchedRecordZoneChanges events; deletions carry their record type")
    func recordChangesPaged() async throws {
        try await Self.withSeeded([Self.zoneA], perZone: 250, readerFetchResultsLimit: 100) { _, writer, reader in
            try await reader.engine.fetchChanges()
            let pages = reader.events.fetchedRecordZoneChanges
            #expect(pages.map(\.modifications.count) == [100, 100, 50])
            #expect(reader.notes.count == 250)

            for index in 0..<10 { try writer.delete(Self.note("A-\(index)")) }
            try await writer.engine.sendChanges()
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            let deletions = reader.events.fetchedRecordZoneChanges.flatMap(\.deletions)
            #expect(Set(deletions.map(\.recordID)) == Set((0..<10).map { Self.note("A-\($0)") }))
            #expect(deletions.allSatisfy { $0.recordType == "Note" })
            #expect(reader.notes == writer.notes)
            try reader.expectProjectionsHold()
        }
    }

    // F40, F102
    @Test(
        "A zone deleted between the database fetch and its zone fetch fails alone; the others are fetched, pairs balance"
    )
    func oneZoneFails() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB, Self.zoneC]) { _, writer, reader in
            let deleted = Atomic<Bool>(false)
            let database = writer.database
            reader.onEvent { event, _ in
                guard case .fetchedDatabaseChanges = event, !deleted.exchange(true, ordering: .relaxed) else { return }
                _ = try? await database.modifyZones(saving: [], deleting: [Self.zoneB])
            }

            let error = await #expect(throws: SyncError.self) { try await reader.engine.fetchChanges() }
            #expect(error?.code == .partialFailure)
            #expect(error?.partialErrors.keys.map { $0 } == [.zone(Self.zoneB)])
            let results = reader.events.zoneFetchResults
            #expect(reader.events.zonesFetched == results.map(\.zoneID))
            #expect(Set(results.map(\.zoneID)) == [Self.zoneA, Self.zoneB, Self.zoneC])
            let failedB = results.first { $0.zoneID == Self.zoneB }?.error?.code
            #expect(failedB == .zoneNotFound || failedB == .userDeletedZone)
            #expect(results.filter { $0.zoneID != Self.zoneB }.allSatisfy { $0.error == nil })
            #expect(Set(reader.notes.keys.map(\.zoneID)) == [Self.zoneA, Self.zoneC])
            #expect(reader.events.isFetchSequence)

            // The next fetch learns that B is gone, and ends cleanly.
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            #expect(reader.events.fetchedDatabaseChanges.flatMap(\.deletions).map(\.zoneID) == [Self.zoneB])
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])
            try reader.expectProjectionsHold()
        }
    }

    // F41, F46, F89 (a transient failure ends the fetch), F102
    @Test("Random histories with injected failures: every fetch follows the grammar and has one will and one did")
    func fetchesWithFailures() async throws {
        try await withDevices("W", "R", maxChangesPerPage: 3) { server, writer, reader in
            let zones = [Self.zoneA, Self.zoneB, Self.zoneC]
            for zone in zones { try writer.createZone(zone) }
            var random = SeededRandom(seed: 41)
            var failedFetches = 0
            let eventsSeen = Atomic<Int>(0)
            let failAfter = Atomic<Int>(-1)
            reader.onEvent { event, _ in
                // A zone's request always follows its willFetchRecordZoneChanges.
                guard event.kind == .willFetchRecordZoneChanges else { return }
                if eventsSeen.add(1, ordering: .relaxed).newValue == failAfter.load(ordering: .relaxed) {
                    server.admin.failNextRequests(of: "alice", with: SyncError(.serviceUnavailable, "injected"))
                }
            }
            for round in 0..<12 {
                // The writer changes a few notes in random zones.
                for index in 0..<Int.random(in: 1...6, using: &random) {
                    let id = Self.note(
                        "n\(Int.random(in: 0..<8, using: &random))", zones.randomElement(using: &random)!)
                    if Bool.random(using: &random), writer.title(id) != nil {
                        try writer.delete(id)
                    } else {
                        try writer.write(id, "round \(round).\(index)")
                    }
                }
                try await writer.engine.sendChanges()

                // Most fetches meet a failing request: the database's, or the k-th zone's, so the
                // failure lands at a random step.
                let failAt = round % 3 == 2 ? -1 : Int.random(in: 0...3, using: &random)
                if failAt == 0 {
                    server.admin.failNextRequests(of: "alice", with: SyncError(.serviceUnavailable, "injected"))
                }
                eventsSeen.store(0, ordering: .relaxed)
                failAfter.store(failAt, ordering: .relaxed)
                reader.clearEvents()
                do {
                    try await reader.engine.fetchChanges()
                } catch let error as SyncError {
                    failedFetches += 1
                    #expect(
                        error.code == .serviceUnavailable || error.code == .partialFailure, "round \(round): \(error)")
                }
                let events = reader.events
                #expect(events.count(of: .willFetchChanges) == 1, "round \(round)")
                #expect(events.count(of: .didFetchChanges) == 1, "round \(round)")
                #expect(events.count(of: .willFetchRecordZoneChanges) == events.count(of: .didFetchRecordZoneChanges))
                #expect(events.isFetchSequence, "round \(round): \(events.withoutStateUpdates.kinds)")
            }
            #expect(failedFetches > 0)

            // Without failures, the reader converges on the writer.
            try await reader.fetchAndExpectConverged(with: writer)
        }
    }

    // F46, F102: a failure inside a zone fetch, not at the start
    @Test(
        "A transient failure in one zone's fetch ends that zone; the others are fetched and the fetch is retried cleanly"
    )
    func zoneFetchFailsTransiently() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB]) { server, writer, reader in
            let injected = Atomic<Bool>(false)
            reader.onEvent { event, _ in
                // After the database changes, the next request (the first zone's) fails.
                guard case .fetchedDatabaseChanges = event, !injected.exchange(true, ordering: .relaxed) else { return }
                server.admin.failNextRequests(of: "alice", with: SyncError(.zoneBusy, "injected"))
            }

            let error = await #expect(throws: SyncError.self) { try await reader.engine.fetchChanges() }
            #expect(error?.code == .partialFailure)
            let results = reader.events.zoneFetchResults
            #expect(results.count == 2)
            #expect(results.first?.error?.code == .zoneBusy)
            #expect(results.last?.error == nil)
            #expect(reader.events.isFetchSequence)

            reader.clearEvents()
            try await reader.engine.fetchChanges()
            #expect(reader.notes == writer.notes)
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])
            try reader.expectProjectionsHold()
        }
    }

    // F49, F98, F99, F150
    @Test(
        "Zones deleted by the server report their reason: purged, encryptedDataReset",
        arguments: [ZoneDeletionReason.purged, .encryptedDataReset])
    func zoneDeletionReasons(reason: ZoneDeletionReason) async throws {
        try await Self.withSeeded([Self.zoneA]) { server, writer, reader in
            try await reader.engine.fetchChanges()
            #expect(reader.notes.count == 1)

            switch reason {
            case .purged: try server.admin.purgeZone(Self.zoneA, of: "alice")
            case .encryptedDataReset: try server.admin.resetEncryptedData(of: "alice")
            case .deleted: Issue.record("not a server-side reason")
            }
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            let deletions = reader.events.fetchedDatabaseChanges.flatMap(\.deletions)
            #expect(deletions.map(\.zoneID) == [Self.zoneA])
            #expect(deletions.first?.reason == reason)
            #expect(reader.notes.isEmpty)

            // The writer, which has not fetched, saves into the zone: the error says why (F98, F99).
            try writer.write(Self.note("late"), "late")
            let error = await #expect(throws: SyncError.self) { try await writer.engine.sendChanges() }
            let itemError = error?.partialErrors[.record(Self.note("late"))]
            switch reason {
            case .purged: #expect(itemError?.code == .userDeletedZone)
            default:
                #expect(itemError?.code == .zoneNotFound)
                #expect(itemError?.userDidResetEncryptedDataKey == true)
            }
            try reader.expectProjectionsHold()
            try writer.expectProjectionsHold()
        }
    }

    // MARK: Concurrency and completion (F48, F73, F77)

    // F48, F77
    @Test("Two overlapping fetchChanges calls: one will/did pair, both return, no payload twice")
    func concurrentFetchesCoalesce() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB], perZone: 5) { _, writer, reader in
            let gate = Gate()
            reader.onEvent(gate.holding(.willFetchChanges))

            let first = Task { try await reader.engine.fetchChanges() }
            await gate.reached.wait()  // the first fetch is running, held in its willFetchChanges
            let second = Task { try await reader.engine.fetchChanges() }
            for _ in 0..<1_000 { await Task.yield() }  // let the second call reach the engine
            await gate.release()
            try await first.value
            try await second.value

            #expect(reader.events.count(of: .willFetchChanges) == 1)
            #expect(reader.events.count(of: .didFetchChanges) == 1)
            let fetched = reader.events.fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID)
            #expect(fetched.count == 10)
            #expect(Set(fetched).count == fetched.count)
            try reader.expectProjectionsHold()
        }
    }

    // F73
    @Test("fetchChanges returns after didFetchChanges was handled; no event of it comes later")
    func fetchReturnsAfterEverything() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB], perZone: 3) { _, writer, reader in
            let handledDid = Atomic<Bool>(false)
            reader.onEvent { event, _ in
                guard case .didFetchChanges = event else { return }
                for _ in 0..<50 { await Task.yield() }
                handledDid.store(true, ordering: .sequentiallyConsistent)
            }

            try await reader.engine.fetchChanges()
            let didWasHandled = handledDid.load(ordering: .sequentiallyConsistent)
            #expect(didWasHandled)
            #expect(reader.syncEvents.last?.kind == .didFetchChanges)
            let count = reader.syncEvents.count
            for _ in 0..<100 { await Task.yield() }
            #expect(reader.syncEvents.count == count)
            #expect(reader.notes == writer.notes)
            try reader.expectProjectionsHold()
        }
    }

    // MARK: The fetched pages' entries (F39, F141)

    @Test("A page's records are logged as the server's stored bytes: the entries are byte for byte the records encoded")
    func pagesLoggedFromStoredBytes() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB], perZone: 5, readerFetchResultsLimit: 3) {
            server, writer, reader in
            #expect(reader.database is any RecordBytesFetching)
            try await reader.engine.fetchChanges()
            #expect(reader.notes.count == 10)
            var pages = 0
            try reader.engine.deviceLog.log.forEachEntry { entry in
                guard entry.kind == DeviceEntry.Kind.zoneChangesFetched else { return }
                let decoded = try DeviceEntry(entry)
                guard case .zoneChangesFetched(_, let records, _, _, _) = decoded, !records.isEmpty else { return }
                pages += 1
                let encoded = decoded.newEntry.tracing(try DeviceEntry.traceHeaders(of: entry))
                #expect(entry.payload == encoded.payload, "the page at \(entry.offset)")
            }
            #expect(pages == 4)
            // Each record's last known server record reads from its place in its page.
            for index in 0..<5 {
                let id = Self.note("B-\(index)", Self.zoneB)
                #expect(try reader.engine.deviceLog.lastKnownServerRecord(for: id)?.recordID == id)
            }
            try reader.expectProjectionsHold()
        }
    }

    // MARK: Tokens (F3, F28, F100)

    /// The zones the writer seeds (five notes each) and the reader's page size (`nil`: the
    /// server's) before its token expires.
    static let expiredTokenSetUps: [(zones: [RecordZone.ID], fetchResultsLimit: Int?)] = [
        ([zoneA], nil),
        ([zoneA, zoneB], 2),  // F141: the refetch from the start comes in several pages
    ]

    // F100, F141, F144
    @Test(
        "An expired token: the engine refetches from the start, page by page; every live record again, and only real deletions",
        arguments: expiredTokenSetUps)
    func expiredTokenRefetches(zones: [RecordZone.ID], fetchResultsLimit: Int?) async throws {
        try await Self.withSeeded(zones, perZone: 5, readerFetchResultsLimit: fetchResultsLimit) {
            server, writer, reader in
            try await reader.engine.fetchChanges()

            // After the reader's fetch: one more note and one deletion, then the server drops
            // its tombstones up to now, past the reader's tokens.
            try await Self.expireTokens(
                server, writer, writing: (Self.note("A-new"), "new"), deleting: Self.note("A-0"))

            reader.clearEvents()
            try await reader.engine.fetchChanges()
            let pages = reader.events.fetchedRecordZoneChanges
            // No phantom deletions: the only one is A-0, which the reader held and which is gone.
            #expect(pages.flatMap(\.deletions).map(\.recordID) == [Self.note("A-0")])
            let live = Set(writer.notes.keys)
            #expect(Set(pages.flatMap(\.modifications).map(\.record.recordID)) == live)
            #expect(reader.events.zoneFetchResults.allSatisfy { $0.error == nil })
            #expect(reader.notes[Self.note("A-new")] == "new")
            try reader.expectProjectionsHold()
        }
    }

    // F100 (a record deleted while the token was expiring)
    @Test("After an expired token, a record deleted meanwhile is gone from the app too")
    func expiredTokenForgetsDeletedRecords() async throws {
        try await Self.withSeeded([Self.zoneA], perZone: 3) { server, writer, reader in
            try await reader.engine.fetchChanges()

            try await Self.expireTokens(server, writer, deleting: Self.note("A-0"))

            try await reader.engine.fetchChanges()
            #expect(reader.notes == writer.notes)
            try reader.expectProjectionsHold()
        }
    }

    // F3, F28, F29
    @Test("An engine reopened on the same log continues from its tokens and keeps its pending changes")
    func reopenedEngineContinues() async throws {
        try await Self.withSeeded([Self.zoneA, Self.zoneB], perZone: 3) { _, writer, reader in
            try await reader.engine.fetchChanges()
            try reader.write(Self.note("mine", Self.zoneB), "mine")
            let pending = try reader.engine.state.pendingRecordZoneChanges

            try reader.startEngine()
            #expect(try reader.engine.state.pendingRecordZoneChanges == pending)
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            #expect(reader.events.fetchedRecordZoneChanges.isEmpty)
            #expect(reader.events.fetchedDatabaseChanges.isEmpty)

            try writer.write(Self.note("later"), "later")
            try await writer.engine.sendChanges()
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            #expect(
                reader.events.fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID) == [
                    Self.note("later")
                ])
            try await reader.engine.sendChanges()
            #expect(try reader.engine.state.pendingRecordZoneChanges == [])
            try reader.expectProjectionsHold()
        }
    }

    /// The writer seeds three notes in zone A, which the reader fetches; then A-2 is deleted and
    /// the tombstones compacted: the reader's token expires, and its refetch lists the zone from
    /// no token, which leaves A-2 out.
    static func readerKnowsA2DeletedBehindCompactedTombstones(
        _ server: SyncServer, _ writer: TestDevice, _ reader: TestDevice
    ) async throws {
        try await seed(writer, zones: [zoneA], perZone: 3)
        try await reader.engine.fetchChanges()
        #expect(reader.notes.count == 3)
        try await expireTokens(server, writer, deleting: note("A-2"))
    }

    /// The writer writes `written` (if any) and deletes `deleted`, sends, and the server drops
    /// its tombstones up to now: past every token of alice's devices until then.
    static func expireTokens(
        _ server: SyncServer, _ writer: TestDevice, writing written: (Record.ID, String)? = nil,
        deleting deleted: Record.ID
    ) async throws {
        if let (id, title) = written { try writer.write(id, title) }
        try writer.delete(deleted)
        try await writer.engine.sendChanges()
        try server.admin.compactTombstones(of: "alice", before: try server.admin.currentToken(of: "alice"))
    }

    // F100, F102, F144: found by the seeded simulation (seed 227 of an earlier generator).
    @Test(
        "A listing from no token cut off after its first page is continued, and still reports the records deleted meanwhile"
    )
    func interruptedListingContinues() async throws {
        try await withDevices("W", "R", maxChangesPerPage: 1) { server, writer, reader in
            try await Self.readerKnowsA2DeletedBehindCompactedTombstones(server, writer, reader)

            // The listing's second page fails: the zone fetch stops after one page.
            let cut = Mutex(true)
            reader.onEvent { event, _ in
                guard case .fetchedRecordZoneChanges = event else { return }
                let first = cut.withLock { first in
                    defer { first = false }
                    return first
                }
                guard first else { return }
                server.admin.failNextRequests(
                    of: "alice", count: 1, with: SyncError(.zoneBusy, "injected after the first page"))
            }
            let error = await #expect(throws: SyncError.self) { try await reader.engine.fetchChanges() }
            #expect(error?.partialErrors[.zone(Self.zoneA)]?.code == .zoneBusy)
            #expect(reader.title(Self.note("A-2")) != nil)

            // The app quits and launches again; the next fetch continues the listing from its
            // page token (A-0 is not fetched again), and at its end reports A-2 as deleted: the
            // device index kept which known records the listing had not returned.
            try reader.startEngine()
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            #expect(
                reader.events.fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID) == [
                    Self.note("A-1")
                ])
            #expect(reader.events.fetchedRecordZoneChanges.flatMap(\.deletions).map(\.recordID) == [Self.note("A-2")])
            #expect(reader.title(Self.note("A-2")) == nil)
            #expect(reader.notes == writer.notes)
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])
            try reader.expectProjectionsHold()
        }
    }

    // F100, F102, F144: found by the sharing simulation's soak (seed 10505): past its start, a
    // listing's page token is an ordinary one, so a listing cut there was continued, never
    // reporting the known records it had left out.
    @Test(
        "A listing from no token cut after a page past its start is continued, and reports the records deleted before it"
    )
    func listingCutPastItsStartContinues() async throws {
        try await withDevices("W", "R", maxChangesPerPage: 1) { server, writer, reader in
            try await Self.readerKnowsA2DeletedBehindCompactedTombstones(server, writer, reader)

            // After the listing's first page two notes are written, past its start; the page of the
            // first of them has an ordinary token and more to come, and the next request fails.
            let pages = Mutex(0)
            reader.onEvent { event, _ in
                guard case .fetchedRecordZoneChanges = event else { return }
                let page = pages.withLock { count in
                    count += 1
                    return count
                }
                if page == 1 {
                    let later = ["B-0", "B-1"].map { name in
                        var record = Record(recordType: "Note", recordID: Self.note(name))
                        record["title"] = .string(name)
                        return record
                    }
                    _ = try? await server.database(for: "alice", device: "other").modifyRecords(
                        saving: later, deleting: [])
                }
                if page == 3 {
                    server.admin.failNextRequests(
                        of: "alice", count: 1, with: SyncError(.zoneBusy, "injected past the listing's start"))
                }
            }
            let error = await #expect(throws: SyncError.self) { try await reader.engine.fetchChanges() }
            #expect(error?.partialErrors[.zone(Self.zoneA)]?.code == .zoneBusy)
            #expect(pages.withLock { $0 } == 3)
            #expect(reader.title(Self.note("A-2")) != nil)

            // The next fetch continues the listing and reports A-2 as deleted.
            reader.onEvent(nil)
            try await reader.engine.fetchChanges()
            #expect(reader.title(Self.note("A-2")) == nil)
            #expect(Set(reader.notes.keys) == Set(["A-0", "A-1", "B-0", "B-1"].map { Self.note($0) }))
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])
            try reader.expectProjectionsHold()
        }
    }

    // F100, F144, F29: the app quits (its request for the next page never returns) between two
    // pages of a listing, past the listing's start, while another device deletes notes. The
    // relaunched engine continues the listing from its page token and still reports the note
    // deleted before the listing began: it ends with exactly the server's notes.
    @Test(
        "A listing past its start stopped by a quit between two pages is continued after the relaunch: the reader ends with exactly the server's notes"
    )
    func listingStoppedByAQuitContinuesAfterTheRelaunch() async throws {
        try await withServer(maxChangesPerPage: 1) { directory, server in
            let writer = try TestDevice("W", server: server, directory: directory)
            let held = HoldingZoneFetches(server.database(for: "alice", device: "R"))
            let reader = try TestDevice("R", database: held, directory: directory.appendingPathComponent("R"))
            try await Self.readerKnowsA2DeletedBehindCompactedTombstones(server, writer, reader)

            // The listing's first page (A-0) comes; meanwhile another device deletes A-1 and
            // writes B-0 and B-1, past the listing's start. The next page is A-1's deletion, whose
            // token is an ordinary one; the request after it never returns: the app quits.
            let firstPage = Atomic(true)
            reader.onEvent { event, _ in
                guard case .fetchedRecordZoneChanges = event, firstPage.exchange(false, ordering: .relaxed) else {
                    return
                }
                let later = ["B-0", "B-1"].map { name in
                    var record = Record(recordType: "Note", recordID: Self.note(name))
                    record["title"] = .string(name)
                    return record
                }
                let other = server.database(for: "alice", device: "other")
                _ = try? await other.modifyRecords(saving: [], deleting: [Self.note("A-1")])
                _ = try? await other.modifyRecords(saving: later, deleting: [])
            }
            // The requests: the expired token, then A-0, A-1's deletion, and the one held.
            held.hold(request: 4)
            let quitting = Task { [engine = reader.engine] in try await engine.fetchChanges() }
            await held.waitUntilHolding()
            #expect(reader.title(Self.note("A-1")) == nil)
            #expect(reader.title(Self.note("A-2")) != nil)
            let token = try #require(try reader.engine.deviceLog.read { try $0.zoneChangeToken(for: Self.zoneA) })
            #expect(token.listingStart == .zero, "past the listing's start: \(token)")

            // The app launches again, its engine opened on the same device log.
            reader.onEvent(nil)
            try reader.startEngine()
            reader.clearEvents()
            try await reader.engine.fetchChanges()
            #expect(
                reader.events.fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID) == [
                    Self.note("B-0"), Self.note("B-1"),
                ])
            #expect(reader.events.fetchedRecordZoneChanges.flatMap(\.deletions).map(\.recordID) == [Self.note("A-2")])
            let serverNotes = try await Self.liveTitles(in: Self.zoneA, of: server)
            #expect(serverNotes == [Self.note("A-0"): "A 0", Self.note("B-0"): "B-0", Self.note("B-1"): "B-1"])
            #expect(reader.notes == serverNotes)
            #expect(try reader.engine.deviceLog.read { try $0.unlistedServerRecords(in: Self.zoneA) } == [])
            #expect(try reader.engine.state.zoneIDsWithUnfetchedServerChanges == [])
            try reader.expectProjectionsHold()

            // The old launch's request ends (as a quit app's never would), so the test ends.
            held.release()
            _ = try? await quitting.value
        }
    }

    /// The title of each live note of alice's `zoneID`, as the server holds it.
    static func liveTitles(in zoneID: RecordZone.ID, of server: SyncServer) async throws -> [Record.ID: String] {
        let database = server.database(for: "alice", device: "inspector")
        var titles: [Record.ID: String] = [:]
        var token: ZoneChangeToken?
        while true {
            let page = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zoneID, since: token))
            for modification in page.modifications {
                titles[modification.record.recordID] = modification.record["title"]?.stringValue ?? ""
            }
            token = page.changeToken
            if !page.moreComing { return titles }
        }
    }
}

/// A database whose `fetchZoneChanges` number n (see ``hold(request:)``) never reaches the server
/// and never returns until ``release()``: the request of an app that quit between two pages.
final class HoldingZoneFetches: ForwardingDatabase {
    let base: InProcessDatabase
    private let state = Mutex<
        (
            calls: Int, holdAt: Int?, held: CheckedContinuation<Void, Never>?, released: Bool,
            waiters: [CheckedContinuation<Void, Never>]
        )
    >((0, nil, nil, false, []))

    init(_ base: InProcessDatabase) { self.base = base }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await base.modifyRecords(request)
    }

    /// Holds the `request`th `fetchZoneChanges` from now (1: the next).
    func hold(request: Int) {
        state.withLock { state in
            state.holdAt = state.calls + request
        }
    }

    /// Returns once a request is held.
    func waitUntilHolding() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.held == nil { state.waiters.append(continuation) }
                return state.held != nil
            }
            if now { continuation.resume() }
        }
    }

    /// Ends the held request with a network failure.
    func release() {
        let held = state.withLock { state in
            state.released = true
            defer { state.held = nil }
            return state.held
        }
        held?.resume()
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        let holds = state.withLock { state in
            state.calls += 1
            return state.calls == state.holdAt
        }
        guard holds else { return try await base.fetchZoneChanges(request) }
        await withCheckedContinuation { continuation in
            let (resumeNow, waiters) = state.withLock { state in
                if state.released { return (true, [CheckedContinuation<Void, Never>]()) }
                state.held = continuation
                defer { state.waiters = [] }
                return (false, state.waiters)
            }
            for waiter in waiters { waiter.resume() }
            if resumeNow { continuation.resume() }
        }
        throw SyncError(.networkFailure, "the app quit before the answer came")
    }
}
