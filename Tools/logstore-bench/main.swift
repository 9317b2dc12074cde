// logstore-bench: append throughput of LogStore against the raw LMDB C API, in the same run.
//
//   swift run -c release --scratch-path .build-bench logstore-bench [--quick] [--only fast|durable]
//
// See Docs/Performance.md for what is measured and the figures on the reference machine.
import CLMDB
import Foundation
import LogStore

let options: BenchOptions
do {
    options = try BenchOptions.parse(CommandLine.arguments)
} catch {
    FileHandle.standardError.write(Data("logstore-bench: \(error)\n".utf8))
    exit(2)
}

let scratch: ScratchDirectory
do {
    scratch = try ScratchDirectory(options.directory)
} catch {
    FileHandle.standardError.write(Data("logstore-bench: cannot create the scratch directory: \(error)\n".utf8))
    exit(2)
}

printHeader(options, scratch: scratch)

var rows: [ResultRow] = []
do {
    for durability in options.durabilities {
        for payloadSize in options.payloadSizes {
            let workload = Workload(payloadSize: payloadSize)
            let mapSize = presizedMapSize(entries: options.entries, payloadSize: payloadSize)
            for transactionSize in options.transactionSizes {
                let configuration = Configuration(
                    payloadSize: payloadSize, transactionSize: transactionSize, durability: durability,
                    entries: options.entryCount(transactionSize: transactionSize), mapSize: mapSize)
                var row = ResultRow(configuration: configuration)
                for repetition in 1...options.repeats {
                    // Rotate the order each repetition so a warm-up effect (the first large file
                    // of a run, say) does not always fall on the same variant.
                    let shift = (repetition - 1) % options.variants.count
                    for variant in options.variants[shift...] + options.variants[..<shift] {
                        let directory = scratch.runDirectory()
                        let measurement: Measurement
                        do {
                            defer { scratch.remove(directory) }  // the disk must not fill up
                            switch variant {
                            case .raw:
                                measurement = try runRaw(configuration, workload: workload, in: directory)
                            case .logstore:
                                measurement = try runLogStore(configuration, projection: false, workload: workload, in: directory)
                            case .projection:
                                measurement = try runLogStore(configuration, projection: true, workload: workload, in: directory)
                            }
                        }
                        row.samples[variant, default: []].append(measurement.seconds)
                        row.cpuSamples[variant, default: []].append(measurement.cpuSeconds)
                        emit(progressLine(configuration, variant, repetition, measurement))
                    }
                }
                rows.append(row)
            }
        }
    }
} catch {
    emit("logstore-bench: \(error)")
    scratch.finish()
    exit(1)
}

emit("")
emit(table(rows))
emit("")
emit(targetLine(rows))
scratch.finish()
