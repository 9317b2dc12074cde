// The measurements of logsync-server-bench, and its report.
import BenchSupport
import Foundation
import LogStore
import LogSyncServer
import SyncModel

extension ServerBench {
    func measure(in scratch: ScratchDirectory) async throws {
        printHeader(
            "logsync-server-bench — LogSync server: commit throughput, and fetches since a recent token against database size",
            scratch: scratch)
        try await measureDeepHierarchy(in: scratch)
        if hierarchyOnly { return }
        emit(
            "  records: \(workload.recordSize) B of field data each (3 strings, 2 integers), type \(RecordWorkload.recordType), "
                + "round-robin over \(workload.zoneCount) zones; saved in modifyRecords requests of \(RecordWorkload.requestSize) new records, "
                + "each with a request ID, through InProcessDatabase")
        emit(
            "  databases: small \(grouped(smallRecords)) records, big \(grouped(bigRecords)) records "
                + "(separate users of one server, durability .fast: commits not flushed, MDB_NOSYNC); "
                + "durable throughput: \(grouped(durableRecords)) records on a server with .durable")
        emit("")

        // 1. Durable commit throughput, on a server of its own (durability is per server).
        emit("durable load (.durable: every commit flushed to disk)")
        let durable = try await durableLoad(scratch)
        emit("  \(grouped(durable.records)) records in \(grouped(durable.requests)) requests: \(durable.rates)")
        let durableFloor = try floor(scratch, "durable-floor", count: durableRecords, durability: .durable)
        emit(
            "  floor (.durable): \(grouped(Int(durableFloor.recordsPerSecond))) records/s; "
                + "server / floor \(ratio(durable.recordsPerSecond / durableFloor.recordsPerSecond))")
        emit("")

        // 2. The two databases, loaded with .fast.
        let directory = scratch.subdirectory("fast")
        let server = try SyncServer(.init(directory: directory, durability: .fast))
        defer { server.shutdown() }
        let smallDatabase = server.database(for: "small", device: "bench")
        let bigDatabase = server.database(for: "big", device: "bench")

        // What the idempotency bookkeeping of request IDs costs (F160): the same load without them.
        let plainDatabase = server.database(for: "no-request-ids", device: "bench")
        /// Loads `count` records into `database` under `title`, printing the rates (and `more`).
        func report(
            _ title: String, _ database: InProcessDatabase, count: Int, series: String, requestIDs: Bool = true,
            progress: Bool = false, more: (LoadResult) -> String = { _ in "" }
        ) async throws -> LoadResult {
            emit(title)
            try await workload.createZones(in: database)
            let result = try await load(
                database, count: count, series: series, requestIDs: requestIDs, progress: progress)
            emit("  \(result.rates)\(more(result))")
            return result
        }
        let plainLoad = try await report(
            "load without request IDs (.fast): \(grouped(smallRecords)) records into a fresh database",
            plainDatabase, count: smallRecords, series: "plain", requestIDs: false)
        emit("")
        let smallLoad = try await report(
            "small database load (.fast): \(grouped(smallRecords)) records", smallDatabase, count: smallRecords,
            series: "small", more: { _ in "; \(Memory.read().description)" })
        emit("")
        let bigLoad = try await report(
            "big database load (.fast): \(grouped(bigRecords)) records", bigDatabase, count: bigRecords,
            series: "big", progress: true,
            more: { load in
                " (wall \(String(format: "%.1f", load.wallSeconds)) s with record generation); \(Memory.read().description)"
            })
        emit("")
        // The floor of the same work: the same requests' bytes decoded and appended by LogStore alone.
        emit(
            "floor (.fast): \(grouped(bigRecords)) records' request bytes decoded and appended with LogStore alone, "
                + "one entry per record, one commit per request, no server")
        let fastFloor = try floor(scratch, "fast-floor", count: bigRecords, durability: .fast)
        emit(
            "  \(grouped(Int(fastFloor.recordsPerSecond))) records/s; server / floor: small \(ratio(smallLoad.recordsPerSecond / fastFloor.recordsPerSecond)), "
                + "big \(ratio(bigLoad.recordsPerSecond / fastFloor.recordsPerSecond))")
        emit("")

        // 3. Recent tokens, then 100 new records in zone 0 of each database.
        let small = try await prepare("small", smallDatabase, records: smallRecords, server: server)
        let big = try await prepare("big", bigDatabase, records: bigRecords, server: server)

        // 4. The fetches: two passes, small then big, each warmed up; the first pass's memory is reported.
        var zoneSamples: [String: Samples] = [:]
        var databaseSamples: [String: Samples] = [:]
        var memoryBefore: [String: Memory] = [:]
        var memoryAfter: [String: Memory] = [:]
        let perPass = Self.repetitions / 2
        for pass in 1...2 {
            for prepared in [small, big] {
                for _ in 0..<Self.warmup {
                    try await fetchZoneSinceRecent(prepared)
                    try await fetchDatabaseSinceRecent(prepared)
                }
                let before = Memory.read()
                for _ in 0..<perPass {
                    let started = ContinuousClock.now
                    try await fetchZoneSinceRecent(prepared)
                    zoneSamples[prepared.name, default: Samples()].values.append(
                        (ContinuousClock.now - started).seconds)
                }
                for _ in 0..<perPass {
                    let started = ContinuousClock.now
                    try await fetchDatabaseSinceRecent(prepared)
                    databaseSamples[prepared.name, default: Samples()].values.append(
                        (ContinuousClock.now - started).seconds)
                }
                let after = Memory.read()
                if pass == 1 {
                    memoryBefore[prepared.name] = before
                    memoryAfter[prepared.name] = after
                }
                emit(
                    "fetch pass \(pass), \(prepared.name): zone median \(ms(zoneSamples[prepared.name]!.median)), "
                        + "database median \(ms(databaseSamples[prepared.name]!.median)); \(after.description)")
            }
        }
        emit("")

        // 5. The tables.
        let smallName = "\(grouped(smallRecords)) records"
        let bigName = "\(grouped(bigRecords)) records"
        var rows: [[String]] = [["", smallName, bigName, "big/small", "target ≤ \(ratio(Self.maximumRatio))"]]
        func timing(_ label: String, _ samples: [String: Samples], target: Bool) {
            let (s, b) = (samples["small"]!, samples["big"]!)
            let medianRatio = b.median / s.median
            rows.append([
                "\(label), median", ms(s.median), ms(b.median), ratio(medianRatio),
                target ? (medianRatio <= Self.maximumRatio ? "PASS" : "FAIL") : "",
            ])
            rows.append(["\(label), p99", ms(s.p99), ms(b.p99), ratio(b.p99 / s.p99), ""])
        }
        timing("zone fetch since recent token (\(Self.recentChanges) changes)", zoneSamples, target: true)
        timing("database fetch since recent token (1 zone)", databaseSamples, target: true)
        rows.append([
            "whole zone 0 from no token (once; O(zone size))",
            "\(ms(small.wholeZone.seconds)) (\(grouped(small.wholeZone.records)) in \(small.wholeZone.pages) p.)",
            "\(ms(big.wholeZone.seconds)) (\(grouped(big.wholeZone.records)) in \(big.wholeZone.pages) p.)",
            ratio(big.wholeZone.seconds / small.wholeZone.seconds), "no target",
        ])
        func memoryRow(_ label: String, _ value: (Memory) -> Int, _ table: [String: Memory]) {
            let (s, b) = (value(table["small"]!), value(table["big"]!))
            rows.append(["\(label) (MiB)", mib(s), mib(b), "", ""])
        }
        memoryRow("VmRSS before fetches", \.rss, memoryBefore)
        memoryRow("VmRSS after \(perPass)+\(perPass) fetches", \.rss, memoryAfter)
        rows.append([
            "VmRSS growth during the fetches (MiB)", mib(memoryAfter["small"]!.rss - memoryBefore["small"]!.rss),
            mib(memoryAfter["big"]!.rss - memoryBefore["big"]!.rss), "", "",
        ])
        memoryRow("  of which RssAnon before", \.anon, memoryBefore)
        memoryRow("  of which RssAnon after", \.anon, memoryAfter)
        memoryRow("VmHWM after fetches", \.hwm, memoryAfter)
        rows.append([
            "data.mdb size (MiB)", String(format: "%.1f", Double(small.dataFileBytes) / 1_048_576),
            String(format: "%.1f", Double(big.dataFileBytes) / 1_048_576),
            ratio(Double(big.dataFileBytes) / Double(small.dataFileBytes)), "",
        ])
        emit(
            "fetches since a recent token (\(Self.repetitions) timed repetitions each, in 2 passes of \(perPass) after \(Self.warmup) warm-up fetches; .fast server)"
        )
        emit(table(rows))
        emit("")

        var loads: [[String]] = [
            [
                "400-record modify requests", "durability", "records", "requests", "records/s", "requests/s",
                "request median",
                "request p99", "server / floor",
            ]
        ]
        func loadRow(_ label: String, _ durability: String, _ result: LoadResult, floor: LoadResult?) {
            let latencies = Samples(values: result.latencies)
            loads.append([
                label, durability, grouped(result.records), grouped(result.requests),
                grouped(Int(result.recordsPerSecond)),
                String(format: "%.1f", result.requestsPerSecond), ms(latencies.median), ms(latencies.p99),
                floor.map { ratio(result.recordsPerSecond / $0.recordsPerSecond) } ?? "",
            ])
        }
        loadRow("load of the small database", ".fast", smallLoad, floor: fastFloor)
        loadRow("load of the big database", ".fast", bigLoad, floor: fastFloor)
        loadRow("load of a fresh database", ".durable", durable, floor: durableFloor)
        loadRow("same as small, without request IDs", ".fast", plainLoad, floor: fastFloor)
        loadRow("floor: request decoded, LogStore alone", ".fast", fastFloor, floor: nil)
        loadRow("floor: request decoded, LogStore alone", ".durable", durableFloor, floor: nil)
        emit("commit throughput (time inside modifyRecords only; record generation excluded)")
        emit(table(loads))
        emit("")

        let zoneRatio = zoneSamples["big"]!.median / zoneSamples["small"]!.median
        let databaseRatio = databaseSamples["big"]!.median / databaseSamples["small"]!.median
        printLoadAtEnd()
        emit(
            "target: fetch since a recent token, \(bigName) / \(smallName), median ≤ \(ratio(Self.maximumRatio)): "
                + "zone \(ratio(zoneRatio)) \(zoneRatio <= Self.maximumRatio ? "PASS" : "FAIL"), "
                + "database \(ratio(databaseRatio)) \(databaseRatio <= Self.maximumRatio ? "PASS" : "FAIL")")
    }

    /// The floor of a load of `count` records (`floorLoad`), in a log of its own that is removed afterwards.
    func floor(_ scratch: ScratchDirectory, _ name: String, count: Int, durability: Durability) throws -> LoadResult {
        let directory = scratch.subdirectory(name)
        defer { scratch.remove(directory) }
        return try floorLoad(directory, count: count, series: name, durability: durability)
    }

    /// Loads `durableRecords` records into a fresh database of a `.durable` server, then removes it.
    func durableLoad(_ scratch: ScratchDirectory) async throws -> LoadResult {
        let directory = scratch.subdirectory("durable")
        defer { scratch.remove(directory) }
        let server = try SyncServer(.init(directory: directory, durability: .durable))
        defer { server.shutdown() }
        let database = server.database(for: "durable", device: "bench")
        try await workload.createZones(in: database)
        return try await load(database, count: durableRecords, series: "durable", progress: false)
    }
}
