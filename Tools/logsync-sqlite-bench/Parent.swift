import BenchSupport
import Foundation

/// Runs the children, alternately, and prints the comparisons.
enum Parent {
    static func run(_ options: SQLiteBench, _ scratch: ScratchDirectory) throws {
        printHeader(
            "logsync-sqlite-bench: a synced SQLite store against GRDB alone and against a plain engine "
                + "(\(options.runCount) runs of each side, alternately; medians; journal mode \(options.journal.rawValue))",
            scratch: scratch)
        var verdicts: [String] = []
        for phase in options.phases {
            switch phase {
            case .fetch: verdicts += try fetch(options, scratch)
            case .send: verdicts += try send(options, scratch)
            default: break
            }
        }
        emit()
        for verdict in verdicts { emit(verdict) }
        printLoadAtEnd()
    }

    /// The options a child needs, with its phase.
    static func child(
        _ phase: SQLiteBench.Phase, _ options: SQLiteBench, _ scratch: ScratchDirectory
    ) throws -> PhaseResult {
        let arguments = [
            "--phase", phase.rawValue, "--phase-dir", scratch.url.path, "--records", String(options.recordCount),
            "--edits", String(options.editCount), "--page", String(options.page), "--journal",
            options.journal.rawValue,
        ]
        return try ChildProcess.run(
            arguments, resultFile: scratch.subdirectory("result-\(phase.rawValue).json"), what: phase.rawValue)
    }

    static func median(_ results: [PhaseResult], _ value: (PhaseResult) -> Double) -> Double {
        Samples(values: results.map(value)).median
    }

    static func rate(_ count: Int, _ seconds: Double) -> String { grouped(Int(Double(count) / seconds)) }

    // MARK: Initial sync

    static func fetch(_ options: SQLiteBench, _ scratch: ScratchDirectory) throws -> [String] {
        let rows = options.recordCount
        emit()
        emit("Initial sync of \(grouped(rows)) rows (server pages of \(options.page)) against inserting them with GRDB")
        let seed = try child(.seed, options, scratch)
        emit("  seeded in \(String(format: "%.1f", seed.seedSeconds)) s; load average \(loadAverage())")
        var store: [PhaseResult] = []
        var floor: [PhaseResult] = []
        var engine: [PhaseResult] = []
        for run in 1...options.runCount {
            store.append(try child(.storeFetch, options, scratch))
            floor.append(try child(.grdbInsert, options, scratch))
            engine.append(try child(.engineFetch, options, scratch))
            emit(
                "  run \(run): store \(String(format: "%.2f", store[run - 1].seconds)) s, "
                    + "GRDB \(String(format: "%.3f", floor[run - 1].seconds)) s, "
                    + "engine alone \(String(format: "%.2f", engine[run - 1].seconds)) s; load average \(loadAverage())"
            )
        }
        let engineSeconds = median(engine, \.seconds)
        let storeSeconds = median(store, \.seconds)
        let floorSeconds = median(floor, \.seconds)
        let growth = store.map { $0.peakAnon - $0.anonBefore }
        let peakGrowth = Samples(values: growth.map(Double.init)).median
        emit(
            table([
                ["", "wall (median)", "rows/s", "CPU", "peak RssAnon above start", "VmHWM", "SQLite file"],
                [
                    "store.fetchChanges()", String(format: "%.2f s", storeSeconds), rate(rows, storeSeconds),
                    String(format: "%.2f s", median(store, \.cpuSeconds)), "\(mib(Int(peakGrowth))) MiB",
                    "\(mib(Int(median(store) { Double($0.hwm) }))) MiB",
                    "\(String(format: "%.1f", median(store) { Double($0.sqliteBytes) } / 1_048_576)) MiB",
                ],
                [
                    "GRDB insert, one transaction", String(format: "%.3f s", floorSeconds), rate(rows, floorSeconds),
                    String(format: "%.3f s", median(floor, \.cpuSeconds)),
                    "\(mib(Int(median(floor) { Double($0.peakAnon - $0.anonBefore) }))) MiB",
                    "\(mib(Int(median(floor) { Double($0.hwm) }))) MiB",
                    "\(String(format: "%.1f", median(floor) { Double($0.sqliteBytes) } / 1_048_576)) MiB",
                ],
                [
                    "engine alone (records counted)", String(format: "%.2f s", engineSeconds),
                    rate(rows, engineSeconds), String(format: "%.2f s", median(engine, \.cpuSeconds)),
                    "\(mib(Int(median(engine) { Double($0.peakAnon - $0.anonBefore) }))) MiB",
                    "\(mib(Int(median(engine) { Double($0.hwm) }))) MiB", "-",
                ],
            ]))
        emit(
            "  the store's time beyond the engine's: \(String(format: "%.2f s", storeSeconds - engineSeconds)) "
                + "(\(rate(rows, storeSeconds - engineSeconds)) rows/s applied); engine alone/floor \(ratio(floorSeconds / engineSeconds))"
        )
        if let last = store.last {
            emit(
                "  pages applied: \(last.pages); device log \(String(format: "%.1f", Double(last.deviceLogBytes) / 1_048_576)) MiB"
            )
            emit(
                "  RssAnon above start at each tenth of the rows (last run): "
                    + last.curve.map { "\(grouped($0[0])): \(mib($0[1] - last.anonBefore))" }.joined(separator: ", "))
        }
        let speed = floorSeconds / storeSeconds
        let peakMiB = peakGrowth / 1024
        return [
            "initial sync: store/floor \(ratio(speed)) (target ≥ 0.5: \(speed >= 0.5 ? "met" : "NOT met"))",
            "initial sync memory: peak RssAnon \(String(format: "%.1f", peakMiB)) MiB above the start "
                + "(target ≤ 64 MiB: \(peakMiB <= 64 ? "met" : "NOT met"))",
        ]
    }

