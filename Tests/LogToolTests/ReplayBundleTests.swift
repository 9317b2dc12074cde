import ChildProcesses
import Foundation
import TemporaryDirectory
import Testing

/// `logtool replay` on support bundles (Docs/Debugging.md, "From a user's report: support
/// bundles"): the bug of `two-devices --buggy-merge` reproduced from each device's bundle and the
/// server's side alone.
@Suite("logtool replay on a support bundle")
struct ReplayBundleTests {
    /// Runs `two-devices --automatic --buggy-merge --support-bundles=clear` and returns the run's
    /// directory (holding `phone.lsb`, `laptop.lsb` and `server/users/u1`).
    ///
    /// With `--support-bundles=clear` the bundles hold values and names in clear, to be read
    /// beside the server user's own directory, which is not redacted; with `--support-bundles`
    /// they are redacted, as an app sends them, and read beside the server's extracts.
    static func runTheWalkthrough(in directory: URL, bundles: String = "--support-bundles=clear") async throws -> URL {
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = directory.path
        let run = try await ChildProcess.run(
            ["--automatic", "--buggy-merge", bundles], program: "two-devices",
            environment: environment, directory: directory)
        #expect(run.status == 0, "\(run)")
        let line = try #require(
            run.output.split(separator: "\n").first { $0.hasPrefix("  phone  wrote /") && $0.hasSuffix("phone.lsb") },
            "\(run)")
        #expect(run.output.contains("laptop.lsb"), "\(run)")
        #expect(run.output.contains("replay "), "\(run)")
        return URL(fileURLWithPath: String(line.dropFirst("  phone  wrote ".count))).deletingLastPathComponent()
    }

    /// Docs/Debugging.md, "From a user's report": the same bug from what a user and an operator
    /// send — each device's redacted bundle, and the server's extract made with its key — with
    /// the record named in clear (logtool hashes it with the bundle's key).
    @Test("The --buggy-merge bug found from redacted bundles and the server's extracts alone")
    func theBugFromRedactedBundlesAndExtracts() async throws {
        try await withTemporaryDirectory { directory in
            let story = try await Self.runTheWalkthrough(in: directory, bundles: "--support-bundles")
            for device in ["phone", "laptop"] {
                var environment = ProcessInfo.processInfo.environment
                environment["TMPDIR"] = directory.path
                let export = try await ChildProcess.run(
                    [
                        "export-log", "--data", "server", "--user", "alice", "--bundle", "\(device).lsb", "--output",
                        "server-\(device).lsb",
                    ], program: "logsync-server", environment: environment, directory: story)
                #expect(export.status == 0, "\(export)")
            }
            // Nothing in clear: the note's title is nowhere in the bundles or the extracts.
            for file in ["phone.lsb", "laptop.lsb", "server-phone.lsb", "server-laptop.lsb"] {
                let bytes = try Data(contentsOf: story.appending(path: "\(file)/data.mdb"))
                #expect(bytes.range(of: Data("Weekend groceries".utf8)) == nil, "\(file)")
                #expect(bytes.range(of: Data("milk, eggs".utf8)) == nil, "\(file)")
            }

            // The phone: its rename (17 bytes) was saved, then a request of another device saved
            // both fields at server offset 12, the title back to 9 bytes.
            let blame = try await runLogtool(
                ["blame", "phone.lsb", "server-phone.lsb", "--record", "groceries", "--zone", "Notes"], in: story)
            #expect(blame.status == 0, "\(blame)")
            #expect(blame.standardOutput.contains("‹redacted string, 17 bytes"), "\(blame)")
            let producer = try #require(blame.lines.first { $0.hasPrefix("produced by: ") }, "\(blame)")
            #expect(producer.contains("a device whose log was not given"), "\(blame)")
            // "produced by: a device whose log was not given (request 2926daf39f1c07c5-34), …"
            let requestID = try #require(
                producer.split(separator: "(request ").dropFirst().first?.split(separator: ")").first.map(String.init),
                "\(blame)")

            // Replayed against a fresh server seeded from the extract: every answer as recorded,
            // and the phone ends holding the 9-byte title again — the bug, reproduced.
            let phone = try await runLogtool(
                ["replay", "phone.lsb", "--against-fresh-server", "--server", "server-phone.lsb"], in: story)
            #expect(phone.status == 0, "\(phone)")
            #expect(phone.standardOutput.contains(" 0 mismatched"), "\(phone)")
            #expect(phone.standardOutput.contains("values redacted, names hashed"), "\(phone)")
            let held = try #require(phone.lines.first { $0.contains("the device holds at the end: ") }, "\(phone)")
            #expect(held.contains("title=\"‹redacted string, 9 byte"), "\(phone)")

            // The laptop's bundle: that request is its resend after a conflict, carrying the
            // title it never edited (its first send held the body only).
            let laptop = try await runLogtool(
                ["blame", "laptop.lsb", "server-laptop.lsb", "--record", "groceries", "--zone", "Notes"], in: story)
            #expect(laptop.status == 0, "\(laptop)")
            let sends = laptop.lines.filter { $0.contains(" sent ") }
            #expect(sends.count == 2, "\(laptop)")
            #expect(sends.first.map { $0.contains("body:") && !$0.contains("title:") } == true, "\(laptop)")
            #expect(sends.last.map { $0.contains(requestID) && $0.contains("title:") } == true, "\(laptop)")
            #expect(laptop.standardOutput.contains("conflict (serverRecordChanged)"), "\(laptop)")
            let replay = try await runLogtool(
                ["replay", "laptop.lsb", "--against-fresh-server", "--server", "server-laptop.lsb"], in: story)
            #expect(replay.status == 0 && replay.standardOutput.contains(" 0 mismatched"), "\(replay)")
        }
    }

    @Test("The --buggy-merge bug reproduced from the phone's and the laptop's bundles and the server's side")
    func theWalkthroughsBugIsReproduced() async throws {
        try await withTemporaryDirectory { directory in
            let story = try await Self.runTheWalkthrough(in: directory)

            // The phone: every request matches, and it ends holding the laptop's stale title.
            let phone = try await runLogtool(
                ["replay", "phone.lsb", "--against-fresh-server", "--server", "server/users/u1"], in: story)
            #expect(phone.status == 0, "\(phone)")
            let text = phone.standardOutput
            #expect(phone.lines.first?.hasPrefix("support bundle: format 1, library ") == true, "\(phone)")
            #expect(text.contains("values in clear, names in clear, database private"), "\(phone)")
            #expect(text.contains(" 0 mismatched"), "\(phone)")
            #expect(text.contains("seeded from the server's side"), "\(phone)")
            #expect(text.contains("the re-issued requests' entries equal the server side's"), "\(phone)")
            let held = try #require(
                phone.lines.first { $0.contains("the device holds at the end: Notes/groceries") }, "\(phone)")
            #expect(held.contains("title=Groceries"), "\(phone)")

            // The laptop: its resend after the conflict carries the title it never changed.
            let laptop = try await runLogtool(
                ["replay", "laptop.lsb", "--against-fresh-server", "--server", "server/users/u1", "--json"], in: story)
            #expect(laptop.status == 0, "\(laptop)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(laptop.standardOutput.utf8)) as? [String: Any])
            #expect(object["matches"] as? Bool == true, "\(laptop)")
            let bundle = try #require(object["bundle"] as? [String: Any], "\(laptop)")
            #expect(bundle["formatVersion"] as? Int == 1)
            #expect(bundle["database"] as? String == "private")
            #expect(bundle["keyID"] is String && bundle["key"] == nil, "the key itself is never printed")
            #expect((object["seededEntries"] as? Int ?? 0) > 0, "\(laptop)")
            let requests = try #require(object["requests"] as? [[String: Any]])
            let sends = requests.filter { $0["kind"] as? String == "modifyRecords" && $0["reissued"] as? Bool == true }
            #expect(sends.count >= 2, "the conflicting send, then the resend: \(laptop)")
            let resend = try #require(sends.last)
            #expect(resend["verdict"] as? String == "matched")
            let notes = try #require(resend["notes"] as? [String])
            #expect(
                notes.contains { $0.hasPrefix("sent Notes/groceries") && $0.contains("title=Groceries") }, "\(laptop)")

            // replay --verify reads the bundle as the device log it was exported from.
            let verify = try await runLogtool(["replay", "phone.lsb", "--verify"], in: story)
            #expect(verify.status == 0, "\(verify)")
            #expect(verify.lines.first?.hasPrefix("support bundle: format 1") == true, "\(verify)")
            #expect(verify.standardOutput.contains("projections verified through offset"), "\(verify)")

            // Bad input: a truncated bundle is a one-line error; the server's side without the
            // device's requests (another user's, here an empty log) is refused naming it.
            let truncated = story.appending(path: "truncated.lsb")
            try FileManager.default.createDirectory(at: truncated, withIntermediateDirectories: true)
            let data = try Data(contentsOf: story.appending(path: "phone.lsb/data.mdb"))
            try data.prefix(data.count / 2).write(to: truncated.appending(path: "data.mdb"))
            let broken = try await runLogtool(
                ["replay", "truncated.lsb", "--against-fresh-server", "--server", "server/users/u1"], in: story)
            #expect(broken.status == 1, "\(broken)")
            #expect(broken.standardError.hasPrefix("logtool: error: "), "\(broken)")
            #expect(broken.standardError.contains("page") || broken.standardError.contains("offset"), "\(broken)")

            let other = try await runLogtool(
                ["replay", "phone.lsb", "--against-fresh-server", "--server", "phone"], in: story)
            #expect(other.status == 1, "\(other)")
            #expect(other.standardError.contains("holds no log \"private\""), "\(other)")
        }
    }
}
