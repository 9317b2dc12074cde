import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Synchronization
import Testing

/// Token revocations between nodes: deleted rows announced by `NOTIFY` in the same commit,
/// heard by every storage on the database, and a lost listening connection announced to the
/// observers before and after, so a node can stop trusting what it keeps in memory.
@Suite("PostgreSQL token revocations")
struct PostgresRevocationTests {
    static let alice = "sha256:" + String(repeating: "a1", count: 32)
    static let alicePhone = "sha256:" + String(repeating: "a2", count: 32)
    static let bob = "sha256:" + String(repeating: "b1", count: 32)

    /// The events an observer heard, kept in order.
    final class Heard: Sendable {
        private let events = Mutex<[RevocationEvent]>([])
        var all: [RevocationEvent] { events.withLock { $0 } }
        func append(_ event: RevocationEvent) { events.withLock { $0.append(event) } }
    }

    /// Two storages ("nodes") on one new database, the second observed; its URL.
    static func twoStorages() async throws -> (
        url: String, first: PostgresStorage, second: PostgresStorage, heard: Heard
    ) {
        let url = try await PostgresTestServer.shared().createDatabase()
        let first = try await PostgresStorage.open(url: url, connections: 1, logger: quietLogger)
        let second = try await PostgresStorage.open(url: url, connections: 1, logger: quietLogger)
        let heard = Heard()
        second.tokens!.observeRevocations { heard.append($0) }
        try await eventually("the second node hears revocations") { heard.all.contains(.listening) }
        return (url, first, second, heard)
    }

    @Test(
        "a revocation on one node deletes the rows and reaches the other node's observer, also when nothing was deleted"
    )
    func revocationReachesTheOtherNode() async throws {
        let (_, first, second, heard) = try await Self.twoStorages()
        defer {
            first.shutdown()
            second.shutdown()
        }
        let tokens = try #require(first.tokens)
        try tokens.add(digest: Self.alice, user: "alice")
        try tokens.add(digest: Self.alicePhone, user: "alice")
        try tokens.add(digest: Self.bob, user: "bob")
        #expect(try second.tokens!.users(forDigests: [Self.alice, Self.bob, Self.alicePhone]).count == 3)

        #expect(try tokens.revoke(.credential(Self.alicePhone)) == 1)
        try await eventually("the other node hears the token's revocation") {
            heard.all.contains(.revoked(.credential(Self.alicePhone)))
        }
        #expect(try second.tokens!.user(forDigest: Self.alicePhone) == nil)
        #expect(try second.tokens!.user(forDigest: Self.alice) == "alice")

        #expect(try second.tokens!.revoke(.user("alice")) == 1)
        #expect(try tokens.revoke(.user("alice")) == 0)
        try await eventually("the node hears both revocations of the user, its own included") {
            heard.all.filter { $0 == .revoked(.user("alice")) }.count == 2
        }
        #expect(try tokens.users(forDigests: [Self.alice, Self.alicePhone, Self.bob]) == [Self.bob: "bob"])
        #expect(try tokens.count() == 1)
    }

    @Test(
        "a lost listening connection: the observer hears interrupted, then listening once it listens again, and revocations after it"
    )
    func lostConnectionIsAnnounced() async throws {
        let (url, first, second, heard) = try await Self.twoStorages()
        defer {
            first.shutdown()
            second.shutdown()
        }
        try first.tokens!.add(digest: Self.bob, user: "bob")
        let before = heard.all.count

        // Ends every listening connection on the database: both nodes'.
        _ = try await sqlValue(
            url,
            """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()
            """)
        try await eventually("the observer hears interrupted, then listening") {
            let after = heard.all.dropFirst(before)
            guard let lost = after.firstIndex(of: .interrupted) else { return false }
            return after[lost...].contains(.listening)
        }
        try await eventually("the node listens again") { second.isListening }
        #expect(try first.tokens!.revoke(.credential(Self.bob)) == 1)
        try await eventually("a revocation after the reconnection is heard") {
            heard.all.contains(.revoked(.credential(Self.bob)))
        }
    }

    @Test("a revocation travels as JSON naming the credential, the user or the session")
    func revocationPayload() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for (revocation, json) in [
            (Revocation.credential(Self.bob), "{\"credential\":\"\(Self.bob)\"}"),
            (Revocation.user("alice smith"), "{\"user\":\"alice smith\"}"),
            (Revocation.session("0f1e2d3c"), "{\"session\":\"0f1e2d3c\"}"),
        ] {
            #expect(String(decoding: try encoder.encode(revocation), as: UTF8.self) == json)
            #expect(try JSONDecoder().decode(Revocation.self, from: Data(json.utf8)) == revocation)
        }
    }
}
