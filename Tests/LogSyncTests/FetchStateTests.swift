import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// What the device index keeps from fetches (DeviceIndex's rules for kinds 20–25 and 50): the
/// database token, known and unfetched zones (F25), zone tokens, last known server records and the
/// delivery offset (F29). Entries are appended by hand, made from the answers of a real server, so
/// every token is one the server issued.
@Suite("Fetch state")
struct FetchStateTests {
    typealias F = Fixtures

    static let archive = RecordZone.ID(zoneName: "Archive")
    static let p = F.id("P", F.photos)
    /// Every record ID the scenarios use, for comparing the index with its replay.
    static let recordIDs = [F.a, F.b, F.c, p, F.id("Q", archive)]

    /// A user's database on a real server, and an engine whose device log receives, by hand, the
    /// entries a fetch would write from the server's answers.
    struct Bench {
        static let user: UserID = "alice"
        let server: SyncServer
        let database: InProcessDatabase
        let engine: SyncEngine

        /// A bench in a fresh temporary directory whose server holds `zones`, then `records`, none
        /// fetched yet; the directory is removed when `body` returns.
        static func with(zones: [RecordZone.ID], records: [Record], _ body: (Bench) async throws -> Void) async throws {
            try await withTemporaryDirectory { directory in
                let bench = try Bench(directory)
                try await bench.serverSaves(zones: zones)
                try await bench.serverSaves(records)
                try await body(bench)
            }
        }

        init(_ directory: URL, maxChangesPerPage: Int = 400) throws {
            server = try makeServer(directory.appendingPathComponent("remote"), maxChangesPerPage: maxChangesPerPage)
            database = server.database(for: Self.user)
            engine = try Self.engine(directory, database)
        }

        /// An engine on the device log in `directory/device` (opened again if it exists).
        static func engine(_ directory: URL, _ database: InProcessDatabase) throws -> SyncEngine {
            let deviceLog = try openDeviceLog(directory.appendingPathComponent("device"))
            var configuration = SyncEngine.Configuration(
                database: database, deviceLog: deviceLog, delegate: IdleDelegate.shared)
            configuration.automaticallySync = false
            return try SyncEngine(configuration)
        }

        var deviceLog: DeviceLog { engine.deviceLog }

        // MARK: The server side

