import Foundation
import LogStore
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSync

/// `logtool` on a support bundle (Docs/Privacy.md): the bundle holds the logs `device` and
/// `bundle`, and the commands read `device` without `--log`.
@Suite("logtool on a support bundle")
struct SupportBundleCommandTests {
    @Test func dumpReadsTheBundlesEntriesAtTheirOffsets() async throws {
        try await withTemporaryDirectory { directory in
            let source = directory.appendingPathComponent("device")
            let bundle = directory.appendingPathComponent("report.lsb")
            let id = Record.ID(recordName: "note-Albatross-4471", zoneID: RecordZone.ID(zoneName: "Zone-Ibis-2208"))
            do {
                let deviceLog = try DeviceLog(directory: source, options: .init(durability: .fast))
                try deviceLog.log.append(DeviceEntry.pendingRecordZoneChangesAdded([.saveRecord(id)]).newEntry)
                try deviceLog.log.append(DeviceEntry.untrackedChangesFlagged(true).newEntry)
                try deviceLog.log.append(DeviceEntry.pendingRecordZoneChangesRemoved([.saveRecord(id)]).newEntry)
                try SupportBundle.export(deviceLog.log, to: bundle, options: .init(), configuration: [:])
            }
            let run = try await runLogtool(["dump", bundle.path], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.lines.compactMap(offsetOfTextLine) == [1, 2, 3], "\(run)")
            #expect(run.standardOutput.contains("pendingRecordZoneChangesAdded"), "\(run)")
            #expect(!run.standardOutput.contains("Albatross") && !run.standardOutput.contains("Ibis"), "\(run)")
            #expect(run.standardOutput.contains("h-"), "\(run)")
            let verify = try await runLogtool(["verify", bundle.path], in: directory)
            #expect(verify.status == 0, "\(verify)")
        }
    }

    /// A range export from offset 3: `dump` shows and chooses the device's offsets; the commands
    /// that rebuild a device's state refuse it, naming the range.
    @Test func aRangeBundleDumpsTheDevicesOffsetsAndIsNotReplayed() async throws {
        try await withTemporaryDirectory { directory in
            let source = directory.appendingPathComponent("device")
            let bundle = directory.appendingPathComponent("range.lsb")
            do {
                let deviceLog = try DeviceLog(directory: source, options: .init(durability: .fast))
                for flag in [true, false, true, false, true] {
                    try deviceLog.log.append(DeviceEntry.untrackedChangesFlagged(flag).newEntry)
                }
                try SupportBundle.export(
                    deviceLog.log, to: bundle, options: .init(range: .offsets(from: 3, to: 5)), configuration: [:])
            }
            let all = try await runLogtool(["dump", bundle.path], in: directory)
            #expect(all.status == 0, "\(all)")
            #expect(all.lines.compactMap(offsetOfTextLine) == [3, 4, 5], "\(all)")
            let window = try await runLogtool(["dump", bundle.path, "--from", "4", "--to", "4"], in: directory)
            #expect(window.lines.compactMap(offsetOfTextLine) == [4], "\(window)")
            let before = try await runLogtool(["dump", bundle.path, "--to", "2"], in: directory)
            #expect(before.status == 0 && before.lines.compactMap(offsetOfTextLine).isEmpty, "\(before)")
            let replay = try await runLogtool(["replay", bundle.path], in: directory)
            #expect(replay.status == 1, "\(replay)")
            #expect(replay.standardError.contains("entries 3...5 only"), "\(replay)")
        }
    }
}
