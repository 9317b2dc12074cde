import Foundation
import LogStore
import LogToolCore
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// `logtool dump`, run as a child process.
@Suite("logtool dump")
struct DumpCommandTests {
    @Test func printsOneLinePerEntry() async throws {
        try await withTemporaryDirectory { directory in
            let log = directory.appendingPathComponent("log")
            let entries = try writeFixtureLog(at: log, count: 25)
            let run = try await runLogtool(["dump", log.path], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.standardError.isEmpty)
            #expect(try run.lines == entries.map { try EntryFormatter().textLine($0) })
            #expect(
                run.lines[4].hasPrefix(
                    "     5  2023-11-14T22:13:20.000005Z  kind   3  size     43  6e6f7465 20353a20 61207061 796c6f61  |note 5: a payloa|…"
                ))
        }
    }

    @Test(
        arguments: [
            (["--from", "3", "--to", "7"], Array(3...7)),
            (["--from", "18"], Array(18...20)),
            (["--to", "2"], [1, 2]),
            (["--from", "20", "--to", "99"], [20]),
            (["--from", "21"], []),
        ] as [([String], [UInt64])])
    func ranges(options: [String], expected: [UInt64]) async throws {
        try await withTemporaryDirectory { directory in
            try writeFixtureLog(at: directory.appendingPathComponent("log"), count: 20)
            let run = try await runLogtool(["dump", "log"] + options, in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.lines.map(offsetOfTextLine) == expected)
        }
    }

    @Test(arguments: [["--from", "0"], ["--to", "0"], ["--from", "5", "--to", "4"], ["--from", "x"]])
    func invalidRangesAreUsageErrors(options: [String]) async throws {
        try await withTemporaryDirectory { directory in
            try writeFixtureLog(at: directory.appendingPathComponent("log"), count: 5)
            let run = try await runLogtool(["dump", "log"] + options, in: directory)
            #expect(run.status == 64, "\(run)")
            #expect(run.standardOutput.isEmpty)
        }
    }

    @Test func jsonLinesParseWithTheRightOffsets() async throws {
        try await withTemporaryDirectory { directory in
            let log = directory.appendingPathComponent("log")
            let entries = try writeFixtureLog(at: log, count: 30)
            let run = try await runLogtool(["dump", log.path, "--json", "--from", "4", "--to", "27"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.lines.count == 24)
            for (line, entry) in zip(run.lines, entries[3...26]) {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect(Set(object.keys) == ["offset", "time", "timeMicros", "kind", "size", "payloadBase64"])
                #expect(object["offset"] as? Int == Int(entry.offset.rawValue))
                let decoded = try JSONDecoder().decode(DumpedEntry.self, from: Data(line.utf8))
                #expect(decoded.offset == entry.offset.rawValue)
                #expect(decoded.timeMicros == entry.time.microsecondsSince1970)
                #expect(decoded.time == entry.time.iso8601)
                #expect(decoded.kind == entry.kind.rawValue)
                #expect(decoded.size == entry.payload.count)
                #expect(Data(base64Encoded: decoded.payloadBase64) == Data(entry.payload))
            }
        }
    }

    @Test func aMissingPathIsAOneLineError() async throws {
        try await withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("no-such-log")
            let run = try await runLogtool(["dump", missing.path], in: directory)
            #expect(run.status != 0)
            #expect(run.standardOutput.isEmpty)
            #expect(
                run.standardError == "logtool: error: no such path in \(missing.path): the directory does not exist\n")
        }
    }

    @Test func aDirectoryWithoutALogIsAOneLineError() async throws {
        try await withTemporaryDirectory { directory in
            let empty = directory.appendingPathComponent("empty")
            try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: false)
            try Data("not lmdb".utf8).write(to: empty.appendingPathComponent("notes.txt"))
            let run = try await runLogtool(["dump", empty.path], in: directory)
            #expect(run.status != 0)
            #expect(run.standardOutput.isEmpty)
            #expect(run.standardError.hasPrefix("logtool: error: not a log in "))
            #expect(run.standardError.contains(empty.lastPathComponent))
            #expect(run.standardError.filter { $0 == "\n" }.count == 1)
            // Read-only: nothing was created there.
            #expect(try FileManager.default.contentsOfDirectory(atPath: empty.path) == ["notes.txt"])
        }
    }

    @Test func aFileIsNotALog() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("file")
            try Data("x".utf8).write(to: file)
            let run = try await runLogtool(["dump", file.path], in: directory)
            #expect(run.status != 0)
            #expect(run.standardError.hasPrefix("logtool: error: not a log in "))
            #expect(run.standardError.filter { $0 == "\n" }.count == 1)
        }
    }

    @Test(arguments: Damage.allCases)
    func aCorruptEntryStopsTheDumpAfterTheEntriesBeforeIt(damage: Damage) async throws {
        try await withTemporaryDirectory { directory in
            let log = directory.appendingPathComponent("log")
            let entries = try writeFixtureLog(at: log, count: 6)
            try corruptEntry(at: 4, in: log, damage)
            for json in [false, true] {
                let run = try await runLogtool(["dump", log.path] + (json ? ["--json"] : []), in: directory)
                #expect(run.status == 1, "\(run)")
                #expect(run.lines.count == 3)
                let expected = try entries[0..<3].map {
                    json ? try EntryFormatter().jsonLine($0) : try EntryFormatter().textLine($0)
                }
                #expect(run.lines == expected)
                #expect(run.standardError.hasPrefix("logtool: error: "))
                #expect(run.standardError.contains(" at offset 4 of log \"main\" in \(log.path): "), "\(run)")
                #expect(run.standardError.filter { $0 == "\n" }.count == 1)
            }
        }
    }

    @Test func severalLogsNeedLog() async throws {
        try await withTemporaryDirectory { directory in
            let environment = directory.appendingPathComponent("env")
            try writeFixtureLog(at: environment, named: "device", count: 3)
            try writeFixtureLog(at: environment, named: "server", count: 5)

            let ambiguous = try await runLogtool(["dump", environment.path], in: directory)
            #expect(ambiguous.status == 1)
            #expect(
                ambiguous.standardError
                    == "logtool: error: \(environment.path) holds 2 logs (device, server); choose one with --log NAME\n"
            )

            let server = try await runLogtool(["dump", environment.path, "--log", "server"], in: directory)
            #expect(server.status == 0, "\(server)")
            #expect(server.lines.count == 5)

            let unknown = try await runLogtool(["dump", environment.path, "--log", "phone"], in: directory)
            #expect(unknown.status == 1)
            #expect(unknown.standardError.contains("no log named \"phone\" (logs here: device, server)"))
        }
    }

    /// (Not `device`: a log of that name is a device log, whose kinds 1–3 are not the fixture's.)
    @Test func theOnlyLogIsChosenWhateverItsName() async throws {
        try await withTemporaryDirectory { directory in
            let environment = directory.appendingPathComponent("env")
            try writeFixtureLog(at: environment, named: "phone", count: 4)
            let run = try await runLogtool(["dump", environment.path], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.lines.count == 4)
        }
    }

    /// The dump opens the environment read-only, so it runs while this process holds the log
    /// open for writing and appends between two dumps.
    @Test func dumpsALogAnotherProcessIsWriting() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("log")
            let log = try Log.open(at: path, options: .init(durability: .fast))
            try log.append((1...3).map(fixtureEntry))
            #expect(try await runLogtool(["dump", path.path], in: directory).lines.count == 3)
            try log.append((4...9).map(fixtureEntry))
            let run = try await runLogtool(["dump", path.path, "--json"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(
                try run.lines.map { try JSONDecoder().decode(DumpedEntry.self, from: Data($0.utf8)).offset }
                    == Array(1...9))
            try log.append(fixtureEntry(10))
            #expect(try log.lastOffset == 10)
        }
    }

    @Test func aLargeLogStreamsThrough() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("log")
            try writeFixtureLog(at: path, count: 5000)
            let run = try await runLogtool(["dump", path.path], in: directory)
            #expect(run.status == 0)
            #expect(run.lines.count == 5000)
            #expect(run.lines.map(offsetOfTextLine) == (1...5000).map { $0 })
        }
    }
}
