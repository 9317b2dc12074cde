import Foundation
import LogStore
import LogSync
import LogSyncServer
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// Every command that reads a device log — `dump`, `stats`, `replay`, `diff`, `timeline`,
/// `blame`, `bisect` — on the logs of real engines still open in this process (a writer holds
/// them), and on paths that are not good logs: each failure is one line on standard error naming
/// the path (and the offset), with exit status 1 (2 for `diff`).
@Suite("logtool commands on device logs: held open, missing, not a log, corrupt")
struct CommandErrorTests {
    static let commands = ["dump", "stats", "replay", "diff", "timeline", "blame", "bisect"]

    /// The arguments that make `command` read the log at `path` (`diff` compares it with itself).
    static func arguments(_ command: String, _ path: String) -> [String] {
        switch command {
        case "diff": [command, path, path]
        case "timeline": [command, path, "--format", "text"]
        case "blame": [command, path, "--record", "n1"]
        case "bisect": [command, path, "--invariant", "projections"]
        default: [command, path]
        }
    }

    static func errorStatus(_ command: String) -> Int32 { command == "diff" ? 2 : 1 }

    @Test(arguments: commands)
    func readsALogAnEngineHoldsOpen(command: String) async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, laptop in
            let before = try laptop.engine.deviceLog.log.lastOffset
            let run = try await runLogtool(Self.arguments(command, "laptop"), in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.standardError.isEmpty, "no progress line when standard error is not a terminal: \(run)")
            #expect(!run.standardOutput.isEmpty)
            // The engine goes on appending after the read-only reader has gone.
            try laptop.engine.state.add(pendingRecordZoneChanges: [.saveRecord(DeviceDumpCommandTests.id("n3"))])
            #expect(try laptop.engine.deviceLog.log.lastOffset > before)
            let again = try await runLogtool(Self.arguments(command, "laptop"), in: directory)
            #expect(again.status == 0, "\(again)")
        }
    }

    @Test(arguments: commands)
    func aMissingPathIsAOneLineError(command: String) async throws {
        try await withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("missing")
            let run = try await runLogtool(Self.arguments(command, "missing"), in: directory)
            #expect(run.status == Self.errorStatus(command), "\(run)")
            #expect(run.standardOutput.isEmpty)
            #expect(
                run.standardError == "logtool: error: no such path in \(missing.path): the directory does not exist\n",
                "\(run)")
        }
    }

    @Test(arguments: commands)
    func aDirectoryThatIsNotALogIsAOneLineError(command: String) async throws {
        try await withTemporaryDirectory { directory in
            let notes = directory.appendingPathComponent("notes")
            try FileManager.default.createDirectory(at: notes, withIntermediateDirectories: false)
            try Data("not lmdb".utf8).write(to: notes.appendingPathComponent("notes.txt"))
            let file = directory.appendingPathComponent("file")
            try Data("x".utf8).write(to: file)
            for path in ["notes", "file"] {
                let run = try await runLogtool(Self.arguments(command, path), in: directory)
                #expect(run.status == Self.errorStatus(command), "\(run)")
                #expect(run.standardOutput.isEmpty)
                #expect(
                    run.standardError.hasPrefix(
                        "logtool: error: not a log in \(directory.appendingPathComponent(path).path)"), "\(run)")
                #expect(run.standardError.filter { $0 == "\n" }.count == 1)
            }
            // Read-only: nothing was created there.
            #expect(try FileManager.default.contentsOfDirectory(atPath: notes.path) == ["notes.txt"])
        }
    }

    /// A copy of the laptop's device log (with its index) with a flipped payload byte at
    /// offset 6: every command names that offset; `dump` prints the five entries before it.
    @Test(arguments: commands)
    func aCorruptEntryIsNamedByItsOffset(command: String) async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, laptop in
            let entries = try laptop.logEntries()
            let damaged = directory.appendingPathComponent("damaged")
            do { try DeviceLog(directory: damaged, options: .init(durability: .fast)).log.append(entries) }
            try corruptEntry(at: 6, of: "device", in: damaged, .flippedPayloadByte)

            let arguments = command == "diff" ? [command, "laptop", "damaged"] : Self.arguments(command, "damaged")
            let run = try await runLogtool(arguments, in: directory)
            #expect(run.status == Self.errorStatus(command), "\(run)")
            #expect(
                run.standardError.hasPrefix(
                    "logtool: error: corrupt entry at offset 6 of log \"device\" in \(damaged.path): checksum mismatch"),
                "\(run)")
            #expect(run.standardError.filter { $0 == "\n" }.count == 1)
            #expect(run.lines.count == (command == "dump" ? 5 : 0), "\(run)")
        }
    }
}
