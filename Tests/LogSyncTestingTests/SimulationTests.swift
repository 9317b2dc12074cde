import Foundation
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncModel
import TemporaryDirectory
import Testing

/// The seeded simulation (LogSyncTesting's `Simulation`): three devices, a server and a
/// network that misbehaves, all decided by one seed, checked at the end for convergence, no
/// acknowledged change lost, no edit lost, and the projection rule on every log.
@Suite("Simulation")
struct SimulationTests {
    /// The seeds of `swift test`: 1...200. `SIMULATION_SEEDS=17,40-45` runs those instead
    /// (Docs/Testing.md: the stress run).
    static let seeds = seedList("SIMULATION_SEEDS", default: Array(1...200))

    /// The seeds a variable lists (`17,40-45`), or `fallback` when it is unset or lists none.
    static func seedList(_ variable: String, default fallback: [UInt64]) -> [UInt64] {
        guard let list = ProcessInfo.processInfo.environment[variable] else { return fallback }
        let seeds = list.split(separator: ",").flatMap { part -> [UInt64] in
            let bounds = part.split(separator: "-").compactMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
            if bounds.count == 2, bounds[0] <= bounds[1] { return Array(bounds[0]...bounds[1]) }
            return bounds.count == 1 ? bounds : []
        }
        return seeds.isEmpty ? fallback : seeds
    }

    /// The seeds in batches of 25, run one batch after another (`.serialized`): one simulation
    /// at a time holds its logs open, and the suites running alongside (whose automatic engines
    /// wait on the cooperative pool) are not starved.
    static let batches = batched(seeds)

    static func batched(_ seeds: [UInt64]) -> [SeedBatch] {
        stride(from: 0, to: seeds.count, by: 25).map { SeedBatch(seeds: Array(seeds[$0..<min($0 + 25, seeds.count)])) }
    }

    /// The seeds of the simulation with sharing in `swift test`: 1...40 (each is slower: five
    /// devices, three users). `SIMULATION_SHARING_SEEDS=17,40-45` runs those instead.
    static let sharingSeeds = seedList("SIMULATION_SHARING_SEEDS", default: Array(1...40))

    struct SeedBatch: Sendable, CustomStringConvertible {
        let seeds: [UInt64]
        var description: String {
            seeds.count == 1 ? "seed \(seeds[0])" : "seeds \(seeds.first!)…\(seeds.last!)"
        }
    }

    /// `SIMULATION_OPERATIONS=300` makes each device do that many operations (default 100).
    static let configuration = configured(
        Simulation.Configuration(), rerun: "SIMULATION_SEEDS={seed} swift test --filter SimulationTests/simulation")

    /// The simulation with sharing (`Simulation.Configuration.sharing`): alice's two devices,
    /// bob's two (read-write) and carol's one (read-only).
    static let sharingConfiguration = configured(
        .sharing, rerun: "SIMULATION_SHARING_SEEDS={seed} swift test --filter SimulationTests/sharingSimulation")

    static func configured(_ base: Simulation.Configuration, rerun: String) -> Simulation.Configuration {
        var configuration = base
        configuration.rerunCommand = rerun
        if let value = ProcessInfo.processInfo.environment["SIMULATION_OPERATIONS"], let operations = Int(value) {
            configuration.operationsPerDevice = max(1, operations)
        }
        return configuration
    }

    // F9–F12, F16–F32, F46–F48, F89–F103, F104–F108, F140–F150: the engine under every fault at once.
    @Test(
        "Seeded simulation: 3 devices × 100 operations converge, lose nothing, keep their projections", .serialized,
        arguments: batches)
    func simulation(batch: SeedBatch) async throws {
        try await Self.run(batch, Self.configuration)
    }

