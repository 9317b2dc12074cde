import ChildProcesses
import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// The provenance of a record (`RecordBlame`, `logtool blame`) on the logs of real engines.
@Suite("logtool blame")
struct BlameTests {
    static func sources(
        _ server: SyncServer, _ devices: TestDevice...
    ) throws -> (devices: [Timeline.Source], server: Timeline.Source) {
        (
            devices.map { .init(name: $0.name, log: $0.engine.deviceLog.log) },
            .init(name: "server", log: try server.admin.log(of: "alice"))
        )
    }

    /// In the story the laptop's edit of n1 lost its conflict (its delegate keeps the server's
    /// version): blame on the laptop shows the edit, the batch, the conflict, the resolution,
    /// and names the phone as the device whose edit the laptop holds.
    @Test func namesTheDeviceWhoseEditWon() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { _, server, phone, laptop in
            let (devices, serverLog) = try Self.sources(server, laptop, phone)
            let blame = try RecordBlame.build(
                record: "n1", device: devices[0], otherDevices: [devices[1]], server: serverLog)
            #expect(blame.recordID == DeviceDumpCommandTests.id("n1"))
            #expect(blame.events.map(\.kind) == [.fetched, .edited, .sent, .conflict], "\(blame.text)")
            let conflict = try #require(blame.events.last)
            #expect(conflict.resolution == "not queued again: the server's version was kept")
            #expect(conflict.request == blame.events[2].request)
            let current = try #require(blame.current)
            #expect(current.stringFields == ["title": "Weekend groceries", "body": "milk"])
            let origin = try #require(blame.origin, "\(blame.text)")
            #expect(origin.device == "phone")
            #expect(origin.serverOffset == conflict.serverOffset)
            #expect(origin.fields.map(\.key) == ["body", "title"])
            #expect(origin.fields.map(\.device) == ["phone", "phone"])
            #expect(
                origin.fields[0].serverOffset < origin.fields[1].serverOffset, "body was last changed by the first save"
            )
            #expect(blame.text.contains("produced by: phone, its batch at offset"), "\(blame.text)")

