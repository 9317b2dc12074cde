import Foundation
import SyncModel

/// Runs each phase in a child process (this binary with `--phase`), collects what the children
/// report and prints the tables.
enum Parent {
    static func main(_ arguments: [String]) {
        let options: BenchOptions
        do {
            options = try BenchOptions.parse(arguments)
        } catch {
            FileHandle.standardError.write(Data("logsync-engine-bench: \(error)\n".utf8))
            exit(2)
        }
        let scratch: ScratchDirectory
        do {
            scratch = try ScratchDirectory(options.directory)
        } catch {
            FileHandle.standardError.write(Data("logsync-engine-bench: cannot create the scratch directory: \(error)\n".utf8))
            exit(2)
        }
        do {
            try run(options, scratch)
        } catch {
            emit("logsync-engine-bench: \(error)")
            scratch.finish()
            exit(1)
        }
        scratch.finish()
    }

    static func run(_ options: BenchOptions, _ scratch: ScratchDirectory) throws {
        emit("logsync-engine-bench — SyncEngine against an in-process LogSync server: initial sync and sending")
        emit("  \(ProcessInfo.processInfo.activeProcessorCount) cores; \(cpuModel()); load average at start: \(loadAverage()); scratch: \(scratch.url.path)")
        emit("  records: \(grouped(options.records)), \(Workload.recordSize) B of field data each (3 strings, 2 integers), type "
            + "\(Workload.recordType), round-robin over \(BenchOptions.zones) custom zones")
        emit("  device log: DeviceLog(directory:options:), durability \(options.durabilities.map { "." + $0 }.joined(separator: " and ")), "
            + "initial map 64 MiB (LogEnvironment default; doubles when full); one engine per phase, automaticallySync false")
        emit("  server: SyncServer in process, durability .fast, page size (maxChangesPerPage) \(options.page) changes, "
            + "at most 4 MB per page; engine fetchResultsLimit nil (the server's page)")
        emit("  fetch: server seeded with modifyRecords requests of \(BenchOptions.seedRequestSize) new records (another device, no engine); "
            + "a fresh device runs fetchChanges() to the end, its delegate keeping every record in a [Record.ID: Record]")
        emit("  send: \(grouped(options.records)) records created in the app's [Record.ID: Record], pending saves added with "
            + "state.add in chunks of \(options.chunk), then sendChanges(); batches from RecordZoneChangeBatch(pendingChanges:recordProvider:) "
            + "over state.pendingRecordZoneChanges: at most \(Limits.maxItemsPerRequest) records or \(grouped(Limits.maxRequestBytes)) B per batch")
        emit("  each phase in a child process of its own (peak memory per phase)")
        emit("")

        var results: [PhaseResult] = []
        if options.phases.contains(.fetch) {
            let directory = scratch.subdirectory("fetch")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            emit("seeding the server: \(grouped(options.records)) records")
            let seed = try child(.seed, durability: "fast", options, directory, scratch)
            emit("  \(grouped(Int(Double(seed.records) / seed.seedSeconds))) records/s (\(grouped(seed.seedRequests)) requests, "
                + "\(String(format: "%.1f", seed.seedSeconds)) s)")
            for durability in options.durabilities {
                emit("initial sync, device log .\(durability)")
                let result = try child(.fetch, durability: durability, options, directory, scratch)
                emit("  " + summary(result))
                results.append(result)
            }
            scratch.remove(directory)
        }
        if options.phases.contains(.send) {
            for durability in options.durabilities {
                let directory = scratch.subdirectory("send-\(durability)")
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                emit("sending, device log .\(durability)")
                let result = try child(.send, durability: durability, options, directory, scratch)
                emit("  " + summary(result))
                results.append(result)
                scratch.remove(directory)
            }
        }
        emit("")

        // The main table.
        var rows: [[String]] = [[
            "phase", "device log", "records", "wall s", "records/s", "CPU s", "server s", "delegate s", "engine s",
            "VmHWM MiB", "peak RssAnon MiB", "device log MiB",
        ]]
        for r in results {
            let delegate = r.handleEventSeconds + r.pendingReadSeconds + r.batchBuildSeconds
            rows.append([
                r.phase == "fetch" ? "initial sync (fetchChanges)" : "sending (sendChanges)", "." + r.durability,
                grouped(r.records), seconds(r.seconds), grouped(Int(Double(r.records) / r.seconds)), seconds(r.cpuSeconds),
                seconds(r.serverSeconds), seconds(delegate), seconds(r.seconds - r.serverSeconds - delegate),
                mib(r.hwm), mib(r.peakAnon), String(format: "%.1f", Double(r.deviceLogBytes) / 1_048_576),
            ])
        }
        emit("figures per phase (wall and CPU time of the one fetchChanges/sendChanges call; server s: inside the server's methods; "
            + "delegate s: inside the delegate; engine s: the rest)")
        emit(table(rows))
        emit("")

        let sends = results.filter { $0.phase == "send" }
        if !sends.isEmpty {
            var detail: [[String]] = [[
                "sending", "batches", "pending list reads s", "first read", "last read", "batch building s",
                "handleEvent s", "state.add s (before the send)",
            ]]
            for r in sends {
                detail.append([
                    "device log ." + r.durability, grouped(r.batches), seconds(r.pendingReadSeconds),
                    "\(ms(r.firstPendingReadSeconds)) (\(grouped(r.firstPendingCount)))",
                    "\(ms(r.lastPendingReadSeconds)) (\(grouped(r.lastPendingCount)))",
                    seconds(r.batchBuildSeconds), seconds(r.handleEventSeconds),
                    "\(seconds(r.addSeconds)) (\(grouped(r.addCalls)) calls, \(grouped(Int(Double(r.records) / r.addSeconds))) changes/s)",
                ])
            }
            emit("sending: the delegate's share (pending list reads: state.pendingRecordZoneChanges in nextRecordZoneChangeBatch, "
                + "with the list's length)")
            emit(table(detail))
            emit("")
        }

        var memory: [[String]] = [["memory (MiB)", "VmHWM before the call", "VmHWM", "ru_maxrss", "peak RssAnon", "end VmRSS", "end RssAnon", "end RssFile"]]
        for r in results {
            memory.append([
                "\(r.phase) .\(r.durability)", mib(r.hwmBefore), mib(r.hwm), mib(r.maxrss), mib(r.peakAnon), mib(r.rss),
                mib(r.anon), mib(r.file),
            ])
        }
        emit("memory per phase (each phase a process of its own; the in-process server's mapped pages count in RssFile)")
        emit(table(memory))
        emit("")
        emit("load average at the end: \(loadAverage()) (other processes on the machine skew the figures)")
    }

