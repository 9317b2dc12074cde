import BenchSupport
import CLMDB
import Foundation
import LogStore

/// The measurements of one configuration, every variant, every repetition.
struct ResultRow {
    var configuration: Configuration
    /// Wall-clock seconds per variant, one per repetition.
    var samples: [Variant: [Double]] = [:]
    /// CPU seconds per variant, one per repetition.
    var cpuSamples: [Variant: [Double]] = [:]

    /// Entries per second of `variant` from its fastest run (wall-clock time; CPU time with
    /// `cpu`), or from its median run with `median`; `nil` if it was not run.
    ///
    /// The fastest run is what the table reports: on a shared machine the noise (other
    /// processes' CPU and disk use) only ever slows a run down, so the fastest of N is the best
    /// estimate of what the code costs. The durable runs make that plain: a commit took
    /// ~0.25 ms with the disk quiet and 3–4 ms while another process was flushing.
    func rate(_ variant: Variant, cpu: Bool = false, median: Bool = false) -> Double? {
        guard let times = (cpu ? cpuSamples : samples)[variant], !times.isEmpty else { return nil }
        let sorted = times.sorted()
        let time =
            !median
            ? sorted[0]
            : sorted.count % 2 == 1
                ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        return Double(configuration.entries) / time
    }

    /// `variant`'s rate over raw LMDB's.
    func ratio(_ variant: Variant, cpu: Bool = false, median: Bool = false) -> Double? {
        guard let value = rate(variant, cpu: cpu, median: median), let raw = rate(.raw, cpu: cpu, median: median)
        else { return nil }
        return value / raw
    }
}

/// The target checked on every run.
enum Target {
    static let payloadSize = 128
    static let transactionSize = 10_000
    static let durability = Durability.fast
    static let minimumRatio = 0.7
}

func targetLine(_ rows: [ResultRow]) -> String {
    let label =
        "target: LogStore/raw ≥ \(ratio(Target.minimumRatio)) at 128 B, 10,000 entries/txn, .fast, no projection"
    guard
        let row = rows.first(where: {
            $0.configuration.payloadSize == Target.payloadSize
                && $0.configuration.transactionSize == Target.transactionSize
                && $0.configuration.durability == Target.durability
        }),
        let value = row.ratio(.logstore)
    else { return "\(label): not run" }
    var notes: [String] = []
    if let median = row.ratio(.logstore, median: true) { notes.append("median runs \(ratio(median))") }
    if let cpu = row.ratio(.logstore, cpu: true) { notes.append("by CPU time \(ratio(cpu))") }
    let info = notes.isEmpty ? "" : " (for information: \(notes.joined(separator: ", ")))"
    return "\(label): \(ratio(value)) \(value >= Target.minimumRatio ? "PASS" : "FAIL")\(info)"
}

func printHeader(_ options: LogStoreBench, scratch: ScratchDirectory) {
    BenchSupport.printHeader(
        "logstore-bench — LogStore append throughput against raw LMDB (same run, same workload)",
        software: String(cString: mdb_version(nil, nil, nil)), scratch: scratch)
    emit(
        "  entries per configuration: \(grouped(options.entryCount)) (transactions of 1 entry: \(grouped(options.entryCount(transactionSize: 1))))"
    )
    let maps = options.payloadSizes.values.map {
        "\($0) B → \(presizedMapSize(entries: options.entryCount, payloadSize: $0) >> 20) MiB"
    }
    emit("  map presized for raw and LogStore alike (no growth is measured): \(maps.joined(separator: ", "))")
    emit(
        "  payload: KeyValueEntry.set over \(grouped(Workload.keyCount)) keys; LogStore adds a 20-byte envelope (CRC-32C)"
    )
    emit("  repetitions: \(options.repeats), variants interleaved, the fastest run reported")
    emit("")
}

func progressLine(
    _ configuration: Configuration, _ variant: Variant, _ repetition: Int, _ measurement: Measurement
) -> String {
    let name: String
    switch variant {
    case .raw: name = "raw"
    case .logstore: name = "LogStore"
    case .projection: name = "LogStore+projection"
    }
    return
        "  \(configuration.durability == .fast ? "fast   " : "durable") \(pad(sizeLabel(configuration.payloadSize), 6, left: true)) "
        + "\(pad(grouped(configuration.transactionSize), 6, left: true))/txn  \(pad(name, 20)) #\(repetition): "
        + "\(pad(grouped(Int(measurement.entriesPerSecond.rounded())), 11, left: true)) entries/s "
        + "(\(grouped(measurement.entries)) in \(String(format: "%.3f", measurement.seconds)) s, "
        + "CPU \(String(format: "%.3f", measurement.cpuSeconds)) s)"
}

/// The aligned result table.
func table(_ rows: [ResultRow]) -> String {
    let header = [
        "payload", "txn size", "durability", "entries", "raw e/s", "LogStore e/s", "+projection e/s",
        "LogStore/raw", "+projection/raw",
    ]
    var cells: [[String]] = [header]
    for row in rows {
        let c = row.configuration
        cells.append([
            sizeLabel(c.payloadSize), grouped(c.transactionSize), c.durability == .fast ? ".fast" : ".durable",
            grouped(c.entries),
            row.rate(.raw).map { grouped(Int($0.rounded())) } ?? "–",
            row.rate(.logstore).map { grouped(Int($0.rounded())) } ?? "–",
            row.rate(.projection).map { grouped(Int($0.rounded())) } ?? "–",
            row.ratio(.logstore).map(ratio) ?? "–",
            row.ratio(.projection).map(ratio) ?? "–",
        ])
    }
    return BenchSupport.table(cells, leftAligned: [2])
}

func sizeLabel(_ bytes: Int) -> String {
    bytes % 1024 == 0 ? "\(bytes / 1024) KiB" : "\(bytes) B"
}