        func serverSaves(zones: [RecordZone.ID]) async throws {
            let response = try await database.modifyZones(saving: zones.map { RecordZone(zoneID: $0) }, deleting: [])
            for zone in zones { _ = try #require(response.saveResults[zone]).get() }
        }

        func serverDeletes(zones: [RecordZone.ID]) async throws {
            let response = try await database.modifyZones(saving: [], deleting: zones)
            for zone in zones { try #require(response.deleteResults[zone]).get() }
        }

        /// Saves records (new ones, or edits of fetched ones) and deletes others; returns the saved records.
        @discardableResult
        func serverSaves(_ records: [Record], deleting: [Record.ID] = []) async throws -> [Record] {
            let response = try await database.modifyRecords(saving: records, deleting: deleting)
            for id in deleting { try #require(response.deleteResults[id]).get() }
            return try records.map { try #require(response.saveResults[$0.recordID]).get() }
        }

        // MARK: The device side: what a fetch appends

        /// Fetches the database page after the engine's token and appends it (F37).
        @discardableResult
        func fetchDatabaseChanges() async throws -> FetchDatabaseChangesResponse {
            let token = try deviceLog.read { try $0.databaseChangeToken() }
            let page = try await database.fetchDatabaseChanges(since: token)
            try deviceLog.append(
                .databaseChangesFetched(
                    modifications: page.modifications.map(\.zoneID), deletions: page.deletions,
                    changeToken: page.changeToken, moreComing: page.moreComing))
            return page
        }

        /// Fetches a zone's page after the engine's token for it and appends it (F39).
        @discardableResult
        func fetchZoneChanges(_ zoneID: RecordZone.ID) async throws -> FetchZoneChangesResponse {
            let token = try deviceLog.read { try $0.zoneChangeToken(for: zoneID) }
            let page = try await database.fetchZoneChanges(zoneID: zoneID, since: token)
            try deviceLog.append(
                .zoneChangesFetched(
                    zoneID: zoneID, modifications: page.modifications.map(\.record), deletions: page.deletions,
                    changeToken: page.changeToken, moreComing: page.moreComing))
            return page
        }

        /// The error the server answers a fetch of `zoneID` with now, which must be one.
        func zoneFetchError(_ zoneID: RecordZone.ID) async throws -> SyncError {
            let token = try deviceLog.read { try $0.zoneChangeToken(for: zoneID) }
            let error = await #expect(throws: SyncError.self) {
                try await database.fetchZoneChanges(zoneID: zoneID, since: token)
            }
            return try #require(error)
        }

        // MARK: Reading the index

        var databaseToken: DatabaseChangeToken? { get throws { try deviceLog.read { try $0.databaseChangeToken() } } }
        func zoneToken(_ zoneID: RecordZone.ID) throws -> ZoneChangeToken? {
            try deviceLog.read { try $0.zoneChangeToken(for: zoneID) }
        }
        var knownZones: Set<RecordZone.ID> { get throws { Set(try deviceLog.read { try $0.knownZoneIDs() }) } }
        var unfetchedZones: Set<RecordZone.ID> {
            get throws { Set(try engine.state.zoneIDsWithUnfetchedServerChanges) }
        }
        func serverRecord(_ id: Record.ID) throws -> Record? { try deviceLog.lastKnownServerRecord(for: id) }
        var state: ReferenceState {
            get throws { try deviceLog.read { try $0.referenceState(recordIDs: FetchStateTests.recordIDs) } }
        }

        /// The projection rule holds: the index equals its rebuild and an independent replay.
        func verify(sourceLocation: SourceLocation = #_sourceLocation) throws {
            #expect(
                try deviceLog.log.verifyProjections() == nil, "the index differs from its rebuild",
                sourceLocation: sourceLocation)
            #expect(
                try ReferenceState.replaying(deviceLog) == state, "the index differs from a replay",
                sourceLocation: sourceLocation)
        }
    }

    // MARK: Database changes

    @Test("F37, F140: a database page stores its token; modified zones become known and unfetched (F25)")
    func databasePage() async throws {
        try await withTemporaryDirectory { directory in
            let bench = try Bench(directory)
            #expect(try bench.databaseToken == nil, "a new device fetches all history")
            try await bench.serverSaves(zones: [F.notes, F.photos])

            let first = try await bench.fetchDatabaseChanges()
            #expect(Set(first.modifications.map(\.zoneID)) == [F.notes, F.photos])
            #expect(try bench.databaseToken == first.changeToken)
            #expect(try bench.knownZones == [F.notes, F.photos])
            #expect(try bench.unfetchedZones == [F.notes, F.photos])

            // The next page starts at the stored token and holds only the new zone; its token replaces the first.
            try await bench.serverSaves(zones: [Self.archive])
            let second = try await bench.fetchDatabaseChanges()
            #expect(second.modifications.map(\.zoneID) == [Self.archive])
            #expect(second.changeToken != first.changeToken)
            #expect(try bench.databaseToken == second.changeToken)
            #expect(try bench.knownZones == [F.notes, F.photos, Self.archive])
            #expect(try bench.unfetchedZones == [F.notes, F.photos, Self.archive])
            try bench.verify()
        }
    }

