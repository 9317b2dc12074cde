import ChildProcesses
import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import LogToolCore
import SyncModel
import TemporaryDirectory
import Testing

/// `logsync-server export-log` and `logtool timeline BUNDLE EXTRACT` as processes
/// (Docs/Privacy.md, "The server's extract"; Docs/logtool.md).
@Suite("logsync-server export-log and logtool on the pair")
struct ServerExtractCommandTests {
    static let zone = RecordZone.ID(zoneName: "Zone-Narwhal-5512")
    static let n1 = Record.ID(recordName: "rec-Narwhal-1", zoneID: zone)

    /// A phone's story synced with a server in `directory/data`, and the phone's bundle.
    static func story(in directory: URL) async throws -> URL {
        let server = try SyncServer(.init(directory: directory.appendingPathComponent("data"), durability: .fast))
        defer { server.shutdown() }
        let phone = try TestDevice("phone", server: server, directory: directory)
        try phone.createZone(zone)
        try phone.write(n1, "Title-Narwhal-Secret-3301")
        try await phone.sync()
        try phone.write(n1, "Title-Narwhal-Second-4402")
        try await phone.sync()
        let bundle = directory.appendingPathComponent("report.lsb")
        try phone.engine.exportSupportBundle(to: bundle)
        phone.releaseEngine()
        return bundle
    }

    static func run(_ program: String, _ arguments: [String], in directory: URL) async throws -> ToolRun {
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = directory.path
        let finished = try await ChildProcess.run(
            arguments, program: program, environment: environment, directory: directory)
        return ToolRun(status: finished.status, standardOutput: finished.output, standardError: finished.errorOutput)
    }

    @Test("export-log writes the extract with the bundle's key; timeline draws the pair, linked by request")
    func exportThenTimeline() async throws {
        try await withTemporaryDirectory { directory in
            let bundle = try await Self.story(in: directory)
            let data = directory.appendingPathComponent("data").path
            let export = try await Self.run(
                "logsync-server",
                ["export-log", "--data", data, "--user", "alice", "--bundle", bundle.path, "--output", "server.lsb"],
                in: directory)
            #expect(export.status == 0, "\(export)")
            #expect(export.standardOutput.contains("private: 1..."), "\(export)")
            let extract = directory.appendingPathComponent("server.lsb")
            let manifest = try ServerExtract.manifest(at: extract)
            #expect(manifest.keyID == (try SupportBundle.manifest(at: bundle)).keyID)
            let bytes = try Data(contentsOf: extract.appendingPathComponent("data.mdb"))
            for text in [
                "Title-Narwhal-Secret-3301", "Title-Narwhal-Second-4402", "rec-Narwhal-1", "Zone-Narwhal-5512",
            ] {
                #expect(bytes.range(of: Data(text.utf8)) == nil, "\(text)")
            }

            let timeline = try await runLogtool(
                ["timeline", bundle.path, extract.path, "--format", "text"], in: directory)
            #expect(timeline.status == 0, "\(timeline)")
            #expect(timeline.lines.first == "timeline: 2 lanes, \(timeline.lines.count - 4) steps", "\(timeline)")
            #expect(timeline.lines.contains { $0.contains("server") && $0.contains("(log private)") }, "\(timeline)")
            // A batch links to the server's requestOutcome by its request ID.
            let sent = try #require(timeline.lines.first { $0.contains("batchPrepared") && $0.contains("(sent)") })
            let request = try #require(sent.split(separator: " ").first { $0.hasPrefix("request=") })
            #expect(
                timeline.lines.contains { $0.contains("requestOutcome") && $0.contains(String(request)) },
                "\(timeline)")
            #expect(!timeline.standardOutput.contains("Narwhal"), "\(timeline)")

            let blame = try await runLogtool(
                [
                    "blame", bundle.path, extract.path, "--record",
                    Redactor(
                        settings: .init(),
                        key: [UInt8](Data(base64Encoded: try SupportBundle.manifest(at: bundle).key)!)
                    ).name("rec-Narwhal-1"),
                ], in: directory)
            #expect(blame.status == 0, "\(blame)")
            #expect(blame.standardOutput.contains(String(request.dropFirst("request=".count).prefix(8))), "\(blame)")

            let bisect = try await runLogtool(["bisect", bundle.path, "--invariant", "tokens"], in: directory)
            #expect(bisect.status == 0, "\(bisect)")

            // The record's name in clear works too: logtool hashes it with the bundle's key.
            let clear = try await runLogtool(
                ["blame", bundle.path, extract.path, "--record", "rec-Narwhal-1"], in: directory)
            #expect(clear.status == 0 && clear.standardOutput == blame.standardOutput, "\(clear)")

            // A range extract from past offset 1 would link the device to the wrong entries: refused.
            let range = try await Self.run(
                "logsync-server",
                [
                    "export-log", "--data", data, "--user", "alice", "--from", "3", "--bundle", bundle.path, "--output",
                    "range.lsb",
                ], in: directory)
            #expect(range.status == 0, "\(range)")
            let refused = try await runLogtool(
                ["timeline", bundle.path, "range.lsb", "--format", "text"], in: directory)
            #expect(refused.status == 1 && refused.standardError.contains("a server extract of a range"), "\(refused)")
        }
    }

    @Test("export-log refuses an unknown user, a range past the end and a wrong bundle; nothing is written")
    func badInput() async throws {
        try await withTemporaryDirectory { directory in
            let bundle = try await Self.story(in: directory)
            let data = directory.appendingPathComponent("data").path
            let base = ["export-log", "--data", data, "--output", "out.lsb"]
            let unknown = try await Self.run(
                "logsync-server", base + ["--user", "mallory", "--bundle", bundle.path], in: directory)
            #expect(unknown.status != 0 && unknown.standardError.contains("mallory"), "\(unknown)")
            let past = try await Self.run(
                "logsync-server", base + ["--user", "alice", "--from", "9999", "--bundle", bundle.path], in: directory)
            #expect(past.status != 0 && past.standardError.contains("9999"), "\(past)")
            let notABundle = try await Self.run(
                "logsync-server", base + ["--user", "alice", "--bundle", data], in: directory)
            #expect(notABundle.status != 0 && notABundle.standardError.contains("badBundle"), "\(notABundle)")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("out.lsb").path))
        }
    }

    @Test(
        "a bundle, an extract and a server user's directory are told apart; the server log follows the bundle's database"
    )
    func sidesAndServerLog() throws {
        #expect(LogSelection.side(available: ["bundle", "device"], manifestKind: 1) == .device)
        #expect(LogSelection.side(available: ["bundle", "private", "shared"], manifestKind: 2) == .server)
        #expect(LogSelection.side(available: ["private", "shared"], manifestKind: nil) == .server)
        #expect(LogSelection.side(available: ["device"], manifestKind: nil) == .device)
        #expect(LogSelection.side(available: ["main"], manifestKind: nil) == nil)
        let both = ["bundle", "private", "shared"]
        #expect(try LogSelection.serverLog(requested: nil, scope: "shared", available: both, path: "/x") == "shared")
        #expect(try LogSelection.serverLog(requested: nil, scope: nil, available: both, path: "/x") == "private")
        #expect(try LogSelection.serverLog(requested: nil, scope: nil, available: ["shared"], path: "/x") == "shared")
        #expect(throws: LogToolError.self) {
            try LogSelection.serverLog(requested: nil, scope: "shared", available: ["private"], path: "/x")
        }
    }
}