    static func summary(_ r: PhaseResult) -> String {
        "\(grouped(r.records)) records in \(seconds(r.seconds)) s: \(grouped(Int(Double(r.records) / r.seconds))) records/s; "
            + "CPU \(seconds(r.cpuSeconds)) s; server \(seconds(r.serverSeconds)) s in \(grouped(r.serverCalls)) calls; "
            + "VmHWM \(mib(r.hwm)) MiB, peak RssAnon \(mib(r.peakAnon)) MiB"
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f", value) }

    /// Runs this binary with `--phase` and returns what it wrote.
    static func child(
        _ phase: BenchOptions.Phase, durability: String, _ options: BenchOptions, _ directory: URL, _ scratch: ScratchDirectory
    ) throws -> PhaseResult {
        let resultURL = scratch.url.appendingPathComponent("result-\(phase.rawValue)-\(durability).json")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = [
            "--phase", phase.rawValue, "--durability", durability, "--records", String(options.records),
            "--chunk", String(options.chunk), "--page", String(options.page), "--phase-dir", directory.path,
            "--result", resultURL.path,
        ]
        try process.run()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw BenchError("the \(phase.rawValue) phase (.\(durability)) failed: status \(process.terminationStatus)")
        }
        return try JSONDecoder().decode(PhaseResult.self, from: Data(contentsOf: resultURL))
    }
}
