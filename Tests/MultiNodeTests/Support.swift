import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncPostgres
import Logging
import PostgresNIO
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// A failure of a multi-node test's own machinery (a node that did not start, a wait that
/// timed out), with what was expected in words.
struct MultiNodeTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One `logsync-server serve --store postgres://…` process and the URL it serves on.
struct Node: Sendable {
    /// The node's name in the test's timeline: `node1`, `node2`.
    let name: String
    let process: ChildProcess
    let url: URL
}

/// The server processes and HTTP clients of one test, all on one PostgreSQL database: started
/// through it, and stopped by ``with(store:_:)`` when the test ends, failed or not.
final class Cluster: Sendable {
    /// The database every node shares: `postgres://postgres@127.0.0.1:PORT/NAME`.
    let store: String
    /// The test's own directory: each node runs in a subdirectory of it.
    let directory: URL
    private let started = Mutex<(processes: [ChildProcess], clients: [HTTPSyncClient])>(([], []))

    private init(store: String, directory: URL) {
        self.store = store
        self.directory = directory
    }

    /// Runs `body` with a cluster on the database `store` in a temporary directory; then closes
    /// every client and kills every node still running, whether `body` threw or not.
    static func with<R>(store: String, _ body: (Cluster) async throws -> R) async throws -> R {
        try await withTemporaryDirectory { directory in
            let cluster = Cluster(store: store, directory: directory)
            do {
                let result = try await body(cluster)
                await cluster.stopAll()
                return result
            } catch {
                await cluster.stopAll()
                throw error
            }
        }
    }

    /// `logsync-server user add NAME --email NAME@example.com --store …`: the user's bearer
    /// token, which every node sharing the database accepts.
    func addUser(_ name: String) async throws -> String {
        let added = try await ChildProcess.run(
            ["user", "add", name, "--email", "\(name)@example.com", "--store", store], directory: directory)
        guard added.status == 0 else { throw MultiNodeTestError("user add \(name) failed: \(added)") }
        let token = added.output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.hasPrefix("lsk_"), !token.contains(where: \.isWhitespace) else {
            throw MultiNodeTestError("user add \(name) printed no token: \(added)")
        }
        return token
    }

    /// Starts `logsync-server serve --store … --port 0 --connections N` (and `options`, such as
    /// `--identity-config FILE`) in its own directory and waits until it listens.
    func startNode(_ name: String, connections: Int = 4, options: [String] = []) async throws -> Node {
        let nodeDirectory = directory.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: nodeDirectory, withIntermediateDirectories: true)
        let process = try ChildProcess.start(
            ["serve", "--store", store, "--port", "0", "--connections", "\(connections)"] + options,
            directory: nodeDirectory)
        // Registered before the wait, so that a node which never listens is killed too.
        started.withLock { $0.processes.append(process) }
        let port = try await process.waitForPort()
        return Node(name: name, process: process, url: URL(string: "http://127.0.0.1:\(port)")!)
    }

    /// A client of the user of `token` on `device`, talking to `node`; closed when the test ends.
    /// Its push channel reconnects within a fifth of a second.
    func client(on node: Node, token: String, device: DeviceID) -> HTTPSyncClient {
        let client = HTTPSyncClient(
            .init(
                serverURL: node.url, credentials: .token(token), device: device, requestTimeout: .seconds(30),
                reconnect: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200))))
        started.withLock { $0.clients.append(client) }
        return client
    }

    /// Closes every client, kills every node (SIGKILL: what they hold is in PostgreSQL) and
    /// waits for each to exit. With `MULTINODE_LOGS` set in the environment, prints each node's
    /// exit status and log, to see why a test failed.
    func stopAll() async {
        let (processes, clients) = started.withLock { state in
            defer { state = ([], []) }
            return (state.processes, state.clients)
        }
        for client in clients { client.close() }
        for process in processes { process.send(SIGKILL) }
        for process in processes {
            let finished = await process.finish()
            if ProcessInfo.processInfo.environment["MULTINODE_LOGS"] != nil {
                print("node \(process.pid) exit \(finished.status):\n\(finished.errorOutput.prefix(12000))")
            }
        }
    }
}

/// A value several tasks share, behind a lock.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    /// The value now.
    var value: Value { mutex.withLock { $0 } }

    /// Changes the value under the lock.
    func change(_ body: (inout Value) -> Void) { mutex.withLock { body(&$0) } }
}

/// The push hints a client's stream delivers, kept as they arrive, for tests to wait on.
final class PushRecorder: Sendable {
    private let received = Mutex<[PushHint]>([])

    /// The hints received so far, oldest first.
    var hints: [PushHint] { received.withLock { $0 } }

    /// Starts keeping the hints of `stream` (until it ends, when its client closes).
    func record(_ stream: AsyncStream<PushHint>) {
        Task { for await hint in stream { self.received.withLock { $0.append(hint) } } }
    }
}

/// Checks `condition` every 20 ms until it holds.
///
/// - Throws: ``MultiNodeTestError`` naming `what` when `limit` passes first; what `condition` throws.
func waitUntil(_ what: String, limit: Duration = .seconds(60), _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            throw MultiNodeTestError("timed out after \(limit) waiting until \(what)")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// Every change of `zone` from the start, page by page: the records by name, and the last token.
func fetchAll(
    _ database: HTTPCloudDatabase, zone: RecordZone.ID
) async throws -> (records: [String: Record], token: ZoneChangeToken) {
    var records: [String: Record] = [:]
    var token: ZoneChangeToken?
    while true {
        let page = try await database.fetchZoneChanges(zoneID: zone, since: token)
        for modification in page.modifications {
            records[modification.record.recordID.recordName] = modification.record
        }
        for deletion in page.deletions { records[deletion.recordID.recordName] = nil }
        token = page.changeToken
        if !page.moreComing { return (records, page.changeToken) }
    }
}

/// One server log as PostgreSQL holds it: its recorded end, and how many entries it has between
/// which offsets.
struct LogExtent: Sendable, CustomStringConvertible {
    var name: String
    var lastOffset: Int64
    var entries: Int64
    var first: Int64
    var last: Int64

    /// Whether the entries are exactly the offsets up to the recorded end, with no gap.
    var isDense: Bool { entries == 0 ? lastOffset == 0 : last == lastOffset && last - first + 1 == entries }

    var description: String { "\(name): \(entries) entries at \(first)…\(last), last_offset \(lastOffset)" }
}

/// Every log in the database at `url`, read directly with SQL.
func logExtents(_ url: String) throws -> [LogExtent] {
    var logger = Logger(label: "MultiNodeTests")
    logger.logLevel = .critical
    let pool = PostgresPool(url: try PostgresURL(url), size: 1, logger: logger)
    defer { pool.shutdown() }
    return try pool.withSession { session in
        try session.query(
            """
            SELECT l.name, l.last_offset, count(e."offset"), coalesce(min(e."offset"), 0), coalesce(max(e."offset"), 0)
            FROM logsync_logs l LEFT JOIN logsync_entries e ON e.log_id = l.log_id
            GROUP BY l.log_id, l.name, l.last_offset ORDER BY l.name
            """
        )
        .map { row in
            let (name, lastOffset, entries, first, last) = try row.decode((String, Int64, Int64, Int64, Int64).self)
            return LogExtent(name: name, lastOffset: lastOffset, entries: entries, first: first, last: last)
        }
    }
}
