// Measurements in a process of their own: this executable run again, passing back a result.
import Foundation

/// This executable, run again as a child process for one measurement, so that the measurement
/// has the process to itself (its peak memory, a cold start). The child writes its result as
/// JSON to the file the parent names, and exits with status 0.
package enum ChildProcess {
    /// Runs this executable with `arguments` followed by `--result <file>`, waits for it, and
    /// decodes the result it wrote to `file`. `what` names the measurement in errors.
    package static func run<Result: Decodable>(
        _ arguments: [String], resultFile file: URL, what: String, as type: Result.Type = Result.self
    ) throws -> Result {
        try? FileManager.default.removeItem(at: file)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = arguments + ["--result", file.path]
        try process.run()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw BenchError("\(what) failed: status \(process.terminationStatus)")
        }
        return try JSONDecoder().decode(Result.self, from: Data(contentsOf: file))
    }

    /// In the child: writes `result` where the parent's `--result` said (nowhere without it).
    package static func write(_ result: some Encodable, to path: String?) throws {
        guard let path else { return }
        try JSONEncoder().encode(result).write(to: URL(fileURLWithPath: path))
    }
}