            // Without the server's log, the value is known but not its author.
            let alone = try RecordBlame.build(record: "n1", device: devices[0])
            #expect(alone.origin == nil)
            #expect(alone.originNote == "give the server's log to know which device's edit produced it")
        }
    }

    /// The two-devices story, where the laptop's delegate merges: each field of the note both
    /// devices hold is named after the device that wrote it.
    @Test func aMergeIsBlamedFieldByField() async throws {
        try await withTemporaryDirectory { directory in
            // The laptop's delegate keeps its body and the server's other fields.
            let merge = TestDevice.Policy(merge: { local, server in
                var merged = server
                merged["body"] = local["body"]
                return merged
            })
            let (server, phone, laptop) = try await CounterfactualTests.writeStory(in: directory, laptopPolicy: merge)
            defer { server.shutdown() }
            let (devices, serverLog) = try Self.sources(server, phone, laptop)
            let blame = try RecordBlame.build(
                record: "n1", device: devices[0], otherDevices: [devices[1]], server: serverLog)
            let origin = try #require(blame.origin, "\(blame.text)")
            #expect(origin.device == "laptop", "the laptop's merge produced the note the phone holds")
            #expect(
                Dictionary(uniqueKeysWithValues: origin.fields.map { ($0.key, $0.device) }) == [
                    "body": "laptop", "title": "phone",
                ])
            let onLaptop = try RecordBlame.build(
                record: "n1", device: devices[1], otherDevices: [devices[0]], server: serverLog)
            let conflict = try #require(onLaptop.events.first { $0.kind == .conflict }, "\(onLaptop.text)")
            #expect(conflict.resolution?.hasPrefix("the delegate queued the record again at offset") == true)
            #expect(onLaptop.origin?.device == "laptop")
        }
    }

    /// The bug Docs/Debugging.md chases, on the README's main job: with `--buggy-merge` the
    /// laptop's delegate resends its whole note after the conflict, and blame on the phone
    /// names the laptop as the author of the stale title, at the server offset that wrote it.
    @Test func theWalkthroughsBugIsBlamedOnTheLaptop() async throws {
        try await withTemporaryDirectory { directory in
            var environment = ProcessInfo.processInfo.environment
            environment["TMPDIR"] = directory.path
            let run = try await ChildProcess.run(
                ["--automatic", "--buggy-merge"], program: "two-devices", environment: environment, directory: directory
            )
            #expect(run.status == 0, "\(run)")
            #expect(run.output.contains("phone  has groceries {body: \"milk, eggs\", title: \"Groceries\"}"), "\(run)")
            let line = try #require(run.output.split(separator: "\n").first { $0.hasPrefix("  phone  /") }, "\(run)")
            let phone = String(line.dropFirst("  phone  ".count))
            let story = URL(fileURLWithPath: phone).deletingLastPathComponent()
            let blame = try await runLogtool(
                ["blame", "phone", "laptop", "--record", "groceries", "--server", "server/users/u1", "--json"],
                in: story)
            #expect(blame.status == 0, "\(blame)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(blame.standardOutput.utf8)) as? [String: Any])
            let origin = try #require(object["origin"] as? [String: Any], "\(blame)")
            #expect(origin["device"] as? String == "laptop")
            let fields = try #require(origin["fields"] as? [[String: Any]])
            let title = try #require(fields.first { $0["key"] as? String == "title" })
            #expect(title["device"] as? String == "laptop")
            #expect(title["value"] as? String == "Groceries")
            #expect(title["serverOffset"] as? Int == origin["serverOffset"] as? Int)
        }
    }

    /// On the seeded simulation's logs: for every record a device holds whose version is in
    /// alice's database, blame names a device whose log holds the batch that sent it.
    @Test func simulationOriginsAreDevices() async throws {
        try await withTemporaryDirectory { directory in
            let simulation = try Simulation(seed: 5, directory: directory)
            _ = try await simulation.run()
            let all = simulation.devices.map { Timeline.Source(name: $0.name, log: $0.engine.deviceLog.log) }
            let server = Timeline.Source(name: "server", log: try simulation.server.admin.log(of: "alice"))
            var named = 0
            for (index, device) in simulation.devices.enumerated() {
                let state = try device.engine.deviceLog.state(at: try device.engine.deviceLog.log.lastOffset)
                for record in state.lastKnownServerRecords {
                    let blame = try RecordBlame.build(
                        record: record.recordID.recordName, zone: record.recordID.zoneID.zoneName, device: all[index],
                        otherDevices: all.enumerated().filter { $0.offset != index }.map(\.element), server: server)
                    #expect(blame.current?.recordChangeTag == record.recordChangeTag)
                    guard let origin = blame.origin else { continue }  // bob's database
                    let sender = try #require(origin.device, "\(blame.text)")
                    #expect(all.map(\.name).contains(sender))
                    named += 1
                }
            }
            #expect(named > 0)
        }
    }

    /// `logtool blame`: text, JSON, and a name in several zones without `--zone`.
    @Test func theCommand() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, _, _, _ in
            let server = ["--server", "data/users/u1", "--server-log", "private"]
            let text = try await runLogtool(["blame", "laptop", "phone", "--record", "n1"] + server, in: directory)
            #expect(text.status == 0, "\(text)")
            #expect(
                text.lines.first == "blame of Notes/n1 on laptop (\(directory.appendingPathComponent("laptop").path))")
            #expect(text.lines.contains { $0.hasPrefix("produced by: phone, its batch at offset ") }, "\(text)")
            #expect(
                text.lines.contains { $0.contains("resolved: not queued again: the server's version was kept") },
                "\(text)")

            let json = try await runLogtool(
                ["blame", "laptop", "phone", "--record", "n1", "--json"] + server, in: directory)
            #expect(json.status == 0, "\(json)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            #expect((object["origin"] as? [String: Any])?["device"] as? String == "phone")
            #expect(json.standardOutput.hasPrefix("{\"device\":\"laptop\",\"path\":"))

            let unknown = try await runLogtool(["blame", "laptop", "--record", "nothing"], in: directory)
            #expect(unknown.status == 0, "\(unknown)")
            #expect(unknown.lines.contains("  no entry of the log names it"), "\(unknown)")
        }
    }

    /// A record name in two zones needs `--zone`: a typed error listing both.
    @Test func anAmbiguousNameIsAnError() throws {
        try withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory.appendingPathComponent("data"), durability: .fast))
            defer { server.shutdown() }
            let phone = try TestDevice("phone", server: server, directory: directory)
            let trash = RecordZone.ID(zoneName: "Trash")
            try phone.createZone(DeviceDumpCommandTests.notes)
            try phone.createZone(trash)
            try phone.write(DeviceDumpCommandTests.id("n1"), "A")
            try phone.write(Record.ID(recordName: "n1", zoneID: trash), "B")
            let source = Timeline.Source(name: "phone", log: phone.engine.deviceLog.log)
            #expect {
                _ = try RecordBlame.build(record: "n1", device: source)
            } throws: { error in
                (error as? DiagnosticsError)?.code == .ambiguousRecord
                    && "\(error)"
                        == "the record name n1 is in several zones of \(phone.directory.path): Notes/n1, Trash/n1; name one with --zone"
            }
            let trashOnly = try RecordBlame.build(record: "n1", zone: "Trash", device: source)
            #expect(trashOnly.recordID == Record.ID(recordName: "n1", zoneID: trash))
        }
    }
}
