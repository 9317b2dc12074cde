import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// F118: one engine per database in production. A second production engine on the same
/// server, user and database, or on the same device log, is refused while the first lives;
/// development engines (the default, and test devices) may share a database to simulate devices.
@Suite("One engine per database (F118)")
struct ProductionEngineTests {
    /// An engine of `user`'s database of `scope` on `server`, its log in `directory/name`, manual sync.
    static func engine(
        _ name: String, on server: SyncServer, user: UserID = "alice", scope: DatabaseScope = .private,
        environment: SyncEngine.Environment, directory: URL
    ) throws -> SyncEngine {
        var configuration = SyncEngine.Configuration(
            database: server.database(for: user, scope: scope, device: DeviceID(name)),
            deviceLog: try openDeviceLog(directory.appendingPathComponent(name)), delegate: IdleDelegate.shared)
        configuration.automaticallySync = false
        configuration.environment = environment
        return try SyncEngine(configuration)
    }

    /// Waits, without sleeping, until nothing holds the engine `reference` points at any more.
    static func waitUntilGone(_ reference: () -> SyncEngine?) async {
        for _ in 0..<10_000 where reference() != nil { await Task.yield() }
    }

    @Test("F118 a second production engine on the same user and database is refused, naming the database")
    func secondProductionEngineIsRefused() async throws {
        try withTemporaryDirectory { directory in
            let server = try makeTickingServer(directory)
            let phone = try Self.engine("phone", on: server, environment: .production, directory: directory)
            // The app, by mistake, builds a second engine for the same database.
            let error = try #require(throws: SyncEngine.DuplicateEngineError.self) {
                try Self.engine("phone-again", on: server, environment: .production, directory: directory)
            }
            #expect(error.conflict == "the private database of user \"alice\" on an in-process server")
            #expect(error.otherEngine == phone.description)
            #expect(error.description.contains("F118"))
            #expect(phone.environment == .production)
        }
    }

    @Test("F118 the database is free again once the first production engine has gone")
    func releasedWhenTheFirstEngineGoes() async throws {
        try await withTemporaryDirectory { directory in
            let server = try makeTickingServer(directory)
            var first: SyncEngine? = try Self.engine(
                "phone", on: server, environment: .production, directory: directory)
            try await first!.fetchChanges()
            weak let gone = first
            #expect(throws: SyncEngine.DuplicateEngineError.self) {
                try Self.engine("phone-2", on: server, environment: .production, directory: directory)
            }
            // The app drops the first engine (it quits the account, say) and builds another.
            first = nil
            await Self.waitUntilGone { gone }
            #expect(gone == nil)
            let second = try Self.engine("phone-2", on: server, environment: .production, directory: directory)
            try await second.fetchChanges()
        }
    }

    @Test("F118 production engines on other databases, users or servers are allowed")
    func otherDatabasesAreAllowed() async throws {
        try withTemporaryDirectory { directory in
            let server = try makeTickingServer(directory)
            let other = try SyncServer(
                .init(directory: directory.appendingPathComponent("other-server"), durability: .fast))
            // A typical app: one engine on the private database, one on the shared database.
            let engines = [
                try Self.engine("private", on: server, environment: .production, directory: directory),
                try Self.engine("shared", on: server, scope: .shared, environment: .production, directory: directory),
                try Self.engine("bob", on: server, user: "bob", environment: .production, directory: directory),
                try Self.engine("elsewhere", on: other, environment: .production, directory: directory),
            ]
            #expect(engines.count == 4)
        }
    }

    @Test("F118 in development (the default) and on test devices, engines share a database to simulate devices")
    func developmentEnginesShareADatabase() async throws {
        try await withTemporaryDirectory { directory in
            let server = try makeTickingServer(directory)
            let first = try Self.engine("first", on: server, environment: .development, directory: directory)
            let second = try Self.engine("second", on: server, environment: .development, directory: directory)
            #expect(first.environment == .development && second.environment == .development)
            // Test devices use the default environment: three devices of alice sync one note.
            let phone = try TestDevice("phone", server: server, directory: directory)
            let laptop = try TestDevice("laptop", server: server, directory: directory)
            let tablet = try TestDevice("tablet", server: server, directory: directory)
            #expect(phone.engine.environment == .development)
            try await phone.seedNote(Fixtures.a, "Groceries", in: Fixtures.notes, syncing: laptop)
            try await tablet.sync()
            #expect(laptop.title(Fixtures.a) == "Groceries" && tablet.title(Fixtures.a) == "Groceries")
            // A production engine beside development ones is not refused either: only production
            // engines claim their database.
            _ = try Self.engine("production", on: server, environment: .production, directory: directory)
        }
    }

    @Test("F118 a production engine is refused on a device log another engine or process uses")
    func sharedDeviceLogIsRefused() async throws {
        try withTemporaryDirectory { directory in
            let server = try makeTickingServer(directory)
            let log = directory.appendingPathComponent("sync")
            // Another process's production engine holds the device log's lock (here, this test).
            let lockPath = log.appendingPathComponent(ProductionEngineClaim.lockFileName).path
            try FileManager.default.createDirectory(at: log, withIntermediateDirectories: true)
            let descriptor = open(lockPath, O_RDWR | O_CREAT, 0o644)
            #expect(descriptor >= 0)
            #expect(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
            func start(_ user: UserID) throws -> SyncEngine {
                var configuration = SyncEngine.Configuration(
                    database: server.database(for: user), logDirectory: log, delegate: IdleDelegate.shared)
                configuration.automaticallySync = false
                configuration.environment = .production
                return try SyncEngine(configuration)
            }
            let error = try #require(throws: SyncEngine.DuplicateEngineError.self) { try start("alice") }
            #expect(error.conflict.contains(log.lastPathComponent))
            #expect(error.otherEngine.contains("another process"))
            // Once that process lets go, the engine starts; a second one on the same log, even of
            // another user, is refused.
            close(descriptor)
            let engine = try start("alice")
            #expect(throws: SyncEngine.DuplicateEngineError.self) { try start("bob") }
            _ = engine
        }
    }
}