    @Test("F140: a page with more coming stores its token, so the next page starts after it")
    func moreComing() async throws {
        try await withTemporaryDirectory { directory in
            let bench = try Bench(directory, maxChangesPerPage: 1)
            try await bench.serverSaves(zones: [F.notes])
            try await bench.serverSaves(zones: [F.photos])

            let first = try await bench.fetchDatabaseChanges()
            #expect(first.moreComing)
            #expect(first.modifications.map(\.zoneID) == [F.notes])
            #expect(try bench.databaseToken == first.changeToken)
            let second = try await bench.fetchDatabaseChanges()
            #expect(!second.moreComing)
            #expect(second.modifications.map(\.zoneID) == [F.photos], "the second page repeats nothing of the first")
            #expect(try bench.databaseToken == second.changeToken)
            #expect(try bench.unfetchedZones == [F.notes, F.photos])
            try bench.verify()
        }
    }

    @Test("F37, F149: a zone deleted on the server is forgotten: not known or unfetched, no token, no server records")
    func deletedZoneForgotten() async throws {
        try await Bench.with(
            zones: [F.notes, F.photos], records: [F.clientRecord(F.a), F.clientRecord(F.b), F.clientRecord(Self.p)]
        ) { bench in
            try await bench.fetchDatabaseChanges()
            try await bench.fetchZoneChanges(F.notes)
            try await bench.fetchZoneChanges(F.photos)
            #expect(try bench.zoneToken(F.notes) != nil)
            #expect(try bench.serverRecord(F.a) != nil)

            try await bench.serverDeletes(zones: [F.notes])
            let page = try await bench.fetchDatabaseChanges()
            #expect(page.deletions == [SyncModel.DatabaseChange.Deletion(zoneID: F.notes, reason: .deleted)])
            #expect(try bench.knownZones == [F.photos])
            #expect(try bench.unfetchedZones == [F.photos], "Photos was fetched but not finished: still unfetched")
            #expect(try bench.zoneToken(F.notes) == nil)
            #expect(try bench.serverRecord(F.a) == nil)
            #expect(try bench.serverRecord(F.b) == nil)
            // The other zone keeps what it had.
            #expect(try bench.zoneToken(F.photos) != nil)
            #expect(try bench.serverRecord(Self.p)?.recordID == Self.p)
            #expect(try bench.databaseToken == page.changeToken)
            try bench.verify()
        }
    }

    @Test("F149: a zone deleted and re-created between fetches is forgotten, then known and unfetched again")
    func recreatedZone() async throws {
        try await Bench.with(zones: [F.notes], records: [F.clientRecord(F.a)]) { bench in
            try await bench.fetchDatabaseChanges()
            try await bench.fetchZoneChanges(F.notes)
            try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: nil))
            #expect(try bench.unfetchedZones == [])

