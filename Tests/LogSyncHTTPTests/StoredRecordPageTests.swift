import Foundation
import LogSyncHTTP
import LogSyncServer
import LogSyncWire
import SyncModel
import TemporaryDirectory
import Testing

/// A zone-changes answer built from the records' stored bytes (`fetchZoneChangesPage`, copied by
/// `Wire.encode(_:storedRecords:)`) decodes to exactly what the decoded path returns: owner and
/// participant fetches, deletions, page tokens, `moreComing`, over HTTP and in process.
@Suite("Zone changes from stored record bytes")
struct StoredRecordPageTests {
    /// Alice's zone "Notes" with records of every kind of value, some changed and some deleted,
    /// shared whole with bob. Returns the zone as bob's shared database names it.
    static func seed(_ server: SyncServer) async throws -> RecordZone.ID {
        try server.registerUser("bob", emailAddress: "bob@example.com")
        let alice = server.database(for: "alice", device: "phone")
        let zone = RecordZone.ID(zoneName: "Notes")
        _ = try await alice.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        var records: [Record] = []
        let files = FileManager.default.temporaryDirectory.appendingPathComponent("assets-\(UUID())", isDirectory: true)
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: files) }
        for index in 0..<25 {
            var record = Record(
                recordType: index % 3 == 0 ? "Folder" : "Note",
                recordID: Record.ID(recordName: "r\(index)", zoneID: zone))
            record["title"] = .string("note \(index) ✓")
            record["count"] = .int64(Int64(index) - 7)
            record["ratio"] = .double(Double(index) / 3)
            record["done"] = .bool(index.isMultiple(of: 2))
            record["blob"] = .bytes(Data((0..<UInt8(index)).map { $0 &* 7 }))
            record["when"] = .date(Date(timeIntervalSince1970: 1_700_000_000 + Double(index)))
            let content = Array("asset-\(index)".utf8)
            let file = files.appendingPathComponent("a\(index)")
            try Data(content).write(to: file)
            let digest = AssetHasher.digest(of: content)
            _ = try await alice.uploadAsset(
                AssetUploadRequest(zoneID: zone, digest: digest, size: Int64(content.count), fileURL: file))
            record["asset"] = .asset(Asset(digest: digest, size: Int64(content.count)))
            record["tags"] = .list([.string("a"), .string("b\(index)")])
            if index > 0 {
                record["link"] = .reference(
                    Record.Reference(
                        recordID: Record.ID(recordName: "r0", zoneID: zone),
                        action: index.isMultiple(of: 5) ? .deleteSelf : .none))
                record.parent = Record.Reference(recordID: Record.ID(recordName: "r0", zoneID: zone))
            }
            records.append(record)
        }
        _ = try await alice.modifyRecords(saving: records, deleting: [])
        var share = Share(recordZoneID: zone)
        share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
        let saved = try await alice.modifyRecords(saving: [share.record], deleting: [])
        let url = try Share(record: try #require(saved.saveResults.values.first).get()).url!
        _ = try await server.database(for: "bob", scope: .shared, device: "phone").acceptShares(
            AcceptSharesRequest(shareURLs: [url]))
        return RecordZone.ID(zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
    }

    /// A server of its own in a fresh temporary directory, seeded (see ``seed(_:)``), with the
    /// zone as bob's shared database names it; shut down and removed when `body` returns.
    static func withSeededServer(
        _ body: (_ server: SyncServer, _ shared: RecordZone.ID) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            defer { server.shutdown() }
            try await body(server, try await seed(server))
        }
    }

    /// Changes after a first fetch: edits and deletions, for a fetch since a token.
    static func change(_ server: SyncServer) async throws {
        let alice = server.database(for: "alice", device: "phone")
        let zone = RecordZone.ID(zoneName: "Notes")
        let fetched = try await alice.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone))
        var edited = fetched.modifications.map(\.record).filter { $0.recordID.recordName.hasSuffix("3") }
        for index in edited.indices { edited[index]["title"] = .string("edited") }
        _ = try await alice.modifyRecords(
            saving: edited,
            deleting: [Record.ID(recordName: "r4", zoneID: zone), Record.ID(recordName: "r8", zoneID: zone)],
            savePolicy: .changedKeys)
    }

    /// Every page of a zone through `first` and `second`, compared page by page (`second` follows
    /// `first`'s tokens). Returns the pages read.
    static func comparePages(
        zone: RecordZone.ID, since: ZoneChangeToken? = nil, limit: Int?, desiredKeys: [String]? = nil,
        _ first: (FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse,
        _ second: (FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse
    ) async throws -> [FetchZoneChangesResponse] {
        var token = since
        var pages: [FetchZoneChangesResponse] = []
        while true {
            let request = FetchZoneChangesRequest(
                zoneID: zone, since: token, resultsLimit: limit, desiredKeys: desiredKeys)
            let expected = try await first(request)
            let got = try await second(request)
            #expect(got == expected)
            pages.append(expected)
            token = expected.changeToken
            if !expected.moreComing { return pages }
        }
    }

    /// The answer the HTTP route sends, decoded as a client decodes it.
    static func spliced(
        _ database: InProcessDatabase, _ request: FetchZoneChangesRequest
    ) async throws -> FetchZoneChangesResponse {
        let page = try await database.fetchZoneChangesPage(request)
        return try Wire.decode(
            FetchZoneChangesResponse.self, from: Wire.encode(page.response, storedRecords: page.storedRecords),
            as: .protobuf)
    }

    @Test("the owner's pages from stored bytes equal the decoded pages, with and without a token")
    func ownerPages() async throws {
        try await Self.withSeededServer { server, _ in
            let alice = server.database(for: "alice", device: "phone")
            let zone = RecordZone.ID(zoneName: "Notes")
            let page = try await alice.fetchZoneChangesPage(FetchZoneChangesRequest(zoneID: zone, resultsLimit: 10))
            #expect(page.storedRecords?.count == 10)
            #expect(page.response.modifications.isEmpty)
            let listing = try await Self.comparePages(zone: zone, limit: 7, alice.fetchZoneChanges) {
                try await Self.spliced(alice, $0)
            }
            #expect(listing.count > 2)
            #expect(listing.reduce(0) { $0 + $1.modifications.count } == 26)  // 25 records and the share
            let end = try #require(listing.last).changeToken
            try await Self.change(server)
            let since = try await Self.comparePages(zone: zone, since: end, limit: 2, alice.fetchZoneChanges) {
                try await Self.spliced(alice, $0)
            }
            #expect(since.reduce(0) { $0 + $1.deletions.count } == 2)
            #expect(since.reduce(0) { $0 + $1.modifications.count } == 3)  // r3, r13, r23
            // The owner's zone named with the owner's record name is answered in that spelling.
            let spelt = RecordZone.ID(zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
            _ = try await Self.comparePages(zone: spelt, limit: 9, alice.fetchZoneChanges) {
                try await Self.spliced(alice, $0)
            }
            // desiredKeys filters the records: decoded, not copied.
            let filtered = try await alice.fetchZoneChangesPage(
                FetchZoneChangesRequest(zoneID: zone, desiredKeys: ["title"]))
            #expect(filtered.storedRecords == nil)
            _ = try await Self.comparePages(
                zone: zone, limit: 9, desiredKeys: ["title", "tags"], alice.fetchZoneChanges
            ) {
                try await Self.spliced(alice, $0)
            }
        }
    }

    @Test("a participant's pages, renamed to the shared zone's spelling, are decoded and equal the in-process ones")
    func participantPages() async throws {
        try await Self.withSeededServer { server, shared in
            let bob = server.database(for: "bob", scope: .shared, device: "phone")
            _ = try await bob.fetchDatabaseChanges(since: nil)
            let page = try await bob.fetchZoneChangesPage(FetchZoneChangesRequest(zoneID: shared))
            #expect(page.storedRecords == nil)
            let pages = try await Self.comparePages(zone: shared, limit: 6, bob.fetchZoneChanges) {
                try await Self.spliced(bob, $0)
            }
            #expect(pages.flatMap(\.modifications).allSatisfy { $0.record.recordID.zoneID == shared })
        }
    }

    @Test("over HTTP, the owner's and the participant's pages equal the in-process ones")
    func overHTTP() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LiveServer.start(in: directory)
            let shared = try await Self.seed(live.server)
            let zone = RecordZone.ID(zoneName: "Notes")
            let aliceClient = live.client(LiveServer.aliceToken, device: "phone")
            let alice = aliceClient.database()
            let local = live.server.database(for: "alice", device: "phone")
            let listing = try await Self.comparePages(
                zone: zone, limit: 8, local.fetchZoneChanges, alice.fetchZoneChanges)
            try await Self.change(live.server)
            _ = try await Self.comparePages(
                zone: zone, since: try #require(listing.last).changeToken, limit: 3, local.fetchZoneChanges,
                alice.fetchZoneChanges)
            let bobClient = live.client(LiveServer.bobToken, device: "phone")
            let bob = bobClient.database(.shared)
            let bobLocal = live.server.database(for: "bob", scope: .shared, device: "phone")
            _ = try await bobLocal.fetchDatabaseChanges(since: nil)
            _ = try await Self.comparePages(zone: shared, limit: 5, bobLocal.fetchZoneChanges, bob.fetchZoneChanges)
            // The JSON answer is the decoded path's.
            let jsonClient = live.client(LiveServer.aliceToken, device: "phone", format: .json)
            _ = try await Self.comparePages(
                zone: zone, limit: 11, local.fetchZoneChanges, jsonClient.database().fetchZoneChanges)
            aliceClient.close()
            bobClient.close()
            jsonClient.close()
            try await live.running.stop()
            live.server.shutdown()
        }
    }

    @Test("the directly written answer is byte for byte SwiftProtobuf's encoding of the same message")
    func sameBytesAsSwiftProtobuf() async throws {
        try await Self.withSeededServer { server, shared in
            try await Self.change(server)
            let alice = server.database(for: "alice", device: "phone")
            let bob = server.database(for: "bob", scope: .shared, device: "phone")
            _ = try await bob.fetchDatabaseChanges(since: nil)
            let zone = RecordZone.ID(zoneName: "Notes")
            var responses = [
                try await alice.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone)),
                try await bob.fetchZoneChanges(FetchZoneChangesRequest(zoneID: shared, resultsLimit: 4)),
                try await alice.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone, desiredKeys: [])),
            ]
            responses.append(
                try await alice.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone, since: responses[0].changeToken))
            )
            var withDeletions = responses[0]
            withDeletions.deletions = [
                RecordZoneChange.Deletion(recordID: Record.ID(recordName: "gone", zoneID: zone), recordType: "Note"),
                RecordZoneChange.Deletion(recordID: Record.ID(recordName: "", zoneID: .default), recordType: ""),
            ]
            withDeletions.clientChangeToken = Data()
            withDeletions.moreComing = true
            responses.append(withDeletions)
            for response in responses {
                let direct = Wire.encode(response, as: .protobuf)
                let message = try WireFormat.json.decode(
                    Logsync_Wire_FetchZoneChangesResponse.self, from: Wire.encode(response, as: .json))
                #expect(direct == WireFormat.protobuf.encode(message))
                #expect(try Wire.decode(FetchZoneChangesResponse.self, from: direct, as: .protobuf) == response)
            }
        }
    }
}
