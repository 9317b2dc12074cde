import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

/// The registry's users, listed a page at a time and deleted (`userDeleted`, kind 122), on the
/// LMDB store: what the admin API and `logsync-server user …` stand on.
@Suite("Users in the registry: listing and deletion")
struct UserDeletionTests {
    @Test(
        "a deleted user leaves the registry's index (ID and address), their environment goes, and the index rebuilt from the log after a restart says the same"
    )
    func deletionSurvivesARebuild() async throws {
        try await withServer { server, directory in
            try server.registerUser("alice", emailAddress: "alice@example.com")
            try server.registerUser("bob", emailAddress: "bob@example.com")
            let alice = server.database(for: "alice", device: "phone")
            _ = try await alice.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            let number = try #require(try server.users.registeredNumber(of: "alice"))
            let environment = LMDBStorage.userDirectory(in: directory, number: number)
            #expect(FileManager.default.fileExists(atPath: environment.path))

            #expect(try server.deleteUser("alice"))
            #expect(!FileManager.default.fileExists(atPath: environment.path))
            #expect(try server.users(limit: 10).map(\.user) == ["bob"])
            #expect(try server.users.user(number: number) == nil)
            #expect(try !server.deleteUser("alice"))
            // Her address is free for another user.
            try server.registerUser("carol", emailAddress: "alice@example.com")
            server.shutdown()

            // A new process, and an index rebuilt from the entries: the same users.
            let reopened = try SyncServer(.init(directory: directory, durability: .fast))
            defer { reopened.shutdown() }
            let log = try #require(reopened.users.log.inspectableLog)
            let copy = LMDBServerLog(
                log: try log.rebuiltCopy(
                    through: try log.lastOffset, at: directory.appendingPathComponent("rebuilt", isDirectory: true)))
            for table in UserRegistry.Index().tableNames {
                #expect(try Self.rows(of: table, in: copy) == Self.rows(of: table, in: reopened.users.log), "\(table)")
            }
            #expect(try reopened.users(limit: 10).map(\.user) == ["bob", "carol"])
            #expect(try reopened.userIdentity(forEmailAddress: "alice@example.com")?.userRecordName != "_user\(number)")
            #expect(try reopened.registeredUser("bob")?.emailAddress == "bob@example.com")
        }
    }

    /// Every row of the registry index's `table`.
    static func rows(of table: String, in log: any ServerLog) throws -> [[UInt8]: [UInt8]] {
        try log.read { index in
            var rows: [[UInt8]: [UInt8]] = [:]
            try index.forEach(in: table, from: nil) { key, value in
                rows[Array(key)] = Array(value)
                return true
            }
            return rows
        }
    }

    @Test("a user whose ID is as long as allowed (511 bytes) is listed, deleted, and counted as having no session")
    func longestUserID() async throws {
        try await withServer { server, _ in
            let user = UserID(String(repeating: "u", count: 511))
            try server.registerUser(user)
            let sessions = try SessionStore(server: server)
            #expect(try sessions.sessions(of: user).isEmpty)
            #expect(try sessions.sessionCounts(of: [user]) == [user: 0])
            #expect(try server.users(limit: 1).map(\.user) == [user])
            #expect(try server.deleteUser(user))
            #expect(try server.users(limit: 1).isEmpty)
        }
    }

    @Test("users are listed in the order of their IDs' bytes from after a given ID, a page at a time")
    func pages() async throws {
        try await withServer { server, _ in
            let names = ["b", "a", "ab", "é", "Z", "aa"]
            for name in names { try server.registerUser(UserID(name)) }
            #expect(try server.users(limit: 100).map(\.user.rawValue) == ["Z", "a", "aa", "ab", "b", "é"])
            #expect(try server.users(after: "a", limit: 2).map(\.user.rawValue) == ["aa", "ab"])
            #expect(try server.users(after: "abc", limit: 2).map(\.user.rawValue) == ["b", "é"])
            #expect(try server.users(after: "é", limit: 2).isEmpty)
            #expect(try server.users(limit: 0).isEmpty)
        }
    }
}
