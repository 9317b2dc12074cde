import Foundation
import Synchronization
import Testing

@testable import SyncModel

/// A `CloudDatabase` that records the requests it gets and answers with empty responses.
final class RecordingDatabase: CloudDatabase {
    let databaseScope = DatabaseScope.private
    let requests = Mutex<[String]>([])
    let lastRecordsRequest = Mutex<ModifyRecordsRequest?>(nil)
    let lastZoneRequest = Mutex<FetchZoneChangesRequest?>(nil)
    private let hints: AsyncStream<PushHint>
    let hintSink: AsyncStream<PushHint>.Continuation

    init() {
        (hints, hintSink) = AsyncStream.makeStream(of: PushHint.self)
    }

    private func note(_ name: String) { requests.withLock { $0.append(name) } }

    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        note("modifyZones")
        return ModifyZonesResponse(
            saveResults: Dictionary(
                uniqueKeysWithValues: request.zonesToSave.map {
                    ($0.zoneID, .success(RecordZone(zoneID: $0.zoneID, capabilities: .customZoneDefault)))
                }))
    }

    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        note("fetchZones(\(request.zoneIDs?.count ?? -1))")
        return FetchZonesResponse(results: [
            Fixture.notes: .success(RecordZone(zoneID: Fixture.notes)),
            Fixture.photos: .failure(SyncError(.zoneNotFound, item: .zone(Fixture.photos))),
        ])
    }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        note("modifyRecords")
        lastRecordsRequest.withLock { $0 = request }
        try request.validate()
        return ModifyRecordsResponse()
    }

    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        note("fetchDatabaseChanges")
        return FetchDatabaseChangesResponse(
            changeToken: DatabaseChangeToken(offset: (request.since?.offset ?? .zero).next))
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        note("fetchZoneChanges")
        lastZoneRequest.withLock { $0 = request }
        return FetchZoneChangesResponse(
            zoneID: request.zoneID, changeToken: ZoneChangeToken(zoneID: request.zoneID, incarnation: 1, offset: 1))
    }

    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        note("modifySubscriptions")
        return ModifySubscriptionsResponse(
            saveResults: Dictionary(
                uniqueKeysWithValues: request.subscriptionsToSave.map { ($0.subscriptionID, .success($0)) }))
    }

    func allSubscriptions() async throws -> [Subscription] { [] }

    func currentUserRecordID() async throws -> Record.ID { Fixture.alice }

    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        note("uploadAsset")
        return AssetUploadResponse(asset: Asset(digest: request.digest, size: request.size), bytesSent: request.size)
    }

    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        note("downloadAsset")
        throw SyncError(.assetNotAvailable, "this recording database keeps no asset contents")
    }

    func pushHints() -> AsyncStream<PushHint> { hints }
}

/// The `CloudDatabase` conveniences forward to the request-value requirements.
struct CloudDatabaseTests {
    let database = RecordingDatabase()

    // F145: the convenience saves with ifServerRecordUnchanged, atomically, by default.
    @Test func modifyRecordsConvenienceUsesCloudKitDefaults() async throws {
        _ = try await database.modifyRecords(saving: [Fixture.savedNote()], deleting: [Fixture.n2])
        let request = try #require(database.lastRecordsRequest.withLock { $0 })
        #expect(request.savePolicy == .ifServerRecordUnchanged)
        #expect(request.atomically)
        #expect(request.requestID == nil)
        #expect(request.recordIDsToDelete == [Fixture.n2])

        _ = try await database.modifyRecords(
            saving: [], deleting: [Fixture.n1], savePolicy: .changedKeys, atomically: false, requestID: "x")
        let second = try #require(database.lastRecordsRequest.withLock { $0 })
        #expect(second.savePolicy == .changedKeys)
        #expect(!second.atomically)
        #expect(second.requestID == "x")
    }

