import AsyncHTTPClient
import Foundation
import LogStore
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSyncServer

/// The admin API's user management over HTTP (Docs/Protocol.md, "Admin API", "Users"): the
/// app's backend lists, creates and deletes users, mints sessions for them and revokes them,
/// with an admin token that is never a user's.
@Suite("Admin API: users", .timeLimit(.minutes(3)))
struct AdminUserTests {
    static let adminToken = "lsadm_the-backend-admin-token-0123456789"
    static let aliceToken = "lsk_alice-token-0123456789abcdef"
    static let allZones = Array("{\"allZones\": true}".utf8)

    /// A server with bearer tokens (alice's), sessions and an admin credential, on a loopback
    /// port.
    struct Served: ServedOnLoopback {
        let server: SyncServer
        let tokens: TokenStore
        let sessions: SessionStore
        let running: RunningHTTPSyncServer
        var admin: AdminClient { AdminClient(serverURL: url, adminToken: AdminUserTests.adminToken) }

        /// Everything a refused admin request could have written: the registry's and the
        /// sessions' logs, the bearer tokens.
        func written() throws -> (LogOffset, LogOffset, Int) {
            (try server.users.log.lastOffset, try sessions.log.lastOffset, tokens.count)
        }
    }

    static func withAdminServer(
        sessions withSessions: Bool = true, _ body: (Served) async throws -> Void
    )
        async throws
    {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            let sessions = try SessionStore(server: server)
            let tokens = TokenStore(sessions: withSessions ? sessions : nil)
            try tokens.add(token: aliceToken, for: "alice")
            let http = HTTPSyncServer(
                server: server, tokens: tokens, configuration: .init(port: 0),
                adminCredential: try AdminCredential(tokens: [adminToken]))
            try await serving(http) { running in
                try await body(Served(server: server, tokens: tokens, sessions: sessions, running: running))
            }
        }
    }

    /// Every admin route, with a body where it takes one.
    static func routes(user: String) -> [(HTTPMethod, String, [UInt8]?)] {
        [
            (.GET, WireAdmin.usersPath(after: nil, limit: 10), nil),
            (.POST, WireAdmin.usersPath, WireSessions.encode(WireAdmin.CreateUser(user: "mallory"))),
            (.POST, WireAdmin.sessionsPath(user), WireSessions.encode(WireAdmin.MintSession(device: "evil"))),
            (.DELETE, WireAdmin.sessionsPath(user), nil),
            (.DELETE, WireAdmin.userPath(user), nil),
        ]
    }

    @Test(
        "every admin route refuses no token, a wrong one, a user's bearer token and a user's session token alike (401, one body) and writes nothing; the admin token opens no database route"
    )
    func refusals() async throws {
        try await Self.withAdminServer { served in
            try await served.admin.createUser("carol")
            let carol = try await served.admin.mintSession(for: "carol", device: "phone")
            let before = try served.written()
            let presented: [String?] = [
                nil, "lsadm_not-the-admin-token-0123456789", Self.aliceToken, carol.accessToken,
            ]
            var bodies: Set<String> = []
            for (method, path, body) in Self.routes(user: "carol") {
                for token in presented {
                    let answer = try await served.request(path, method: method, token: token, body: body)
                    #expect(answer.status == 401, "\(method) \(path) with \(token ?? "no token"): \(answer)")
                    bodies.insert(answer.body)
                }
            }
            #expect(bodies.count == 1 && bodies.first?.contains("invalid admin credential") == true, "\(bodies)")
            #expect(try served.written() == before)
            #expect(try served.sessions.sessions(of: "carol").count == 1)

            // The admin token is nobody's: no database route opens with it.
            let asDatabase = try await served.request(
                WireProtocol.path(.fetchZones, scope: .private), token: Self.adminToken, body: Self.allZones)
            #expect(asDatabase.status == 401, "\(asDatabase)")
            let asDevice = try await served.request(WireSessions.devicesPath, method: .GET, token: Self.adminToken)
            #expect(asDevice.status == 401, "\(asDevice)")
            // And carol's own token still opens hers.
            let asCarol = try await served.request(
                WireProtocol.path(.fetchZones, scope: .private), token: carol.accessToken, body: Self.allZones)
            #expect(asCarol.status == 200, "\(asCarol)")
        }
    }

    @Test(
        "users are listed a page at a time in the order of their IDs, each with their e-mail address and sessions; bad limits and bodies are refused, naming what is wrong"
    )
    func listAndCreate() async throws {
        try await Self.withAdminServer { served in
            let names = (0..<25).map { String(format: "user-%02d", $0) }
            for name in names.shuffled() { try await served.admin.createUser(name) }
            let bob = try await served.admin.createUser("bob", email: "bob@example.com")
            #expect(bob == WireAdmin.User(user: "bob", email: "bob@example.com", sessions: 0))
            // Again: idempotent; then an address of its own.
            #expect(try await served.admin.createUser("bob") == bob)
            _ = try await served.admin.mintSession(for: "bob", device: "phone")
            _ = try await served.admin.mintSession(for: "bob", device: "laptop")

            var listed: [WireAdmin.User] = []
            var after: String? = nil
            var pages = 0
            repeat {
                let page = try await served.admin.users(after: after, limit: 10)
                #expect(page.users.count <= 10)
                listed += page.users
                after = page.next
                pages += 1
            } while after != nil && pages < 10
            #expect(listed.map(\.user) == (["bob"] + names).sorted())
            #expect(pages == 3)
            #expect(listed.first == WireAdmin.User(user: "bob", email: "bob@example.com", sessions: 2))

            let whole = try await served.admin.users()
            #expect(whole.users.count == 26 && whole.next == nil)
            let fromMiddle = try await served.admin.users(after: "user-1", limit: 3)
            #expect(fromMiddle.users.map(\.user) == ["user-10", "user-11", "user-12"])

            for limit in ["0", "1001", "ten"] {
                let answer = try await served.request(
                    WireAdmin.usersPath + "?limit=\(limit)", method: .GET, token: Self.adminToken)
                #expect(answer.status == 400 && answer.body.contains("limit"), "\(answer)")
            }
            let before = try served.written()
            for body in [
                "{\"user\": \"\"}", "{\"user\": \" padded\"}", "{\"name\": \"x\"}",
                "{\"user\": \"dave\", \"email\": \"not an address\"}",
                "{\"user\": \"dave\", \"email\": \"bob@example.com\"}",
            ] {
                let answer = try await served.request(
                    WireAdmin.usersPath, token: Self.adminToken, body: Array(body.utf8))
                #expect(answer.status == 400, "\(body): \(answer)")
            }
            #expect(try served.written() == before)
        }
    }

    @Test(
        "a minted session syncs as a signed-in device's does; minting for an unknown user is 404, for a bad device 400, and without sessions there is none to mint"
    )
    func mintedSessionSyncs() async throws {
        try await Self.withAdminServer { served in
            try await served.admin.createUser("carol@example.com", email: "carol@example.com")
            let tokens = try await served.admin.mintSession(
                for: "carol@example.com", device: "phone", name: "Carol's phone")
            #expect(tokens.user == "carol@example.com" && tokens.device == "phone")
            let phone = served.syncClient(tokens.accessToken, device: "phone")
            defer { phone.close() }
            _ = try await phone.database().modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            let recordID = Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes"))
            var record = Record(recordType: "Note", recordID: recordID)
            record["title"] = .string("minted")
            _ = try await phone.database().modifyRecords(saving: [record], deleting: [])
            let stored = try await Self.records(in: "Notes", of: served.server.database(for: "carol@example.com"))
            #expect(stored.map(\.recordID) == [recordID])
            let devices = try await SessionClient(serverURL: served.url).devices(accessToken: tokens.accessToken)
            #expect(devices.map(\.name) == ["Carol's phone"])

            let before = try served.written()
            await #expect(throws: SyncError.self) {
                try await served.admin.mintSession(for: "nobody", device: "phone")
            }
            let unknown = try await served.request(
                WireAdmin.sessionsPath("nobody"), token: Self.adminToken,
                body: WireSessions.encode(WireAdmin.MintSession(device: "phone")))
            #expect(unknown.status == 404, "\(unknown)")
            let badDevice = try await served.request(
                WireAdmin.sessionsPath("carol@example.com"), token: Self.adminToken,
                body: WireSessions.encode(WireAdmin.MintSession(device: "")))
            #expect(badDevice.status == 400, "\(badDevice)")
            #expect(try served.written() == before)
        }
        try await Self.withAdminServer(sessions: false) { served in
            try await served.admin.createUser("carol")
            let answer = try await served.request(
                WireAdmin.sessionsPath("carol"), token: Self.adminToken,
                body: WireSessions.encode(WireAdmin.MintSession(device: "phone")))
            #expect(answer.status == 404, "\(answer)")
        }
    }

    @Test(
        "revoking a user's sessions ends their push channels at once, sessions' and bearer tokens' alike, and refuses their tokens; another user's go on"
    )
    func revokeSessionsEndsPushChannels() async throws {
        try await Self.withAdminServer { served in
            try await served.admin.createUser("alice")
            try await served.admin.createUser("bob")
            let phone = try await served.admin.mintSession(for: "alice", device: "phone")
            let laptop = try await served.admin.mintSession(for: "alice", device: "laptop")
            let bob = try await served.admin.mintSession(for: "bob", device: "phone")
            let port = served.running.port
            let phoneChannel = try await TokenRevocationTests.openPushChannel(
                port: port, token: phone.accessToken, device: "phone")
            defer { phoneChannel.close() }
            let bearerChannel = try await TokenRevocationTests.openPushChannel(
                port: port, token: Self.aliceToken, device: "tablet")
            defer { bearerChannel.close() }
            let bobChannel = try await TokenRevocationTests.openPushChannel(
                port: port, token: bob.accessToken, device: "phone")
            defer { bobChannel.close() }

            let revoked = try await served.admin.revokeSessions(of: "alice")
            #expect(revoked == WireAdmin.Revoked(sessions: 2, tokens: 1))
            try await TokenRevocationTests.waitUntil(
                "alice's push channels are closed", by: .now + TokenRevocationTests.patience
            ) {
                TokenRevocationTests.closedAsRevoked(phoneChannel)
                    && TokenRevocationTests.closedAsRevoked(bearerChannel)
            }
            for token in [phone.accessToken, laptop.accessToken, Self.aliceToken] {
                let refused = try await served.request(
                    WireProtocol.path(.fetchZones, scope: .private), token: token, body: Self.allZones)
                #expect(refused.status == 401, "\(refused)")
            }
            #expect(!TokenRevocationTests.closedAsRevoked(bobChannel))
            let bobClient = served.syncClient(bob.accessToken, device: "phone")
            defer { bobClient.close() }
            _ = try await bobClient.database().currentUserRecordID()
            #expect(try await served.admin.revokeSessions(of: "alice") == WireAdmin.Revoked(sessions: 0, tokens: 0))
            #expect(try await served.admin.users().users.map(\.sessions) == [0, 1])
        }
    }

    @Test(
        "F124 deleting a user: their shares end for participants, they leave others' shares, their data and credentials go, other users keep everything; the same answer again"
    )
    func deleteUser() async throws {
        try await Self.withAdminServer { served in
            let server = served.server
            for user in ["alice", "bob", "carol"] {
                try await served.admin.createUser(user, email: "\(user)@example.com")
            }
            // alice shares her Notes with bob; bob shares his Trips with alice; carol has her own.
            let aliceDB = server.database(for: "alice", device: "phone")
            let bobDB = server.database(for: "bob", device: "phone")
            let carolDB = server.database(for: "carol", device: "phone")
            let notes = try await Self.sharedZone("Notes", of: aliceDB, with: "bob", server: server)
            let trips = try await Self.sharedZone("Trips", of: bobDB, with: "alice", server: server)
            _ = try await carolDB.modifyZones(saving: [RecordZone(zoneName: "Own")], deleting: [])
            _ = try await carolDB.modifyRecords(saving: [Self.note("c1", in: "Own")], deleting: [])
            let bobShared = server.database(for: "bob", scope: .shared, device: "phone")
            let bobFeed = try await bobShared.fetchDatabaseChanges(since: nil)
            #expect(bobFeed.modifications.map(\.zoneID) == [notes])
            let aliceNumber = try #require(try server.users.registeredNumber(of: "alice"))
            let aliceChannel = try await TokenRevocationTests.openPushChannel(
                port: served.running.port, token: Self.aliceToken, device: "tablet")
            defer { aliceChannel.close() }

            try await served.admin.deleteUser("alice")

            // bob sees alice's zone go, as when an owner deletes the share.
            let after = try await bobShared.fetchDatabaseChanges(since: bobFeed.changeToken)
            #expect(after.deletions.map(\.zoneID) == [notes], "\(after)")
            // alice left bob's share: it names her as removed, as after a participant leaves.
            let tripsShare = try Share(
                record: try #require(
                    try await Self.records(in: "Trips", of: bobDB).first {
                        $0.recordID.recordName == Share.zoneWideShareRecordName
                    }))
            let aliceInTrips = tripsShare.participants.filter {
                $0.userIdentity.userRecordName == "_user\(aliceNumber)"
            }
            #expect(aliceInTrips.map(\.acceptanceStatus) == [.removed], "\(tripsShare.participants)")
            _ = trips
            // alice's data and credentials are gone.
            try await TokenRevocationTests.waitUntil(
                "alice's push channel is closed", by: .now + TokenRevocationTests.patience
            ) { TokenRevocationTests.closedAsRevoked(aliceChannel) }
            let refused = try await served.request(
                WireProtocol.path(.fetchZones, scope: .private), token: Self.aliceToken, body: Self.allZones)
            #expect(refused.status == 401, "\(refused)")
            #expect(
                !FileManager.default.fileExists(
                    atPath: LMDBStorage.userDirectory(in: server.configuration.directory, number: aliceNumber).path))
            #expect(try server.registeredUser("alice") == nil)
            #expect(try server.userIdentity(forEmailAddress: "alice@example.com") == nil)
            #expect(try await served.admin.users().users.map(\.user) == ["bob", "carol"])
            // bob's and carol's data are whole.
            #expect(try await Self.records(in: "Own", of: carolDB).map(\.recordID.recordName) == ["c1"])
            #expect(try await Self.records(in: "Trips", of: bobDB).count == 2)
            #expect(try await bobDB.fetchAllZones().map(\.zoneID.zoneName).sorted() == ["Trips", "_defaultZone"])

            // The same answer again, and for a user who never was.
            for user in ["alice", "nobody"] {
                let again = try await served.request(WireAdmin.userPath(user), method: .DELETE, token: Self.adminToken)
                #expect(again.status == 204, "\(again)")
            }
            // Registered again, alice starts from nothing.
            try await served.admin.createUser("alice")
            #expect(try server.users.registeredNumber(of: "alice") != aliceNumber)
            #expect(try await aliceDB.fetchAllZones().map(\.zoneID.zoneName) == ["_defaultZone"])
        }
    }

    /// The records of `zone` in `database`, as a first fetch of the zone gives them.
    static func records(in zone: String, of database: some CloudDatabase) async throws -> [Record] {
        try await database.fetchZoneChanges(zoneID: RecordZone.ID(zoneName: zone), since: nil).modifications.map(
            \.record)
    }

    /// A note `name` in `zone`.
    static func note(_ name: String, in zone: String) -> Record {
        var record = Record(
            recordType: "Note", recordID: Record.ID(recordName: name, zoneID: RecordZone.ID(zoneName: zone)))
        record["title"] = .string(name)
        return record
    }

    /// Makes `zone` in `owner`'s database with a note, shares it whole with `participant`
    /// (invited by their e-mail address `<participant>@example.com`), who accepts; returns the
    /// zone as the participant names it.
    static func sharedZone(
        _ zone: String, of owner: InProcessDatabase, with participant: UserID, server: SyncServer
    ) async throws -> RecordZone.ID {
        _ = try await owner.modifyZones(saving: [RecordZone(zoneName: zone)], deleting: [])
        _ = try await owner.modifyRecords(saving: [note("\(zone)-1", in: zone)], deleting: [])
        var share = Share(recordZoneID: RecordZone.ID(zoneName: zone))
        share.addParticipant(
            Share.Participant(emailAddress: "\(participant.rawValue)@example.com", permission: .readWrite))
        let saved = try await owner.modifyRecords(saving: [share.record], deleting: [])
        let url = try #require(try Share(record: try saved.saveResults[share.record.recordID]!.get()).url)
        let accepted = try await server.database(for: participant, scope: .shared).acceptShares(
            AcceptSharesRequest(shareURLs: [url]))
        _ = try accepted.results[url]!.get()
        let ownerName = try await owner.currentUserRecordID().recordName
        return RecordZone.ID(zoneName: zone, ownerName: ownerName)
    }
}
