import Foundation
import LogSyncServer
import MetricsTestKit
import PostgresProcess
import SyncModel
import Testing

@testable import LogSyncPostgres

/// Fetches on a streaming replica (`replicaURL`, `--replica-url`): a real primary and a real
/// hot standby made from it with `pg_basebackup -R`, both started by the test. A fetch reads the
/// replica when the replica holds the log up to the fetch's token, the primary otherwise; the
/// answer's token is never older than the request's (F142), and a replica that lags or is down
/// makes fetches read the primary, never fail. Each test has its own primary and standby, since
/// it pauses or stops the standby.
@Suite("Fetches on a streaming replica", .timeLimit(.minutes(5)))
struct PostgresReplicaTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func note(_ name: String, _ title: String) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
        record["title"] = .string(title)
        return record
    }

    static func names(_ response: FetchZoneChangesResponse) -> Set<String> {
        Set(response.modifications.map(\.record.recordID.recordName))
    }

    /// A primary with a new database, a standby streaming from it, and a node (`SyncServer`)
    /// whose store is the primary and whose replica is the standby, with its metrics; all
    /// stopped and removed after `body`.
    static func withPrimaryAndReplica(
        _ body: (
            _ primary: PostgresTestServer, _ standby: PostgresTestServer, _ node: SyncServer, _ url: String,
            _ metrics: TestMetrics
        ) async throws -> Void
    ) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let primary = try await PostgresTestServer()
        let url = try await primary.createDatabase()
        let standby = try await primary.startStandby()
        let replicaURL = url.replacingOccurrences(of: ":\(primary.port)/", with: ":\(standby.port)/")
        let metrics = TestMetrics()
        let node = try await onOwnThread {
            try SyncServer(
                SyncServer.Configuration(directory: directory, durability: .fast, metricsFactory: metrics),
                storage: PostgresStorage(
                    url: url, replicaURL: replicaURL, connections: 2, logger: quietLogger, metricsFactory: metrics))
        }
        do {
            try await body(primary, standby, node, url, metrics)
        } catch {
            node.shutdown()
            await standby.destroy()
            await primary.destroy()
            throw error
        }
        node.shutdown()
        await standby.destroy()
        await primary.destroy()
    }

    /// How many fetches were answered where (`result`: `replica` or `primary`).
    static func reads(_ metrics: TestMetrics, _ result: String) -> Int64 {
        (try? metrics.expectCounter("logsync_postgres_replica_reads_total", [("result", result)]).totalValue) ?? 0
    }

    // F142: any snapshot from the token on answers a fetch, so a replica that has caught up
    // answers it.
    @Test("F142 once the replica has caught up, fetches are answered by it")
    func caughtUpReplicaServesFetches() async throws {
        try await Self.withPrimaryAndReplica { primary, standby, node, _, metrics in
            let phone = node.database(for: "alice", device: "phone")
            // phone: creates the Notes zone and two notes, on the primary.
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            _ = try await phone.modifyRecords(
                saving: [Self.note("groceries", "Groceries"), Self.note("todo", "Todo")], deleting: [])
            try await standby.waitUntilCaughtUp(with: primary)

            // phone: fetches the database's and the zone's changes: the replica answers both.
            let before = Self.reads(metrics, "replica")
            let zones = try await phone.fetchDatabaseChanges(since: nil)
            #expect(zones.modifications.map(\.zoneID) == [Self.notes])
            let first = try await phone.fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(Self.names(first) == ["groceries", "todo"])
            #expect(Self.reads(metrics, "replica") == before + 2)

            // phone: a third note; once the replica has it, a fetch from the token brings it,
            // from the replica.
            _ = try await phone.modifyRecords(saving: [Self.note("books", "Books")], deleting: [])
            try await standby.waitUntilCaughtUp(with: primary)
            let next = try await phone.fetchZoneChanges(zoneID: Self.notes, since: first.changeToken)
            #expect(Self.names(next) == ["books"])
            #expect(next.changeToken.offset > first.changeToken.offset)
            #expect(Self.reads(metrics, "replica") == before + 3)
        }
    }

    // F142: a token the replica has not reached is answered by the primary, never with an
    // older token.
    @Test("F142 a fetch with a token ahead of the replica is answered by the primary, never with an older token")
    func tokenAheadOfTheReplicaReadsThePrimary() async throws {
        try await Self.withPrimaryAndReplica { primary, standby, node, url, metrics in
            let phone = node.database(for: "alice", device: "phone")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            _ = try await phone.modifyRecords(saving: [Self.note("groceries", "Groceries")], deleting: [])
            try await standby.waitUntilCaughtUp(with: primary)
            let first = try await phone.fetchZoneChanges(zoneID: Self.notes, since: nil)
            let firstZones = try await phone.fetchDatabaseChanges(since: nil)

            // The replica stops replaying: it lags from now on.
            _ = try await standby.psql("SELECT pg_wal_replay_pause()")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneName: "Trips")], deleting: [])
            _ = try await phone.modifyRecords(saving: [Self.note("todo", "Todo")], deleting: [])

            // laptop, on a node that reads the primary alone: its tokens are ahead of the replica.
            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let other = try PostgresStorageTests.node(url, in: directory)
            defer { other.shutdown() }
            let laptop = other.database(for: "alice", device: "laptop")
            let ahead = try await laptop.fetchZoneChanges(zoneID: Self.notes, since: first.changeToken)
            #expect(Self.names(ahead) == ["todo"])
            let aheadZones = try await laptop.fetchDatabaseChanges(since: firstZones.changeToken)
            #expect(Set(aheadZones.modifications.map(\.zoneID.zoneName)) == ["Trips", "Notes"])

            // laptop's tokens on the replica's node: the primary answers, with tokens not older.
            let fellBack = Self.reads(metrics, "primary")
            let onReplicaNode = node.database(for: "alice", device: "laptop")
            let next = try await onReplicaNode.fetchZoneChanges(zoneID: Self.notes, since: ahead.changeToken)
            #expect(next.modifications.isEmpty && next.deletions.isEmpty)
            #expect(next.changeToken.offset >= ahead.changeToken.offset)
            let nextZones = try await onReplicaNode.fetchDatabaseChanges(since: aheadZones.changeToken)
            #expect(nextZones.modifications.isEmpty)
            #expect(nextZones.changeToken.offset >= aheadZones.changeToken.offset)
            #expect(Self.reads(metrics, "primary") == fellBack + 2)

            // phone's older token is still answered by the lagging replica: as of its snapshot,
            // which is not older than the token.
            let answeredByReplica = Self.reads(metrics, "replica")
            let stale = try await phone.fetchZoneChanges(zoneID: Self.notes, since: first.changeToken)
            #expect(stale.changeToken.offset >= first.changeToken.offset)
            #expect(Self.reads(metrics, "replica") == answeredByReplica + 1)

            // The replica replays again and catches up: laptop's token is answered there.
            _ = try await standby.psql("SELECT pg_wal_replay_resume()")
            try await standby.waitUntilCaughtUp(with: primary)
            let caughtUp = try await onReplicaNode.fetchZoneChanges(zoneID: Self.notes, since: ahead.changeToken)
            #expect(caughtUp.changeToken.offset >= ahead.changeToken.offset)
            #expect(Self.reads(metrics, "replica") == answeredByReplica + 2)
        }
    }

    // F142: a replica that is down costs nothing but its reads: fetches read the primary.
    @Test("F142 a stopped replica makes fetches read the primary, without an error")
    func stoppedReplicaFallsBack() async throws {
        try await Self.withPrimaryAndReplica { primary, standby, node, _, metrics in
            let phone = node.database(for: "alice", device: "phone")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            _ = try await phone.modifyRecords(saving: [Self.note("groceries", "Groceries")], deleting: [])
            try await standby.waitUntilCaughtUp(with: primary)
            let first = try await phone.fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(Self.reads(metrics, "replica") == 1)

            // The replica stops; phone keeps writing and fetching through the node.
            try await standby.stop()
            _ = try await phone.modifyRecords(saving: [Self.note("todo", "Todo")], deleting: [])
            let fellBack = Self.reads(metrics, "primary")
            let next = try await phone.fetchZoneChanges(zoneID: Self.notes, since: first.changeToken)
            #expect(Self.names(next) == ["todo"])
            let all = try await phone.fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(Self.names(all) == ["groceries", "todo"])
            let zones = try await phone.fetchDatabaseChanges(since: nil)
            #expect(zones.modifications.map(\.zoneID) == [Self.notes])
            #expect(Self.reads(metrics, "primary") == fellBack + 3)
            #expect(Self.reads(metrics, "replica") == 1)

            // The replica is back and catches up: after its rest, fetches read it again.
            try await standby.startAgain()
            try await standby.waitUntilCaughtUp(with: primary)
            try await eventually("a fetch is answered by the replica again", timeout: .seconds(60)) {
                _ = try? await phone.fetchZoneChanges(zoneID: Self.notes, since: next.changeToken)
                return Self.reads(metrics, "replica") > 1
            }
        }
    }
}
