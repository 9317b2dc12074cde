import ChildProcesses
import Foundation
import KeyValueLog
import Testing

@testable import LogStore

#if canImport(Glibc)
    import Glibc
#endif

/// The fixed time of the fixture entry at `offset`: 2023-11-14T22:13:20Z plus `offset` µs.
func fixtureTime(_ offset: UInt64) -> EntryTime {
    EntryTime(microsecondsSince1970: 1_700_000_000_000_000 + Int64(offset))
}

/// The payload the fixture gives the entry at `offset` (key–value sets, every fifth a long note).
func fixtureEntry(_ offset: UInt64) -> NewEntry {
    var entry =
        offset % 5 == 0
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

/// Runs `logtool arguments` in `directory` with `TMPDIR` pointing there, and waits for it to
/// exit.
func runLogtool(_ arguments: [String], in directory: URL) async throws -> ToolRun {
    var environment = ProcessInfo.processInfo.environment
    environment["TMPDIR"] = directory.path
    let finished = try await ChildProcess.run(
        arguments, program: "logtool", environment: environment, directory: directory)
    return ToolRun(status: finished.status, standardOutput: finished.output, standardError: finished.errorOutput)
}

/// The offset at the start of a `dump` text line.
func offsetOfTextLine(_ line: String) -> UInt64? {
    line.split(separator: " ", omittingEmptySubsequences: true).first.flatMap { UInt64($0) }
}
