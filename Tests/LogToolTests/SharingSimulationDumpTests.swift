import Foundation
import LogSyncServer
import LogSyncTesting
import SyncModel
import TemporaryDirectory
import Testing

/// `logtool dump` on every log a seeded simulation with sharing leaves: the owner's private log
/// with its share records, the participants' shared-database logs, the registry with e-mail
/// addresses, and every device log, the participants' included (F119).
@Suite("logtool dump of a sharing simulation's logs")
struct SharingSimulationDumpTests {
    @Test("Every entry of every log a sharing simulation writes is decoded, share records with their participants")
    func everyEntryDecoded() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = Simulation.Configuration.sharing
            configuration.operationsPerDevice = 60
            let simulation = try Simulation(seed: 3, directory: directory, configuration: configuration)
            _ = try await simulation.run()

            /// The directory of a user's environment: `u<N>` for the record name `_user<N>`.
            func environment(_ user: UserID) throws -> String {
                "server/users/u" + (try simulation.server.userRecordID(for: user).recordName.dropFirst("_user".count))
            }
            var logs: [[String]] = [["server/registry"], [try environment("alice"), "--log", "private"]]
            for participant in configuration.participants {
                logs.append([try environment(participant.user), "--log", "shared"])
            }
            logs += simulation.devices.map { [$0.name] }
            var kinds: Set<String> = []
            var shareLines: [String] = []
            for log in logs {
                let run = try await runLogtool(["dump"] + log + ["--json"], in: directory)
                #expect(run.status == 0 && run.standardError.isEmpty, "\(log): \(run)")
                for line in run.lines {
                    let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                    guard let kind = object["kindName"] as? String else {
                        Issue.record("\(log.joined(separator: " ")): an entry logtool does not decode: \(line)")
                        continue
                    }
                    kinds.insert(kind)
                    if let fields = object["fields"] as? [String: Any], fields["type"] as? String == Share.recordType {
                        shareLines.append(line)
                    }
                }
            }
            for kind in ["sharedZoneJoined", "sharedZoneChanged", "sharedZoneLeft", "userEmailSet", "recordSaved"] {
                #expect(kinds.contains(kind), "no \(kind) entry among \(kinds.sorted())")
            }
            #expect(!shareLines.isEmpty)
            #expect(shareLines.contains { $0.contains("participants") && $0.contains("privateUser") })
        }
    }
}
