import Foundation
import LogStore
import SyncModel
import Synchronization
import Testing

@testable import LogSyncServer

/// A wall clock the test moves by hand, for expiries without sleeps.
final class MovableDate: Sendable {
    private let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { date.withLock { $0 } }
    func advance(by interval: TimeInterval) { date.withLock { $0 += interval } }
}

/// What a session store's observer heard, in order.
final class HeardRevocations: Sendable {
    private let events = Mutex<[RevocationEvent]>([])
    var all: [RevocationEvent] { events.withLock { $0 } }
    func append(_ event: RevocationEvent) { events.withLock { $0.append(event) } }
}

/// Devices as sessions in the LMDB store: a device signs in, uses its access token until it
/// expires, refreshes (both tokens replaced), and a replaced refresh token presented again
/// revokes the session; the user lists and revokes their devices.
@Suite("Sessions in the LMDB store")
struct SessionStoreTests {
    static let lifetimes = SessionStore.Lifetimes(access: .seconds(900), refresh: .seconds(86_400))

    func withSessions(_ body: (SessionStore, SyncServer, MovableDate, URL) async throws -> Void) async throws {
        try await withServer { server, directory in
            let clock = MovableDate()
            let sessions = try SessionStore(server: server, lifetimes: Self.lifetimes, now: { clock.now })
            try await body(sessions, server, clock, directory)
        }
    }

