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
}
