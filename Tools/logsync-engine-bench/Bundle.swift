import BenchSupport
import Foundation
import LogStore
import LogSync

/// The support-bundle phase: exporting a long device log as a support bundle, redacted, against
/// the floor of copying its file. The log is built as the open phase builds its logs (a
/// device's life, `.fast`); then, alternately in one run, each in a fresh process, an export
/// (`SupportBundle.export`, the code under `SyncEngine.exportSupportBundle`, redaction and
/// hashed names on) and a copy of `data.mdb` (read and written 1 MiB at a time, then synced, as
/// `cp` and a sync do). Targets (issue 34): the export streams, its peak anonymous memory under
/// 64 MiB whatever the log's length, and it runs at least at half the copy's speed.
extension Child {
    /// Exports the log built in `<phase-dir>/device` to `<phase-dir>/report.lsb` and measures it.
    static func bundleExportPhase(_ options: EngineBench, _ directory: URL) throws -> PhaseResult {
        let log = try Log.open(
            at: directory.appendingPathComponent("device"), named: DeviceLog.logName,
            options: LogEnvironment.Options(readOnly: true))
        let bundle = directory.appendingPathComponent("report.lsb")
        try? FileManager.default.removeItem(at: bundle)
        var result = PhaseResult(phase: "bundle-export", durability: "durable", records: options.recordCount)
        result.anonBefore = Memory.read().anon
        let sampler = PeakSampler()
        result.hwmBefore = Memory.read().hwm
        let cpuBefore = cpuSeconds()
        let started = ContinuousClock.now
        try SupportBundle.export(log, to: bundle, options: .init(), configuration: ["database": "private"])
        result.seconds = seconds(since: started)
        result.cpuSeconds = cpuSeconds() - cpuBefore
        result.peakAnon = sampler.stop()
        result.entries = Int(try log.lastOffset.rawValue)
        result.deviceLogBytes = fileSize(directory.appendingPathComponent("device/data.mdb"))
        result.serverBytes = fileSize(bundle.appendingPathComponent("data.mdb"))
        fillMemory(&result)
        try FileManager.default.removeItem(at: bundle)
        return result
    }

    /// Copies `<phase-dir>/device/data.mdb` to `<phase-dir>/copy.mdb`, 1 MiB per read and write,
    /// then syncs the copy: the floor of any export that reads the whole log.
    static func bundleCopyPhase(_ options: EngineBench, _ directory: URL) throws -> PhaseResult {
        let source = directory.appendingPathComponent("device/data.mdb")
        let destination = directory.appendingPathComponent("copy.mdb")
        try? FileManager.default.removeItem(at: destination)
        var result = PhaseResult(phase: "bundle-copy", durability: "durable", records: options.recordCount)
        let cpuBefore = cpuSeconds()
        let started = ContinuousClock.now
        let input = open(source.path, O_RDONLY)
        let output = open(destination.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard input >= 0, output >= 0 else { throw BenchError("cannot open \(source.path) or \(destination.path)") }
        defer {
            close(input)
            close(output)
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var copied = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            guard count >= 0 else { throw BenchError("reading \(source.path) failed: errno \(errno)") }
            if count == 0 { break }
            var written = 0
            while written < count {
                let step = buffer.withUnsafeBytes { write(output, $0.baseAddress! + written, count - written) }
                guard step > 0 else { throw BenchError("writing \(destination.path) failed: errno \(errno)") }
                written += step
            }
            copied += count
        }
        guard fsync(output) == 0 else { throw BenchError("syncing \(destination.path) failed: errno \(errno)") }
        result.seconds = seconds(since: started)
        result.cpuSeconds = cpuSeconds() - cpuBefore
        result.deviceLogBytes = copied
        fillMemory(&result)
        try FileManager.default.removeItem(at: destination)
        return result
    }
}

extension Parent {
    /// Builds the log, then runs the export and the copy alternately; returns the report's rows.
    static func bundleRuns(_ options: EngineBench, _ scratch: ScratchDirectory) throws -> [[String]] {
        let size = options.bundleLength
        let directory = scratch.subdirectory("bundle-\(size)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { scratch.remove(directory) }
        emit("building a device log of \(grouped(size)) entries (.fast)")
        let build = try child(.build, durability: .fast, options, directory, scratch, records: size)
        emit(
            "  \(seconds(build.seconds)) s, data.mdb \(String(format: "%.1f", Double(build.deviceLogBytes) / 1_048_576)) MiB"
        )
        var exports: [PhaseResult] = []
        var copies: [PhaseResult] = []
        for run in 0..<options.bundleRunCount {
            // Half the runs copy first, so that neither side always runs on a warmer page cache.
            for export in run % 2 == 0 ? [true, false] : [false, true] {
                let result = try child(
                    export ? .bundleExport : .bundleCopy, durability: .durable, options, directory, scratch,
                    records: size)
                if export {
                    guard result.entries == size else {
                        throw BenchError("the export read \(result.entries) entries, not \(size)")
                    }
                    exports.append(result)
                    emit(
                        "  run \(run + 1), export: \(seconds(result.seconds)) s, bundle "
                            + "\(String(format: "%.1f", Double(result.serverBytes) / 1_048_576)) MiB, peak RssAnon "
                            + "\(mib(result.peakAnon)) MiB (\(mib(result.anonBefore)) MiB before)")
                } else {
                    copies.append(result)
                    emit("  run \(run + 1), copy: \(seconds(result.seconds)) s")
                }
            }
        }
        let bytes = Double(build.deviceLogBytes) / 1_048_576
        let export = Samples(values: exports.map(\.seconds)).median
        let copy = Samples(values: copies.map(\.seconds)).median
        let peak = exports.map(\.peakAnon).max() ?? 0
        let before = exports.map(\.anonBefore).min() ?? 0
        return [
            [
                "support bundle", "entries", "data.mdb MiB", "export s (median)", "entries/s", "MiB/s",
                "peak RssAnon MiB (max; before)", "copy s (median)", "copy MiB/s", "export speed / copy",
            ],
            [
                "redacted, names hashed", grouped(size), String(format: "%.1f", bytes), seconds(export),
                grouped(Int(Double(size) / export)), String(format: "%.1f", bytes / export),
                "\(mib(peak)) (\(mib(before)))", seconds(copy), String(format: "%.1f", bytes / copy),
                ratio(copy / export),
            ],
        ]
    }
}
