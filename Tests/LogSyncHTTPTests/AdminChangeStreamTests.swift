import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import SyncModel
import TemporaryDirectory
import Testing

/// The admin change stream over HTTP (Docs/Protocol.md, "Admin change stream"): the app's
/// backend reads any user's database with an admin token, as the user's devices read it, and
/// follows which databases change; user tokens and the admin token open each other's routes
/// never.
@Suite("The admin change stream over HTTP", .timeLimit(.minutes(2)))
struct AdminChangeStreamTests {
    static let adminToken = "lsadm_backend-token-0123456789abcdef"
    static let zone = RecordZone.ID(zoneName: "Notes")

    /// A live server (alice and bob, with `LiveServer`'s tokens) whose admin token is
    /// ``adminToken``, and an admin client of it.
    static func withAdminServer(_ body: (LiveServer, AdminClient) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(
                SyncServer.Configuration(directory: directory.appendingPathComponent("server"), durability: .fast))
            let tokens = TokenStore()
            try tokens.add(token: LiveServer.aliceToken, for: "alice")
            try tokens.add(token: LiveServer.bobToken, for: "bob")
            var configuration = HTTPSyncServer.Configuration()
            configuration.port = 0
            let running = try await RunningHTTPSyncServer.start(
                HTTPSyncServer(
                    server: server, tokens: tokens, configuration: configuration,
                    adminCredential: try AdminCredential(tokens: [adminToken])))
            let live = LiveServer(server: server, tokens: tokens, running: running)
            do {
                try await body(live, AdminClient(serverURL: live.baseURL, adminToken: adminToken))
            } catch {
                try? await live.stop()
                throw error
            }
            try await live.stop()
        }
    }

    /// Saves the Notes zone and `names` in it as `client`'s user.
    static func save(_ names: [String], _ client: HTTPSyncClient, deleting: [String] = []) async throws {
        let database = client.database()
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        let records = names.map { name in
            var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
            record["title"] = .string("note \(name)")
            return record
        }
        let response = try await database.modifyRecords(
            saving: records, deleting: deleting.map { Record.ID(recordName: $0, zoneID: zone) },
            savePolicy: .allKeys)
        for result in response.saveResults.values { _ = try result.get() }
    }

    @Test("the admin reads alice's database as her device does: the same zones, records and tokens")
    func readsAsTheDevice() async throws {
        try await Self.withAdminServer { live, admin in
            let alice = live.client(LiveServer.aliceToken, device: "phone")
            defer { alice.close() }
            try await Self.save(["n1", "n2"], alice)
            let own = try await alice.database().fetchDatabaseChanges(since: nil)
            let read = try await admin.fetchDatabaseChanges(user: "alice", scope: .private, .init(since: nil))
            #expect(read == own)
            let ownZone = try await alice.database().fetchZoneChanges(zoneID: Self.zone, since: nil)
            let readZone = try await admin.fetchZoneChanges(
                user: "alice", scope: .private, .init(zoneID: Self.zone, since: nil))
            #expect(readZone.modifications.map(\.record) == ownZone.modifications.map(\.record))
            #expect(readZone.changeToken == ownZone.changeToken)
            // From the tokens: what alice deletes next, and nothing else.
            try await Self.save([], alice, deleting: ["n1"])
            let next = try await admin.fetchZoneChanges(
                user: "alice", scope: .private, .init(zoneID: Self.zone, since: readZone.changeToken))
            #expect(next.modifications.isEmpty)
            #expect(next.deletions.map(\.recordID.recordName) == ["n1"])
            let zones = try await admin.fetchZones(user: "alice", scope: .private, .init(zoneIDs: nil))
            #expect(zones.results.keys.contains(Self.zone))
            // Bob's database is bob's.
            try live.server.registerUser("bob")
            let bob = try await admin.fetchDatabaseChanges(user: "bob", scope: .private, .init(since: nil))
            #expect(bob.modifications.isEmpty)
        }
    }

    @Test(
        "the stream names every database holding anything with its current token, says it caught up, then names each database that commits"
    )
    func catalogueThenLive() async throws {
        try await Self.withAdminServer { live, admin in
            let alice = live.client(LiveServer.aliceToken, device: "phone")
            defer { alice.close() }
            let bob = live.client(LiveServer.bobToken, device: "laptop")
            defer { bob.close() }
            try await Self.save(["a1"], alice)
            try await Self.save(["b1"], bob)
            var events = admin.changeHints().makeAsyncIterator()
            var catalogue: [ChangedDatabase] = []
            while let event = try await events.next() {
                guard case .changed(let hint) = event else { break }
                catalogue.append(hint)
            }
            #expect(
                catalogue == [
                    ChangedDatabase(
                        user: "alice", scope: .private, token: try live.server.admin.currentToken(of: "alice")),
                    ChangedDatabase(user: "bob", scope: .private, token: try live.server.admin.currentToken(of: "bob")),
                ])
            // No subscription covers bob's notes: the stream hears of them all the same.
            try await Self.save(["b2"], bob, deleting: ["b1"])
            var latest: ChangedDatabase?
            while latest?.token != (try live.server.admin.currentToken(of: "bob")) {
                guard case .changed(let hint) = try await events.next() else {
                    Issue.record("the stream ended or caught up again")
                    return
                }
                #expect(hint.user == "bob" && hint.scope == .private)
                latest = hint
            }
        }
    }

    @Test("a server shutting down ends the stream as a finished answer, not a cut connection")
    func shutdownEndsTheStream() async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(
                SyncServer.Configuration(directory: directory.appendingPathComponent("server"), durability: .fast))
            defer { server.shutdown() }
            var configuration = HTTPSyncServer.Configuration()
            configuration.port = 0
            // A grace period no test waits for: the stream must end before it.
            configuration.shutdownGracePeriod = .seconds(600)
            let running = try await RunningHTTPSyncServer.start(
                HTTPSyncServer(
                    server: server, tokens: TokenStore(), configuration: configuration,
                    adminCredential: try AdminCredential(tokens: [Self.adminToken])))
            let admin = AdminClient(
                serverURL: URL(string: "http://127.0.0.1:\(running.port)")!, adminToken: Self.adminToken)
            var events = admin.changeHints().makeAsyncIterator()
            #expect(try await events.next() == .caughtUp)
            async let stopped: Void = running.stop()
            #expect(try await events.next() == nil)
            try await stopped
        }
    }

    @Test("a stream silent for longer than its limit fails with networkFailure, as a connection gone without a word")
    func silentStreamFails() async throws {
        try await Self.withAdminServer { _, admin in
            var events = admin.changeHints(silenceLimit: .milliseconds(300)).makeAsyncIterator()
            let failure = await #expect(throws: SyncError.self) {
                while try await events.next() != nil {}
            }
            #expect(failure?.code == .networkFailure, "\(String(describing: failure))")
        }
    }

    @Test("a user's token opens no admin route, and the admin token opens no database route")
    func credentialsApart() async throws {
        try await Self.withAdminServer { live, admin in
            let alice = live.client(LiveServer.aliceToken, device: "phone")
            defer { alice.close() }
            try await Self.save(["a1"], alice)
            let read = WireAdminChanges.databasePath(user: "alice", scope: .private, operation: .fetchDatabaseChanges)
            let body = Wire.encode(FetchDatabaseChangesRequest(since: nil), as: .protobuf)
            for token in [LiveServer.aliceToken, LiveServer.bobToken, "not-a-token-at-all-0123456789", nil] {
                var headers = [("Content-Type", "application/x-protobuf")]
                if let token { headers.append(("Authorization", "Bearer \(token)")) }
                let refused = try await rawRequest(live, read, headers: headers, body: body)
                #expect(refused.status == 401, "\(refused)")
                #expect(try refused.error().message == "invalid admin credential")
                let stream = try await rawRequest(live, WireAdminChanges.changesPath, method: .GET, headers: headers)
                #expect(stream.status == 401, "\(stream)")
            }
            let own = try await rawRequest(
                live, WireProtocol.path(.fetchDatabaseChanges, scope: .private),
                headers: [("Authorization", "Bearer \(Self.adminToken)"), ("Content-Type", "application/x-protobuf")],
                body: body)
            #expect(own.status == 401, "\(own)")
            #expect(try own.error().code == .notAuthenticated)
            let userOfAdmin = HTTPSyncClient(.init(serverURL: live.baseURL, credentials: .token(Self.adminToken)))
            defer { userOfAdmin.close() }
            await #expect(throws: SyncError.self) { _ = try await userOfAdmin.database().fetchAllZones() }
            // The admin reads with its own token only.
            let wrong = AdminClient(serverURL: live.baseURL, adminToken: LiveServer.aliceToken)
            let refused = await #expect(throws: SyncError.self, "alice's token reads through no admin route") {
                _ = try await wrong.fetchDatabaseChanges(user: "alice", scope: .private, .init(since: nil))
            }
            #expect(refused?.code == .notAuthenticated)
            _ = try await admin.fetchDatabaseChanges(user: "alice", scope: .private, .init(since: nil))
        }
    }

    @Test("bad scopes, user IDs, operations and bodies are refused with an error naming them; nobody is registered")
    func badInput() async throws {
        try await Self.withAdminServer { live, _ in
            let headers = [
                ("Authorization", "Bearer \(Self.adminToken)"), ("Content-Type", "application/x-protobuf"),
            ]
            let body = Wire.encode(FetchDatabaseChangesRequest(since: nil), as: .protobuf)
            for user in ["alice", "bob"] {
                _ = try await live.server.database(for: UserID(rawValue: user)).modifyZones(
                    saving: [RecordZone(zoneID: Self.zone)], deleting: [])
            }
            func post(_ path: String, body: [UInt8]? = body) async throws -> (Int, SyncError) {
                let answer = try await rawRequest(live, path, headers: headers, body: body)
                return (answer.status, try answer.error())
            }
            let badScope = try await post("/v1/admin/databases/alice/everyone/fetchDatabaseChanges")
            #expect(badScope.0 == 404 && badScope.1.message.contains("everyone"), "\(badScope)")
            let badOperation = try await post("/v1/admin/databases/alice/private/fetchEverything")
            #expect(badOperation.0 == 404, "\(badOperation)")
            let write = try await post("/v1/admin/databases/alice/private/modifyRecords")
            #expect(write.0 == 403 && write.1.code == .permissionFailure, "\(write)")
            let control = try await post("/v1/admin/databases/al%01ice/private/fetchDatabaseChanges")
            #expect(control.0 == 400 && control.1.message.contains("user ID"), "\(control)")
            // A % not followed by two hexadecimal digits, sent as is (a URL type would encode it).
            let badEscape = try await exchange(
                port: live.port,
                send: Array(
                    "POST /v1/admin/databases/al%ZZice/private/fetchDatabaseChanges HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Self.adminToken)\r\nAccept: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .utf8))
            #expect(badEscape.hasPrefix("HTTP/1.1 400"), "\(badEscape)")
            #expect(badEscape.contains("not percent-encoded UTF-8"), "\(badEscape)")
            let garbage = try await post(
                "/v1/admin/databases/alice/private/fetchDatabaseChanges", body: [0xFF, 0xFF, 0xFF, 0x01])
            #expect(garbage.0 == 400 && garbage.1.code == .invalidArguments, "\(garbage)")
            // Bob's token presented for alice's database.
            let bobToken = try live.server.admin.currentToken(of: "bob")
            let badToken = try await post(
                "/v1/admin/databases/alice/private/fetchDatabaseChanges",
                body: Wire.encode(FetchDatabaseChangesRequest(since: bobToken), as: .protobuf))
            #expect(badToken.0 == 400 && badToken.1.code == .invalidArguments, "\(badToken)")
            let nobody = try await post(
                WireAdminChanges.databasePath(user: "dave", scope: .private, operation: .fetchDatabaseChanges))
            #expect(nobody.0 == 404 && nobody.1.code == .unknownItem && nobody.1.message.contains("dave"), "\(nobody)")
            #expect(try !live.server.isRegistered("dave"))
            let otherVersion = try await post("/v9/admin/databases/alice/private/fetchDatabaseChanges")
            #expect(otherVersion.0 == 404 && otherVersion.1.code == .incompatibleVersion, "\(otherVersion)")
        }
    }

    @Test("a user ID with slashes and colons (an identity provider's) is a path component of its own")
    func encodedUserIDs() async throws {
        try await Self.withAdminServer { live, admin in
            let user = "https://issuer.example/realm:subject 7/é"
            let database = live.server.database(for: UserID(rawValue: user), device: "phone")
            _ = try await database.modifyZones(saving: [RecordZone(zoneID: Self.zone)], deleting: [])
            let read = try await admin.fetchDatabaseChanges(user: user, scope: .private, .init(since: nil))
            #expect(read.modifications.map(\.zoneID) == [Self.zone])
        }
    }

    @Test("a server without an admin credential has no admin routes")
    func noCredentialNoRoutes() async throws {
        try await withLiveServer { live, _ in
            let admin = AdminClient(serverURL: live.baseURL, adminToken: Self.adminToken)
            let refused = await #expect(throws: SyncError.self, "no admin route answers") {
                _ = try await admin.fetchDatabaseChanges(user: "alice", scope: .private, .init(since: nil))
            }
            #expect(refused?.code == .serverRejectedRequest, "\(String(describing: refused))")
        }
    }
}
