import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import LogToolCore
import Testing

@testable import LogSyncDiagnostics

/// `logtool diff` on the device logs of real engines (the story of `DeviceDumpCommandTests`),
/// and on forks of them made with `rewind(to:into:)`, run as a child process while the engines
/// still hold the logs.
@Suite("logtool diff")
struct DiffCommandTests {
    /// The offset just before the laptop's first edit (its first `pendingRecordZoneChangesAdded`):
    /// the laptop has fetched the notes, and push hints may have arrived.
    static func offsetBeforeFirstEdit(of device: TestDevice) throws -> LogOffset {
        var found: LogOffset?
        try device.engine.deviceLog.log.forEachEntry { entry in
            if found == nil && entry.kind == 1 { found = entry.offset }
        }
        let first = try #require(found, "the device never edited")
        return LogOffset(first.rawValue - 1)
    }

    /// The lines of a `diff` text output after `label` (indented by two or more spaces).
    static func block(after label: String, in run: ToolRun) -> [String] {
        guard let start = run.lines.firstIndex(of: label) else { return [] }
        return Array(run.lines[(start + 1)...].prefix { $0.hasPrefix("  ") })
    }

    /// The laptop's timeline forked before its edits: the fork fetches the phone's edit of n1
    /// first, then edits n1 and sends it, which succeeds (the laptop's own send conflicted).
    @Test func aForkThatWentOnDifferentlyDiffersAtTheFork() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, server, _, laptop in
            let forkPoint = try Self.offsetBeforeFirstEdit(of: laptop)
            // The fork's log is closed once made, then opened by its device.
            _ = try laptop.engine.deviceLog.rewind(
                to: forkPoint, into: directory.appendingPathComponent("fork"), options: .init(durability: .fast))
            let fork = try TestDevice("fork", server: server, directory: directory)
            try await fork.engine.fetchChanges()
            try fork.edit(DeviceDumpCommandTests.id("n1"), ["body": "milk, eggs"])
            try await fork.engine.sendChanges()
            let next = forkPoint.rawValue + 1

