import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Synchronization
import Testing

/// Devices as sessions in the PostgreSQL store, on two nodes sharing one database: a session
/// made on one is honoured by the other, and its revocation (a device signed out, a refresh
/// token reused, a refresh replacing an access token) reaches the other node's observer.
@Suite("PostgreSQL sessions")
struct PostgresSessionTests {
    /// A wall clock the test moves by hand.
    final class MovableDate: Sendable {
        private let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { date.withLock { $0 } }
        func advance(by interval: TimeInterval) { date.withLock { $0 += interval } }
    }

    /// Two nodes' sessions on one new database, the second observed; the clock they share.
    static func twoNodes() async throws -> (
        first: SessionStore, second: SessionStore, heard: PostgresRevocationTests.Heard, clock: MovableDate,
        servers: [SyncServer]
    ) {
        let url = try await PostgresTestServer.shared().createDatabase()
        let clock = MovableDate()
        let lifetimes = SessionStore.Lifetimes(access: .seconds(900), refresh: .seconds(86_400))
        var servers: [SyncServer] = []
        var stores: [SessionStore] = []
        for _ in 0..<2 {
            let storage = try await PostgresStorage.open(url: url, connections: 1, logger: quietLogger)
            let server = try SyncServer(
                .init(directory: FileManager.default.temporaryDirectory.appendingPathComponent("unused")),
                storage: storage)
            servers.append(server)
            stores.append(try SessionStore(server: server, lifetimes: lifetimes, now: { clock.now }))
        }
        let heard = PostgresRevocationTests.Heard()
        stores[1].observeRevocations { heard.append($0) }
        try await eventually("the second node hears revocations") { heard.all.contains(.listening) }
        return (stores[0], stores[1], heard, clock, servers)
    }

    @Test("a session made on one node is honoured by the other, until it expires; the user is registered")
    func sessionOnEveryNode() async throws {
        let (first, second, _, clock, servers) = try await Self.twoNodes()
        defer { for server in servers { server.shutdown() } }
        let phone = try first.create(user: "apple:alice", device: "phone", name: "Phone")
        let grant = try #require(
            try second.lookUp(accessToken: phone.accessToken).validGrant, "the other node does not know the session")
        #expect(grant.user == "apple:alice" && grant.device == "phone" && grant.session == phone.session.id)
        #expect(try servers[1].userIdentity(forUserRecordName: "_user1") != nil)
        #expect(try second.sessions(of: "apple:alice").map(\.name) == ["Phone"])
        clock.advance(by: 900)
        #expect(try second.lookUp(accessToken: phone.accessToken) == .expired(grant))
    }

    @Test("refresh on one node: the old access token is refused on both and the other node hears it")
    func refreshAcrossNodes() async throws {
        let (first, second, heard, clock, servers) = try await Self.twoNodes()
        defer { for server in servers { server.shutdown() } }
        let phone = try first.create(user: "alice", device: "phone")
        clock.advance(by: 1000)
        let next = try #require(try second.refresh(phone.refreshToken).issued, "the refresh was refused")
        try await eventually("the other node hears that the old access token went") {
            heard.all.contains(.revoked(.credential(SessionStore.digest(phone.accessToken))))
        }
        #expect(try first.lookUp(accessToken: phone.accessToken) == .unknown)
        #expect(try first.lookUp(accessToken: next.accessToken).validGrant != nil, "the new access token is refused")
        clock.advance(by: 86_400)
        #expect(try first.refresh(next.refreshToken) == .expired)
    }

    @Test("a replaced refresh token used again on another node revokes the session, and every node hears it")
    func reuseAcrossNodes() async throws {
        let (first, second, heard, _, servers) = try await Self.twoNodes()
        defer { for server in servers { server.shutdown() } }
        let phone = try first.create(user: "alice", device: "phone")
        let laptop = try first.create(user: "alice", device: "laptop")
        let thief = try #require(try first.refresh(phone.refreshToken).issued, "the refresh was refused")
        #expect(try second.refresh(phone.refreshToken) == .reused(session: phone.session.id, user: "alice"))
        try await eventually("the other node hears the session's revocation") {
            heard.all.contains(.revoked(.session(phone.session.id)))
        }
        #expect(try first.lookUp(accessToken: thief.accessToken) == .unknown)
        #expect(try first.refresh(thief.refreshToken) == .unknown)
        #expect(try second.sessions(of: "alice").map(\.device) == ["laptop"])
        #expect(try second.lookUp(accessToken: laptop.accessToken).validGrant != nil, "the laptop's session went too")
    }

    @Test("revoke one device, then all: the other node hears each session's revocation")
    func revokeAcrossNodes() async throws {
        let (first, second, heard, _, servers) = try await Self.twoNodes()
        defer { for server in servers { server.shutdown() } }
        let phone = try first.create(user: "alice", device: "phone")
        let laptop = try first.create(user: "alice", device: "laptop")
        let bob = try first.create(user: "bob", device: "phone")
        #expect(try first.revoke(user: "alice", device: "phone") == 1)
        #expect(try first.revoke(user: "alice", device: "phone") == 0)
        try await eventually("the other node hears the phone's revocation") {
            heard.all.contains(.revoked(.session(phone.session.id)))
        }
        #expect(try second.lookUp(accessToken: phone.accessToken) == .unknown)
        #expect(try second.revokeAll(of: "alice") == 1)
        try await eventually("the other node hears the laptop's revocation") {
            heard.all.contains(.revoked(.session(laptop.session.id)))
        }
        #expect(try first.sessions(of: "alice").isEmpty)
        #expect(try first.lookUp(accessToken: bob.accessToken).validGrant != nil, "bob's session went")
    }
}
