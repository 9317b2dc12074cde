import BenchSupport
import Foundation
import SyncModel

/// Runs each phase in a child process (this binary with `--phase`), collects what the children
/// report and prints the tables.
enum Parent {
    static func run(_ options: EngineBench, _ scratch: ScratchDirectory) throws {
        printHeader(
            "logsync-engine-bench — SyncEngine against an in-process LogSync server: initial sync, sending, opening, a shared zone",
            scratch: scratch)
        if options.phases.contains(.fetch) || options.phases.contains(.send) {
            emit(
                "  records: \(grouped(options.recordCount)), \(workload.recordSize) B of field data each (3 strings, 2 integers), type "
                    + "\(RecordWorkload.recordType), round-robin over \(workload.zoneCount) custom zones")
            emit(
                "  device log: DeviceLog(directory:options:), durability \(options.durabilities.map { ".\($0)" }.joined(separator: " and ")), "
                    + "initial map 64 MiB (LogEnvironment default; doubles when full); one engine per phase, automaticallySync false"
            )
            emit(
                "  server: SyncServer in process, durability .fast, page size (maxChangesPerPage) \(options.page) changes, "
                    + "at most 4 MB per page; engine fetchResultsLimit nil (the server's page)")
            emit(
                "  fetch: server seeded with modifyRecords requests of \(EngineBench.seedRequestSize) new records (another device, no engine); "
                    + "a fresh device runs fetchChanges() to the end, its delegate keeping every record in a [Record.ID: Record]"
            )
            emit(
                "  send: \(grouped(options.recordCount)) records created in the app's [Record.ID: Record], pending saves added with "
                    + "state.add in chunks of \(options.chunk), then sendChanges(); batches from RecordZoneChangeBatch(pendingChanges:recordProvider:) "
                    + "over state.pendingRecordZoneChanges: at most \(Limits.maxItemsPerRequest) records or \(grouped(Limits.maxRequestBytes)) B per batch"
            )
        }
        if options.phases.contains(.edits) {
            emit(
                "  edits: \(grouped(options.recordCount)) pending saves added one per call on a fresh engine, three times: "
                    + "state.add from \(options.editTasks) tasks, then from \(options.editTasks) threads, then state.suspending.add "
                    + "from \(options.editTasks) tasks; against LogStore appending 100 entries per commit")
        }
        if options.phases.contains(.open) {
            emit(
                "  open: device logs of \(options.openLengths.map(grouped).joined(separator: " and ")) entries built (.fast) from a device's life "
                    + "(edits one state.add each, undos, sends with batchPrepared/batchResult, fetched pages, delivery marks; "
                    + "\(grouped(OpenWorkload.recordCount)) records, \(OpenWorkload.tailChanges)+ changes left pending); then "
                    + "SyncEngine(configuration) (.durable, automaticallySync false) until the first state.pendingRecordZoneChanges returns, "
                    + "median of \(options.openRunCount) opens per log, each in a fresh process (the OS page cache stays warm)"
            )
        }
        if options.phases.contains(.instrumentation) {
            emit(
                "  instrumentation: the initial sync of \(grouped(options.recordCount)) records and the same records committed "
                    + "to a fresh .durable server in requests of 400, each with metrics and tracing and with neither, "
                    + "\(options.instrumentationRunCount) run(s) each side, alternately")
        }
        if options.phases.contains(.bundle) {
            emit(
                "  bundle: a device log of \(grouped(options.bundleLength)) entries built as the open phase builds its logs, exported "
                    + "as a support bundle (redacted, names hashed) and its data.mdb copied, \(options.bundleRunCount) run(s) each, alternately"
            )
        }
        if options.phases.contains(.share) {
            emit(
                "  share: \(grouped(options.recordCount)) records seeded in one zone of alice's, shared whole (zone-wide Share) with bob, "
                    + "read-write, who accepts; then a fresh engine of alice's on the private database and one of bob's on the shared "
                    + "database each run fetchChanges() to the end, alternately, \(options.shareRunCount) run(s) each, device log "
                    + ".\(options.durabilities[0]); ratio: the participant's records/s over the owner's (medians), target ≥ 0.8"
            )
        }
        if options.phases.contains(.decode) {
            emit(
                "  decode: \(grouped(options.recordCount)) of the records as a server saved them (system fields set), decoded "
                    + "from their protobuf bytes by the generated decoder (SwiftProtobuf's message, then the conversion) and by "
                    + "the direct reader (Record(protoBytes:)), then in pages of \(options.page) by Wire.decode both ways; "
                    + "CPU time, in this process, best of \(options.decodeRunCount) alternate run(s)")
        }
        emit("  each phase in a child process of its own (peak memory per phase)")
        emit("")

        if options.phases.contains(.decode) {
            let figures = try DecodePhase.run(options)
            emit("decode floor (records/s, CPU time)")
            emit(
                table([
                    ["decoding", "generated decoder", "direct reader", "direct / generated"],
                    [
                        "records alone", grouped(Int(figures.generatedRecords)), grouped(Int(figures.directRecords)),
                        ratio(figures.directRecords / figures.generatedRecords),
                    ],
                    [
                        "pages (Wire.decode)", grouped(Int(figures.generatedPages)), grouped(Int(figures.directPages)),
                        ratio(figures.directPages / figures.generatedPages),
                    ],
                ]))
            emit("")
        }

        var results: [PhaseResult] = []
        var floors: [PhaseResult] = []
        if options.phases.contains(.fetch) {
            let directory = try seededServer(
                .seed, "fetch", "\(grouped(options.recordCount)) records", options, scratch)
            for durability in options.durabilities {
                emit("initial sync, device log .\(durability)")
                let result = try child(.fetch, durability: durability, options, directory, scratch)
                emit("  " + summary(result))
                results.append(result)
                let floor = try child(.floor, durability: durability, options, directory, scratch)
                emit(
                    "  floor: the same \(grouped(floor.pages)) pages decoded from protobuf and appended, one entry and one "
                        + "LogStore commit per page, no engine: \(grouped(Int(Double(floor.records) / floor.seconds))) records/s "
                        + "(\(seconds(floor.seconds)) s); the engine reaches \(ratio(floor.seconds / result.seconds)) of it"
                )
                floors.append(floor)
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
        var editRows: [[String]] = []
        if options.phases.contains(.edits) {
            editRows.append([
                "concurrent edits", "callers", "edits", "wall s", "acknowledged edits/s", "CPU s", "CPU µs per edit",
                "commits", "edits per commit", "floor: LogStore, 100 per commit", "edits / floor",
            ])
            for durability in options.durabilities {
                let directory = scratch.subdirectory("edits-\(durability)")
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                emit("concurrent edits, device log .\(durability)")
                let edits = try child(.edits, durability: durability, options, directory, scratch)
                let floor = try child(.editsFloor, durability: durability, options, directory, scratch)
                let floorRate = Double(floor.records) / floor.seconds
                let paths: [(String, String, Double, Double, Int)] = [
                    (
                        "state.add, blocking", "\(options.editTasks) tasks", edits.seconds, edits.cpuSeconds,
                        edits.commits
                    ),
                    (
                        "state.add, blocking", "\(options.editTasks) threads", edits.threadSeconds,
                        edits.threadCPUSeconds, edits.threadCommits
                    ),
                    (
                        "state.suspending.add", "\(options.editTasks) tasks", edits.suspendingSeconds,
                        edits.suspendingCPUSeconds,
                        edits.suspendingCommits
                    ),
                ]
                for (path, callers, wall, cpu, commits) in paths {
                    let rate = Double(edits.records) / wall
                    emit(
                        "  \(path) from \(callers): \(grouped(edits.records)) edits in \(seconds(wall)) s, "
                            + "\(grouped(Int(rate))) acknowledged edits/s; floor \(grouped(Int(floorRate))) entries/s")
                    editRows.append([
                        "device log .\(durability.rawValue), \(path)", callers, grouped(edits.records), seconds(wall),
                        grouped(Int(rate)), seconds(cpu), String(format: "%.1f", cpu / Double(edits.records) * 1e6),
                        grouped(commits), String(format: "%.1f", Double(edits.records) / Double(max(commits, 1))),
                        grouped(Int(floorRate)), ratio(rate / floorRate),
                    ])
                }
                scratch.remove(directory)
            }
        }
        var opens: [Int: [PhaseResult]] = [:]
        var builds: [Int: PhaseResult] = [:]
        if options.phases.contains(.open) {
            for size in options.openLengths {
                let directory = scratch.subdirectory("open-\(size)")
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                emit("building a device log of \(grouped(size)) entries (.fast)")
                let build = try child(.build, durability: .fast, options, directory, scratch, records: size)
                emit(
                    "  \(seconds(build.seconds)) s (\(grouped(Int(Double(size) / build.seconds))) entries/s, "
                        + "\(grouped(build.addCalls)) appends), data.mdb \(String(format: "%.1f", Double(build.deviceLogBytes) / 1_048_576)) MiB"
                )
                builds[size] = build
            }
            // Alternate the logs run by run, so a change of the machine's load hits both alike.
            for run in 1...options.openRunCount {
                var line: [String] = []
                for size in options.openLengths {
                    let result = try child(
                        .open, durability: .durable, options, scratch.subdirectory("open-\(size)"), scratch,
                        records: size)
                    guard result.entries == size else {
                        throw BenchError("the open of the \(size)-entry log saw \(result.entries) entries")
                    }
                    opens[size, default: []].append(result)
                    line.append("\(grouped(size)): \(ms(result.seconds))")
                }
                emit("open run \(run): " + line.joined(separator: ", "))
            }
            for size in options.openLengths { scratch.remove(scratch.subdirectory("open-\(size)")) }
        }
        var shared: [PhaseResult] = []
        if options.phases.contains(.share) {
            let directory = try seededServer(
                .shareSeed, "share",
                "\(grouped(options.recordCount)) records in one zone, shared with bob, who accepts", options, scratch)
            let durability = options.durabilities[0]
            for run in 1...options.shareRunCount {
                let owner = try child(.ownerFetch, durability: durability, options, directory, scratch)
                let participant = try child(.participantFetch, durability: durability, options, directory, scratch)
                emit(
                    "share run \(run): owner \(seconds(owner.seconds)) s, participant \(seconds(participant.seconds)) s"
                )
                shared += [owner, participant]
            }
            scratch.remove(directory)
        }
        var bundleRows: [[String]] = []
        if options.phases.contains(.bundle) {
            emit("support bundle: an export against copying the log's file")
            bundleRows = try bundleRuns(options, scratch)
        }
        var instrumentationRows: [[String]] = []
        if options.phases.contains(.instrumentation) {
            emit("instrumentation: metrics and tracing against neither")
            instrumentationRows = try instrumentationRuns(options, scratch)
        }
        emit("")

        if !bundleRows.isEmpty {
            emit(
                "support bundle: SupportBundle.export (redacted, names hashed: SyncEngine.exportSupportBundle's work) of a "
                    + "device log built as the open phase builds its logs, against copying its data.mdb (1 MiB reads and "
                    + "writes, then fsync), alternately, each in a fresh process; targets: peak RssAnon under 64 MiB, "
                    + "export speed ≥ 0.5 of the copy's")
            emit(table(bundleRows))
            emit("")
        }
        if !instrumentationRows.isEmpty {
            emit(
                "instrumentation: the server and the engine with metrics (a Prometheus registry) and tracing (an in-memory "
                    + "tracer keeping every span) against neither (nothing bootstrapped: the no-op handlers), alternately in "
                    + "one run, each run in a fresh process; ratio: instrumented records/s over plain, target ≥ 0.95")
            emit(table(instrumentationRows))
            emit("")
        }
        if !shared.isEmpty { shareReport(options, shared) }
        if !opens.isEmpty { openReport(options, builds, opens) }
        if !editRows.isEmpty {
            emit(
                "concurrent edits: callers each adding one pending save per call, acknowledged when committed (group commit "
                    + "shares commits between waiting calls): state.add blocks its thread, state.suspending.add suspends its task; "
                    + "floor: entries of the same size appended by LogStore alone, 100 per commit, one writer, same durability; "
                    + "measured in the same run")
            emit(table(editRows))
            emit("")
        }
        guard !results.isEmpty else {
            printLoadAtEnd()
            return
        }

        // The main table.
        var rows: [[String]] = [
            [
                "phase", "device log", "records", "wall s", "records/s", "CPU s", "server s", "delegate s", "engine s",
                "VmHWM MiB", "peak RssAnon MiB", "device log MiB",
            ]
        ]
        for r in results {
            let delegate = r.handleEventSeconds + r.pendingReadSeconds + r.batchBuildSeconds
            rows.append([
                r.phase == "fetch" ? "initial sync (fetchChanges)" : "sending (sendChanges)", "." + r.durability,
                grouped(r.records), seconds(r.seconds), grouped(Int(Double(r.records) / r.seconds)),
                seconds(r.cpuSeconds),
                seconds(r.serverSeconds), seconds(delegate), seconds(r.seconds - r.serverSeconds - delegate),
                mib(r.hwm), mib(r.peakAnon), String(format: "%.1f", Double(r.deviceLogBytes) / 1_048_576),
            ])
        }
        emit(
            "figures per phase (wall and CPU time of the one fetchChanges/sendChanges call; server s: inside the server's methods; "
                + "delegate s: inside the delegate; engine s: the rest)")
        emit(table(rows))
        emit("")

        if !floors.isEmpty {
            var floorRows: [[String]] = [
                [
                    "initial sync against its floor", "engine records/s", "floor records/s", "engine / floor",
                    "floor s", "floor CPU s",
                    "floor log MiB", "device log MiB", "device log / floor log",
                ]
            ]
            for floor in floors {
                guard let engine = results.first(where: { $0.phase == "fetch" && $0.durability == floor.durability })
                else { continue }
                floorRows.append([
                    "device log ." + floor.durability, grouped(Int(Double(engine.records) / engine.seconds)),
                    grouped(Int(Double(floor.records) / floor.seconds)), ratio(floor.seconds / engine.seconds),
                    seconds(floor.seconds),
                    seconds(floor.cpuSeconds), String(format: "%.1f", Double(floor.deviceLogBytes) / 1_048_576),
                    String(format: "%.1f", Double(engine.deviceLogBytes) / 1_048_576),
                    ratio(Double(engine.deviceLogBytes) / Double(max(floor.deviceLogBytes, 1))),
                ])
            }
            emit(
                "the floor: the same pages as protobuf bytes (the HTTP transport's), decoded into records kept in a dictionary as "
                    + "the engine's app keeps them, and appended as they came, one LogStore entry and commit per page, same durability, "
                    + "no engine; measured in the same run")
            emit(table(floorRows))
            emit("")

            // The device log's bytes per record against the record's own encoded size (target ≤ 2×).
            var sizeRows: [[String]] = [
                ["device log per record", "encoded record B", "device log B/record", "ratio", "target ≤ 2"]
            ]
            // The engine's own heap: the fetch's RssAnon above its start, less the app's dictionary
            // (measured by the floor, which keeps the same records the same way), at its peak and
            // at each tenth of the records.
            var memoryRows: [[String]] = [
                [
                    "engine memory (MiB)", "app's data (all records)", "peak RssAnon above start",
                    "engine's own at the peak",
                    "target ≤ 64", "curve: engine's own at each tenth of the records",
                ]
            ]
            for floor in floors {
                guard let engine = results.first(where: { $0.phase == "fetch" && $0.durability == floor.durability })
                else { continue }
                let perRecord = Double(engine.deviceLogBytes) / Double(max(engine.records, 1))
                let sizeRatio = perRecord / max(floor.encodedRecordBytes, 1)
                sizeRows.append([
                    "device log ." + floor.durability, String(format: "%.0f", floor.encodedRecordBytes),
                    String(format: "%.0f", perRecord),
                    ratio(sizeRatio), sizeRatio <= 2 ? "PASS" : "FAIL",
                ])
                let app = Double(floor.appDataKB)
                let own = Double(engine.peakAnon - engine.anonBefore) - app
                // At each tenth, the engine's RssAnon above its start less the floor's at the same
                // tenth: the app's dictionary grows by doublings, at the same counts in both.
                let curve = zip(engine.curve, floor.curve).map { point, floorPoint -> String in
                    String(
                        format: "%.0f",
                        Double((point[1] - engine.anonBefore) - (floorPoint[1] - floor.anonBefore)) / 1024)
                }
                memoryRows.append([
                    "device log ." + floor.durability, mib(floor.appDataKB), mib(engine.peakAnon - engine.anonBefore),
                    String(format: "%.1f", own / 1024), own / 1024 <= 64 ? "PASS" : "FAIL",
                    curve.joined(separator: " "),
                ])
            }
            emit(table(sizeRows))
            emit("")
            emit(
                "memory of the initial sync: the engine's own heap is RssAnon above the call's start less the app's dictionary "
                    + "(the floor's, holding the same records); the curve subtracts the floor's RssAnon at the same tenth of the records"
            )
            emit(table(memoryRows))
            emit("")
        }

        let sends = results.filter { $0.phase == "send" }
        if !sends.isEmpty {
            var detail: [[String]] = [
                [
                    "sending", "batches", "pending list reads s", "first read", "last read", "batch building s",
                    "handleEvent s", "state.add s (before the send)",
                ]
            ]
            for r in sends {
                detail.append([
                    "device log ." + r.durability, grouped(r.batches), seconds(r.pendingReadSeconds),
                    "\(ms(r.firstPendingReadSeconds)) (\(grouped(r.firstPendingCount)))",
                    "\(ms(r.lastPendingReadSeconds)) (\(grouped(r.lastPendingCount)))",
                    seconds(r.batchBuildSeconds), seconds(r.handleEventSeconds),
                    "\(seconds(r.addSeconds)) (\(grouped(r.addCalls)) calls, \(grouped(Int(Double(r.records) / r.addSeconds))) changes/s)",
                ])
            }
            emit(
                "sending: the delegate's share (pending list reads: state.pendingRecordZoneChanges in nextRecordZoneChangeBatch, "
                    + "with the list's length)")
            emit(table(detail))
            emit("")

            // The device log per sent record against the record's encoded size (issue 37's
            // target ≤ 1.3×), and where its bytes are: each kind's payloads per record; the rest
            // of data.mdb is the index, LMDB's pages and free space.
            let kinds = ["batchPrepared", "batchResult", "batchSaved", "pendingRecordZoneChangesAdded"]
            var sizes: [[String]] = [
                ["device log per sent record", "encoded record B", "device log B/record", "ratio", "target ≤ 1.3"]
                    + kinds.map { "\($0) B/record" } + ["other B/record"]
            ]
            for r in sends {
                let records = Double(max(r.records, 1))
                let perRecord = Double(r.deviceLogBytes) / records
                let sizeRatio = perRecord / max(r.encodedRecordBytes, 1)
                let payloads = kinds.map { Double(r.entryBytes[$0] ?? 0) / records }
                sizes.append(
                    [
                        "device log ." + r.durability, String(format: "%.0f", r.encodedRecordBytes),
                        String(format: "%.0f", perRecord), ratio(sizeRatio), sizeRatio <= 1.3 ? "PASS" : "FAIL",
                    ] + payloads.map { String(format: "%.0f", $0) }
                        + [String(format: "%.0f", perRecord - payloads.reduce(0, +))])
            }
            emit(
                "sending: the device log (data.mdb) per sent record, against the mean encoded size of the records as saved "
                    + "(the last known server records), and the entries' payload bytes per record by kind")
            emit(table(sizes))
            emit("")

            // Reading the saved records back one by one, as apps that rebuild edits on them do.
            var lookups: [[String]] = [
                [
                    "lastKnownServerRecord(for:), every sent record in send order", "each entry read alone: records/s",
                    "entries kept between calls: records/s", "ratio",
                ]
            ]
            for r in sends where r.lookupKeptSeconds > 0 && r.lookupAloneSeconds > 0 {
                let alone = Double(r.records) / r.lookupAloneSeconds
                let kept = Double(r.records) / r.lookupKeptSeconds
                lookups.append([
                    "device log ." + r.durability, grouped(Int(alone)), grouped(Int(kept)), ratio(kept / alone),
                ])
            }
            emit("sending: the saved records read back one call each (processor time)")
            emit(table(lookups))
            emit("")
        }

        var memory: [[String]] = [
            [
                "memory (MiB)", "VmHWM before the call", "VmHWM", "ru_maxrss", "peak RssAnon", "end VmRSS",
                "end RssAnon", "end RssFile",
            ]
        ]
        for r in results {
            memory.append([
                "\(r.phase) .\(r.durability)", mib(r.hwmBefore), mib(r.hwm), mib(r.maxrss), mib(r.peakAnon), mib(r.rss),
                mib(r.anon), mib(r.file),
            ])
        }
        emit(
            "memory per phase (each phase a process of its own; the in-process server's mapped pages count in RssFile)")
        emit(table(memory))
        emit("")
        printLoadAtEnd()
    }

    /// The open phase's table and ratio.
    static func openReport(_ options: EngineBench, _ builds: [Int: PhaseResult], _ opens: [Int: [PhaseResult]]) {
        var rows: [[String]] = [
            [
                "device log entries", "data.mdb MiB", "build s (.fast)", "open+first read ms (median)", "min", "max",
                "open ms", "first read ms", "CPU ms", "minor faults", "major faults", "pending read", "VmHWM MiB",
            ]
        ]
        var medians: [Double] = []
        var minimums: [Double] = []
        for size in options.openLengths {
            let runs = opens[size] ?? []
            func median(_ value: (PhaseResult) -> Double) -> Double { Samples(values: runs.map(value)).median }
            let total = median(\.seconds)
            medians.append(total)
            minimums.append(runs.map(\.seconds).min() ?? 0)
            rows.append([
                grouped(size), String(format: "%.1f", Double(builds[size]?.deviceLogBytes ?? 0) / 1_048_576),
                seconds(builds[size]?.seconds ?? 0), millis(total), millis(runs.map(\.seconds).min() ?? 0),
                millis(runs.map(\.seconds).max() ?? 0), millis(median(\.openSeconds)),
                millis(median(\.firstReadSeconds)),
                millis(median(\.cpuSeconds)), grouped(Int(median { Double($0.minorFaults) })),
                grouped(Int(median { Double($0.majorFaults) })), grouped(runs.last?.processed ?? 0),
                mib(Int(median { Double($0.hwm) })),
            ])
        }
        emit(
            "open: SyncEngine(configuration) on the existing log (.durable) until the first state.pendingRecordZoneChanges "
                + "returns; median, min and max of \(options.openRunCount) runs, each in a fresh process; the OS page cache is warm "
                + "(the logs were just written), so this is a cold process, not a cold disk; other columns are medians")
        emit(table(rows))
        if medians.count >= 2, let first = medians.first, let last = medians.last, first > 0 {
            let value = last / first
            emit(
                "ratio of the medians, \(grouped(options.openLengths.last!)) / \(grouped(options.openLengths.first!)) entries: \(ratio(value)) "
                    + "(requirement ≤ 2: \(value <= 2 ? "PASS" : "FAIL")); of the fastest runs: "
                    + "\(ratio(minimums.last! / max(minimums.first!, 1e-9)))")
        }
        emit("")
    }

    /// Creates the scratch subdirectory `name` and seeds a server there with the child `phase`,
    /// printing what it seeds and how fast. Returns the directory.
    static func seededServer(
        _ phase: EngineBench.Phase, _ name: String, _ what: String, _ options: EngineBench, _ scratch: ScratchDirectory
    ) throws -> URL {
        let directory = scratch.subdirectory(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        emit("seeding the server: \(what)")
        let seed = try child(phase, durability: .fast, options, directory, scratch)
        emit(
            "  \(grouped(Int(Double(seed.records) / seed.seedSeconds))) records/s (\(grouped(seed.seedRequests)) requests, "
                + "\(String(format: "%.1f", seed.seedSeconds)) s)")
        return directory
    }

    /// The sharing phase's table and ratio.
    static func shareReport(_ options: EngineBench, _ results: [PhaseResult]) {
        var rows: [[String]] = [
            [
                "initial sync of the shared zone", "runs", "wall s (median)", "min", "max", "records/s", "CPU s",
                "server s",
                "server calls", "pages", "VmHWM MiB", "device log MiB",
            ]
        ]
        var medians: [String: Double] = [:]
        for (phase, name) in [
            ("owner-fetch", "owner, private database"), ("participant-fetch", "participant, shared database"),
        ] {
            let runs = results.filter { $0.phase == phase }
            func median(_ value: (PhaseResult) -> Double) -> Double { Samples(values: runs.map(value)).median }
            let wall = median(\.seconds)
            medians[phase] = wall
            rows.append([
                name, String(runs.count), seconds(wall), seconds(runs.map(\.seconds).min() ?? 0),
                seconds(runs.map(\.seconds).max() ?? 0),
                grouped(Int(Double(options.recordCount) / wall)), seconds(median(\.cpuSeconds)),
                seconds(median(\.serverSeconds)),
                grouped(runs.last?.serverCalls ?? 0), grouped(runs.last?.pages ?? 0),
                mib(Int(median { Double($0.hwm) })),
                String(format: "%.1f", Double(runs.last?.deviceLogBytes ?? 0) / 1_048_576),
            ])
        }
        emit(
            "sharing: a fresh engine's fetchChanges() of the one shared zone of \(grouped(options.recordCount)) records, "
                + "owner and participant alternately (medians; server s: inside the server's methods)")
        emit(table(rows))
        if let owner = medians["owner-fetch"], let participant = medians["participant-fetch"], participant > 0 {
            let value = owner / participant
            emit(
                "ratio, the participant's speed over the owner's (owner s / participant s): \(ratio(value)) "
                    + "(target ≥ 0.8: \(value >= 0.8 ? "PASS" : "FAIL"))")
        }
        emit("")
    }

    static func millis(_ value: Double) -> String { String(format: "%.2f", value * 1000) }

    static func summary(_ r: PhaseResult) -> String {
        "\(grouped(r.records)) records in \(seconds(r.seconds)) s: \(grouped(Int(Double(r.records) / r.seconds))) records/s; "
            + "CPU \(seconds(r.cpuSeconds)) s; server \(seconds(r.serverSeconds)) s in \(grouped(r.serverCalls)) calls; "
            + "VmHWM \(mib(r.hwm)) MiB, peak RssAnon \(mib(r.peakAnon)) MiB"
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f", value) }

    /// Runs this executable with `--phase` and returns what it reported.
    static func child(
        _ phase: EngineBench.Phase, durability: DurabilityName, _ options: EngineBench, _ directory: URL,
        _ scratch: ScratchDirectory,
        records: Int? = nil, instrumented: Bool = false
    ) throws -> PhaseResult {
        try ChildProcess.run(
            (instrumented ? ["--instrumented"] : []) + [
                "--phase", phase.rawValue, "--durability", durability.rawValue, "--records",
                String(records ?? options.recordCount),
                "--chunk", String(options.chunk), "--page", String(options.page), "--edit-tasks",
                String(options.editTasks), "--batches", options.batches.rawValue, "--phase-dir", directory.path,
            ],
            resultFile: scratch.url.appendingPathComponent("result-\(phase.rawValue)-\(durability).json"),
            what: "the \(phase.rawValue) phase (.\(durability))")
    }
}
