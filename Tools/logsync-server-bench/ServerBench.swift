// logsync-server-bench: a LogSync server holding many records in 100 zones. Measures commit
// throughput of 400-record modify requests, and the time and memory of fetching one zone's
// changes (and the database feed) since a recent token, on a small and a big database in the
// same run: that fetch must not grow with the database's size.
//
// It also lists a zone holding a parent chain as deep as the limit, shared with a participant,
// as the owner and as the participant (F123; `--hierarchy-only` measures that alone).
//
//   swift run -c release --scratch-path .build-bench2 logsync-server-bench [--records N] [--quick] [--dir PATH]
//       [--hierarchy-only]
//
// See Docs/Performance.md ("Server") for what is measured and the figures on the reference machine.
import ArgumentParser
import BenchSupport

@main
struct ServerBench: BenchCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-server-bench",
        abstract:
            "A LogSync server's commit throughput, and its fetches since a recent token against the database's size.",
        discussion:
            "Docs/Performance.md (\"Server\") says what is measured and has the figures of the reference machine.")

    @OptionGroup var common: CommonOptions

    @Option(
        help: ArgumentHelp(
            "Records in the big database (default 1,000,000, 100,000 with --quick; the small one has 10,000).",
            valueName: "N"),
        transform: count(atLeast: workload.zoneCount))
    var records: Int?

    @Flag(help: "Measure only the listing of a deep shared hierarchy (F123), not the loads and fetches.")
    var hierarchyOnly = false

    /// Records in the big database.
    var bigRecords: Int { records ?? common.size(1_000_000, quick: 100_000) }
    /// Records in the small database the big one is compared with.
    var smallRecords: Int { 10_000 }
    /// Records loaded with `.durable` commits for the durable throughput figure.
    var durableRecords: Int { 20_000 }

    /// Records saved into the fetched zone after the recent token was taken.
    static let recentChanges = 100
    /// Timed repetitions of each fetch per database (two passes of half, databases alternating).
    static let repetitions = 200
    /// Untimed fetches before each timed pass.
    static let warmup = 20
    /// The target: fetch time since a recent token, big database over small, at most this.
    static let maximumRatio = 2.0
}