    // MARK: Sending

    static func send(_ options: SQLiteBench, _ scratch: ScratchDirectory) throws -> [String] {
        let edits = options.editCount
        emit()
        emit(
            "\(grouped(edits)) local edits sent: the store (one SQLite transaction, hand-off, send) against a plain engine"
        )
        var store: [PhaseResult] = []
        var engine: [PhaseResult] = []
        for run in 1...options.runCount {
            store.append(try child(.storeSend, options, scratch))
            engine.append(try child(.engineSend, options, scratch))
            emit(
                "  run \(run): store \(String(format: "%.2f", store[run - 1].seconds)) s, "
                    + "engine \(String(format: "%.2f", engine[run - 1].seconds)) s; load average \(loadAverage())")
        }
        let storeSeconds = median(store, \.seconds)
        let engineSeconds = median(engine, \.seconds)
        emit(
            table([
                ["", "wall (median)", "records/s", "CPU", "of which state.add", "peak RssAnon above start"],
                [
                    "store.sendChanges() (hand-off + send)", String(format: "%.2f s", storeSeconds),
                    rate(edits, storeSeconds), String(format: "%.2f s", median(store, \.cpuSeconds)), "-",
                    "\(mib(Int(median(store) { Double($0.peakAnon - $0.anonBefore) }))) MiB",
                ],
                [
                    "engine: state.add + sendChanges()", String(format: "%.2f s", engineSeconds),
                    rate(edits, engineSeconds), String(format: "%.2f s", median(engine, \.cpuSeconds)),
                    String(format: "%.3f s", median(engine, \.addSeconds)),
                    "\(mib(Int(median(engine) { Double($0.peakAnon - $0.anonBefore) }))) MiB",
                ],
            ]))
        emit(
            "  the app's transaction of the edits (not timed above): \(String(format: "%.3f s", median(store, \.transactionSeconds)))"
        )
        let speed = engineSeconds / storeSeconds
        return ["send: store/engine \(ratio(speed)) (target ≥ 0.5: \(speed >= 0.5 ? "met" : "NOT met"))"]
    }
}
