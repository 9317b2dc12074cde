import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// Bisection of device logs (`DeviceLog.bisect`, `DeviceLogBisect`, `logtool bisect`).
@Suite("logtool bisect")
struct BisectTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// The device index with a bug from `brokenFrom` on: an app's removal of a pending change is
    /// ignored, so the change stays pending though the app withdrew it.
    static func brokenIndex(from brokenFrom: UInt64) -> AlteredProjection {
        AlteredProjection(DeviceLog.standardIndex) { index, entry, tables in
            if entry.offset.rawValue >= brokenFrom && entry.kind == DeviceEntry.Kind.pendingRecordZoneChangesRemoved {
                return
            }
            try index.apply(entry, to: tables)
        }
    }

    /// A device log of `cycles` × 10 entries, as an engine writes them, appended 10,000 per
    /// commit: in cycle k (offsets 10k+1…10k+10) the app queues three notes and withdraws the
    /// third (offset 10k+4), a send saves the other two, the scheduler plans, a delivery mark.
    static func writeLongLog(at directory: URL, cycles: Int) throws -> DeviceLog {
        let log = try DeviceLog(directory: directory, options: .init(durability: .fast, initialMapSize: 64 << 20))
        var entries: [DeviceEntry] = []
        var offset: UInt64 = 0
        func add(_ entry: DeviceEntry) throws {
            entries.append(entry)
            offset += 1
            if entries.count == 10_000 {
                try log.append(entries)
                entries.removeAll(keepingCapacity: true)
            }
        }
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        for k in 0..<cycles {
            let ids = (0..<3).map { Record.ID(recordName: "n\((k * 3 + $0) % 600)", zoneID: notes) }
            for id in ids { try add(.pendingRecordZoneChangesAdded([.saveRecord(id)])) }
            try add(.pendingRecordZoneChangesRemoved([.saveRecord(ids[2])]))
            try add(.sendStarted(.init(reason: .scheduled, options: .init())))
            let records = ids.prefix(2).map { id -> Record in
                var record = Record(recordType: "Note", recordID: id)
                record["title"] = .string("cycle \(k)")
                return record
            }
            try add(
                .batchPrepared(
                    recordsToSave: records, recordIDsToDelete: [], atomicByZone: false,
                    requestID: RequestID("long-\(offset + 1)")))
            let saved = records.enumerated().map { index, record -> Record in
                var copy = record
                copy.applySystemFields(
                    Record.SystemFields(
                        recordChangeTag: String(k * 2 + index + 1), creationDate: start, modificationDate: start,
                        creatorUserRecordID: nil, lastModifiedUserRecordID: nil))
                return copy
            }
            try add(.batchResult(saved: saved, deleted: [], failedSaves: [:], failedDeletes: [:]))
            try add(.sendFinished(error: nil))
            try add(.syncScheduled(work: .send, reason: .localChanges, after: .seconds(1)))
            try add(.eventsDelivered(through: LogOffset(offset)))
        }
        if !entries.isEmpty { try log.append(entries) }
        return log
    }

    /// The must-show: a deliberately broken projection in a 100,000-entry log, its first bad
    /// offset found in fewer than 20 state reconstructions, with the violation named.
    @Test func findsABrokenProjectionIn100000EntriesWithFewReconstructions() throws {
        try withTemporaryDirectory { directory in
            let log = try Self.writeLongLog(at: directory.appendingPathComponent("long"), cycles: 10_000)
            #expect(try log.log.lastOffset == LogOffset(100_000))
            // The bug starts at 61,235; the first removal it ignores is cycle 6124's, at 61,244.
            let bisect = DeviceLogBisect(log: log.log, index: Self.brokenIndex(from: 61_235))
            let result = try bisect.run(.projectionsEqualReplay)
            #expect(result.firstBadOffset == LogOffset(61_244), "\(result)")
            #expect(result.reconstructions < 20, "\(result)")
            #expect(result.reconstructions == result.checks.count)
            #expect(result.checks.first == .init(offset: LogOffset(100_000), holds: false))
            #expect(
                result.checks.contains(.init(offset: LogOffset(61_243), holds: true))
                    || result.checks.contains { $0.offset < LogOffset(61_244) && $0.holds })
            #expect(result.violation?.hasPrefix("pending record changes: index ") == true, "\(result)")

            // The real index holds the invariant on the first 20,000 entries, checked once.
            let healthy = try log.bisect(.projectionsEqualReplay, through: LogOffset(20_000))
            #expect(healthy.firstBadOffset == nil, "\(healthy)")
            #expect(healthy.reconstructions == 1)
        }
    }

    /// `bisect { state in … }` on the story: the first offset at which the laptop holds the
    /// phone's title is the answer that refused its save (the conflict brought the server's
    /// record).
    @Test func aClosureOnTheStory() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { _, _, _, laptop in
            let deviceLog = laptop.engine.deviceLog
            let result = try deviceLog.bisect { state in
                !state.lastKnownServerRecords.contains { $0["title"] == .string("Weekend groceries") }
            }
            let bad = try #require(result.firstBadOffset, "\(result)")
            let entry = try #require(try deviceLog.log.entry(at: bad))
            #expect(try EntryDecoder.device.describe(entry)?.kindName == "batchResult")
            #expect(result.reconstructions <= 6, "\(result)")  // ⌈log₂ 17⌉ + 1
        }
    }

    /// Every built-in invariant holds on the logs of real engines: the story's two devices and
    /// the seeded simulation's three (faults, restarts, account switches), at every state the
    /// bisection reconstructs. A difference would be a bug in the index or in the replay.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func builtInInvariantsHoldOnSimulationLogs(seed: UInt64) async throws {
        try await withTemporaryDirectory { directory in
            let simulation = try Simulation(seed: seed, directory: directory)
            _ = try await simulation.run()
            for device in simulation.devices {
                for invariant in DeviceInvariant.builtIn {
                    let result = try device.engine.deviceLog.bisect(invariant)
                    #expect(result.firstBadOffset == nil, "seed \(seed), device \(device.name): \(result)")
                }
                // The replay in memory equals the index at the end, part by part.
                let log = device.engine.deviceLog
                var replay = DeviceStateReplay()
                try log.log.forEachEntry { entry in replay.apply(try DeviceEntry(entry, in: log.log), at: entry.offset)
                }
                let state = try log.state(at: try log.log.lastOffset)
                #expect(DeviceInvariant.difference(state, replay.state) == nil, "seed \(seed), device \(device.name)")
            }
        }
    }

    @Test func builtInInvariantsHoldOnTheStory() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { _, _, phone, laptop in
            for device in [phone, laptop] {
                for invariant in DeviceInvariant.builtIn {
                    let result = try device.engine.deviceLog.bisect(invariant)
                    #expect(result.firstBadOffset == nil, "\(device.name): \(result)")
                }
            }
        }
    }

    /// `logtool bisect`: a log whose zone token goes back at offset 4 fails there (status 1);
    /// the story's log holds (status 0); JSON; an unknown invariant is a usage error.
    @Test func theCommand() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, _ in
            let broken = try DeviceLog(
                directory: directory.appendingPathComponent("broken"), options: .init(durability: .fast))
            func page(_ offset: UInt64) -> DeviceEntry {
                .zoneChangesFetched(
                    zoneID: Self.notes, modifications: [], deletions: [],
                    changeToken: ZoneChangeToken(zoneID: Self.notes, incarnation: 1, offset: ChangeOffset(offset)),
                    moreComing: false)
            }
            try broken.append([page(3), page(5), .eventsDelivered(through: LogOffset(2)), page(4), page(6)])

            let fails = try await runLogtool(["bisect", "broken", "--invariant", "tokens"], in: directory)
            #expect(fails.status == 1, "\(fails)")
            #expect(fails.standardError.isEmpty, "\(fails)")
            #expect(
                fails.lines.first
                    == "bisect of log \"device\" in \(directory.appendingPathComponent("broken").path), entries 1...5, invariant tokens: change tokens never go backwards"
            )
            #expect(
                fails.lines.contains(
                    "invariant \"tokens\" first fails after offset 4 (\(fails.lines.count - 3) reconstructions): at offset 4 the token of zone Notes went from offset 5 to 4"
                ), "\(fails)")

            let json = try await runLogtool(["bisect", "broken", "--invariant", "tokens", "--json"], in: directory)
            #expect(json.status == 1)
            #expect(
                json.standardOutput.hasPrefix(
                    "{\"invariant\":\"tokens\",\"through\":5,\"holds\":false,\"firstBadOffset\":4,\"lastGoodOffset\":3,"
                ), "\(json)")

            let holds = try await runLogtool(["bisect", "laptop", "--invariant", "projections"], in: directory)
            #expect(holds.status == 0, "\(holds)")
            #expect(holds.lines.last?.hasPrefix("invariant \"projections\" holds through offset ") == true, "\(holds)")

            let unknown = try await runLogtool(["bisect", "laptop", "--invariant", "nope"], in: directory)
            #expect(unknown.status == 64, "\(unknown)")
            #expect(
                unknown.standardError.contains(
                    "unknown invariant nope; the invariants are projections, pending, tokens"), "\(unknown)")
        }
    }
}