    @Test("sign-in: the access token grants the user and device until it expires; the user is registered")
    func signInAndExpiry() async throws {
        try await withSessions { sessions, server, clock, _ in
            let phone = try sessions.create(user: "apple:alice", device: "phone", name: "Alice's phone")
            #expect(phone.accessToken.hasPrefix("lsa_") && phone.refreshToken.hasPrefix("lsr_"))
            #expect(phone.accessToken.utf8.count == 47)
            #expect(phone.session.accessExpires == clock.now + 900)
            #expect(phone.session.refreshExpires == clock.now + 86_400)
            #expect(try server.users.allUsers() == ["apple:alice"])

            let grant = try #require(
                try sessions.lookUp(accessToken: phone.accessToken).validGrant, "the new access token is not valid")
            #expect(grant.user == "apple:alice" && grant.device == "phone" && grant.session == phone.session.id)
            #expect(try sessions.lookUp(accessToken: phone.refreshToken) == .unknown)
            #expect(try sessions.lookUp(accessToken: "lsa_" + String(repeating: "x", count: 43)) == .unknown)

            clock.advance(by: 899)
            #expect(try sessions.lookUp(accessToken: phone.accessToken) == .valid(grant))
            clock.advance(by: 1)
            #expect(try sessions.lookUp(accessToken: phone.accessToken) == .expired(grant))
        }
    }

    @Test("the store keeps only digests of the tokens")
    func onlyDigestsAreStored() async throws {
        try await withSessions { sessions, _, _, directory in
            let issued = try sessions.create(user: "alice", device: "phone")
            _ = try sessions.refresh(issued.refreshToken)
            let registry = LMDBStorage.registryDirectory(in: directory)
            let files = try FileManager.default.contentsOfDirectory(at: registry, includingPropertiesForKeys: nil)
            for file in files {
                let bytes = try Data(contentsOf: file)
                #expect(bytes.range(of: Data(issued.accessToken.utf8)) == nil)
                #expect(bytes.range(of: Data(issued.refreshToken.utf8)) == nil)
                #expect(bytes.range(of: Data(issued.refreshToken.dropFirst(4).utf8)) == nil)
            }
        }
    }

    @Test("refresh replaces both tokens; the old access token stops at once and every node hears it")
    func refreshRotates() async throws {
        try await withSessions { sessions, _, clock, _ in
            let heard = HeardRevocations()
            sessions.observeRevocations { heard.append($0) }
            let first = try sessions.create(user: "alice", device: "phone")
            clock.advance(by: 1000)  // the access token expired; the refresh token did not
            let second = try #require(try sessions.refresh(first.refreshToken).issued, "the refresh was refused")
            #expect(second.accessToken != first.accessToken && second.refreshToken != first.refreshToken)
            #expect(second.session.id == first.session.id)
            #expect(second.session.refreshed == clock.now && second.session.created == first.session.created)
            #expect(second.session.accessExpires == clock.now + 900)
            #expect(try sessions.lookUp(accessToken: first.accessToken) == .unknown)
            #expect(
                try sessions.lookUp(accessToken: second.accessToken).validGrant != nil,
                "the new access token is not valid")
            #expect(heard.all == [.listening, .revoked(.credential(SessionStore.digest(first.accessToken)))])
        }
    }

    @Test("a replaced refresh token presented again revokes the session: neither holder goes on")
    func reuseRevokesTheSession() async throws {
        try await withSessions { sessions, _, _, _ in
            let heard = HeardRevocations()
            sessions.observeRevocations { heard.append($0) }
            let stolen = try sessions.create(user: "alice", device: "phone")
            let laptop = try sessions.create(user: "alice", device: "laptop")
            let thief = try #require(try sessions.refresh(stolen.refreshToken).issued, "the first refresh was refused")
            // The device refreshes with the token it still holds: the thief used it first.
            #expect(try sessions.refresh(stolen.refreshToken) == .reused(session: stolen.session.id, user: "alice"))
            #expect(heard.all.last == .revoked(.session(stolen.session.id)))
            #expect(try sessions.lookUp(accessToken: thief.accessToken) == .unknown)
            #expect(try sessions.refresh(thief.refreshToken) == .unknown)
            #expect(try sessions.refresh(stolen.refreshToken) == .unknown)
            #expect(try sessions.sessions(of: "alice").map(\.device) == ["laptop"])
            #expect(
                try sessions.lookUp(accessToken: laptop.accessToken).validGrant != nil,
                "the other device's session went too")
        }
    }

    @Test("an expired refresh token is refused and changes nothing; unknown tokens are refused")
    func expiredRefreshToken() async throws {
        try await withSessions { sessions, _, clock, _ in
            let issued = try sessions.create(user: "alice", device: "phone")
            #expect(try sessions.refresh("lsr_nothing") == .unknown)
            #expect(try sessions.refresh(issued.accessToken) == .unknown)
            clock.advance(by: 86_400)
            let before = try sessions.log.lastOffset
            #expect(try sessions.refresh(issued.refreshToken) == .expired)
            #expect(try sessions.log.lastOffset == before)
            #expect(try sessions.sessions(of: "alice").isEmpty)
        }
    }

    @Test("list, revoke one device, revoke all; signing in again on a device replaces its session")
    func listAndRevoke() async throws {
        try await withSessions { sessions, _, clock, _ in
            let heard = HeardRevocations()
            sessions.observeRevocations { heard.append($0) }
            let phone = try sessions.create(user: "alice", device: "phone", name: "Phone")
            clock.advance(by: 10)
            let laptop = try sessions.create(user: "alice", device: "laptop", name: "Laptop")
            clock.advance(by: 10)
            let tablet = try sessions.create(user: "alice", device: "tablet")
            let bob = try sessions.create(user: "bob", device: "phone")
            #expect(try sessions.sessions(of: "alice").map(\.device) == ["phone", "laptop", "tablet"])
            #expect(try sessions.sessions(of: "alice").map(\.name) == ["Phone", "Laptop", ""])
            #expect(try sessions.sessions(of: "carol").isEmpty)

            // The phone signs in again: its old session goes.
            let phoneAgain = try sessions.create(user: "alice", device: "phone")
            #expect(heard.all.last == .revoked(.session(phone.session.id)))
            #expect(try sessions.lookUp(accessToken: phone.accessToken) == .unknown)
            #expect(try sessions.sessions(of: "alice").count == 3)

            #expect(try sessions.revoke(user: "alice", device: "laptop") == 1)
            #expect(heard.all.last == .revoked(.session(laptop.session.id)))
            #expect(try sessions.lookUp(accessToken: laptop.accessToken) == .unknown)
            #expect(try sessions.refresh(laptop.refreshToken) == .unknown)
            // Another user's device of the same name, and a device never signed in: nothing.
            #expect(try sessions.revoke(user: "alice", device: "laptop") == 0)
            #expect(try sessions.revoke(user: "carol", device: "phone") == 0)
            #expect(try sessions.lookUp(accessToken: bob.accessToken).validGrant != nil, "bob's session went")

            #expect(try sessions.revokeAll(of: "alice") == 2)
            #expect(
                Set(heard.all.suffix(2))
                    == [.revoked(.session(phoneAgain.session.id)), .revoked(.session(tablet.session.id))])
            #expect(try sessions.sessions(of: "alice").isEmpty)
            #expect(try sessions.sessions(of: "bob").count == 1)
        }
    }

    @Test("bad input is refused by name and writes nothing")
    func badInput() async throws {
        try await withSessions { sessions, server, _, _ in
            let before = try sessions.log.lastOffset
            #expect(throws: SyncError.self) { try sessions.create(user: "", device: "phone") }
            #expect(throws: SyncError.self) { try sessions.create(user: "alice", device: "") }
            #expect(throws: SyncError.self) {
                try sessions.create(user: "alice", device: "phone", name: String(repeating: "n", count: 257))
            }
            #expect(throws: SyncError.self) { try sessions.create(user: "alice", device: "phone", name: "a\u{7}b") }
            #expect(try sessions.log.lastOffset == before)
            #expect(try server.users.allUsers().isEmpty)
        }
    }

    @Test("sessions outlive a restart: they are in the registry's environment, their index rebuilt from the log")
    func sessionsSurviveARestart() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("logsync-sessions-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = MovableDate()
        let (kept, refreshed): (SessionStore.Issued, SessionStore.Issued)
        do {
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            let sessions = try SessionStore(server: server, now: { clock.now })
            kept = try sessions.create(user: "alice", device: "phone")
            let laptop = try sessions.create(user: "alice", device: "laptop")
            let next = try #require(try sessions.refresh(laptop.refreshToken).issued, "the refresh was refused")
            refreshed = next
            _ = try sessions.refresh(laptop.refreshToken)  // reused: the laptop's session goes
            server.shutdown()
        }
        let server = try SyncServer(.init(directory: directory, durability: .fast))
        let sessions = try SessionStore(server: server, now: { clock.now })
        #expect(try sessions.lookUp(accessToken: kept.accessToken).validGrant != nil, "the phone's session was lost")
        #expect(try sessions.lookUp(accessToken: refreshed.accessToken) == .unknown)
        #expect(try sessions.sessions(of: "alice").map(\.device) == ["phone"])
        let log = try #require(sessions.log.inspectableLog)
        try log.rebuildProjections()
        #expect(try sessions.sessions(of: "alice").map(\.device) == ["phone"])
    }
}
