// logsync-engine-bench: a device's SyncEngine against an in-process LogSync server, measured
// through the three things an app waits for at scale:
//
// 1. Initial sync: N records (≈300 B, 10 custom zones) seeded on the server, then a fresh device
//    engine runs `fetchChanges()` to the end, its delegate keeping every record in a dictionary.
// 2. Sending: N local edits (records ≈300 B in 10 zones), pending changes added in chunks as an
//    app adds them, sent with `sendChanges()`, the delegate building each batch with
//    `RecordZoneChangeBatch(pendingChanges:recordProvider:)` from the pending list.
// 3. Opening: device logs of 10,000 and 1,000,000 entries (a device's life: edits, sends,
//    fetches) built `.fast`; then `SyncEngine(configuration)` until the first
//    `state.pendingRecordZoneChanges` returns, in a fresh process per run. Opening reads the
//    projections, never replays the log: the longer log must open within 2× the shorter.
// 4. Sharing: N records seeded in one zone, shared whole with bob, who accepts; then the owner's
//    fresh engine on the private database and bob's fresh engine on the shared database each
//    fetch the zone to the end, alternately, a few runs: the ratio of their speeds (the
//    participant's records/s over the owner's) must be at least 0.8.
// 5. Support bundle: a 1,000,000-entry device log (built as in 3) exported as a redacted support
//    bundle, against copying its file, alternately: peak memory and the speed ratio.
//
// Each phase runs in a child process (this binary again, with `--phase`), so that each has its
// own peak memory (VmHWM). Device logs `.durable` and `.fast`; the server `.fast` (its own cost is
// measured by logsync-server-bench).
//
//   swift build -c release --product logsync-engine-bench --scratch-path .build-e
//   .build-e/release/logsync-engine-bench [--records N] [--chunk N] [--page N] [--only fetch|send|open]
//       [--durability durable,fast] [--open-sizes N,N] [--open-runs N] [--share-runs N] [--quick] [--dir PATH]
//       (--only share: the sharing comparison; --only instrumentation: metrics and tracing against neither;
//        --only bundle: a support bundle's export of a long device log against copying its file)
//
// See Docs/Performance.md ("Engine") for what is measured and the figures on the reference machine.
import ArgumentParser
import BenchSupport