            try await bench.serverDeletes(zones: [F.notes])
            try await bench.serverSaves(zones: [F.notes])
            let page = try await bench.fetchDatabaseChanges()
            #expect(page.deletions.map(\.zoneID) == [F.notes], "the old incarnation's deletion comes first")
            #expect(page.modifications.map(\.zoneID) == [F.notes])
            #expect(try bench.knownZones == [F.notes])
            #expect(try bench.unfetchedZones == [F.notes])
            #expect(try bench.zoneToken(F.notes) == nil, "the old incarnation's token is invalid (F149)")
            #expect(try bench.serverRecord(F.a) == nil, "the new incarnation is empty (F149)")
            try bench.verify()
        }
    }

    // MARK: Zone changes

    @Test(
        "F39, F141: a zone page stores the zone's token and its records as last known server records; deletions forget them"
    )
    func zonePage() async throws {
        try await Bench.with(zones: [F.notes], records: [F.clientRecord(F.a, title: "one"), F.clientRecord(F.b)]) {
            bench in
            // A zone page is enough to know the zone, without a database page.
            let first = try await bench.fetchZoneChanges(F.notes)
            #expect(first.modifications.count == 2)
            #expect(try bench.zoneToken(F.notes) == first.changeToken)
            #expect(try bench.knownZones == [F.notes])
            #expect(try bench.unfetchedZones == [], "only a database page makes a zone unfetched")
            let fetchedA = try #require(first.modifications.first { $0.record.recordID == F.a }?.record)
            #expect(try bench.serverRecord(F.a) == fetchedA)
            #expect(try bench.serverRecord(F.a)?.recordChangeTag != nil, "the server's system fields are kept")

            // The server edits A and deletes B; the next page starts at the stored token.
            var edit = fetchedA
            edit["title"] = .string("two")
            let saved = try await bench.serverSaves([edit], deleting: [F.b])
            let second = try await bench.fetchZoneChanges(F.notes)
            #expect(second.modifications.map(\.record) == saved)
            #expect(second.deletions == [RecordZoneChange.Deletion(recordID: F.b, recordType: "Note")])
            #expect(try bench.serverRecord(F.a) == saved.first)
            #expect(try bench.serverRecord(F.a)?["title"] == RecordValue.string("two"))
            #expect(try bench.serverRecord(F.b) == nil)
            #expect(try bench.zoneToken(F.notes) == second.changeToken)
            #expect(second.changeToken != first.changeToken)
            try bench.verify()
        }
    }

    @Test("F25, F40: a zone fetched to the end leaves the unfetched zones; the others stay")
    func zoneFetchedToTheEnd() async throws {
        try await Bench.with(zones: [F.notes, F.photos], records: [F.clientRecord(F.a)]) { bench in
            try await bench.fetchDatabaseChanges()
            #expect(try bench.unfetchedZones == [F.notes, F.photos])

            try await bench.fetchZoneChanges(F.notes)
            #expect(try bench.unfetchedZones == [F.notes, F.photos], "a page alone does not drain the zone")
            try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: nil))
            #expect(try bench.unfetchedZones == [F.photos])
            #expect(try bench.knownZones == [F.notes, F.photos])
            #expect(try bench.zoneToken(F.notes) != nil)
            #expect(try bench.serverRecord(F.a) != nil)

            // Finishing a zone that is not unfetched changes nothing.
            let before = try bench.state
            try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: nil))
            #expect(try bench.state == before)
            try bench.verify()
        }
    }

    /// How a zone disappears on the server, and the error its fetch then gives (F149, F150).
    enum Disappearance: String, CaseIterable, Sendable {
        case deleted, purged

        var code: SyncError.Code {
            switch self {
            case .deleted: .zoneNotFound
            case .purged: .userDeletedZone
            }
        }
    }

    @Test(
        "F40, F149, F150: zoneNotFound or userDeletedZone from a zone's fetch forgets the zone",
        arguments: Disappearance.allCases)
    func zoneGoneForgotten(_ how: Disappearance) async throws {
        try await Bench.with(zones: [F.notes, F.photos], records: [F.clientRecord(F.a), F.clientRecord(Self.p)]) {
            bench in
            try await bench.fetchDatabaseChanges()
            try await bench.fetchZoneChanges(F.notes)
            try await bench.fetchZoneChanges(F.photos)
            try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.photos, error: nil))
            try await bench.serverSaves([F.clientRecord(F.b)])  // Notes has changes again
            let again = try await bench.fetchDatabaseChanges()
            #expect(again.modifications.map(\.zoneID) == [F.notes])

            switch how {
            case .deleted: try await bench.serverDeletes(zones: [F.notes])
            case .purged: try bench.server.admin.purgeZone(F.notes, of: Bench.user)
            }
            let error = try await bench.zoneFetchError(F.notes)
            #expect(error.code == how.code)
            try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: error))
            #expect(try bench.knownZones == [F.photos])
            #expect(try bench.unfetchedZones == [])
            #expect(try bench.zoneToken(F.notes) == nil)
            #expect(try bench.serverRecord(F.a) == nil)
            #expect(try bench.serverRecord(Self.p) != nil, "the other zone keeps its records")
            #expect(try bench.zoneToken(F.photos) != nil, "the other zone keeps its token")
            try bench.verify()
        }
    }

    @Test(
        "F40, F89: another error leaves the zone unfetched, with its token and records, for the next fetch",
        arguments: [
            SyncError.Code.networkFailure, .zoneBusy, .serviceUnavailable, .requestRateLimited, .operationCancelled,
            .changeTokenExpired, .internalError, .permissionFailure,
        ])
    func zoneErrorKeepsUnfetched(_ code: SyncError.Code) async throws {
        try await Bench.with(zones: [F.notes], records: [F.clientRecord(F.a)]) { bench in
            try await bench.fetchDatabaseChanges()
            let page = try await bench.fetchZoneChanges(F.notes)
            try await bench.serverSaves([F.clientRecord(F.b)])

            bench.server.admin.failNextRequests(of: Bench.user, with: SyncError(code, "injected", item: .zone(F.notes)))
            let error = try await bench.zoneFetchError(F.notes)
            #expect(error.code == code)
            let before = try bench.state
            try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: error))
            #expect(try bench.state == before, "the failed fetch changes nothing")
            #expect(try bench.unfetchedZones == [F.notes])
            #expect(try bench.knownZones == [F.notes])
            #expect(try bench.zoneToken(F.notes) == page.changeToken)
            #expect(try bench.serverRecord(F.a) != nil)

            // The next fetch resumes at the stored token and drains the zone.
            let next = try await bench.fetchZoneChanges(F.notes)
            #expect(next.modifications.map(\.record.recordID) == [F.b])
            try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: nil))
            #expect(try bench.unfetchedZones == [])
            try bench.verify()
        }
    }

    // MARK: Listings

    // F100: the device index keeps a listing's progress, so that its end knows, whichever launch
    // reaches it, which known records none of its pages returned.
    @Test(
        "F100: a zone page without a token marks the zone's known records unlisted; its pages, a reset and the zone's deletion clear them"
    )
    func listingMarksKnownRecords() async throws {
        try withTemporaryDirectory { directory in
            let log = try openDeviceLog(directory)
            let c = F.id("C")
            let (a, b, cRecord) = (
                F.serverRecord(F.a, tag: "1"), F.serverRecord(F.b, tag: "2"), F.serverRecord(c, tag: "3")
            )
            let token = ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 5)
            let listingToken = ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 6, listingStart: 9)
            func unlisted() throws -> [Record.ID] {
                try log.read { try $0.unlistedServerRecords(in: F.notes) }.map(\.recordID)
            }
            func page(_ records: [Record], deleting deleted: [Record.ID] = [], _ token: ZoneChangeToken) throws {
                try log.append(
                    .zoneChangesFetched(
                        zoneID: F.notes, modifications: records,
                        deletions: deleted.map { .init(recordID: $0, recordType: "Note") }, changeToken: token,
                        moreComing: true))
            }

            // The zone's first fetch knows nothing before it: nothing to mark.
            try page([a, b, cRecord], token)
            #expect(try unlisted() == [])

            // The token expired: the listing's first page returns A; B and C are not returned yet.
            try log.append(.changeTokenReset(zoneID: F.notes))
            try page([a], listingToken)
            #expect(try unlisted() == [F.b, c])
            // A later page deletes C; a rebuild of the index from the log gives the same.
            try page([], deleting: [c], token)
            #expect(try unlisted() == [F.b])
            try log.log.rebuildProjections()
            #expect(try unlisted() == [F.b])
            #expect(try log.read { try $0.isUnlisted(F.b) })

            // A reset ends the listing; a new one marks again, and the zone's deletion ends it.
            try log.append(.changeTokenReset(zoneID: F.notes))
            #expect(try unlisted() == [])
            try page([a], listingToken)
            #expect(try unlisted() == [F.b])
            try log.append(
                .databaseChangesFetched(
                    modifications: [], deletions: [.init(zoneID: F.notes)],
                    changeToken: DatabaseChangeToken(offset: 12), moreComing: false))
            #expect(try unlisted() == [])
            #expect(try log.log.verifyProjections() == nil)
        }
    }

    // MARK: Expired tokens

    @Test("F100, F144: changeTokenReset of a zone drops its token only; the zone is then fetched from the start")
    func zoneTokenReset() async throws {
        try await Bench.with(zones: [F.notes, F.photos], records: [F.clientRecord(F.a), F.clientRecord(Self.p)]) {
            bench in
            let database = try await bench.fetchDatabaseChanges()
            try await bench.fetchZoneChanges(F.notes)
            try await bench.fetchZoneChanges(F.photos)
            let photosToken = try bench.zoneToken(F.photos)

            // The server compacts its tombstones past the device's zone token.
            try await bench.serverSaves([F.clientRecord(F.b)])
            try bench.server.admin.compactTombstones(
                of: Bench.user, before: try bench.server.admin.currentToken(of: Bench.user))
            let error = try await bench.zoneFetchError(F.notes)
            #expect(error.code == .changeTokenExpired)

            try bench.deviceLog.append(.changeTokenReset(zoneID: F.notes))
            #expect(try bench.zoneToken(F.notes) == nil)
            #expect(try bench.zoneToken(F.photos) == photosToken, "another zone's token is kept")
            #expect(try bench.databaseToken == database.changeToken, "the database token is kept")
            #expect(try bench.knownZones == [F.notes, F.photos])
            #expect(try bench.unfetchedZones == [F.notes, F.photos])
            #expect(try bench.serverRecord(F.a) != nil, "the records stay until the zone is fetched again")

            let full = try await bench.fetchZoneChanges(F.notes)
            #expect(
                Set(full.modifications.map(\.record.recordID)) == [F.a, F.b], "from the start: the zone's full contents"
            )
            #expect(try bench.zoneToken(F.notes) == full.changeToken)
            try bench.verify()
        }
    }

    @Test("F100, F144: changeTokenReset without a zone drops the database token only")
    func databaseTokenReset() async throws {
        try await Bench.with(zones: [F.notes], records: [F.clientRecord(F.a)]) { bench in
            try await bench.fetchDatabaseChanges()
            let zonePage = try await bench.fetchZoneChanges(F.notes)

            try await bench.serverSaves(zones: [F.photos])
            try bench.server.admin.compactTombstones(
                of: Bench.user, before: try bench.server.admin.currentToken(of: Bench.user))
            let token = try bench.databaseToken
            let error = await #expect(throws: SyncError.self) {
                try await bench.database.fetchDatabaseChanges(since: token)
            }
            #expect(error?.code == .changeTokenExpired)

            try bench.deviceLog.append(.changeTokenReset(zoneID: nil))
            #expect(try bench.databaseToken == nil)
            #expect(try bench.zoneToken(F.notes) == zonePage.changeToken, "zone tokens are kept")
            #expect(try bench.knownZones == [F.notes])

            let all = try await bench.fetchDatabaseChanges()
            #expect(Set(all.modifications.map(\.zoneID)) == [F.notes, F.photos], "from the start: all history")
            #expect(try bench.databaseToken == all.changeToken)
            #expect(try bench.zoneToken(F.notes) == zonePage.changeToken)
            try bench.verify()
        }
    }

    // MARK: Delivery and the timeline

    @Test("F29: eventsDelivered stores the delivery offset; the last one wins")
    func deliveryOffset() async throws {
        try await withTemporaryDirectory { directory in
            let bench = try Bench(directory)
            #expect(try bench.deviceLog.read { try $0.deliveredOffset() } == nil)
            try await bench.serverSaves(zones: [F.notes])
            try await bench.serverSaves([F.clientRecord(F.a)])
            try await bench.fetchDatabaseChanges()
            try await bench.fetchZoneChanges(F.notes)
            let fetched = try bench.deviceLog.log.lastOffset

            let before = try bench.state
            try bench.deviceLog.append(.eventsDelivered(through: fetched))
            #expect(try bench.deviceLog.read { try $0.deliveredOffset() } == fetched)
            var expected = before
            expected.delivered = fetched
            #expect(try bench.state == expected, "delivery changes nothing else")

            let finished = try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: nil))
            try bench.deviceLog.append(.eventsDelivered(through: finished))
            #expect(try bench.deviceLog.read { try $0.deliveredOffset() } == finished)
            try bench.verify()
        }
    }

    @Test("F36, F41, F42, F45: the start and end of a send or a fetch change no state")
    func timelineMarks() async throws {
        try await Bench.with(zones: [F.notes, F.photos], records: [F.clientRecord(F.a)]) { bench in
            try await bench.fetchDatabaseChanges()
            try await bench.fetchZoneChanges(F.notes)
            let before = try bench.state
            #expect(before.knownZones == [F.notes, F.photos])

            let fetch = SyncEngine.FetchChangesContext(reason: .manual, options: .init(scope: .zoneIDs([F.notes])))
            let send = SyncEngine.SendChangesContext(reason: .scheduled, options: .init(scope: .all))
            try bench.deviceLog.append([
                .fetchStarted(fetch), .fetchFinished(error: nil), .fetchFinished(error: SyncError(.networkFailure)),
                .sendStarted(send), .sendFinished(error: nil), .sendFinished(error: SyncError(.operationCancelled)),
            ])
            #expect(try bench.state == before)
            try bench.verify()
        }
    }

    // MARK: Persistence

    @Test("Fetch state survives closing and reopening the device log")
    func reopen() async throws {
        try await withTemporaryDirectory { directory in
            let server = try makeServer(directory.appendingPathComponent("remote"))
            let database = server.database(for: Bench.user)
            let last: LogOffset
            let before: ReferenceState
            do {
                let bench = try Bench.reusing(server, database, directory)
                try await bench.serverSaves(zones: [F.notes, F.photos, Self.archive])
                try await bench.serverSaves([F.clientRecord(F.a), F.clientRecord(F.b), F.clientRecord(Self.p)])
                try await bench.fetchDatabaseChanges()
                try await bench.fetchZoneChanges(F.notes)
                try bench.deviceLog.append(.zoneFetchFinished(zoneID: F.notes, error: nil))
                try await bench.fetchZoneChanges(F.photos)
                try bench.deviceLog.append(.changeTokenReset(zoneID: F.photos))
                try bench.deviceLog.append(.eventsDelivered(through: try bench.deviceLog.log.lastOffset))
                let state = try bench.state
                #expect(state.databaseToken != nil)
                #expect(state.zoneTokens.keys.sorted { $0.zoneName < $1.zoneName } == [F.notes])
                #expect(state.unfetchedZones == [F.photos, Self.archive])
                #expect(state.serverRecords.count == 3)
                #expect(state.delivered != nil)
                last = try bench.deviceLog.log.lastOffset
                before = state
            }  // the engine and its device log are closed here

            let bench = try Bench.reusing(server, database, directory)
            #expect(try bench.deviceLog.log.lastOffset == last)
            #expect(
                try bench.deviceLog.log.appliedOffsets() == [DeviceIndex.projectionName: last],
                "current without a replay")
            #expect(try bench.state == before)
            // And it carries on: the stored tokens are good for the next fetch.
            try await bench.serverSaves([F.clientRecord(F.c)])
            let next = try await bench.fetchZoneChanges(F.notes)
            #expect(next.modifications.map(\.record.recordID) == [F.c])
            try bench.verify()
        }
    }
}

extension FetchStateTests.Bench {
    /// A bench on an existing server, with the engine on `directory/device` (opened again if it exists).
    static func reusing(_ server: SyncServer, _ database: InProcessDatabase, _ directory: URL) throws -> Self {
        Self(server: server, database: database, engine: try engine(directory, database))
    }

    private init(server: SyncServer, database: InProcessDatabase, engine: SyncEngine) {
        self.server = server
        self.database = database
        self.engine = engine
    }
}
