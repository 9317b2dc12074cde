// logsync-store-bench: the server's PostgreSQL store against its LMDB store, and one server node
// against two on one PostgreSQL database, in the same run.
//
// 1. Commit: N records (≈300 B) saved into one zone in requests of 400, through the server's
//    rules in this process (`InProcessDatabase`); records/s per store. LMDB `.durable` against
//    PostgreSQL with fsync and synchronous commits on; LMDB `.fast` against PostgreSQL with
//    fsync off: each pair equally durable.
// 2. Fetch: the same records fetched from scratch, page by page; records/s per store.
// 3. Nodes: D devices (HTTP clients, U users, the devices of a user on alternate nodes) each
//    save R requests of 10 records and then fetch their zone, all at once, over loopback HTTP;
//    against one node, then against two nodes (two HTTP servers, each with its own PostgreSQL
//    store and connections) on the same database. Records saved per second over the whole
//    run, and the median and p99 latency of the save requests.
// 4. Sharing: O owners sharing with O participants, commits propagated to each participant's
//    shared database, with one lock per participant against one for the whole storage, on one
//    node and on two (SharingBench.swift).
//
// PostgreSQL is started by the benchmark (initdb and pg_ctl in the scratch directory, on a free
// loopback port; as an unprivileged user when run as root), twice: with fsync and without. The nodes run in
// this process: on a machine with 2 cores, two nodes add no processors, only a second pool of
// connections and a second listener, which is what the figures show.
//
//   swift build -c release --product logsync-store-bench --scratch-path .build-h
//   .build-h/release/logsync-store-bench [--records N] [--devices N] [--quick] [--dir PATH]
//   .build-h/release/logsync-store-bench --sharing-only [--owners N] [--participants N] [--rounds N]
//   .build-h/release/logsync-store-bench --commit-only [--statements]
//
// --statements loads pg_stat_statements into both PostgreSQL servers and prints, after each
// PostgreSQL commit phase, its statements: calls per commit request (a round trip each, unless
// sent ahead of the next), rows, and milliseconds spent in PostgreSQL.
//
// Docs/Performance.md ("PostgreSQL and several nodes") has the figures of the reference machine.
import ArgumentParser
import BenchSupport
import Foundation
import LogStore
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncPostgres
import LogSyncServer
import Logging
import PostgresProcess
import SyncModel
import Synchronization

