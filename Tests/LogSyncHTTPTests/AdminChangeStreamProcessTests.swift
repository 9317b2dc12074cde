import ChildProcesses
import Foundation
import LogSyncHTTP
import SyncModel
import TemporaryDirectory
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The app's backend as a process of its own: `backend-indexer` follows every database of
/// every user of a `logsync-server` process through the admin change stream, with an admin
/// token only, and is killed and restarted while the users write (Docs/Protocol.md, "Admin
/// change stream").
@Suite("A backend indexer process and logsync-server", .timeLimit(.minutes(4)))
struct AdminChangeStreamProcessTests {
    typealias Device = DeviceProcessTests.Device

    /// One record as the indexer's index.json keeps it.
    struct Indexed: Codable, Hashable, CustomStringConvertible {
        var user: String
        var scope: String
        var zoneName: String
        var ownerName: String
        var recordName: String
        var recordType: String
        var fields: [String: RecordValue]

        var description: String { "\(user)/\(scope)/\(zoneName)/\(ownerName)/\(recordName)" }
    }

    /// Every record of `user`'s database of `scope` as the user's own client fetches it.
    static func records(of user: String, _ scope: DatabaseScope, _ client: HTTPSyncClient) async throws -> Set<Indexed>
    {
        let database = client.database(scope)
        var zones: [RecordZone.ID] = []
        var token: DatabaseChangeToken?
        while true {
            let page = try await database.fetchDatabaseChanges(since: token)
            zones += page.modifications.map(\.zoneID)
            token = page.changeToken
            if !page.moreComing { break }
        }
        var found: Set<Indexed> = []
        for zoneID in zones {
            var zoneToken: ZoneChangeToken?
            while true {
                let page = try await database.fetchZoneChanges(zoneID: zoneID, since: zoneToken)
                for change in page.modifications {
                    let record = change.record
                    var fields: [String: RecordValue] = [:]
                    for key in record.allKeys() { fields[key] = record[key] }
                    found.insert(
                        Indexed(
                            user: user, scope: "\(scope)", zoneName: zoneID.zoneName, ownerName: zoneID.ownerName,
                            recordName: record.recordID.recordName, recordType: record.recordType, fields: fields))
                }
                zoneToken = page.changeToken
                if !page.moreComing { break }
            }
        }
        return found
    }

    /// Saves `names` (and the zone) and deletes `deleting` in `user`'s zone `zone`.
    static func write(
        _ client: HTTPSyncClient, zone: String, saving names: [String], deleting: [String] = [], round: Int
    ) async throws {
        let zoneID = RecordZone.ID(zoneName: zone)
        let database = client.database()
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
        let records = names.map { name in
            var record = Record(recordType: "Item", recordID: Record.ID(recordName: name, zoneID: zoneID))
            record["title"] = .string("\(name) in round \(round)")
            record["round"] = .int64(Int64(round))
            return record
        }
        let response = try await database.modifyRecords(
            saving: records, deleting: deleting.map { Record.ID(recordName: $0, zoneID: zoneID) },
            savePolicy: .allKeys)
        for result in response.saveResults.values { _ = try result.get() }
        for result in response.deleteResults.values { _ = try result.get() }
    }

