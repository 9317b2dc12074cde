// logsync-sqlite-bench: a synced SQLite store (LogSyncSQLite) measured against its floors, in
// one run, each side in a child process of its own (its own peak memory), alternately:
//
// 1. Initial sync: N rows (default 100,000; ≈300 B of fields each, 10 zones by a `zone` column)
//    held by the server (seeded once through the server's own modify API), fetched by a fresh
//    store into an empty SQLite file (`store.fetchChanges()`), against the floor: the same rows
//    inserted with GRDB alone (one cached prepared statement) in one transaction into the same
//    table. Target: the store's rows/s at least 0.5 of the floor's. A plain SyncEngine fetching
//    the same records (its delegate counting them) shows the engine's part of the store's time.
// 2. Memory: the initial sync's peak RssAnon (sampled every 10 ms) above RssAnon before it;
//    the rows are on disk, the store keeps none in memory. Target: at most 64 MiB, flat.
// 3. Sending: E local edits (default 10,000) inserted in one SQLite transaction, then handed off
//    and sent (`store.sendChanges()`: the hand-off, then the engine's send), against a plain
//    SyncEngine whose delegate holds the same records in a dictionary: the pending saves added
//    in one call, then `sendChanges()`. Target: the store's records/s at least 0.5 of the
//    engine's.
//
// Device logs `.durable` (the store's default), the server `.fast` (its cost is measured by
// logsync-server-bench), SQLite in write-ahead-log mode as `SyncedDatabase(path:)` opens it
// (synchronous FULL), or a rollback journal with `--journal delete` (the store's file and the
// floor's alike).
//
//   swift build -c release --product logsync-sqlite-bench --scratch-path .build-release
//   .build-release/release/logsync-sqlite-bench [--records N] [--edits N] [--runs N] [--only fetch|send]
//       [--journal wal|delete] [--quick]
//
// See Docs/Performance.md ("A synced SQLite store") for what is measured and the figures on the reference machine.
import ArgumentParser
import BenchSupport
import Foundation

@main
struct SQLiteBench: BenchCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-sqlite-bench",
        abstract:
            "A synced SQLite store: its initial sync against inserting the rows with GRDB alone, its send of local edits against a plain engine's, its memory.",
        discussion: """
            Each measurement runs in a child process of its own: this executable again, with --phase and the options \
            it needs (a --phase run can also be started alone, for example under perf).
            """)

    @OptionGroup var common: CommonOptions

    @Option(
        help: ArgumentHelp("Rows of the initial sync (default 100,000, 10,000 with --quick).", valueName: "N"),
        transform: count(atLeast: 10))
    var records: Int?

    @Option(
        help: ArgumentHelp("Local edits sent (default 10,000, 2,000 with --quick).", valueName: "N"),
        transform: count(atLeast: 10))
    var edits: Int?

    @Option(
        help: ArgumentHelp("Timed runs of each side, alternately (default 3, 1 with --quick).", valueName: "N"),
        transform: count())
    var runs: Int?

    /// The server's page size (`maxChangesPerPage`): records per fetched page.
    @Option(
        help: ArgumentHelp("The server's page size, changes per fetched page (default 400).", valueName: "N"),
        transform: count())
    var page = 400

    /// The SQLite file's journal mode, for the store's file and the floor's alike.
    enum Journal: String, ExpressibleByArgument, Codable {
        /// SQLite's default: a rollback journal (an app's own `DatabaseQueue` given to
        /// `SyncedDatabase(writer:…)`).
        case delete
        /// Write-ahead logging, which `SyncedDatabase(path:…)` opens (and GRDB's `DatabasePool`).
        case wal
    }

    @Option(
        help: ArgumentHelp(
            "The SQLite files' journal mode: wal (as SyncedDatabase(path:) opens them) or delete (SQLite's default); synchronous stays FULL.",
            valueName: "wal|delete"))
    var journal = Journal.wal

    @Option(
        name: .customLong("only"), help: ArgumentHelp("Run only the initial sync or the send.", valueName: "fetch|send")
    )
    var onlyPhase: Phase?

    // The child's options.
    @Option(help: .hidden) var phase: Phase?
    @Option(name: .customLong("result"), help: .hidden) var resultPath: String?
    @Option(name: .customLong("phase-dir"), help: .hidden) var phaseDirectory: String?

    enum Phase: String, ExpressibleByArgument {
        /// The parent's comparisons.
        case fetch, send
        /// The children: the server's rows, the store's initial sync, its floor; the store's send, the engine's.
        case seed
        case storeFetch = "store-fetch"
        case grdbInsert = "grdb-insert"
        case engineFetch = "engine-fetch"
        case storeSend = "store-send"
        case engineSend = "engine-send"
    }

    func validate() throws {
        if let onlyPhase, ![.fetch, .send].contains(onlyPhase) {
            throw ValidationError("--only: fetch or send, not \"\(onlyPhase.rawValue)\"")
        }
    }

    var recordCount: Int { records ?? common.size(100_000, quick: 10_000) }
    var editCount: Int { edits ?? common.size(10_000, quick: 2_000) }
    var runCount: Int { runs ?? common.size(3, quick: 1) }
    var phases: [Phase] { onlyPhase.map { [$0] } ?? [.fetch, .send] }

    func run() async throws {
        if let phase {
            try await Child.run(phase, self)
        } else {
            try await measureInScratch()
        }
    }

    func measure(in scratch: ScratchDirectory) throws { try Parent.run(self, scratch) }
}