@main
struct EngineBench: BenchCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-engine-bench",
        abstract:
            "A device's SyncEngine against an in-process LogSync server: initial sync, sending, opening, a shared zone's initial sync.",
        discussion: """
            Each phase runs in a child process of its own: this executable again, with --phase and the options \
            it needs (a --phase run can also be started alone, for example under perf). \
            Docs/Performance.md ("Engine") says what is measured and has the figures of the reference machine.
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var records: SyncedRecordsOption

    /// Pending changes added per `state.add(pendingRecordZoneChanges:)` call in the send phase.
    @Option(
        help: ArgumentHelp("Pending changes per state.add call in the send phase (default 100).", valueName: "N"),
        transform: count())
    var chunk = 100

    /// The server's page size (`maxChangesPerPage`): records per fetched page.
    @Option(
        help: ArgumentHelp("The server's page size, changes per fetched page (default 400).", valueName: "N"),
        transform: count())
    var page = 400

    @Option(
        name: .customLong("only"),
        help: ArgumentHelp(
            "Run only one phase: the fetch, the send, the edits, the open, the sharing, the instrumentation, the bundle or the decode floor.",
            valueName: "fetch|send|edits|open|share|instrumentation|bundle|decode"))
    var onlyPhase: Phase?

    @Option(
        help: ArgumentHelp(
            "Sharing: timed initial syncs of the shared zone per side, owner and participant alternately (default 3, 1 with --quick).",
            valueName: "N"),
        transform: count())
    var shareRuns: Int?

    @Option(
        name: .customLong("durability"),
        help: ArgumentHelp(
            "Device-log durabilities to measure in fetch and send, comma-separated (default durable,fast; the open phase always opens .durable).",
            valueName: "durable,fast"),
        transform: CommaList<DurabilityName>.parser)
    var durabilityList = CommaList([DurabilityName.durable, .fast])

    /// How the send phase's delegate builds its batches.
    enum BatchSource: String, ExpressibleByArgument, Codable {
        /// `RecordZoneChangeBatch(state:scope:recordProvider:)`: reads the pending list as far as the batch needs.
        case cursor
        /// CKSyncEngine's pattern: the whole `state.pendingRecordZoneChanges`, filtered, for every batch.
        case list
    }

    @Option(
        help: ArgumentHelp(
            "Send: batches built from a cursor over the pending list (RecordZoneChangeBatch(state:scope:recordProvider:), the default) "
                + "or from the whole list read for every batch (CKSyncEngine's pattern).",
            valueName: "cursor|list"))
    var batches = BatchSource.cursor

    /// Tasks adding edits at once in the edits phase.
    @Option(
        help: ArgumentHelp("Edits: tasks adding one pending change per call at once (default 64).", valueName: "N"),
        transform: count())
    var editTasks = 64

    @Option(
        help: ArgumentHelp(
            "Open: device-log lengths in entries, comma-separated (default 10000,1000000, 10000,100000 with --quick; "
                + "the ratio compares the last with the first).",
            valueName: "N,N"),
        transform: CommaList.parser(count(atLeast: OpenWorkload.minimumEntries)))
    var openSizes: CommaList<Int>?

    @Option(
        help: ArgumentHelp(
            "Open: timed opens per log, each in a fresh process (default 7, 3 with --quick).", valueName: "N"),
        transform: count())
    var openRuns: Int?

    @Option(
        help: ArgumentHelp(
            "Instrumentation: runs of each side, with metrics and tracing and with neither, alternately (default 3, 1 with --quick).",
            valueName: "N"),
        transform: count())
    var instrumentationRuns: Int?

    @Option(
        help: ArgumentHelp(
            "Support bundle: the device log's length in entries (default 1000000, 100000 with --quick).",
            valueName: "N"),
        transform: count(atLeast: OpenWorkload.minimumEntries))
    var bundleEntries: Int?

    @Option(
        help: ArgumentHelp(
            "Support bundle: exports and copies, alternately (default 3, 1 with --quick).", valueName: "N"),
        transform: count())
    var bundleRuns: Int?

    @Option(
        help: ArgumentHelp(
            "Decode floor: runs of each decoder, alternately; the best of each is kept (default 3, 1 with --quick).",
            valueName: "N"),
        transform: count())
    var decodeRuns: Int?

    // The child's options: the parent passes its own on, with these.
    @Option(help: .hidden) var phase: Phase?
    /// The child's server and engine record metrics and spans (`Instrumentation`).
    @Flag(help: .hidden) var instrumented = false
    @Option(name: .customLong("result"), help: .hidden) var resultPath: String?
    @Option(name: .customLong("phase-dir"), help: .hidden) var phaseDirectory: String?

    enum Phase: String, ExpressibleByArgument {
        case seed, fetch, floor, send, edits
        case editsFloor = "edits-floor"
        case build, open, share
        /// Sharing's children: the seeded and shared zone, the owner's and the participant's initial syncs.
        case shareSeed = "share-seed"
        case ownerFetch = "owner-fetch"
        case participantFetch = "participant-fetch"
        /// The cost of instrumentation (a parent phase), and its child of server commits alone.
        case instrumentation, commit
        /// The support-bundle export against copying the log's file (a parent phase), and its children.
        case bundle
        case bundleExport = "bundle-export"
        case bundleCopy = "bundle-copy"
        /// Records decoded from their bytes alone, both decoders (a parent phase, in process).
        case decode
    }

    /// Records per modify request when seeding the server (the server's limit, F151).
    static let seedRequestSize = RecordWorkload.requestSize

    func validate() throws {
        if let onlyPhase,
            ![.fetch, .send, .edits, .open, .share, .instrumentation, .bundle, .decode].contains(onlyPhase)
        {
            throw ValidationError(
                "--only: fetch, send, edits, open, share, instrumentation, bundle or decode, not \"\(onlyPhase.rawValue)\""
            )
        }
    }

    var recordCount: Int { records.total(common) }
    var phases: [Phase] {
        onlyPhase.map { [$0] } ?? [.decode, .fetch, .send, .edits, .open, .share, .instrumentation, .bundle]
    }
    var decodeRunCount: Int { decodeRuns ?? common.size(3, quick: 1) }
    var shareRunCount: Int { shareRuns ?? common.size(3, quick: 1) }
    var instrumentationRunCount: Int { instrumentationRuns ?? common.size(3, quick: 1) }
    var durabilities: [DurabilityName] { durabilityList.values }
    var openLengths: [Int] { openSizes?.values ?? (common.quick ? [10_000, 100_000] : [10_000, 1_000_000]) }
    var openRunCount: Int { openRuns ?? common.size(7, quick: 3) }
    var bundleLength: Int { bundleEntries ?? (common.quick ? 100_000 : 1_000_000) }
    var bundleRunCount: Int { bundleRuns ?? common.size(3, quick: 1) }

    /// A child measures its phase and reports to its parent; the parent runs the phases.
    func run() async throws {
        if let phase {
            try await Child.run(phase, self)
        } else {
            try await measureInScratch()
        }
    }

    func measure(in scratch: ScratchDirectory) throws { try Parent.run(self, scratch) }
}
