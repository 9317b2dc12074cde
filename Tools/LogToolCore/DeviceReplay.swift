import Foundation
import LogStore
import LogSync
import LogSyncTesting

/// `logtool replay`: a device log's engine state at an offset, and optionally a check of its
/// projections.
public enum DeviceReplay {
    /// Opens the device log in `path` read-only, replays its entries `1...end` (`nil`: the
    /// last) into a scratch directory with `DeviceLog.state(at:)` and writes the state
    /// (`DeviceStateReport`) to `output`; with `verify`, then runs `verifyProjections()` on
    /// the log and writes `projections verified through offset N`.
    ///
    /// - Throws: `LogStoreError` for a missing path, a directory without a log, or a corrupt
    ///   entry (naming its offset); `LogToolError` for a log that is not a device log, an
    ///   offset past the end, or projections that differ from their rebuild (naming the first
    ///   difference).
    public static func run(
        path: String, through end: LogOffset?, verify: Bool, to output: inout some TextOutputStream
    ) throws {
        let deviceLog = try openDeviceLog(at: path)
        let log = deviceLog.log
        let last = try log.lastOffset
        let target = end ?? last
        guard target <= last else {
            throw LogToolError(
                "--to \(target) is past the end of the log \"\(log.name)\" in \(log.environment.path), which ends at offset \(last)")
        }
        // Decode every replayed entry first, so that a corrupt one is named by its offset in
        // this log rather than by the replay failing in the scratch copy.
        var cursor = try log.entries(from: .first, through: target)
        while let entry = try cursor.next() {
            do {
                _ = try EntryDecoder.device.describe(entry)
            } catch {
                var located = error
                if located.path == nil { located.path = log.environment.path }
                if located.log == nil { located.log = log.name }
                throw located
            }
        }
        let state = try deviceLog.state(at: target)
        output.write("replayed entries 1...\(target) of \(last) of log \"\(log.name)\" in \(log.environment.path)\n")
        output.write(DeviceStateReport.text(state))
        if verify {
            let through = try log.lastOffset
            if let mismatch = try log.verifyProjections() {
                throw LogToolError("projections not verified: \(mismatch)")
            }
            output.write("projections verified through offset \(through)\n")
        }
    }

    /// Opens the device log in `path` read-only (so an engine may be appending to it).
    ///
    /// - Throws: the log store's error for a missing path or a directory without a log;
    ///   `LogToolError` when the environment holds no log named `device`.
    public static func openDeviceLog(at path: String) throws -> DeviceLog {
        let options = LogEnvironment.Options(readOnly: true)
        let environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: options)
        let names = try environment.logNames()
        guard names.contains(DeviceLog.logName) else {
            let held = names.isEmpty ? "no logs" : (names.count == 1 ? "the log " : "the logs ") + names.sorted().joined(separator: ", ")
            throw LogToolError(
                "\(environment.path) is not a device log: it holds \(held), not a log named \(DeviceLog.logName)")
        }
        return try DeviceLog(directory: URL(fileURLWithPath: environment.path), options: options)
    }
}
