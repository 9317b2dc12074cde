import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// "Would these devices have converged had the laptop's delegate merged differently?", asked
/// of recorded logs (`CounterfactualReplay`, `ServerReplayPolicy`).
@Suite("counterfactual replay")
struct CounterfactualTests {
    /// The phone writes a note, the laptop fetches it; both edit it (the phone its title, the
    /// laptop its body); the phone's save wins and the laptop's is refused, its delegate
    /// resolving the conflict with `laptopPolicy` (by default it keeps the server's version);
    /// the laptop sends what its delegate queued, if anything; then both fetch.
    static func writeStory(
        in directory: URL, laptopPolicy: TestDevice.Policy = .init()
    ) async throws -> (SyncServer, TestDevice, TestDevice) {
        let server = try SyncServer(.init(directory: directory.appendingPathComponent("data"), durability: .fast))
        let phone = try TestDevice("phone", server: server, directory: directory)
        let laptop = try TestDevice("laptop", server: server, directory: directory, policy: laptopPolicy)
        let note = DeviceDumpCommandTests.id("n1")
        try phone.createZone(DeviceDumpCommandTests.notes)
        try phone.edit(note, ["title": "Groceries"])
        try await phone.engine.sendChanges()
        try await laptop.engine.fetchChanges()
        try phone.edit(note, ["title": "Weekend groceries"])
        try laptop.edit(note, ["body": "milk, eggs"])
        try await phone.engine.sendChanges()
        await #expect(throws: SyncError.self) { try await laptop.engine.sendChanges() }
        try await laptop.engine.sendChanges()
        try await phone.engine.fetchChanges()
        try await laptop.engine.fetchChanges()
        return (server, phone, laptop)
    }

    func replay(
        _ policy: ServerReplayPolicy, story: (SyncServer, TestDevice, TestDevice), in directory: URL, name: String
    ) async throws -> CounterfactualReplay.Report {
        let (server, phone, laptop) = story
        let fresh = try SyncServer(.init(directory: directory.appendingPathComponent(name), durability: .fast))
        defer { fresh.shutdown() }
        return try await CounterfactualReplay.run(
            devices: [
                .init(name: "phone", log: phone.engine.deviceLog.log),
                .init(name: "laptop", log: laptop.engine.deviceLog.log, policy: policy),
            ],
            order: try server.admin.log(of: "alice"), against: fresh.database(for: "alice"))
    }

    @Test func wouldTheyHaveConvergedHadTheLaptopMergedDifferently() async throws {
        try await withTemporaryDirectory { directory in
            let story = try await Self.writeStory(in: directory)
            defer { story.0.shutdown() }

            // As recorded: the server's version won, and both devices hold it.
            let recorded = try await replay(.asRecorded, story: story, in: directory, name: "fresh-1")
            #expect(recorded.converged, "\(recorded)")
            #expect(recorded.devices.allSatisfy { $0.report.matches }, "\(recorded)")
            let held = try #require(recorded.serverRecords.first)
            #expect(held.stringFields == ["title": "Weekend groceries"])

            // Had the laptop's delegate kept its own record (its note, stale title included), its
            // save would have gone out after the phone's last fetch: the phone would not hold it.
            let mine = try await replay(.localRecordWins, story: story, in: directory, name: "fresh-2")
            #expect(!mine.converged, "\(mine)")
            #expect(mine.divergent.map(\.name) == ["phone"], "\(mine)")
            #expect(mine.serverRecords.first?.stringFields == ["title": "Groceries", "body": "milk, eggs"])
            let laptop = try #require(mine.devices.last?.report)
            #expect(laptop.requests.last?.entry == "policy", "\(laptop)")
            #expect(laptop.heldRecords.first?.stringFields == ["title": "Groceries", "body": "milk, eggs"])

            // A merge that keeps the server's record changes nothing.
            let merged = try await replay(.merging { _, _ in nil }, story: story, in: directory, name: "fresh-3")
            #expect(merged.converged, "\(merged)")
        }
    }

    /// `logtool replay --against-fresh-server`: the phone's log alone gets the same answers
    /// (status 0); the laptop's does not, since a fresh server lacks the phone's zone and edits
    /// (status 1, each mismatch on a line); `--policy` needs the flag.
    @Test func theReplayCommand() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, _ in
            let phone = try await runLogtool(["replay", "phone", "--against-fresh-server"], in: directory)
            #expect(phone.status == 0, "\(phone)")
            #expect(phone.lines.count == 1, "\(phone)")
            #expect(
                phone.lines.first?.hasSuffix(": 3 requests, 3 re-issued: 3 matched, 0 mismatched, 0 not comparable")
                    == true, "\(phone)")
            let json = try await runLogtool(
                ["replay", "phone", "--against-fresh-server", "--policy", "server-wins", "--json"], in: directory)
            #expect(json.status == 0, "\(json)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            #expect(object["matches"] as? Bool == true)
            #expect((object["heldRecords"] as? [[String: Any]])?.count == 2)

            let laptop = try await runLogtool(["replay", "laptop", "--against-fresh-server"], in: directory)
            #expect(laptop.status == 1, "\(laptop)")
            #expect(laptop.lines.dropFirst().allSatisfy { $0.hasPrefix("  mismatch at offset ") }, "\(laptop)")
            #expect(laptop.standardError.isEmpty, "\(laptop)")

            let usage = try await runLogtool(["replay", "phone", "--policy", "local-wins"], in: directory)
            #expect(usage.status == 64, "\(usage)")
            #expect(usage.standardError.contains("--policy needs --against-fresh-server"), "\(usage)")
        }
    }
}