    // F151: whole-request failures are thrown as SyncError.
    @Test func wholeRequestFailuresAreThrown() async throws {
        await #expect(throws: SyncError.self) {
            _ = try await database.modifyRecords(saving: RequestTests.notes(401), deleting: [])
        }
    }

    // F141
    @Test func zoneFetchConvenience() async throws {
        let response = try await database.fetchZoneChanges(zoneID: Fixture.notes, since: nil, desiredKeys: [])
        #expect(response.zoneID == Fixture.notes)
        let request = try #require(database.lastZoneRequest.withLock { $0 })
        #expect(request.desiredKeys == [])
        #expect(request.resultsLimit == nil)
    }

    @Test func otherConveniences() async throws {
        let zones = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
        #expect(try zones.saveResults[Fixture.notes]?.get().capabilities == .customZoneDefault)
        #expect(try await database.fetchAllZones() == [RecordZone(zoneID: Fixture.notes)])
        #expect(try await database.fetchZones([Fixture.notes, Fixture.photos]).results.count == 2)
        let page = try await database.fetchDatabaseChanges(since: DatabaseChangeToken(offset: 4))
        #expect(page.changeToken == DatabaseChangeToken(offset: 5))
        #expect(!page.moreComing)
        let subscriptions = try await database.modifySubscriptions(
            saving: [Subscription(subscriptionID: "db")], deleting: [])
        #expect(subscriptions.saveResults.count == 1)
        #expect(try await database.currentUserRecordID() == Fixture.alice)
        #expect(
            database.requests.withLock { $0 } == [
                "modifyZones", "fetchZones(-1)", "fetchZones(2)", "fetchDatabaseChanges", "modifySubscriptions",
            ])
    }

    // F113, F154: hints arrive on the stream and carry no data beyond scope, zone and token.
    @Test func pushHintsStream() async throws {
        let hint = PushHint(
            databaseScope: .private, subscriptionID: "engine", zoneID: Fixture.notes,
            changeToken: DatabaseChangeToken(offset: 8))
        database.hintSink.yield(hint)
        database.hintSink.finish()
        var received: [PushHint] = []
        for await hint in database.pushHints() { received.append(hint) }
        #expect(received == [hint])
        #expect(
            hint.description
                == #"PushHint(private, subscription "engine", zone "Notes", DatabaseChangeToken(offset 8))"#)
        #expect(try jsonRoundTrip(hint) == hint)
    }

    // F119: the sharing operations are CloudDatabase's, so any database, an engine's included,
    // reaches them without a cast; one that does not implement them refuses each, naming it.
    @Test func sharingOperationsRefusedByDefault() async throws {
        let plain: any CloudDatabase = database
        let url = try #require(URL(string: "logsync://share/_user1/00000000000000000000000000000000"))
        func expectRefused(_ operation: String, _ call: () async throws -> Void) async {
            let error = await #expect(throws: SyncError.self) { try await call() }
            #expect(error?.code == .badDatabase)
            #expect(error?.message.hasPrefix("\(operation) is not supported by this private database") == true)
        }
        await expectRefused("fetchShareMetadata") { _ = try await plain.fetchShareMetadata(url: url) }
        await expectRefused("acceptShares") { _ = try await plain.acceptShares(AcceptSharesRequest(shareURLs: [url])) }
        await expectRefused("fetchShareParticipants") {
            _ = try await plain.fetchShareParticipants([UserIdentity.LookupInfo(emailAddress: "bob@example.com")])
        }
        #expect(!(database is any ShareOperations))
        #expect(database.requests.withLock { $0 } == [])
    }

    // F119: lookup infos name exactly one thing, well formed; a request names each once, at most 400.
    @Test func lookupInfoRules() throws {
        try UserIdentity.LookupInfo(emailAddress: "bob@example.com").validate()
        try UserIdentity.LookupInfo(userRecordName: "_user2").validate()
        for (info, words) in [
            (UserIdentity.LookupInfo(emailAddress: "bob"), "invalid e-mail address"),
            (UserIdentity.LookupInfo(userRecordName: ""), "invalid user record name"),
            (UserIdentity.LookupInfo(unchecked: nil, userRecordName: nil), "names no e-mail address"),
            (UserIdentity.LookupInfo(unchecked: "bob@example.com", userRecordName: "_user2"), "names both"),
        ] {
            let error = #expect(throws: SyncError.self) { try info.validate() }
            #expect(error?.code == .invalidArguments)
            #expect(error?.message.contains(words) == true, "\(String(describing: error))")
        }
        let bob = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
        #expect(throws: SyncError.self) { try FetchShareParticipantsRequest(lookupInfos: [bob, bob]).validate() }
        let many = (0...Limits.maxItemsPerRequest).map { UserIdentity.LookupInfo(userRecordName: "_user\($0)") }
        let tooMany = #expect(throws: SyncError.self) {
            try FetchShareParticipantsRequest(lookupInfos: many).validate()
        }
        #expect(tooMany?.code == .limitExceeded)
        #expect(bob.description == "<bob@example.com>")
        #expect(UserIdentity.LookupInfo(userRecordName: "_user2").description == #"user "_user2""#)
    }
}
