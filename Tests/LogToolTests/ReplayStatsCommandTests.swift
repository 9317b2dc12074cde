import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import LogToolCore
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// `logtool stats` and `logtool replay` on the device logs of real engines (the story of
/// `DeviceDumpCommandTests`), run as a child process while the engines still hold the logs.
@Suite("logtool stats and replay")
struct ReplayStatsCommandTests {
    /// The value after `label:` on the line that starts with it.
    static func value(_ label: String, in run: ToolRun) -> String? {
        run.lines.first { $0.hasPrefix(label + ":") }
            .map { String($0.dropFirst(label.count + 1)).trimmingCharacters(in: .whitespaces) }
    }

    /// The numbered items listed under `label` (`1. save Notes/n1` → `save Notes/n1`).
    static func items(under label: String, in run: ToolRun) -> [String] {
        guard let start = run.lines.firstIndex(where: { $0.hasPrefix(label + ":") }) else { return [] }
        return run.lines[(start + 1)...].prefix { $0.hasPrefix(" ") }.map {
            let text = $0.trimmingCharacters(in: .whitespaces)
            return String(text[text.index(after: text.firstIndex(of: " ")!)...])
        }
    }

    @Test func statsCountsMatchTheDump() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, phone, laptop in
            for device in ["phone", "laptop"] {
                let dump = try await runLogtool(["dump", device, "--json"], in: directory)
                #expect(dump.status == 0, "\(dump)")
                var expected: [Int: (name: String, count: Int, bytes: Int)] = [:]
                for line in dump.lines {
                    let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                    let kind = try #require(object["kind"] as? Int)
                    let name = try #require(object["kindName"] as? String)
                    expected[kind, default: (name, 0, 0)].count += 1
                    expected[kind]!.bytes += try #require(object["size"] as? Int)
                }

                let run = try await runLogtool(["stats", device], in: directory)
                #expect(run.status == 0, "\(run)")
                #expect(run.standardError.isEmpty)
                #expect(Self.value("entries", in: run) == String(dump.lines.count), "\(run)")
                let total = expected.values.reduce(0) { $0 + $1.bytes }
                #expect(Self.value("payload", in: run)?.hasPrefix("\(total) bytes") == true, "\(run)")
                #expect(Self.value("log", in: run)?.hasPrefix("device in ") == true)
                let first = try #require(
                    dump.lines.first.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                )
                #expect(Self.value("first", in: run) == first["time"] as? String)
                let fileSize =
                    try FileManager.default.attributesOfItem(
                        atPath: directory.appendingPathComponent(device).appendingPathComponent("data.mdb").path)[.size]
                    as? NSNumber
                #expect(
                    Self.value("file size", in: run)?.hasPrefix("\(try #require(fileSize)) bytes") == true, "\(run)")

                // The per-kind rows follow the header `kind  name  entries  payload bytes`.
                let header = try #require(run.lines.firstIndex { $0.hasPrefix("kind  name") }, "\(run)")
                var rows: [Int: (name: String, count: Int, bytes: Int)] = [:]
                for line in run.lines[(header + 1)...] {
                    let columns = line.split(separator: " ").map(String.init)
                    try #require(columns.count == 4, "\(line)")
                    rows[try #require(Int(columns[0]))] = (
                        columns[1], try #require(Int(columns[2])), try #require(Int(columns[3]))
                    )
                }
                #expect(rows.keys.sorted() == expected.keys.sorted())
                for (kind, row) in rows {
                    #expect(
                        row.name == expected[kind]?.name && row.count == expected[kind]?.count
                            && row.bytes == expected[kind]?.bytes,
                        "kind \(kind): \(row) vs \(String(describing: expected[kind]))")
                }
            }
        }
    }

    @Test func replayShowsPendingChangesBeforeTheSendAndNoneAtTheEnd() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, phone, _ in
            // Offsets 1–3 add the zone and the notes; 5 starts the first send (expectedPhoneStart).
            let before = try await runLogtool(["replay", "phone", "--to", "3"], in: directory)
            #expect(before.status == 0, "\(before)")
            #expect(before.standardError.isEmpty)
            #expect(Self.value("state at offset", in: before) == "3")
            #expect(
                Self.items(under: "pending record changes", in: before) == ["save Notes/n1", "save Notes/n2"],
                "\(before)")
            #expect(Self.items(under: "pending database changes", in: before) == ["save Notes"], "\(before)")
            #expect(Self.value("account", in: before) == "never checked")
            #expect(Self.value("database token", in: before) == "none")

            let last = try phone.engine.deviceLog.log.lastOffset
            let end = try await runLogtool(["replay", "phone"], in: directory)
            #expect(end.status == 0, "\(end)")
            #expect(Self.value("state at offset", in: end) == String(last.rawValue))
            #expect(Self.value("pending record changes", in: end) == "none", "\(end)")
            #expect(Self.value("pending database changes", in: end) == "none", "\(end)")
            #expect(Self.value("in-flight record changes", in: end) == "none", "\(end)")
            #expect(Self.value("known zones", in: end) == "1: Notes", "\(end)")
            #expect(Self.value("account", in: end) == "user _user1", "\(end)")

            // The same state as LogSyncTesting's time travel gives in-process.
            let state = try phone.engine.deviceLog.state(at: LogOffset(3))
            #expect(before.lines.dropFirst().joined(separator: "\n") + "\n" == DeviceStateReport.text(state))

            let past = try await runLogtool(["replay", "phone", "--to", String(last.rawValue + 1)], in: directory)
            #expect(past.status == 1, "\(past)")
            #expect(
                past.standardError.hasPrefix("logtool: error: offset \(last.rawValue + 1) is past the end"), "\(past)")
        }
    }

    @Test func verifyPassesOnAGoodLog() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, phone, laptop in
            for (name, device) in [("phone", phone), ("laptop", laptop)] {
                let last = try device.engine.deviceLog.log.lastOffset
                let run = try await runLogtool(["replay", name, "--verify"], in: directory)
                #expect(run.status == 0, "\(run)")
                #expect(run.standardError.isEmpty, "\(run)")
                #expect(run.lines.last == "projections verified through offset \(last)", "\(run)")
            }
        }
    }

    @Test func replayOfAMissingPathIsAOneLineError() async throws {
        try await withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("missing")
            let run = try await runLogtool(["replay", "missing"], in: directory)
            #expect(run.status == 1, "\(run)")
            #expect(run.standardOutput.isEmpty)
            #expect(
                run.standardError == "logtool: error: no such path in \(missing.path): the directory does not exist\n",
                "\(run)")

            let stats = try await runLogtool(["stats", "missing"], in: directory)
            #expect(stats.status == 1, "\(stats)")
            #expect(stats.standardError.filter { $0 == "\n" }.count == 1, "\(stats)")
        }
    }

    @Test func replayOfALogThatIsNotADeviceLogIsAOneLineError() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("kv")
            try writeFixtureLog(at: path, count: 3)
            let run = try await runLogtool(["replay", "kv"], in: directory)
            #expect(run.status == 1, "\(run)")
            #expect(run.standardError.hasPrefix("logtool: error: "), "\(run)")
            #expect(run.standardError.contains("is not a device log: it holds the log main"), "\(run)")
            #expect(run.standardError.filter { $0 == "\n" }.count == 1)

            let stats = try await runLogtool(["stats", "kv"], in: directory)
            #expect(stats.status == 0, "\(stats)")
            #expect(Self.value("entries", in: stats) == "3", "\(stats)")
        }
    }

    @Test func aCorruptEntryIsReportedAtItsOffset() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, phone, _ in
            let entries = try phone.logEntries()
            let damaged = directory.appendingPathComponent("damaged")
            // A device log of its own (with the index, which replay opens), closed before damaging it.
            do { try DeviceLog(directory: damaged, options: .init(durability: .fast)).log.append(entries) }
            try corruptEntry(at: 4, of: "device", in: damaged, .flippedPayloadByte)
            for command in ["stats", "replay"] {
                let run = try await runLogtool([command, "damaged"], in: directory)
                #expect(run.status == 1, "\(run)")
                #expect(
                    run.standardError.hasPrefix(
                        "logtool: error: corrupt entry at offset 4 of log \"device\" in \(damaged.path): "), "\(run)")
                #expect(run.standardError.filter { $0 == "\n" }.count == 1)
            }
        }
    }
}
