// Helpers the benchmark executables share: memory figures, timing samples, tables, the
// machine's description, the report's first and last lines, and the scratch directory.
import Foundation

/// Resident memory of this process, from /proc/self/status (kB figures; 0 where unavailable).
package struct Memory {
    package init() {}

    package var rss = 0
    package var anon = 0
    package var file = 0
    package var hwm = 0

    package static func read() -> Memory {
        var memory = Memory()
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return memory }
        for line in text.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == ":" || $0 == " " || $0 == "\t" })
            guard parts.count >= 2, let kB = Int(parts[1]) else { continue }
            switch parts[0] {
            case "VmRSS": memory.rss = kB
            case "RssAnon": memory.anon = kB
            case "RssFile": memory.file = kB
            case "VmHWM": memory.hwm = kB
            default: break
            }
        }
        return memory
    }

    package var rssMiB: String { mib(rss) }
    package var description: String {
        "VmRSS \(mib(rss)) MiB (RssAnon \(mib(anon)), RssFile \(mib(file))), VmHWM \(mib(hwm)) MiB"
    }
}

package func mib(_ kB: Int) -> String { String(format: "%.1f", Double(kB) / 1024) }

/// Timing samples in seconds.
package struct Samples {
    package init(values: [Double] = []) { self.values = values }

    package var values: [Double] = []

    package var median: Double { percentile(50) }
    package var p99: Double { percentile(99) }

    /// Nearest-rank percentile.
    package func percentile(_ p: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}

package func ms(_ seconds: Double) -> String { String(format: "%.3f ms", seconds * 1000) }
package func ratio(_ value: Double) -> String { String(format: "%.2f", value) }

/// `1234567` → `1,234,567`.
package func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (i, ch) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(ch)
    }
    return value < 0 ? "-" + out : out
}

package func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
    let fill = String(repeating: " ", count: max(0, width - text.count))
    return left ? fill + text : text + fill
}

/// An aligned table; the first row is the header. The columns in `leftAligned` (the first by
/// default) are aligned left, the others right.
package func table(_ cells: [[String]], leftAligned: Set<Int> = [0]) -> String {
    var widths = [Int](repeating: 0, count: cells.map(\.count).max() ?? 0)
    for line in cells { for (i, cell) in line.enumerated() { widths[i] = max(widths[i], cell.count) } }
    var lines: [String] = []
    for (n, line) in cells.enumerated() {
        lines.append(
            line.enumerated().map { i, cell in pad(cell, widths[i], left: !leftAligned.contains(i)) }.joined(
                separator: "  "))
        if n == 0 { lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
    }
    return lines.joined(separator: "\n")
}

/// The 1, 5 and 15-minute load averages, from /proc/loadavg.
package func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

package func cpuModel() -> String {
    guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return "CPU unknown" }
    for line in text.split(separator: "\n") where line.hasPrefix("model name") {
        return line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
            ?? "CPU unknown"
    }
    return "CPU unknown"
}

/// The first lines of a report: what the benchmark measures, then the machine (with `software`,
/// such as the LMDB version, in front), the load and the scratch directory.
package func printHeader(_ title: String, software: String? = nil, scratch: ScratchDirectory) {
    emit(title)
    let machine =
        "\(ProcessInfo.processInfo.activeProcessorCount) cores; \(cpuModel()); load average at start: \(loadAverage())"
    emit("  \(software.map { $0 + "; " } ?? "")\(machine); scratch: \(scratch.url.path)")
}

/// The last line of a report.
package func printLoadAtEnd() {
    emit("load average at the end: \(loadAverage()) (other processes on the machine skew the figures)")
}

/// The scratch directory: a fresh subdirectory of the one given with `--dir` (or of the
/// temporary directory), removed at the end, with `--dir` itself if this program created it.
package final class ScratchDirectory {
    package let url: URL
    private let createdParent: URL?
    private var runs = 0

    package init(
        _ path: String?,
        prefix: String = CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "bench"
    ) throws {
        let fileManager = FileManager.default
        let parent = path.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? fileManager.temporaryDirectory
        createdParent = fileManager.fileExists(atPath: parent.path) ? nil : parent
        url = parent.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try fileManager.createDirectory(at: url, withIntermediateDirectories: true)
    }

    package func subdirectory(_ name: String) -> URL { url.appendingPathComponent(name, isDirectory: true) }

    /// A new subdirectory name for each call (`run-1`, `run-2`, …), not created.
    package func runDirectory() -> URL {
        runs += 1
        return subdirectory("run-\(runs)")
    }

    package func remove(_ directory: URL) { try? FileManager.default.removeItem(at: directory) }

    package func finish() {
        try? FileManager.default.removeItem(at: url)
        if let createdParent { try? FileManager.default.removeItem(at: createdParent) }
    }
}

/// Writes a line to standard output unbuffered, so progress shows when output goes to a file.
package func emit(_ line: String = "") {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// A benchmark's failure: the message is the whole report of it.
package struct BenchError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

extension Duration {
    /// The duration in seconds.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}

/// Seconds from `start` until now.
package func seconds(since start: ContinuousClock.Instant) -> Double { (ContinuousClock.now - start).seconds }
