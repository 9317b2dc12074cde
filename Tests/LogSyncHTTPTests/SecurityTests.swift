import Foundation
import LogStore
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel
import Testing

/// Authentication and isolation over HTTP (F126, F138): every refused request gets the right
/// status and an error body, and changes nothing.
@Suite("HTTP: authentication and isolation", .timeLimit(.minutes(2)))
struct SecurityTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func note(_ name: String, _ title: String, zone: RecordZone.ID = notes) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
        record["title"] = .string(title)
        return record
    }

    /// Alice's Notes zone with one note, made through her own client; returns her user record name.
    @discardableResult
    static func aliceHasANote(_ live: LiveServer) async throws -> String {
        let alice = live.client(LiveServer.aliceToken, device: "phone").database()
        _ = try await alice.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
        let saved = try await alice.modifyRecords(saving: [note("secret", "alice's")], deleting: [])
        #expect((try? saved.saveResults[Record.ID(recordName: "secret", zoneID: notes)]?.get()) != nil)
        return try await alice.currentUserRecordID().recordName
    }

    @Test(
        "no token, a bad token, a malformed Authorization header: 401, nothing changed",
        arguments: [nil, "Bearer lsk_not-a-token-of-anyone-here", "Basic YWxpY2U6c2VjcmV0", "Bearer"])
    func unauthenticated(authorization: String?) async throws {
        try await withLiveServer { live, _ in
            try await Self.aliceHasANote(live)
            let before = try live.lastOffset(of: "alice")
            var headers = [("Content-Type", "application/x-protobuf")]
            if let authorization { headers.append(("Authorization", authorization)) }
            let body = Wire.encode(
                ModifyRecordsRequest(
                    recordsToSave: [Self.note("secret", "overwritten")],
                    savePolicy: .allKeys), as: .protobuf)
            let response = try await rawRequest(
                live, "/v1/databases/private/modifyRecords", headers: headers, body: body)
            #expect(response.status == 401, "\(response)")
            #expect(response.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            #expect(try response.error().code == .notAuthenticated)
            #expect(try live.lastOffset(of: "alice") == before)

            // Through the client: the same error, which the engine treats as an account problem (F89).
            let client = live.client(
                authorization?.replacingOccurrences(of: "Bearer ", with: "") ?? "lsk_wrong-0123456789abcdef")
            let error = await #expect(throws: SyncError.self) { _ = try await client.database().fetchAllZones() }
            #expect(error?.code == .notAuthenticated)
        }
    }

    // F138: bob reads alice's zone by its ID, with either owner name: he gets zoneNotFound, the
    // same answer as for a zone nobody has, so he learns nothing of alice's zones.
    @Test("F138 cross-user reads: 404 zoneNotFound, identical for an existing and a missing zone")
    func crossUserRead() async throws {
        try await withLiveServer { live, _ in
            let aliceRecordName = try await Self.aliceHasANote(live)
            let bob = live.client(LiveServer.bobToken, device: "laptop").database()
            for zone in [Self.notes, RecordZone.ID(zoneName: "Notes", ownerName: aliceRecordName)] {
                let request = FetchZoneChangesRequest(zoneID: zone)
                let existing = try await rawRequest(
                    live, "/v1/databases/private/fetchZoneChanges",
                    headers: [("Authorization", "Bearer \(LiveServer.bobToken)")],
                    body: Wire.encode(request, as: .protobuf))
                let missing = try await rawRequest(
                    live, "/v1/databases/private/fetchZoneChanges",
                    headers: [("Authorization", "Bearer \(LiveServer.bobToken)")],
                    body: Wire.encode(
                        FetchZoneChangesRequest(zoneID: RecordZone.ID(zoneName: "Nothing", ownerName: zone.ownerName)),
                        as: .protobuf))
                #expect(existing.status == 404, "\(existing)")
                #expect(try existing.error().code == .zoneNotFound)
                #expect(missing.status == 404)
                #expect(
                    try existing.error().message
                        == (try missing.error().message).replacingOccurrences(of: "Nothing", with: "Notes"))
                let fetched = try await bob.fetchZones([zone])
                guard case .failure(let error)? = fetched.results[zone] else {
                    Issue.record("bob fetched \(zone)")
                    continue
                }
                #expect(error.code == .zoneNotFound)
            }
            #expect(try await bob.fetchAllZones().map(\.zoneID).allSatisfy { $0 == .default })
            #expect(try await bob.fetchDatabaseChanges(since: nil).modifications.isEmpty)
        }
    }

    // F126, F138: bob's writes aimed at alice's zone and record land nowhere near her database.
    @Test("F138 cross-user writes: refused per item or kept in bob's own database; alice's log unchanged")
    func crossUserWrite() async throws {
        try await withLiveServer { live, _ in
            let aliceRecordName = try await Self.aliceHasANote(live)
            let before = try live.lastOffset(of: "alice")
            let bob = live.client(LiveServer.bobToken).database()

            // Bob has no Notes zone of his own (zoneNotFound), and his private database holds no
            // zone of another owner (invalidArguments, F127).
            let alicesZone = RecordZone.ID(zoneName: "Notes", ownerName: aliceRecordName)
            let response = try await bob.modifyRecords(
                saving: [Self.note("secret", "bob was here"), Self.note("secret", "bob was here", zone: alicesZone)],
                deleting: [], savePolicy: .allKeys, atomically: false)
            let expected: [RecordZone.ID: SyncError.Code] = [Self.notes: .zoneNotFound, alicesZone: .invalidArguments]
            for (id, result) in response.saveResults {
                guard case .failure(let error) = result else {
                    Issue.record("bob saved into a zone of alice's")
                    continue
                }
                #expect(error.code == expected[id.zoneID], "\(id)")
            }
            let deletion = try await bob.modifyRecords(
                saving: [], deleting: [Record.ID(recordName: "secret", zoneID: Self.notes)], savePolicy: .allKeys)
            #expect(deletion.deleteResults.values.allSatisfy { if case .failure = $0 { true } else { false } })

            // A header or a path naming alice changes nothing: the user comes from the token.
            let sneaky = try await rawRequest(
                live, "/v1/databases/private/modifyZones",
                headers: [
                    ("Authorization", "Bearer \(LiveServer.bobToken)"), ("LogSync-User", "alice"), ("X-User", "alice"),
                ],
                body: Wire.encode(
                    ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: RecordZone.ID(zoneName: "BobsOwn"))]),
                    as: .protobuf))
            #expect(sneaky.status == 200)
            for path in [
                "/v1/users/alice/databases/private/modifyRecords", "/v1/databases/alice/modifyRecords",
                "/v1/databases/private/../alice/modifyRecords",
            ] {
                let refused = try await rawRequest(
                    live, path, headers: [("Authorization", "Bearer \(LiveServer.bobToken)")],
                    body: Wire.encode(
                        ModifyRecordsRequest(recordsToSave: [Self.note("secret", "x")], savePolicy: .allKeys),
                        as: .protobuf))
                #expect(refused.status == 404, "\(path): \(refused)")
            }
            #expect(try live.lastOffset(of: "alice") == before)
            let alices = try await live.client(LiveServer.aliceToken).database().fetchZoneChanges(
                zoneID: Self.notes, since: nil)
            #expect(alices.modifications.map { $0.record["title"] } == [.string("alice's")])
            #expect(Set(try await bob.fetchAllZones().map(\.zoneID)) == [.default, RecordZone.ID(zoneName: "BobsOwn")])
        }
    }

    // F138: the shared database shows only zones shared with the user; no zone of alice's is
    // shared with bob, so his shared database reaches none of hers.
    @Test("F138 the shared database reaches only zones shared with the user")
    func sharedDatabase() async throws {
        try await withLiveServer { live, _ in
            let aliceRecordName = try await Self.aliceHasANote(live)
            let before = try live.lastOffset(of: "alice")
            let bobShared = live.client(LiveServer.bobToken).database(.shared)
            #expect(try await bobShared.fetchAllZones().isEmpty)
            #expect(try await bobShared.fetchDatabaseChanges(since: nil).modifications.isEmpty)
            let alicesZone = RecordZone.ID(zoneName: "Notes", ownerName: aliceRecordName)
            let read = await #expect(throws: SyncError.self) {
                _ = try await bobShared.fetchZoneChanges(zoneID: alicesZone, since: nil)
            }
            #expect(read?.code == .zoneNotFound)
            let write = try await bobShared.modifyRecords(
                saving: [Self.note("secret", "bob", zone: alicesZone)], deleting: [], savePolicy: .allKeys)
            #expect(write.saveResults.values.allSatisfy { if case .failure = $0 { true } else { false } })
            #expect(try live.lastOffset(of: "alice") == before)
            #expect(try live.lastOffset(of: "alice", scope: .shared) == LogOffset(rawValue: 0))
        }
    }

    // F127 F138: bob saves a zone named with alice's owner name into his private database. The
    // zone fails alone (200, per-item invalidArguments naming the zone and the owner), nothing is
    // written, and alice's zone and record are as they were. Deleting it by that name is
    // refused the same way.
    @Test("F127 F138 a zone of another owner in a private database: per-item invalidArguments, nothing written")
    func zoneOfAnotherOwner() async throws {
        try await withLiveServer { live, _ in
            let aliceRecordName = try await Self.aliceHasANote(live)
            let alicesZone = RecordZone.ID(zoneName: "Notes", ownerName: aliceRecordName)
            let before = try [live.lastOffset(of: "alice"), live.lastOffset(of: "bob")]

            let raw = try await rawRequest(
                live, "/v1/databases/private/modifyZones",
                headers: [("Authorization", "Bearer \(LiveServer.bobToken)")],
                body: Wire.encode(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: alicesZone)]), as: .protobuf))
            #expect(raw.status == 200, "\(raw)")
            let answer = try Wire.decode(ModifyZonesResponse.self, from: raw.body, as: .protobuf)
            guard case .failure(let error)? = answer.saveResults[alicesZone] else {
                Issue.record("bob's private database took a zone of alice's: \(answer)")
                return
            }
            #expect(error.code == .invalidArguments)
            #expect(error.item == .zone(alicesZone))
            #expect(error.message.contains(aliceRecordName) && error.message.contains("Notes"), "\(error)")

            let bob = live.client(LiveServer.bobToken, device: "laptop").database()
            let deletion = try await bob.modifyZones(saving: [], deleting: [alicesZone])
            guard case .failure(let deleteError)? = deletion.deleteResults[alicesZone] else {
                Issue.record("bob deleted a zone of alice's")
                return
            }
            #expect(deleteError.code == .invalidArguments)
            #expect(try [live.lastOffset(of: "alice"), live.lastOffset(of: "bob")] == before)
            #expect(try await bob.fetchAllZones().map(\.zoneID) == [.default])
            let alices = try await live.client(LiveServer.aliceToken).database().fetchZoneChanges(
                zoneID: Self.notes, since: nil)
            #expect(alices.modifications.map { $0.record["title"] } == [.string("alice's")])
        }
    }

    // F120 F138: bob asks his shared database for alice's zone by her owner name: 404
    // zoneNotFound, byte for byte the answer for a zone alice does not have. His zone saves and
    // deletions there get badDatabase per zone (F120, F147), and alice's logs stay as they were.
    @Test("F120 F138 alice's zone through bob's shared database: 404 zoneNotFound, identical whether or not it exists")
    func sharedDatabaseRead() async throws {
        try await withLiveServer { live, _ in
            let aliceRecordName = try await Self.aliceHasANote(live)
            let before = try [live.lastOffset(of: "alice"), live.lastOffset(of: "alice", scope: .shared)]
            let bobShared = live.client(LiveServer.bobToken, device: "laptop").database(.shared)
            var answers: [String: RawResponse] = [:]
            for zoneName in ["Notes", "Nothing"] {
                let zone = RecordZone.ID(zoneName: zoneName, ownerName: aliceRecordName)
                let raw = try await rawRequest(
                    live, "/v1/databases/shared/fetchZoneChanges",
                    headers: [("Authorization", "Bearer \(LiveServer.bobToken)")],
                    body: Wire.encode(FetchZoneChangesRequest(zoneID: zone), as: .protobuf))
                #expect(raw.status == 404, "\(raw)")
                #expect(try raw.error().code == .zoneNotFound)
                #expect(try raw.error().item == .zone(zone))
                answers[zoneName] = raw

                let fetched = try await bobShared.fetchZones([zone])
                guard case .failure(let error)? = fetched.results[zone] else {
                    Issue.record("bob fetched \(zone) through his shared database")
                    continue
                }
                #expect(error.code == .zoneNotFound)

                let modified = try await bobShared.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
                guard case .failure(let saveError)? = modified.saveResults[zone] else {
                    Issue.record("bob created \(zone) in his shared database")
                    continue
                }
                #expect(saveError.code == .badDatabase)
                let deleted = try await bobShared.modifyZones(saving: [], deleting: [zone])
                guard case .failure(let deleteError)? = deleted.deleteResults[zone] else {
                    Issue.record("bob deleted \(zone) through his shared database")
                    continue
                }
                #expect(deleteError.code == .badDatabase)
            }
            let existing = try #require(answers["Notes"])
            let missing = try #require(answers["Nothing"])
            // The whole error, once the zone name is swapped: code, message, item, everything else.
            var expected = try missing.error()
            expected.message = expected.message.replacingOccurrences(of: "Nothing", with: "Notes")
            expected.item = .zone(RecordZone.ID(zoneName: "Notes", ownerName: aliceRecordName))
            #expect(try existing.error() == expected)
            #expect(existing.header("Content-Type") == missing.header("Content-Type"))
            #expect(try [live.lastOffset(of: "alice"), live.lastOffset(of: "alice", scope: .shared)] == before)
            #expect(try live.lastOffset(of: "bob", scope: .shared) == LogOffset(rawValue: 0))
            #expect(try await bobShared.fetchAllZones().isEmpty)
        }
    }

    @Test("a push channel without a valid token is refused with 401")
    func pushNeedsAToken() async throws {
        try await withLiveServer { live, _ in
            let missing = try await rawRequest(live, "/v1/databases/private/push", method: .GET)
            #expect(missing.status == 401, "\(missing)")
            let bad = try await rawRequest(
                live, "/v1/databases/private/push", method: .GET,
                headers: [("Authorization", "Bearer lsk_nobody-0123456789abcdef")])
            #expect(bad.status == 401)
            let notUpgraded = try await rawRequest(
                live, "/v1/databases/private/push", method: .GET, headers: aliceHeaders([("LogSync-Device", "phone")]))
            #expect(notUpgraded.status == 400)
            #expect(try notUpgraded.error().message.contains("WebSocket"))
        }
    }
}