@main
struct StoreBench: BenchCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-store-bench",
        abstract: "The PostgreSQL store against the LMDB store, and one node against two, in one run.",
        discussion: "Docs/Performance.md (\"PostgreSQL and several nodes\") has the figures of the reference machine.")

    @OptionGroup var common: CommonOptions

    @Option(
        help: ArgumentHelp(
            "Records committed and fetched per store (default 40,000; 4,000 with --quick).", valueName: "N"),
        transform: count())
    var records: Int?

    @Option(
        help: ArgumentHelp("Concurrent devices in the nodes phase (default 100).", valueName: "N"), transform: count())
    var devices: Int?

    @Option(help: ArgumentHelp("Users the devices belong to (default 20).", valueName: "N"), transform: count())
    var users: Int?

    @Option(
        help: ArgumentHelp("Save requests per device in the nodes phase (default 20; 5 with --quick).", valueName: "N"),
        transform: count())
    var rounds: Int?

    @Option(
        help: ArgumentHelp("Owners and participants in the sharing phase (default 100).", valueName: "N"),
        transform: count())
    var owners: Int?

    @Option(
        help: ArgumentHelp("Participants each owner shares with in the sharing phase (default 5).", valueName: "N"),
        transform: count())
    var participants: Int?

    @Flag(help: "Run the sharing phase alone.")
    var sharingOnly = false

    @Flag(help: "Run the commit and fetch phases alone.")
    var commitOnly = false

    @Flag(
        help:
            "Count each PostgreSQL store's statements in the commit phase (pg_stat_statements): calls per commit request and time."
    )
    var statements = false

    var recordCount: Int { records ?? common.size(40_000, quick: 4_000) }
    var ownerCount: Int { owners ?? 100 }
    var participantsPerOwner: Int { min(participants ?? 5, ownerCount) }
    var sharingRounds: Int { roundCount }
    var deviceCount: Int { devices ?? 100 }
    var userCount: Int { min(users ?? 20, deviceCount) }
    var roundCount: Int { rounds ?? common.size(20, quick: 5) }

    static let zone = RecordZone.ID(zoneName: "Bench")

    static let quiet: Logger = {
        var logger = Logger(label: "logsync-store-bench")
        logger.logLevel = .critical
        return logger
    }()

    func measure(in scratch: ScratchDirectory) async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .critical
            return handler
        }
        printHeader(
            "logsync-store-bench — the PostgreSQL store against LMDB, and one node against two", scratch: scratch)
        emit(
            "  \(grouped(recordCount)) records per store; \(deviceCount) devices of \(userCount) users, \(roundCount) saves of 10 records each"
        )
        let settings =
            statements ? ["shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"] : []
        let durablePostgres = try await PostgresTestServer(
            directory: scratch.subdirectory("pg-durable"), durable: true, settings: settings)
        let fastPostgres = try await PostgresTestServer(
            directory: scratch.subdirectory("pg-fast"), durable: false, settings: settings)
        if statements {
            for server in [durablePostgres, fastPostgres] {
                _ = try await server.psql("CREATE EXTENSION pg_stat_statements")
            }
        }
        // Both servers stopped and removed before the scratch directory is: a server left
        // running (a detached task that never ran before the process ended) kept its directory.
        let outcome: Result<Void, any Error>
        do {
            try await measure(durablePostgres, fastPostgres, in: scratch)
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        await durablePostgres.destroy()
        await fastPostgres.destroy()
        try outcome.get()
    }

    /// The phases, on the PostgreSQL servers with fsync on and off.
    private func measure(
        _ durablePostgres: PostgresTestServer, _ fastPostgres: PostgresTestServer, in scratch: ScratchDirectory
    ) async throws {
        if sharingOnly {
            try await measureSharing(on: durablePostgres, scratch: scratch)
            printLoadAtEnd()
            return
        }
        emit(
            "  PostgreSQL: \(durablePostgres.directory.path) (fsync on) and \(fastPostgres.directory.path) (fsync off)")
        emit()

        // 1 and 2: commit and fetch, per store.
        var rows: [[String]] = [
            ["store", "commit s", "commit records/s", "fetch s", "fetch records/s", "vs LMDB (commit, fetch)"]
        ]
        let stores: [(String, () async throws -> any ServerStorage)] = [
            (
                "LMDB .durable",
                { try LMDBStorage(directory: scratch.subdirectory("lmdb-durable"), durability: .durable) }
            ),
            ("PostgreSQL, fsync on", { try await self.postgresStorage(on: durablePostgres) }),
            ("LMDB .fast", { try LMDBStorage(directory: scratch.subdirectory("lmdb-fast"), durability: .fast) }),
            ("PostgreSQL, fsync off", { try await self.postgresStorage(on: fastPostgres) }),
        ]
        var lmdb: (commit: Double, fetch: Double) = (0, 0)
        var statementReports: [String] = []
        for (index, (name, make)) in stores.enumerated() {
            emit("  \(name): commit and fetch…")
            let storage = try await make()
            let server = try SyncServer(
                SyncServer.Configuration(directory: scratch.subdirectory("unused")), storage: storage)
            let postgres = index == 1 ? durablePostgres : index == 3 ? fastPostgres : nil
            let counted = statements ? postgres : nil
            let (commit, fetch) = try await commitAndFetch(server) {
                if let counted { _ = try await counted.psql("SELECT pg_stat_statements_reset()") }
            } afterCommit: {
                if let counted {
                    statementReports.append(
                        "\(name), statements of the commit phase:\n" + (try await statementReport(counted)))
                }
            }
            server.shutdown()
            let perSecond = (Double(recordCount) / commit, Double(recordCount) / fetch)
            if index.isMultiple(of: 2) { lmdb = perSecond }
            rows.append([
                name, String(format: "%.2f", commit), grouped(Int(perSecond.0)), String(format: "%.2f", fetch),
                grouped(Int(perSecond.1)),
                index.isMultiple(of: 2)
                    ? "" : "\(ratio(perSecond.0 / lmdb.commit)), \(ratio(perSecond.1 / lmdb.fetch))",
            ])
        }
        emit()
        emit(table(rows))
        emit()
        for report in statementReports {
            emit(report)
            emit()
        }
        if commitOnly {
            printLoadAtEnd()
            return
        }

        // 3: one node against two, PostgreSQL with fsync on.
        var nodeRows: [[String]] = [
            ["nodes", "seconds", "records/s", "save p50", "save p99", "fetch p99", "2 nodes / 1"]
        ]
        var one = 0.0
        for nodes in [1, 2] {
            emit("  \(nodes) node\(nodes == 1 ? "" : "s"), \(deviceCount) devices…")
            let result = try await nodesRun(nodes: nodes, on: durablePostgres, scratch: scratch)
            let perSecond = Double(deviceCount * roundCount * 10) / result.seconds
            if nodes == 1 { one = perSecond }
            nodeRows.append([
                "\(nodes)", String(format: "%.2f", result.seconds), grouped(Int(perSecond)), ms(result.saves.median),
                ms(result.saves.p99),
                ms(result.fetches.p99), nodes == 1 ? "" : ratio(perSecond / one),
            ])
        }
        emit()
        emit(table(nodeRows))
        emit()

        // 4: sharing's lock, per participant against whole storage.
        try await measureSharing(on: durablePostgres, scratch: scratch)
        printLoadAtEnd()
    }

    /// A PostgreSQL store on a new database of `server`.
    func postgresStorage(on server: PostgresTestServer) async throws -> PostgresStorage {
        let url = try await server.createDatabase()
        return try PostgresStorage(url: url, connections: 16, logger: Self.quiet)
    }

    /// The statements of the commit phase, from `pg_stat_statements`, most time first: calls per
    /// commit request, rows, and milliseconds in PostgreSQL (planning and execution).
    func statementReport(_ server: PostgresTestServer) async throws -> String {
        let requests = Double((recordCount + 399) / 400)
        let output = try await server.psql(
            """
            SELECT calls, rows, round((total_plan_time + total_exec_time)::numeric, 1),
                   regexp_replace(left(query, 110), '\\s+', ' ', 'g')
            FROM pg_stat_statements WHERE dbid <> (SELECT oid FROM pg_database WHERE datname = current_database())
            ORDER BY total_plan_time + total_exec_time DESC
            """)
        var rows: [[String]] = [["per request", "rows", "ms", "statement"]]
        var calls = 0.0
        var milliseconds = 0.0
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: "|", maxSplits: 3).map(String.init)
            guard fields.count == 4, let count = Double(fields[0]), let time = Double(fields[2]) else { continue }
            calls += count
            milliseconds += time
            rows.append([String(format: "%.2f", count / requests), fields[1], fields[2], fields[3]])
        }
        rows.insert(
            ["\(String(format: "%.2f", calls / requests))", "", String(format: "%.1f", milliseconds), "(all)"], at: 1)
        return table(rows)
    }

    /// Seconds to commit `recordCount` records in requests of 400, and to fetch them all;
    /// `beforeCommit` and `afterCommit` run just before and after the commits, outside the
    /// measured times.
    func commitAndFetch(
        _ server: SyncServer, beforeCommit: () async throws -> Void = {}, afterCommit: () async throws -> Void = {}
    ) async throws -> (commit: Double, fetch: Double) {
        let database = server.database(for: "bench", device: "writer")
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: Self.zone)], deleting: [])
        try await beforeCommit()
        let started = ContinuousClock.now
        var saved = 0
        while saved < recordCount {
            let batch = (saved..<min(saved + 400, recordCount)).map { Self.record("r\($0)", size: 300) }
            let response = try await database.modifyRecords(saving: batch, deleting: [])
            guard response.saveResults.values.allSatisfy({ (try? $0.get()) != nil }) else {
                throw BenchError("a save failed")
            }
            saved += batch.count
        }
        let commit = seconds(since: started)
        try await afterCommit()
        let fetchStarted = ContinuousClock.now
        var fetched = 0
        var token: ZoneChangeToken? = nil
        while true {
            let page = try await server.database(for: "bench", device: "reader").fetchZoneChanges(
                zoneID: Self.zone, since: token)
            fetched += page.modifications.count
            token = page.changeToken
            if !page.moreComing { break }
        }
        guard fetched == recordCount else { throw BenchError("fetched \(fetched) records of \(recordCount)") }
        return (commit, seconds(since: fetchStarted))
    }

    /// A record of about `size` bytes of field data.
    static func record(_ name: String, size: Int, in zoneID: RecordZone.ID = zone) -> Record {
        var record = Record(recordType: "Item", recordID: Record.ID(recordName: name, zoneID: zoneID))
        record["title"] = .string(name)
        record["body"] = .string(String(repeating: "x", count: max(0, size - name.utf8.count - 16)))
        record["count"] = .int64(Int64(name.utf8.count))
        return record
    }

    /// Latencies collected by concurrent tasks.
    final class Collected: Sendable {
        private let state = Mutex<[Double]>([])
        func add(_ value: Double) { state.withLock { $0.append(value) } }
        var values: [Double] { state.withLock { $0 } }
    }

    struct NodesResult {
        var seconds: Double
        var saves: Samples
        var fetches: Samples
    }

    /// Every device saving its rounds at once through `nodes` HTTP servers on one database.
    func nodesRun(nodes: Int, on postgres: PostgresTestServer, scratch: ScratchDirectory) async throws -> NodesResult {
        let url = try await postgres.createDatabase()
        var servers: [(SyncServer, RunningHTTPSyncServer)] = []
        for index in 0..<nodes {
            let storage = try PostgresStorage(url: url, connections: 16, logger: Self.quiet)
            let server = try SyncServer(
                SyncServer.Configuration(directory: scratch.subdirectory("node\(index)")), storage: storage)
            let http = HTTPSyncServer(
                server: server, tokens: TokenStore(stored: storage.tokens!), configuration: .init(port: 0),
                logger: Self.quiet)
            servers.append((server, try await RunningHTTPSyncServer.start(http)))
        }
        defer {
            for (server, _) in servers { server.shutdown() }
        }
        // Users, their tokens (kept in the database: any node accepts them) and zones.
        var tokens: [String] = []
        for user in 0..<userCount {
            let token = TokenStore.generateToken()
            try servers[0].1.http.tokens.add(token: token, for: UserID(rawValue: "user\(user)"))
            tokens.append(token)
        }
        var clients: [HTTPSyncClient] = []
        for device in 0..<deviceCount {
            let node = servers[device % nodes].1
            clients.append(
                HTTPSyncClient(
                    .init(
                        serverURL: URL(string: "http://127.0.0.1:\(node.port)")!,
                        credentials: .token(tokens[device % userCount]),
                        device: DeviceID(rawValue: "device\(device)"))))
        }
        defer { for client in clients { client.close() } }
        for user in 0..<userCount {
            _ = try await clients[user].database(.private).modifyZones(
                saving: [RecordZone(zoneID: Self.zone)], deleting: [])
        }
        let saves = Collected()
        let fetches = Collected()
        let rounds = roundCount
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (device, client) in clients.enumerated() {
                group.addTask {
                    let database = client.database(.private)
                    for round in 0..<rounds {
                        let batch = (0..<10).map { Self.record("d\(device)r\(round)n\($0)", size: 300) }
                        let sent = ContinuousClock.now
                        let response = try await database.modifyRecords(saving: batch, deleting: [])
                        let elapsed = seconds(since: sent)
                        guard response.saveResults.values.allSatisfy({ (try? $0.get()) != nil }) else {
                            throw BenchError("device \(device): a save failed")
                        }
                        saves.add(elapsed)
                    }
                    let sent = ContinuousClock.now
                    var token: ZoneChangeToken? = nil
                    while true {
                        let page = try await database.fetchZoneChanges(zoneID: Self.zone, since: token)
                        token = page.changeToken
                        if !page.moreComing { break }
                    }
                    let elapsed = seconds(since: sent)
                    fetches.add(elapsed)
                }
            }
            try await group.waitForAll()
        }
        let total = seconds(since: started)
        for (_, running) in servers { try await running.stop() }
        return NodesResult(
            seconds: total, saves: Samples(values: saves.values), fetches: Samples(values: fetches.values))
    }
}
