import CoreMetrics
import Foundation
import LogStore
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Testing

/// The PostgreSQL store under the server's rules: two servers ("nodes") on one database, the
/// log's offsets, push between nodes, the index rebuilt, damaged rows, and an outage.
@Suite("PostgreSQL store")
struct PostgresStorageTests {
    /// A server on `url`, as one node of several, whose server and store record into `metrics`.
    static func node(
        _ url: String, in directory: URL, connections: Int = 2,
        metrics: any MetricsFactory = MetricsSystem.factory
    ) throws -> SyncServer {
        try SyncServer(
            SyncServer.Configuration(directory: directory, durability: .fast, metricsFactory: metrics),
            storage: PostgresStorage(url: url, connections: connections, logger: quietLogger, metricsFactory: metrics))
    }

    /// Two nodes on one new database, and its URL.
    static func twoNodes(in directory: URL) async throws -> (url: String, node1: SyncServer, node2: SyncServer) {
        let url = try await PostgresTestServer.shared().createDatabase()
        return (
            url, try node(url, in: directory.appendingPathComponent("1")),
            try node(url, in: directory.appendingPathComponent("2"))
        )
    }

    /// Runs `body` with two nodes (servers) of one new database (see ``twoNodes(in:)``), and a
    /// directory for files; then shuts the nodes down and removes the directory.
    static func withTwoNodes(_ body: (URL, String, SyncServer, SyncServer) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (url, node1, node2) = try await twoNodes(in: directory)
        defer {
            node1.shutdown()
            node2.shutdown()
        }
        try await body(directory, url, node1, node2)
    }

    /// Runs `body` with a node (server) of a new database, its URL, and the node's directory;
    /// then shuts the node down and removes the directory.
    static func withNode(_ body: (URL, String, SyncServer) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = try await PostgresTestServer.shared().createDatabase()
        let node = try Self.node(url, in: directory)
        defer { node.shutdown() }
        try await body(directory, url, node)
    }

    static func note(_ name: String, _ text: String = "hello") -> Record {
        var record = Record(
            recordType: "Note", recordID: Record.ID(recordName: name, zoneID: RecordZone.ID(zoneName: "Notes")))
        record["text"] = .string(text)
        return record
    }

    /// Every record of the zone, following pages from the start.
    static func allRecords(_ database: any CloudDatabase) async throws -> [String: Record] {
        var records: [String: Record] = [:]
        var token: ZoneChangeToken? = nil
        while true {
            let page = try await database.fetchZoneChanges(zoneID: RecordZone.ID(zoneName: "Notes"), since: token)
            for change in page.modifications { records[change.record.recordID.recordName] = change.record }
            token = page.changeToken
            if !page.moreComing { return records }
        }
    }

