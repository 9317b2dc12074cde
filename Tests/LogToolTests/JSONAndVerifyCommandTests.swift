import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import LogToolCore
import Testing

@testable import LogSyncDiagnostics

/// `stats --json`, `replay --json`, and `replay --verify` on a device log whose stored index
/// was made to differ from its rebuild, on the logs of real engines.
@Suite("logtool --json and a failing replay --verify")
struct JSONAndVerifyCommandTests {
    static func object(_ run: ToolRun) throws -> [String: Any] {
        #expect(run.lines.count == 1, "one object on one line: \(run)")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any], "\(run)")
    }

    @Test func statsJSONHasTheTextsFigures() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, phone, _ in
            let text = try await runLogtool(["stats", "phone"], in: directory)
            let run = try await runLogtool(["stats", "phone", "--json"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.standardError.isEmpty)
            let object = try Self.object(run)
            #expect(
                DiffCommandTests.keys(of: run.standardOutput) == [
                    "log", "path", "entries", "payloadBytes", "first", "last", "firstMicros", "lastMicros",
                    "spanMicros", "fileSize",
                    "kinds",
                ])
            let last = try phone.engine.deviceLog.log.lastOffset
            #expect(object["log"] as? String == "device")
            #expect(object["path"] as? String == directory.appendingPathComponent("phone").path)
            #expect(object["entries"] as? Int == Int(last.rawValue))
            #expect(
                ReplayStatsCommandTests.value("payload", in: text)?.hasPrefix(
                    "\(object["payloadBytes"] as? Int ?? -1) bytes") == true)
            #expect(ReplayStatsCommandTests.value("first", in: text) == object["first"] as? String)
            let first = try #require(object["firstMicros"] as? Int)
            let lastMicros = try #require(object["lastMicros"] as? Int)
            #expect(object["spanMicros"] as? Int == lastMicros - first)
            let kinds = try #require(object["kinds"] as? [[String: Any]])
            #expect(kinds.map { $0["kind"] as? Int ?? 0 } == kinds.map { $0["kind"] as? Int ?? 0 }.sorted())
            #expect(kinds.reduce(0) { $0 + ($1["entries"] as? Int ?? 0) } == Int(last.rawValue))
            let prepared = try #require(kinds.first { $0["kind"] as? Int == 11 })
            #expect(prepared["name"] as? String == "batchPrepared")
            #expect(prepared["entries"] as? Int == 2)

            // An empty log: null times.
            let empty = directory.appendingPathComponent("empty")
            try writeFixtureLog(at: empty, count: 0)
            let emptyRun = try await runLogtool(["stats", "empty", "--json"], in: directory)
            let emptyObject = try Self.object(emptyRun)
            #expect(emptyObject["entries"] as? Int == 0)
            #expect(emptyObject["first"] is NSNull && emptyObject["spanMicros"] is NSNull, "\(emptyRun)")
            #expect((emptyObject["kinds"] as? [Any])?.isEmpty == true)
        }
    }

    @Test func replayJSONHasTheStateTheTextShows() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, server, phone, laptop in
            let last = try laptop.engine.deviceLog.log.lastOffset
            let run = try await runLogtool(["replay", "laptop", "--verify", "--json"], in: directory)
            #expect(run.status == 0, "\(run)")
            let object = try Self.object(run)
            #expect(
                DiffCommandTests.keys(of: run.standardOutput) == ["log", "path", "lastOffset", "state", "verification"])
            #expect(object["lastOffset"] as? Int == Int(last.rawValue))
            let verification = try #require(object["verification"] as? [String: Any])
            #expect(verification["verified"] as? Bool == true)
            #expect(verification["through"] as? Int == Int(last.rawValue))

            let state = try #require(object["state"] as? [String: Any])
            #expect(state["offset"] as? Int == Int(last.rawValue))
            #expect(state.keys.count == 1 + DeviceStateReport.fields.count)
            #expect(state["knownZoneIDs"] as? [String] == ["Notes"])
            // The server's offsets count the operationGroupStarted entries of the phone's send and the laptop's fetch (F69).
            #expect((state["databaseChangeToken"] as? [String: Int])?["offset"] == 6)
            let tokens = try #require(state["zoneChangeTokens"] as? [[String: Any]])
            #expect(tokens.count == 1)
            #expect(tokens.first?["zone"] as? String == "Notes")
            #expect(tokens.first?["offset"] as? Int == 6)
            // n2 was deleted by the laptop's send; n1's last known server record is the one the
            // conflict reported (the phone's edit).
            let records = try #require(state["lastKnownServerRecords"] as? [[String: Any]])
            #expect(records.map { $0["record"] as? String } == ["Notes/n1"], "\(run)")
            #expect(records.first?["type"] as? String == "Note")
            #expect(records.first?["fields"] as? [String: String] == ["body": "milk", "title": "Weekend groceries"])
            #expect((state["account"] as? [String: String]) == ["status": "user", "user": "_user1"])
            #expect(state["subscriptionID"] as? String == "logsync-database")

            // The same tokens and records in the text.
            let text = try await runLogtool(["replay", "laptop"], in: directory)
            #expect(ReplayStatsCommandTests.items(under: "zone tokens", in: text) == ["Notes → offset 6"], "\(text)")
            let recordLines = ReplayStatsCommandTests.items(under: "server records", in: text)
            #expect(recordLines.count == 1, "\(text)")
            #expect(recordLines.first?.hasPrefix("Notes/n1  Note  tag ") == true, "\(text)")
            #expect(recordLines.first?.hasSuffix("  body=milk title=\"Weekend groceries\"") == true, "\(text)")

            // Before the first fetch: no tokens, no records, no verification.
            let before = try await runLogtool(["replay", "laptop", "--to", "1", "--json"], in: directory)
            let early = try #require(try Self.object(before)["state"] as? [String: Any])
            #expect((early["zoneChangeTokens"] as? [Any])?.isEmpty == true)
            #expect((early["lastKnownServerRecords"] as? [Any])?.isEmpty == true)
            #expect(try Self.object(before)["verification"] is NSNull)
        }
    }

    /// A bogus delivery offset written straight into the stored index (through the log's own
    /// environment, as no entry would write it): the rebuild has none, and `--verify` names
    /// the projection, the table and the key.
    @Test func aFailingVerifyNamesTheFirstDifference() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, phone, _ in
            let log = phone.engine.deviceLog.log
            let table = try log.read { try $0.table("state", of: "index") }
            try log.environment.write { transaction in
                try transaction.put([0, 0, 0, 0, 0, 0, 0, 99], forKey: Array("delivered".utf8), in: table)
            }
            let last = try log.lastOffset

            let run = try await runLogtool(["replay", "phone", "--verify"], in: directory)
            #expect(run.status == 1, "\(run)")
            // The state is printed first: the replay rebuilds it from the entries, without the
            // bogus value.
            #expect(ReplayStatsCommandTests.value("delivered through", in: run) == "none", "\(run)")
            #expect(!run.standardOutput.contains("projections verified"))
            // (A push hint may still add an entry: the offset is the log's end when verified.)
            #expect(
                run.standardError.hasPrefix(
                    "logtool: error: projections not verified: projection \"index\" table \"state\" differs from its rebuild through offset "
                ),
                "\(run)")
            #expect(
                run.standardError.hasSuffix(
                    " at key 0x64656c697665726564 \"delivered\": incremental 0x0000000000000063, rebuilt (absent)\n"),
                "\(run)")
            #expect(run.standardError.filter { $0 == "\n" }.count == 1)

            let json = try await runLogtool(["replay", "phone", "--verify", "--json"], in: directory)
            #expect(json.status == 1, "\(json)")
            let verification = try #require(try Self.object(json)["verification"] as? [String: Any])
            #expect(verification["verified"] as? Bool == false)
            #expect((verification["through"] as? Int ?? 0) >= Int(last.rawValue))
            #expect(
                (verification["difference"] as? String)?.hasPrefix("projection \"index\" table \"state\"") == true,
                "\(json)")
            #expect(json.standardError.hasPrefix("logtool: error: projections not verified: "), "\(json)")

            // Without --verify the replay does not look at the stored index.
            let plain = try await runLogtool(["replay", "phone"], in: directory)
            #expect(plain.status == 0, "\(plain)")
        }
    }
}