    // F118–F125 with F9–F12, F16–F32, F89–F103: sharing between three users under every fault.
    @Test(
        "Seeded simulation with sharing: an owner and two participants share, accept, edit, remove and leave; all converge, lose nothing",
        .serialized, arguments: batched(sharingSeeds))
    func sharingSimulation(batch: SeedBatch) async throws {
        try await Self.run(batch, Self.sharingConfiguration)
    }

    /// Runs a batch's seeds one after another, each in its own directory, recording each failure.
    static func run(_ batch: SeedBatch, _ configuration: Simulation.Configuration) async throws {
        let verbose = ProcessInfo.processInfo.environment["SIMULATION_VERBOSE"] != nil
        for seed in batch.seeds {
            try await Self.inDirectory(for: seed) { directory in
                let simulation = try Simulation(seed: seed, directory: directory, configuration: configuration)
                do {
                    let report = try await simulation.run()
                    if verbose { print(report) }
                    if ProcessInfo.processInfo.environment["SIMULATION_TRACE"] != nil {
                        print(report.trace.joined(separator: "\n"))
                    }
                    #expect(
                        report.operations == configuration.deviceCount * configuration.operationsPerDevice,
                        "seed \(seed)")
                } catch let failure as SimulationFailure {
                    Issue.record(Comment(rawValue: verbose ? failure.fullDescription : failure.description))
                }
            }
        }
    }

    /// The soak's seeds: `SIMULATION_SOAK=N` runs N seeds from `SIMULATION_SOAK_FROM` (10,000
    /// by default, past the seeds `swift test` runs); unset, the soak does not run.
    static let soakSeeds: ClosedRange<UInt64>? = {
        let environment = ProcessInfo.processInfo.environment
        guard let count = environment["SIMULATION_SOAK"].flatMap(UInt64.init), count > 0 else { return nil }
        let first = environment["SIMULATION_SOAK_FROM"].flatMap(UInt64.init) ?? 10_000
        return first...(first + count - 1)
    }()

    /// The soak's configuration: with `SIMULATION_SHARING=1`, the simulation with sharing.
    static let soakConfiguration =
        ProcessInfo.processInfo.environment["SIMULATION_SHARING"] == "1" ? sharingConfiguration : configuration

    /// The soak (Docs/Testing.md): `SIMULATION_SOAK=20000 swift test --filter SimulationTests/soak`.
    /// Runs the seeds as many at a time as the machine has cores, prints the seeds done and seeds
    /// per second as it goes, and stops at the first failing seed, printing it with the line that
    /// reruns it alone.
    @Test("Soak: many seeds, as many at a time as there are cores", .enabled(if: soakSeeds != nil))
    func soak() async throws {
        let seeds = try #require(Self.soakSeeds)
        let width = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let clock = ContinuousClock()
        let started = clock.now
        var done = 0
        var failure: SoakFailure?
        func rate() -> String {
            let elapsed = (clock.now - started).components
            let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
            return String(format: "%.2f seeds/s", Double(done) / max(seconds, 1e-3))
        }
        print("soak: seeds \(seeds.lowerBound)…\(seeds.upperBound), \(width) at a time")
        await withTaskGroup(of: SoakFailure?.self) { group in
            var next = seeds.lowerBound
            func startNext() {
                guard next <= seeds.upperBound else { return }
                let seed = next
                next += 1
                group.addTask { await Self.soakRun(seed) }
            }
            for _ in 0..<width { startNext() }
            while let result = await group.next() {
                done += 1
                if let result {
                    failure = result
                    group.cancelAll()
                    break
                }
                if done % 50 == 0 { print("soak: \(done) seeds, \(rate())") }
                startNext()
            }
        }
        if let failure {
            print("soak: seed \(failure.seed) failed after \(done) seeds; rerun it with:\n  \(failure.rerun)")
            Issue.record(Comment(rawValue: failure.report))
        } else {
            print("soak: \(done) seeds passed, \(rate())")
        }
    }

    /// A seed the soak found failing: the simulation's report of it, or the error that stopped it.
    struct SoakFailure: Sendable {
        let seed: UInt64
        let rerun: String
        let report: String
    }

    /// One soak seed, run in a temporary directory of its own.
    static func soakRun(_ seed: UInt64) async -> SoakFailure? {
        let configuration = soakConfiguration
        let rerun = configuration.rerunCommand.replacingOccurrences(of: "{seed}", with: String(seed))
        do {
            var failure: SoakFailure?
            try await withTemporaryDirectory { directory in
                do {
                    _ = try await Simulation(seed: seed, directory: directory, configuration: configuration).run()
                } catch let found as SimulationFailure {
                    failure = SoakFailure(seed: seed, rerun: found.rerun, report: found.description)
                }
            }
            return failure
        } catch {
            return SoakFailure(
                seed: seed, rerun: rerun, report: "simulation seed \(seed) stopped: \(error)\nrerun: \(rerun)")
        }
    }

    /// A temporary directory, or with `SIMULATION_KEEP=DIR` the directory `DIR/seed-N`, kept
    /// after the run for `logtool` (emptied first).
    static func inDirectory(for seed: UInt64, _ body: (URL) async throws -> Void) async throws {
        guard let keep = ProcessInfo.processInfo.environment["SIMULATION_KEEP"] else {
            return try await withTemporaryDirectory(body)
        }
        let directory = URL(fileURLWithPath: keep).appendingPathComponent("seed-\(seed)", isDirectory: true)
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try await body(directory)
    }

    @Test("A seed replays exactly: the same trace, network fates and final notes")
    func seedReplays() async throws {
        var reports: [Simulation.Report] = []
        for _ in 0..<2 {
            try await withTemporaryDirectory { directory in
                reports.append(try await Simulation(seed: 7, directory: directory).run())
            }
        }
        #expect(reports[0].trace == reports[1].trace)
        #expect(reports[0].fates == reports[1].fates)
        #expect(reports[0].finalNotes == reports[1].finalNotes)
        #expect(reports[0].trace.count > 300)
    }

    @Test("Across a few seeds the simulation reaches every fault, restarts, account switches and conflicts")
    func coverage() async throws {
        var fates: [NetworkFate: Int] = [:]
        var engineRestarts = 0
        var serverRestarts = 0
        var switches = 0
        var won = 0
        var lost = 0
        var acknowledged = 0
        var dropped = 0
        for seed in UInt64(1)...8 {
            try await withTemporaryDirectory { directory in
                let report = try await Simulation(seed: seed, directory: directory).run()
                fates.merge(report.fates, uniquingKeysWith: +)
                engineRestarts += report.engineRestarts
                serverRestarts += report.serverRestarts
                switches += report.accountSwitches
                won += report.edits.conflictsWon
                lost += report.edits.conflictsLost
                acknowledged += report.savesAcknowledged
                dropped += report.editsDropped
            }
        }
        for fate in NetworkFate.allCases { #expect((fates[fate] ?? 0) > 0, "no request was \(fate): \(fates)") }
        #expect(engineRestarts > 0 && serverRestarts > 0 && switches > 0)
        #expect(won > 0 && lost > 0, "conflicts won \(won), lost \(lost)")
        #expect(acknowledged > 100)
        #expect(dropped > 0)
    }

    // The seeds run in order until every step has happened (at most 20 seeds): which steps a
    // seed reaches depends on the server's answers, so a fixed handful of seeds would stop
    // covering a step whenever the server changes.
    @Test(
        "With sharing, seeds share zones and hierarchies, accept, refuse read-only edits, change permissions, open links, hit the participant limit, move notes between hierarchies, remove, leave and delete shares"
    )
    func sharingCoverage() async throws {
        var sharing = Simulation.SharingReport()
        var refused = 0
        var acknowledged = 0
        var fates: [NetworkFate: Int] = [:]
        func covered() -> Bool {
            sharing.sharesSaved > 0 && sharing.participantsRemoved > 0 && sharing.sharesDeleted > 0
                && sharing.accepted > 0 && sharing.accepted < sharing.acceptsTried && sharing.left > 0
                && sharing.participantChangesAcknowledged > 0 && refused > 0 && sharing.hierarchySharesSaved > 0
                && sharing.permissionsChanged > 0 && sharing.linksOpened > 0 && sharing.linksClosed > 0
                && sharing.crowdInvitations > 0 && sharing.participantLimitRefusals > 0 && sharing.notesMoved > 0
                && acknowledged > 100 && NetworkFate.allCases.allSatisfy { (fates[$0] ?? 0) > 0 }
        }
        let configuration = Simulation.Configuration.sharing
        for seed in UInt64(1)...20 where !covered() {
            try await withTemporaryDirectory { directory in
                let report = try await Simulation(seed: seed, directory: directory, configuration: configuration).run()
                sharing.sharesSaved += report.sharing.sharesSaved
                sharing.participantsRemoved += report.sharing.participantsRemoved
                sharing.sharesDeleted += report.sharing.sharesDeleted
                sharing.acceptsTried += report.sharing.acceptsTried
                sharing.accepted += report.sharing.accepted
                sharing.left += report.sharing.left
                sharing.participantChangesAcknowledged += report.sharing.participantChangesAcknowledged
                sharing.hierarchySharesSaved += report.sharing.hierarchySharesSaved
                sharing.permissionsChanged += report.sharing.permissionsChanged
                sharing.linksOpened += report.sharing.linksOpened
                sharing.linksClosed += report.sharing.linksClosed
                sharing.crowdInvitations += report.sharing.crowdInvitations
                sharing.participantLimitRefusals += report.sharing.participantLimitRefusals
                sharing.notesMoved += report.sharing.notesMoved
                refused += report.edits.refused
                acknowledged += report.savesAcknowledged
                fates.merge(report.fates, uniquingKeysWith: +)
            }
        }
        #expect(sharing.sharesSaved > 0 && sharing.participantsRemoved > 0 && sharing.sharesDeleted > 0, "\(sharing)")
        #expect(sharing.accepted > 0 && sharing.accepted < sharing.acceptsTried, "\(sharing)")
        #expect(sharing.left > 0 && sharing.participantChangesAcknowledged > 0, "\(sharing)")
        #expect(refused > 0, "no read-only participant's edit was refused")
        // F123 hierarchies, F121 permission changes, links, the participant limit.
        #expect(sharing.hierarchySharesSaved > 0 && sharing.permissionsChanged > 0, "\(sharing)")
        #expect(sharing.linksOpened > 0 && sharing.linksClosed > 0, "\(sharing)")
        #expect(sharing.crowdInvitations > 0 && sharing.participantLimitRefusals > 0, "\(sharing)")
        // F123: notes moved into and out of shared hierarchies.
        #expect(sharing.notesMoved > 0, "\(sharing)")
        #expect(acknowledged > 100)
        for fate in NetworkFate.allCases { #expect((fates[fate] ?? 0) > 0, "no request was \(fate): \(fates)") }
    }

    @Test("A seed with sharing replays exactly")
    func sharingSeedReplays() async throws {
        var reports: [Simulation.Report] = []
        for _ in 0..<2 {
            try await withTemporaryDirectory { directory in
                reports.append(try await Simulation(seed: 11, directory: directory, configuration: .sharing).run())
            }
        }
        #expect(reports[0].trace == reports[1].trace)
        #expect(reports[0].finalNotes == reports[1].finalNotes)
        #expect(reports[0].sharing == reports[1].sharing)
    }

    /// A simulation of `seed` in `directory`, its operations run and settled, whose checks find
    /// nothing.
    static func settled(
        seed: UInt64, directory: URL, configuration: Simulation.Configuration
    ) async throws -> Simulation {
        let simulation = try Simulation(seed: seed, directory: directory, configuration: configuration)
        try await simulation.runOperations()
        try await simulation.settle()
        #expect(try await simulation.check() == [])
        return simulation
    }

    /// Someone writes the note `x` titled `title`, in a new zone `zoneName`, to alice's database
    /// behind the simulation's devices' back: what the simulation's checks find then, and the
    /// failure they make.
    static func findingsAfterPlanting(
        in simulation: Simulation, zone zoneName: String, title: String
    ) async throws -> (findings: [String], failure: SimulationFailure) {
        let database = simulation.server.database(for: "alice", device: "intruder")
        let zone = RecordZone.ID(zoneName: zoneName)
        _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
        var note = Record(recordType: "Note", recordID: Record.ID(recordName: "x", zoneID: zone))
        note["title"] = .string(title)
        _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [note]))
        let findings = try await simulation.check()
        return (findings, simulation.failure(findings))
    }

    // The checks themselves: a read-only participant's edit that reached the owner is found.
    @Test("An edit of the read-only participant found in the owner's notes is named, with the seed")
    func readOnlyEditIsFound() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = Simulation.Configuration.sharing
            configuration.operationsPerDevice = 30
            configuration.rerunCommand =
                "SIMULATION_SHARING_SEEDS={seed} swift test --filter SimulationTests/sharingSimulation"
            let simulation = try await Self.settled(seed: 2, directory: directory, configuration: configuration)
            // carol's device (E) is read-only: plant a note as if her edit had been accepted.
            let (findings, failure) = try await Self.findingsAfterPlanting(
                in: simulation, zone: "Planted", title: "E.999")
            #expect(
                findings.contains {
                    $0.contains("edits of user \"carol\", a read-only participant") && $0.contains("Planted/x = E.999")
                })
            #expect(
                failure.description.contains(
                    "rerun: SIMULATION_SHARING_SEEDS=2 swift test --filter SimulationTests/sharingSimulation"))
        }
    }

    // The checks themselves: a change the server never acknowledged is found and named.
    @Test("A change that bypassed the devices is found: the failure names it, the seed and the rerun command")
    func unacknowledgedServerChangeIsFound() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = Simulation.Configuration()
            configuration.rerunCommand = "SIMULATION_SEEDS={seed} swift test --filter SimulationTests/simulation"
            let simulation = try await Self.settled(seed: 3, directory: directory, configuration: configuration)
            // Someone writes to alice's database behind the simulation's back.
            let (findings, failure) = try await Self.findingsAfterPlanting(
                in: simulation, zone: "Intruded", title: "planted")
            #expect(
                findings.contains { $0.contains("not what it acknowledged") && $0.contains("Intruded/x = planted") })
            #expect(failure.description.contains("simulation seed 3 failed"))
            #expect(
                failure.description.contains("rerun: SIMULATION_SEEDS=3 swift test --filter SimulationTests/simulation")
            )
        }
    }

    // The checks themselves: an engine that forgot a pending save loses the edit, and it is found.
    @Test("A pending save the engine forgets is found as a lost edit")
    func forgottenPendingSaveIsFound() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = Simulation.Configuration()
            configuration.operationsPerDevice = 10
            let simulation = try Simulation(seed: 5, directory: directory, configuration: configuration)
            try await simulation.runOperations()
            try await simulation.settle()
            let device = simulation.devices[0]
            let id = Record.ID(recordName: "forgotten", zoneID: RecordZone.ID(zoneName: "Z0"))
            try device.engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: id.zoneID))])
            try simulation.write(id, "lost edit", on: 0)
            // A faulty engine would drop the change; here the test does it.
            try device.engine.state.remove(pendingRecordZoneChanges: [.saveRecord(id)])
            try await simulation.settle()

            let findings = try await simulation.check()
            #expect(findings.contains { $0.contains("device A lost edits") && $0.contains("Z0/forgotten = lost edit") })
        }
    }
}