    @Test(
        "F119 a backend indexer reads every change of alice's, bob's and carol's databases (a shared zone included), is killed mid-run, resumes from its saved tokens and ends with exactly the server's records, with an admin token only"
    )
    func indexerKilledAndResumed() async throws {
        try await withTemporaryDirectory { directory in
            let names = ["alice", "bob", "carol"]
            // Bearer tokens of `user add` (as scripts use them), each user with the e-mail
            // address by which alice invites bob.
            let data = directory.appendingPathComponent("server").path
            var tokens: [String: String] = [:]
            for name in names {
                let added = try await ChildProcess.run([
                    "user", "add", name, "--email", "\(name)@example.com", "--data", data,
                ])
                try #require(added.status == 0, "\(added)")
                tokens[name] = added.output.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let adminFile = directory.appendingPathComponent("admin-tokens")
            let adminToken = try await ChildProcess.addAdminToken(to: adminFile)
            let server = try ChildProcess.start(
                ["--data", data, "--port", "0", "--admin-token-file", adminFile.path])
            let url = URL(string: "http://127.0.0.1:\(try await server.waitForPort())")!
            var clients: [String: HTTPSyncClient] = [:]
            for name in names {
                clients[name] = HTTPSyncClient(
                    .init(serverURL: url, credentials: .token(tokens[name]!), device: DeviceID("\(name)-writer")))
            }
            defer { for client in clients.values { client.close() } }
            let alice = clients["alice"]!
            let bob = clients["bob"]!
            let carol = clients["carol"]!

            // 1. Before the backend runs: each user's notes, carol's work, and alice's Notes zone
            // shared with bob (a notes-device of each), so bob's shared database holds it too.
            for round in 0..<2 {
                try await Self.write(alice, zone: "Items", saving: (0..<6).map { "a\(round)-\($0)" }, round: round)
                try await Self.write(bob, zone: "Items", saving: (0..<6).map { "b\(round)-\($0)" }, round: round)
                try await Self.write(carol, zone: "Work", saving: (0..<4).map { "w\(round)-\($0)" }, round: round)
            }
            let alicePhone = Device(
                name: "alice-phone", directory: directory.appendingPathComponent("alice-phone"), token: tokens["alice"]!
            )
            let bobLaptop = Device(
                name: "bob-laptop", directory: directory.appendingPathComponent("bob-laptop"), token: tokens["bob"]!)
            try await alicePhone.run("set", "groceries", "title", "Groceries", server: url)
            try await alicePhone.run("share", "--with", "bob@example.com", "--permission", "read-write", server: url)
            let shareURL = try await alicePhone.run("share", "--url", server: url)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            try await bobLaptop.run("accept", shareURL, server: url)

            // 2. The backend follows every database, with the admin token and nothing else.
            // 3. The users write on; the indexer hears of it, and is killed while they write.
            // Three times, each run resuming from what the one before saved.
            let state = directory.appendingPathComponent("indexer")
            let arguments = ["--server", url.absoluteString, "--admin-token", adminToken, "--state", state.path]
            for run in 0..<3 {
                let indexer = try ChildProcess.start(arguments, program: "backend-indexer")
                try await indexer.waitForOutputLine(containing: "caught up")
                try await Self.write(
                    alice, zone: "Items", saving: ["a-live-\(run)", "a-new-\(run)"], deleting: ["a0-\(run)"],
                    round: 2)
                try await indexer.waitForOutputLine(containing: "indexed alice private (live)")
                async let writes: Void = {
                    for round in 3..<6 {
                        try await Self.write(
                            bob, zone: "Items", saving: ["b-\(run)-\(round)"],
                            deleting: [run < 2 ? "b0-\(run * 3 + round - 3)" : "b1-\(round - 3)"],
                            round: round)
                        try await Self.write(carol, zone: "Work", saving: ["w-\(run)-\(round)"], round: round)
                    }
                }()
                indexer.send(SIGKILL)
                let killed = await indexer.finish()
                #expect(killed.status != 0, "\(killed)")
                try await writes
            }

            // 4. While it is down: edits, deletions, a zone deleted, bob's edit of alice's shared note.
            try await Self.write(alice, zone: "Items", saving: ["a1-0"], deleting: ["a1-1", "a-live-0"], round: 7)
            _ = try await carol.database().modifyZones(saving: [], deleting: [RecordZone.ID(zoneName: "Work")])
            try await Self.write(carol, zone: "Home", saving: ["h-0"], round: 7)
            try await bobLaptop.run(
                "set", "--owner", "alice@example.com", "groceries", "body", "milk, eggs", server: url)

            // 5. Restarted from its saved state, it catches up and stops.
            let resumed = try await ChildProcess.run(arguments + ["--until-idle"], program: "backend-indexer")
            #expect(resumed.status == 0, "\(resumed)")
            #expect(resumed.output.contains("caught up"), "\(resumed)")
            #expect(
                resumed.output.contains("indexed carol private"), "it read what changed while it was down: \(resumed)")

            // 6. Its index is exactly what the users' own clients fetch.
            let index = try JSONDecoder().decode(
                [Indexed].self, from: Data(contentsOf: state.appendingPathComponent("index.json")))
            var expected: Set<Indexed> = []
            for name in names {
                for scope in [DatabaseScope.private, .shared] {
                    expected.formUnion(try await Self.records(of: name, scope, clients[name]!))
                }
            }
            #expect(Set(index) == expected)
            #expect(index.count == expected.count, "no record twice")
            #expect(
                expected.contains { $0.user == "bob" && $0.scope == "shared" && $0.recordName.hasPrefix("groceries.") })
            #expect(!expected.contains { $0.zoneName == "Work" })
            #expect(!expected.contains { $0.recordName == "a-live-0" || $0.recordName == "b0-2" })
            let missing = expected.subtracting(index).sorted { $0.description < $1.description }
            let extra = Set(index).subtracting(expected).sorted { $0.description < $1.description }
            #expect(missing.isEmpty && extra.isEmpty, "missing \(missing), extra \(extra)")

            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
        }
    }
}
