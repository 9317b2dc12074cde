import Foundation
@testable import LogStore
import LogStoreFixtures
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A new directory of its own for one test, removed when `body` returns.
func withTemporaryDirectory<R>(_ body: (URL) throws -> R) throws -> R {
    let template = FileManager.default.temporaryDirectory.appendingPathComponent("logtool-tests-XXXXXX").path
    var bytes = Array(template.utf8CString)
    let created = try #require(mkdtemp(&bytes), "mkdtemp failed: errno \(errno)")
    let directory = URL(fileURLWithPath: String(cString: created))
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// `withTemporaryDirectory` for an async body.
func withTemporaryDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
    let template = FileManager.default.temporaryDirectory.appendingPathComponent("logtool-tests-XXXXXX").path
    var bytes = Array(template.utf8CString)
    let created = try #require(mkdtemp(&bytes), "mkdtemp failed: errno \(errno)")
    let directory = URL(fileURLWithPath: String(cString: created))
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// The fixed time of the fixture entry at `offset`: 2023-11-14T22:13:20Z plus `offset` µs.
func fixtureTime(_ offset: UInt64) -> EntryTime {
    EntryTime(microsecondsSince1970: 1_700_000_000_000_000 + Int64(offset))
}

/// The payload the fixture gives the entry at `offset` (key–value sets, every fifth a long note).
func fixtureEntry(_ offset: UInt64) -> NewEntry {
    var entry = offset % 5 == 0
        ? KeyValueEntry.note(Array("note \(offset): a payload longer than sixteen bytes".utf8)).newEntry
        : KeyValueEntry.set(key: "key\(offset % 7)", value: Array("value \(offset)".utf8)).newEntry
    entry.time = fixtureTime(offset)
    return entry
}

/// Writes `count` fixture entries to the log `name` in `directory`, closing the log afterwards,
/// and returns them as they read back.
@discardableResult
func writeFixtureLog(at directory: URL, named name: String = "main", count: UInt64) throws -> [LogEntry] {
    let log = try Log.open(at: directory, named: name, options: .init(durability: .fast))
    if count > 0 { try log.append((1...count).map(fixtureEntry)) }
    var entries: [LogEntry] = []
    try log.forEachEntry { entries.append($0) }
    return entries
}

/// How to damage a stored entry.
enum Damage: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// One payload byte flipped: the checksum no longer matches.
    case flippedPayloadByte
    /// The whole value replaced by 40 bytes of garbage (its format version byte is 0xDE).
    case garbage
    /// The value cut to 3 bytes, shorter than the envelope.
    case truncated

    var testDescription: String { rawValue }
}

/// Writes garbage over the stored value of the entry at `offset`, in the log's own table.
func corruptEntry(at offset: UInt64, of name: String = "main", in directory: URL, _ damage: Damage) throws {
    let log = try Log.open(at: directory, named: name, options: .init(durability: .fast))
    let key = withUnsafeBytes(of: offset.bigEndian) { Array($0) }
    try log.environment.write { transaction in
        var value = try #require(try transaction.value(forKey: key, in: log.entriesTable))
        switch damage {
        case .flippedPayloadByte: value[Envelope.headerSize] ^= 0xFF
        case .garbage: value = Array(repeating: [0xDE, 0xAD, 0xBE, 0xEF], count: 10).flatMap { $0 }
        case .truncated: value = Array(value.prefix(3))
        }
        try transaction.put(value, forKey: key, in: log.entriesTable)
    }
}

/// What a run of the `logtool` binary did.
struct ToolRun: CustomStringConvertible {
    var status: Int32
    var standardOutput: String
    var standardError: String

    /// Standard output's lines, without line breaks.
    var lines: [String] {
        var lines = standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    var description: String { "exit \(status)\nstdout:\n\(standardOutput)stderr:\n\(standardError)" }
}

/// The `logtool` executable SwiftPM built next to the test bundle (`.build/debug/logtool`).
let logtoolExecutable: URL? = {
    if let path = ProcessInfo.processInfo.environment["LOGTOOL_PATH"] { return URL(fileURLWithPath: path) }
    var starts: [URL] = []
    if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        starts.append(URL(fileURLWithPath: exe))
    }
    starts.append(URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL)
    for start in starts {
        // Linux: .build/debug/LogSyncPackageTests.xctest; macOS: …/X.xctest/Contents/MacOS/X.
        var directory = start.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("logtool")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
    }
    return nil
}()

/// Runs `logtool arguments` in `directory`, with the child's output in files there (no pipes to
/// drain), and waits for it to exit. `TMPDIR` points into `directory`.
func runLogtool(_ arguments: [String], in directory: URL) throws -> ToolRun {
    let executable = try #require(logtoolExecutable, "no logtool binary next to \(CommandLine.arguments[0])")
    let scratch = directory.appendingPathComponent("run-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let outURL = scratch.appendingPathComponent("stdout")
    let errURL = scratch.appendingPathComponent("stderr")
    try #require(FileManager.default.createFile(atPath: outURL.path, contents: nil))
    try #require(FileManager.default.createFile(atPath: errURL.path, contents: nil))
    let out = try FileHandle(forWritingTo: outURL)
    let err = try FileHandle(forWritingTo: errURL)

    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.currentDirectoryURL = directory
    var environment = ProcessInfo.processInfo.environment
    environment["TMPDIR"] = directory.path
    process.environment = environment
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = err
    try process.run()
    process.waitUntilExit()
    try out.close()
    try err.close()
    return ToolRun(
        status: process.terminationStatus,
        standardOutput: try String(contentsOf: outURL, encoding: .utf8),
        standardError: try String(contentsOf: errURL, encoding: .utf8))
}

/// The offset at the start of a `dump` text line.
func offsetOfTextLine(_ line: String) -> UInt64? {
    line.split(separator: " ", omittingEmptySubsequences: true).first.flatMap { UInt64($0) }
}