            let run = try await runLogtool(["diff", "laptop", "fork"], in: directory)
            #expect(run.status == 1, "\(run)")
            #expect(run.standardError.isEmpty, "\(run)")
            #expect(
                run.lines.first?.hasPrefix("A: \(directory.appendingPathComponent("laptop").path), log \"device\", ")
                    == true, "\(run)")
            #expect(
                run.lines.dropFirst().first?.hasPrefix(
                    "B: \(directory.appendingPathComponent("fork").path), log \"device\", ") == true, "\(run)")
            let entryLine = try #require(run.lines.first { $0.hasPrefix("entries first differ") }, "\(run)")
            #expect(
                entryLine.hasPrefix(
                    "entries first differ at offset \(next): A pendingRecordZoneChangesAdded (kind 1), B "), "\(run)")
            #expect(run.lines.contains("states first differ after offset \(next):"), "\(run)")
            #expect(
                Self.block(after: "states first differ after offset \(next):", in: run).starts(with: [
                    "  pending record changes:", "    A: 1: save Notes/n1", "    B: none",
                ]), "\(run)")

            // The same, as JSON, and with the sides swapped.
            let json = try await runLogtool(["diff", "fork", "laptop", "--json"], in: directory)
            #expect(json.status == 1, "\(json)")
            #expect(json.lines.count == 1, "\(json)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            #expect(Self.keys(of: json.standardOutput) == ["a", "b", "identical", "entries", "states"])
            #expect(object["identical"] as? Bool == false)
            let entries = try #require(object["entries"] as? [String: Any])
            #expect(entries["offset"] as? Int == Int(next))
            #expect((entries["b"] as? [String: Any])?["kindName"] as? String == "pendingRecordZoneChangesAdded")
            let states = try #require(object["states"] as? [String: Any])
            #expect(states["offset"] as? Int == Int(next))
            let fields = try #require(states["fields"] as? [[String: Any]])
            let pending = try #require(fields.first { $0["field"] as? String == "pendingRecordZoneChanges" }, "\(json)")
            #expect(pending["a"] as? [Any] != nil && (pending["a"] as? [Any])?.isEmpty == true, "\(json)")
            #expect((pending["b"] as? [[String: String]]) == [["change": "save", "record": "Notes/n1"]], "\(json)")
        }
    }

    @Test func identicalLogsHaveNoDifference() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, laptop in
            let last = try laptop.engine.deviceLog.log.lastOffset
            _ = try laptop.engine.deviceLog.rewind(
                to: last, into: directory.appendingPathComponent("copy"), options: .init(durability: .fast))

            let run = try await runLogtool(["diff", "laptop", "copy"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.standardError.isEmpty, "\(run)")
            #expect(run.lines.count == 3, "\(run)")
            #expect(
                run.lines.last
                    == "no difference: the same \(last) entries (kinds and payloads), so the same engine state after each",
                "\(run)")

            let json = try await runLogtool(["diff", "laptop", "laptop", "--json"], in: directory)
            #expect(json.status == 0, "\(json)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            #expect(object["identical"] as? Bool == true)
            #expect(object["entries"] is NSNull && object["states"] is NSNull, "\(json)")
            #expect((object["a"] as? [String: Any])?["lastOffset"] as? Int == Int(last.rawValue))
        }
    }

    /// A fork that was not continued is a prefix of its log: the entries differ where it ends,
    /// and the longer log's next state is compared with the fork's last.
    @Test func aPrefixDiffersWhereItEnds() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, laptop in
            let forkPoint = try Self.offsetBeforeFirstEdit(of: laptop)
            _ = try laptop.engine.deviceLog.rewind(
                to: forkPoint, into: directory.appendingPathComponent("prefix"), options: .init(durability: .fast))
            let next = forkPoint.rawValue + 1

            let run = try await runLogtool(["diff", "laptop", "prefix"], in: directory)
            #expect(run.status == 1, "\(run)")
            #expect(
                run.lines.contains(
                    "entries first differ at offset \(next): A pendingRecordZoneChangesAdded (kind 1), B has none (it ends at offset \(forkPoint))"
                ),
                "\(run)")
            #expect(
                run.lines.contains(
                    "states first differ after offset \(next) (B's last state, after offset \(forkPoint)):"), "\(run)")

            let swapped = try await runLogtool(["diff", "prefix", "laptop"], in: directory)
            #expect(swapped.status == 1, "\(swapped)")
            #expect(
                swapped.lines.contains(
                    "entries first differ at offset \(next): A has none (it ends at offset \(forkPoint)), B pendingRecordZoneChangesAdded (kind 1)"
                ),
                "\(swapped)")
            #expect(
                Self.block(
                    after: "states first differ after offset \(next) (A's last state, after offset \(forkPoint)):",
                    in: swapped
                )
                .starts(with: ["  pending record changes:", "    A: none", "    B: 1: save Notes/n1"]), "\(swapped)")
        }
    }

    /// Entries that change no table (a copy of `sendFinished`) make the logs differ, not the
    /// states: exit status 1 all the same.
    @Test func entriesThatChangeNothingDifferButTheStatesDoNot() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, laptop in
            let entries = try laptop.logEntries()
            let finished = try #require(entries.last { $0.kind == 14 }, "no sendFinished")
            do {
                try DeviceLog(directory: directory.appendingPathComponent("longer"), options: .init(durability: .fast))
                    .log.append(entries + [finished])
            }

            let run = try await runLogtool(["diff", "laptop", "longer"], in: directory)
            #expect(run.status == 1, "\(run)")
            let count = entries.count
            #expect(
                run.lines.contains(
                    "entries first differ at offset \(count + 1): A has none (it ends at offset \(count)), B sendFinished (kind 14)"
                ), "\(run)")
            #expect(
                run.lines.last
                    == "states do not differ: the same engine state after each offset through \(count + 1) (A's last, after offset \(count), for the offsets past its end)",
                "\(run)")
        }
    }

    /// The laptop's log, and a copy whose zone page (offset 5) is the one a later fetch got: the
    /// zone tokens and server records that differ are shown one by one.
    @Test func zonesAndRecordsThatDifferAreShownOneByOne() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, server, _, laptop in
            // A fork after the laptop's first database page fetches the zone again, later.
            // Its log is closed once made, then opened by its device.
            _ = try laptop.engine.deviceLog.rewind(
                to: LogOffset(3), into: directory.appendingPathComponent("late"), options: .init(durability: .fast))
            let late = try TestDevice("late", server: server, directory: directory)
            try await late.engine.fetchChanges()
            let latePage = try late.logEntries().last { $0.kind == 22 }
            let entries = try laptop.logEntries(through: LogOffset(4))
            let spliced = directory.appendingPathComponent("spliced")
            do {
                try DeviceLog(directory: spliced, options: .init(durability: .fast)).log.append(
                    entries + [try #require(latePage)])
            }

            let run = try await runLogtool(["diff", "laptop", "spliced"], in: directory)
            #expect(run.status == 1, "\(run)")
            #expect(
                run.lines.contains(
                    "entries first differ at offset 5: A zoneChangesFetched (kind 22), B zoneChangesFetched (kind 22)"),
                "\(run)")
            let block = Self.block(after: "states first differ after offset 5:", in: run)
            #expect(block.count == 9, "\(run)")
            guard block.count == 9 else { return }
            #expect(block[0] == "  zone tokens, Notes:")
            // The server's offsets count the operationGroupStarted entries of the phone's send and the laptop's fetch (F69).
            #expect(block[1] == "    A: offset 6")
            #expect(
                block[2].hasPrefix("    B: offset ") && block[2] != block[1].replacingOccurrences(of: "A:", with: "B:"),
                "\(run)")
            #expect(block[3] == "  server records, Notes/n1:")
            #expect(block[4] == "    A: Note  tag 3  body=milk title=Groceries", "\(run)")
            #expect(
                block[5].hasPrefix("    B: Note  tag ")
                    && block[5].hasSuffix("  body=milk title=\"Weekend groceries\""), "\(run)")
            #expect(block[6] == "  server records, Notes/n2:")
            #expect(block[7] == "    A: Note  tag 4  title=Draft", "\(run)")
            #expect(block[8] == "    B: none")

            let json = try await runLogtool(["diff", "laptop", "spliced", "--json"], in: directory)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            let fields = try #require((object["states"] as? [String: Any])?["fields"] as? [[String: Any]], "\(json)")
            #expect(fields.map { $0["field"] as? String } == ["zoneChangeTokens", "lastKnownServerRecords"], "\(json)")
            #expect(fields[1]["ids"] as? [String] == ["Notes/n1", "Notes/n2"], "\(json)")
            let recordsA = try #require(fields[1]["a"] as? [[String: Any]])
            #expect(recordsA.map { $0["record"] as? String } == ["Notes/n1", "Notes/n2"])
            #expect(recordsA[0]["tag"] as? String == "3")
            #expect(recordsA[0]["fields"] as? [String: String] == ["body": "milk", "title": "Groceries"])
            #expect((fields[1]["b"] as? [[String: Any]])?.map { $0["record"] as? String } == ["Notes/n1"])
        }
    }

    @Test func errorsAreOneLineWithExitStatus2() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, laptop in
            try writeFixtureLog(at: directory.appendingPathComponent("kv"), count: 3)
            let entries = try laptop.logEntries()
            let damaged = directory.appendingPathComponent("damaged")
            do { try DeviceLog(directory: damaged, options: .init(durability: .fast)).log.append(entries) }
            try corruptEntry(at: 4, of: "device", in: damaged, .flippedPayloadByte)
            // A batchResult that does not decode, written without the index (which would refuse it).
            let undecodable = directory.appendingPathComponent("undecodable")
            try Log.open(at: undecodable, named: "device", options: .init(durability: .fast))
                .append(entries + [NewEntry(kind: 12, payload: [0xFF, 0xFF])])
            let foreign = directory.appendingPathComponent("foreign")
            try Log.open(at: foreign, named: "device", options: .init(durability: .fast))
                .append(entries + [NewEntry(kind: 200, payload: [1])])

            let cases: [([String], String)] = [
                (
                    ["missing", "laptop"],
                    "logtool: error: no such path in \(directory.appendingPathComponent("missing").path): the directory does not exist"
                ),
                (
                    ["laptop", "kv"],
                    "logtool: error: \(directory.appendingPathComponent("kv").path) is not a device log: it holds the log main, not a log named device"
                ),
                (
                    ["laptop", "damaged"],
                    "logtool: error: corrupt entry at offset 4 of log \"device\" in \(damaged.path): checksum mismatch"
                ),
                (
                    ["undecodable", "laptop"],
                    "logtool: error: corrupt entry at offset \(entries.count + 1) of log \"device\" in \(undecodable.path): "
                ),
                (
                    ["laptop", "foreign"],
                    "logtool: error: corrupt entry at offset \(entries.count + 1) of log \"device\" in \(foreign.path): kind 200 is not a device entry kind\n"
                ),
            ]
            for (arguments, prefix) in cases {
                let run = try await runLogtool(["diff"] + arguments, in: directory)
                #expect(run.status == 2, "\(arguments): \(run)")
                #expect(run.standardOutput.isEmpty, "\(run)")
                #expect(run.standardError.hasPrefix(prefix), "\(arguments): \(run)")
                #expect(run.standardError.filter { $0 == "\n" }.count == 1, "\(run)")
            }
            let usage = try await runLogtool(["diff", "laptop"], in: directory)
            #expect(usage.status == 64, "\(usage)")
        }
    }

    /// The keys of a one-line JSON object's top level, in the order written.
    static func keys(of json: String) -> [String] {
        var keys: [String] = []
        var depth = 0
        var inString = false
        var escaped = false
        var current = ""
        var afterKey = false
        for character in json {
            if inString {
                if escaped {
                    escaped = false
                    current.append(character)
                    continue
                }
                if character == "\\" {
                    escaped = true
                    continue
                }
                if character == "\"" {
                    inString = false
                    afterKey = depth == 1
                    continue
                }
                current.append(character)
                continue
            }
            switch character {
            case "\"":
                inString = true
                current = ""
            case "{", "[": depth += 1
            case "}", "]": depth -= 1
            case ":": if afterKey && depth == 1 { keys.append(current) }
            default: break
            }
            if character != ":" && character != "\"" { afterKey = false }
        }
        return keys
    }
}