    // Two nodes committing to one database at once take turns: every save is acknowledged,
    // none is lost, and the log's offsets stay dense.
    @Test("two nodes writing one database at once: nothing lost, offsets dense")
    func concurrentNodes() async throws {
        try await Self.withTwoNodes { directory, url, node1, node2 in
            _ = try await node1.database(for: "alice").modifyZones(
                saving: [RecordZone(zoneName: "Notes")], deleting: [])
            let before = try node1.admin.currentToken(of: "alice")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<8 {
                    let node = writer.isMultiple(of: 2) ? node1 : node2
                    group.addTask {
                        let database = node.database(for: "alice", device: DeviceID(rawValue: "device\(writer)"))
                        for round in 0..<5 {
                            let response = try await database.modifyRecords(
                                saving: [Self.note("w\(writer)r\(round)")], deleting: [])
                            #expect(response.saveResults.values.allSatisfy { (try? $0.get()) != nil })
                        }
                    }
                }
                try await group.waitForAll()
            }
            let after = try node2.admin.currentToken(of: "alice")
            // 40 saves, one entry each: dense, nothing skipped, nothing written twice.
            #expect(after.offset.rawValue == before.offset.rawValue + 40)
            let count = try await sqlValue(
                url,
                "SELECT count(*) FROM logsync_entries JOIN logsync_logs USING (log_id) WHERE name LIKE 'u%/private'")
            let last = try await sqlValue(
                url,
                "SELECT max(\"offset\") FROM logsync_entries JOIN logsync_logs USING (log_id) WHERE name LIKE 'u%/private'"
            )
            #expect(count == last)
            #expect(UInt64(last) == after.offset.rawValue)
            let seen1 = try await Self.allRecords(node1.database(for: "alice"))
            let seen2 = try await Self.allRecords(node2.database(for: "alice"))
            #expect(seen1.count == 40)
            #expect(Set(seen1.keys) == Set(seen2.keys))
        }
    }

    // A commit on node 1 reaches a device listening on node 2 (F112, F113).
    @Test("F113 a commit on one node is hinted to a device on the other")
    func pushBetweenNodes() async throws {
        try await Self.withTwoNodes { directory, url, node1, node2 in
            let phone = node1.database(for: "alice", device: "phone")
            let laptop = node2.database(for: "alice", device: "laptop")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            _ = try await phone.modifySubscriptions(saving: [Subscription(subscriptionID: "all")], deleting: [])
            try await eventually("node 2 listens") { (node2.storage as? PostgresStorage)?.isListening == true }
            let hints = laptop.pushHints()
            _ = try await phone.modifyRecords(saving: [Self.note("n1")], deleting: [])
            let hint = try await firstHint(hints)
            #expect(hint.subscriptionID == "all")
            #expect(hint.changeToken == (try node2.admin.currentToken(of: "alice")))
        }
    }

    // The index is a projection: dropped or of another version, it is rebuilt from the entries
    // and answers as before.
    @Test("an index of another version is rebuilt from the entries")
    func indexRebuilt() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = try await PostgresTestServer.shared().createDatabase()
        let node = try Self.node(url, in: directory)
        let before: [String: Record]
        do {
            defer { node.shutdown() }
            _ = try await node.database(for: "alice").modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            _ = try await node.database(for: "alice").modifyRecords(
                saving: (0..<30).map { Self.note("n\($0)") }, deleting: [])
            _ = try await node.database(for: "alice").modifyRecords(
                saving: [], deleting: [Record.ID(recordName: "n4", zoneID: RecordZone.ID(zoneName: "Notes"))])
            before = try await Self.allRecords(node.database(for: "alice"))
        }
        try await sql(url, "UPDATE logsync_logs SET projection_version = 0; DELETE FROM logsync_index")
        let reopened = try Self.node(url, in: directory)
        defer { reopened.shutdown() }
        let after = try await Self.allRecords(reopened.database(for: "alice"))
        #expect(after.count == 29)
        #expect(after == before)
        #expect(try await sqlValue(url, "SELECT count(*) FROM logsync_index") > 0)
    }

    // A damaged entry row is a typed error naming its offset, never a crash or a wrong answer.
    @Test("a damaged entry row fails the request naming the offset")
    func damagedEntry() async throws {
        try await Self.withNode { directory, url, node in
            let database = node.database(for: "alice")
            _ = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            _ = try await database.modifyRecords(saving: [Self.note("n1")], deleting: [])
            // The record's entry (the one whose payload holds its text): bytes that are no record.
            let offset = try await sqlValue(
                url,
                "SELECT \"offset\" FROM logsync_entries WHERE position('hello'::bytea in payload) > 0 ORDER BY \"offset\" LIMIT 1"
            )
            try await sql(
                url,
                "UPDATE logsync_entries SET payload = '\\xffffffff'::bytea WHERE position('hello'::bytea in payload) > 0"
            )
            do {
                _ = try await Self.allRecords(database)
                Issue.record("a damaged record entry was read without an error")
            } catch let error as SyncError {
                #expect(error.code == .internalError)
                #expect("\(error)".contains("\(offset)"), "\(error)")
            }
        }
    }

    // PostgreSQL restarted under a running node: the request in the outage fails with
    // serviceUnavailable and a retry-after (F90), the next one after it succeeds, and nothing
    // acknowledged is lost.
    @Test("F90 PostgreSQL restarted: serviceUnavailable with retry-after, then service again, nothing lost")
    func restart() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let postgres = try await PostgresTestServer()
        defer { Task { await postgres.destroy() } }
        let url = try await postgres.createDatabase()
        let node = try Self.node(url, in: directory)
        defer { node.shutdown() }
        let database = node.database(for: "alice", device: "phone")
        _ = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
        _ = try await database.modifyRecords(saving: [Self.note("before")], deleting: [])
        try await postgres.stop()
        do {
            _ = try await database.modifyRecords(saving: [Self.note("during")], deleting: [])
            Issue.record("a save succeeded with PostgreSQL stopped")
        } catch let error as SyncError {
            #expect(error.code == .serviceUnavailable, "\(error)")
            #expect(error.retryAfter != nil)
        }
        try await postgres.startAgain()
        var saved = false
        for _ in 0..<50 where !saved {
            do {
                _ = try await database.modifyRecords(saving: [Self.note("after")], deleting: [])
                saved = true
            } catch let error as SyncError where error.code == .serviceUnavailable {
                try await Task.sleep(for: error.retryAfter ?? .milliseconds(100))
            }
        }
        #expect(saved)
        let records = try await Self.allRecords(database)
        #expect(Set(records.keys) == ["before", "after"])
    }
}

// MARK: Helpers

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(
        "logsync-store-test-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// The first hint of `stream`, within 20 seconds.
func firstHint(_ stream: AsyncStream<PushHint>) async throws -> PushHint {
    try await withThrowingTaskGroup(of: PushHint?.self) { group in
        group.addTask {
            for await hint in stream { return hint }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(20))
            throw TimedOut(what: "a push hint arrives")
        }
        defer { group.cancelAll() }
        guard let hint = try await group.next() ?? nil else {
            throw TimedOut(what: "a push hint arrives (the stream ended)")
        }
        return hint
    }
}

/// Runs SQL statements on the database at `url`.
func sql(_ url: String, _ statements: String) async throws {
    let pool = PostgresPool(url: try PostgresURL(url), size: 1, logger: quietLogger)
    defer { pool.shutdownSoon() }
    try await pool.run { try pool.withSession { session in try session.execute(statements) } }
}

/// The single integer a query returns.
func sqlValue(_ url: String, _ query: String) async throws -> Int64 {
    let pool = PostgresPool(url: try PostgresURL(url), size: 1, logger: quietLogger)
    defer { pool.shutdownSoon() }
    return try await pool.run {
        try pool.withSession { session in try session.query(query).first?.decode(Int64.self) ?? 0 }
    }
}

extension PostgresPool {
    /// Shuts the pool down on a thread that may block.
    func shutdownSoon() {
        Thread.detachNewThread { self.shutdown() }
    }
}
