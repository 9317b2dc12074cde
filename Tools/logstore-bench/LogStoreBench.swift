// logstore-bench: append throughput of LogStore against the raw LMDB C API, in the same run.
//
//   swift run -c release --scratch-path .build-bench logstore-bench [--quick] [--only fast|durable]
//
// See Docs/Performance.md for what is measured and the figures on the reference machine.
import ArgumentParser
import BenchSupport
import CLMDB
import Foundation
import LogStore

@main
struct LogStoreBench: BenchCommand {
    static let configuration = CommandConfiguration(
        commandName: "logstore-bench",
        abstract: "Append throughput of LogStore against the raw LMDB C API, in the same run.",
        discussion: "Docs/Performance.md says what is measured and has the figures of the reference machine.")

    @OptionGroup var common: CommonOptions

    @Option(
        help: ArgumentHelp(
            "Entries appended per configuration (default 1,000,000, 100,000 with --quick; transactions of one entry append at most 10,000).",
            valueName: "N"),
        transform: count())
    var entries: Int?

    @Option(help: ArgumentHelp("Run only the .fast or only the .durable configurations.", valueName: "fast|durable"))
    var only: DurabilityName?

    @Option(
        name: .customLong("payload"),
        help: ArgumentHelp("Payload sizes in bytes, comma-separated (default 128,1024).", valueName: "N,N…"),
        transform: CommaList.parser(count()))
    var payloadSizes = CommaList([128, 1024])

    @Option(
        name: .customLong("txn"),
        help: ArgumentHelp("Entries per transaction, comma-separated (default 1,100,10000).", valueName: "N,N…"),
        transform: CommaList.parser(count()))
    var transactionSizes = CommaList([1, 100, 10_000])

    @Option(
        name: .customLong("variant"),
        help: ArgumentHelp(
            "Which paths to run, comma-separated (default all three); for profiling.",
            valueName: "raw|logstore|projection"),
        transform: CommaList<Variant>.parser)
    var variants = CommaList(Variant.allCases)

    /// How many times each measurement is repeated, the variants interleaved; the fastest run
    /// is reported. Three by default: single runs on a shared 2-core machine are too noisy.
    @Option(
        name: .customLong("repeat"),
        help: ArgumentHelp(
            "Repeat each measurement N times, the variants interleaved, and report the fastest run (default 3).",
            valueName: "N"),
        transform: count())
    var repeats = 3

    /// Transactions of one entry are limited to this many entries (one commit each).
    static let singleEntryCap = 10_000

    func validate() throws {
        for size in payloadSizes.values where size < Workload.keyBytes + 2 {
            throw ValidationError(
                "--payload: \(size) bytes cannot hold a KeyValueEntry.set with a \(Workload.keyBytes)-byte key")
        }
    }

    /// Entries per configuration (transactions of 1 entry use `min(singleEntryCap, entries)`).
    var entryCount: Int { entries ?? common.size(1_000_000, quick: 100_000) }

    var durabilities: [Durability] { only.map { [$0.durability] } ?? [.fast, .durable] }

    /// The entries appended with transactions of `transactionSize`.
    func entryCount(transactionSize: Int) -> Int {
        transactionSize == 1 ? min(Self.singleEntryCap, entryCount) : entryCount
    }

    func measure(in scratch: ScratchDirectory) throws {
        printHeader(self, scratch: scratch)
        var rows: [ResultRow] = []
        for durability in durabilities {
            for payloadSize in payloadSizes.values {
                let workload = Workload(payloadSize: payloadSize)
                let mapSize = presizedMapSize(entries: entryCount, payloadSize: payloadSize)
                for transactionSize in transactionSizes.values {
                    let configuration = Configuration(
                        payloadSize: payloadSize, transactionSize: transactionSize, durability: durability,
                        entries: entryCount(transactionSize: transactionSize), mapSize: mapSize)
                    rows.append(try measure(configuration, workload, scratch))
                }
            }
        }
        emit("")
        emit(table(rows))
        emit("")
        emit(targetLine(rows))
    }

    /// Every variant of one configuration, `repeats` times.
    func measure(_ configuration: Configuration, _ workload: Workload, _ scratch: ScratchDirectory) throws -> ResultRow
    {
        var row = ResultRow(configuration: configuration)
        let variants = variants.values
        for repetition in 1...repeats {
            // Rotate the order each repetition so a warm-up effect (the first large file of a
            // run, say) does not always fall on the same variant.
            let shift = (repetition - 1) % variants.count
            for variant in variants[shift...] + variants[..<shift] {
                let directory = scratch.runDirectory()
                defer { scratch.remove(directory) }  // the disk must not fill up
                let measurement: Measurement
                switch variant {
                case .raw: measurement = try runRaw(configuration, workload: workload, in: directory)
                case .logstore:
                    measurement = try runLogStore(configuration, projection: false, workload: workload, in: directory)
                case .projection:
                    measurement = try runLogStore(configuration, projection: true, workload: workload, in: directory)
                }
                row.samples[variant, default: []].append(measurement.seconds)
                row.cpuSamples[variant, default: []].append(measurement.cpuSeconds)
                emit(progressLine(configuration, variant, repetition, measurement))
            }
        }
        return row
    }
}

/// The three paths measured.
enum Variant: String, CaseIterable, ExpressibleByArgument {
    /// The LMDB C API directly: the ceiling.
    case raw
    /// `Log.append` with no projection.
    case logstore
    /// `Log.append` with `LatestValueProjection`.
    case projection
}
