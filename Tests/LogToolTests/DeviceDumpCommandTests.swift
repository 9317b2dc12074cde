import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// `logtool dump` on the device logs of real `SyncEngine`s syncing through a `SyncServer`, run
/// as a child process.
@Suite("logtool dump of device logs")
struct DeviceDumpCommandTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static func id(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: notes) }

    /// The story, with the server in `directory/data` and the device logs in `directory/phone`
    /// and `directory/laptop`: the phone creates the zone Notes and the notes n1 and n2 and
    /// sends them; the laptop fetches them; the phone edits n1 and sends; the laptop, not having
    /// fetched, edits n1 and deletes n2 in one send: n1 conflicts. Returns the server and the
    /// devices, still open.
    static func writeDeviceStory(in directory: URL) async throws -> (SyncServer, phone: TestDevice, laptop: TestDevice)
    {
        let server = try SyncServer(.init(directory: directory.appendingPathComponent("data"), durability: .fast))
        let phone = try TestDevice("phone", server: server, directory: directory)
        let laptop = try TestDevice("laptop", server: server, directory: directory)

        try phone.createZone(notes)
        try phone.edit(id("n1"), ["title": "Groceries", "body": "milk"])
        try phone.edit(id("n2"), ["title": "Draft"])
        try await phone.engine.sendChanges()
        try await laptop.engine.fetchChanges()

        try phone.edit(id("n1"), ["title": "Weekend groceries"])
        try await phone.engine.sendChanges()
        try laptop.edit(id("n1"), ["body": "milk, eggs"])
        try laptop.delete(id("n2"))
        await #expect(throws: SyncError.self) { try await laptop.engine.sendChanges() }
        // Each device is hinted of the other's last commit (the phone's second send, the laptop's
        // deletion) whenever the server's push delivery hands the hint out (F113, F154): wait for
        // a hint on both, so that the logs no longer change. Hints coalesce (F113), so a device
        // holds one or more.
        await waitUntil("each device's log holds a hint of the other's commits") {
            try [phone, laptop].allSatisfy { device in
                var hints = 0
                try device.engine.deviceLog.log.forEachEntry(from: .first) {
                    if case .pushReceived = try DeviceEntry($0, in: device.engine.deviceLog.log) { hints += 1 }
                }
                return hints >= 1
            }
        }
        return (server, phone, laptop)
    }

    /// Runs `body` on the story of ``writeDeviceStory(in:)``, written in a temporary directory,
    /// with the server and the devices still open; shuts the server down after.
    static func withDeviceStory(
        _ body: (_ directory: URL, _ server: SyncServer, _ phone: TestDevice, _ laptop: TestDevice) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let (server, phone, laptop) = try await writeDeviceStory(in: directory)
            defer { server.shutdown() }
            try await body(directory, server, phone, laptop)
        }
    }

    /// The laptop's log after the story, after the size column, without the `pushReceived`
    /// entries (push hints arrive whenever the server sends them). Its tokens count the server's
    /// `operationGroupStarted` entries of the phone's send and of the laptop's fetch (F69).
    static let expectedLaptopLog = [
        "accountChanged  user=_user1",
        "fetchStarted  reason=manual scope=all",
        "databaseChangesFetched  modified=1 deleted=0 zones=[Notes] token=6 moreComing=false",
        "eventsDelivered  through=3",
        "zoneChangesFetched  zone=Notes modified=2 deleted=0 records=[n1,n2] token=6 moreComing=false",
        "eventsDelivered  through=5",
        "zoneFetchFinished  zone=Notes",
        "fetchFinished",
        "subscriptionEnsured  subscription=logsync-database",
        "pendingRecordZoneChangesAdded  count=1 changes=[save:Notes/n1]",
        "pendingRecordZoneChangesAdded  count=1 changes=[delete:Notes/n2]",
        "sendStarted  reason=manual scope=all",
        "batchPrepared  count=2 changes=[save:Notes/n1,delete:Notes/n2] atomic=false request=*",
        "batchResult  saved=0 deleted=1 failed=1 deletions=[Notes/n2] errors=[n1:serverRecordChanged]",
        "sendFinished",
    ]

    /// The phone's first send, offsets 1–9.
    static let expectedPhoneStart = [
        "pendingDatabaseChangesAdded  count=1 changes=[save:Notes]",
        "pendingRecordZoneChangesAdded  count=1 changes=[save:Notes/n1]",
        "pendingRecordZoneChangesAdded  count=1 changes=[save:Notes/n2]",
        "accountChanged  user=_user1",
        "sendStarted  reason=manual scope=all",
        "databaseChangesSent  saved=1 deleted=0 failed=0 zones=[Notes]",
        "batchPrepared  count=2 changes=[save:Notes/n1,save:Notes/n2] atomic=false request=*",
        // The answer, written against the batchPrepared at offset 7 (kind 15).
        "batchSaved  saved=2 deleted=0 failed=0 records=[Notes/n1,Notes/n2] prepared=7",
        "sendFinished",
    ]

    /// `line` with the value of `request=` (a random launch prefix, a dash and the entry's
    /// offset) replaced by `*`, once checked to end with the line's own offset (F103).
    static func maskingRequestID(_ line: String) -> String {
        guard let match = line.firstMatch(of: /request=([0-9a-f]+)-([0-9]+)/) else { return line }
        #expect(UInt64(match.output.2) == offsetOfTextLine(line), "the request ID names the batch's offset: \(line)")
        return line.replacing(match.output.0, with: "request=*")
    }

    static func withoutPushes(_ lines: [String]) -> [String] {
        lines.filter { !(describedPart(of: $0) ?? "").hasPrefix("pushReceived") }
    }

    @Test func deviceLogLinesNameKindsAndIDs() async throws {
        try await Self.withDeviceStory { directory, _, phone, laptop in
            let run = try await runLogtool(["dump", "laptop"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.standardError.isEmpty)
            #expect(run.lines.map(offsetOfTextLine) == (1...UInt64(run.lines.count)).map { $0 })
            #expect(
                Self.withoutPushes(run.lines).map(Self.maskingRequestID).map(describedPart) == Self.expectedLaptopLog,
                "\(run)")
            #expect(run.lines.contains { $0.contains("  kind  12  size ") && $0.contains("batchResult  saved=0") })

            let phoneRun = try await runLogtool(["dump", "phone", "--log", "device"], in: directory)
            #expect(phoneRun.status == 0, "\(phoneRun)")
            #expect(
                phoneRun.lines.prefix(9).map(Self.maskingRequestID).map(describedPart) == Self.expectedPhoneStart,
                "\(phoneRun)")
            // Every entry is described: no hex preview.
            #expect(phoneRun.lines.allSatisfy { !$0.contains("|") }, "\(phoneRun)")
        }
    }

    @Test func jsonLinesCarryKindNameAndFields() async throws {
        try await Self.withDeviceStory { directory, _, _, laptop in
            let run = try await runLogtool(["dump", "laptop", "--json"], in: directory)
            #expect(run.status == 0, "\(run)")
            let objects = try run.lines.map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            for object in objects {
                #expect(
                    Set(object.keys) == [
                        "offset", "time", "timeMicros", "kind", "kindName", "size", "fields", "payloadBase64",
                    ])
                #expect(
                    Data(base64Encoded: try #require(object["payloadBase64"] as? String))?.count == object["size"]
                        as? Int)
            }
            #expect(
                objects.map { $0["kindName"] as? String }.filter { $0 != "pushReceived" }
                    == Self.expectedLaptopLog.map { $0.components(separatedBy: "  ")[0] })

            let result = try #require(objects.first { $0["kindName"] as? String == "batchResult" })
            #expect(result["kind"] as? Int == 12)
            let fields = try #require(result["fields"] as? [String: Any])
            #expect(fields["saved"] as? Int == 0)
            #expect(fields["deleted"] as? Int == 1)
            #expect(fields["failed"] as? Int == 1)
            #expect(fields["deletions"] as? [String] == ["Notes/n2"])
            #expect(fields["errors"] as? [String] == ["n1:serverRecordChanged"])

            let page = try #require(objects.first { $0["kindName"] as? String == "zoneChangesFetched" })
            let pageFields = try #require(page["fields"] as? [String: Any])
            #expect(pageFields["zone"] as? String == "Notes")
            #expect(pageFields["records"] as? [String] == ["n1", "n2"])
            #expect(pageFields["token"] as? Int == 6)
            #expect(pageFields["moreComing"] as? String == "false")
        }
    }

    @Test(
        arguments: [
            (["--kind", "batchResult"], ["batchResult"]),
            (["--kind", "batchresult", "--kind", "11"], ["batchPrepared", "batchResult"]),
            (
                ["--record", "n2"],
                ["zoneChangesFetched", "pendingRecordZoneChangesAdded", "batchPrepared", "batchResult"]
            ),
            (["--record", "n1", "--kind", "batchResult"], ["batchResult"]),
            (["--zone", "Notes", "--kind", "zoneFetchFinished"], ["zoneFetchFinished"]),
            (["--zone", "Trash"], []),
            (["--kind", "recordSaved"], []),
        ] as [([String], [String])])
    func filters(options: [String], expected: [String]) async throws {
        try await Self.withDeviceStory { directory, _, _, laptop in
            let run = try await runLogtool(["dump", "laptop"] + options, in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(
                run.lines.compactMap { describedPart(of: $0)?.components(separatedBy: "  ")[0] } == expected, "\(run)")
            let json = try await runLogtool(["dump", "laptop", "--json"] + options, in: directory)
            #expect(json.lines.count == expected.count, "\(json)")
        }
    }

    @Test func anUnknownKindNameListsDeviceKinds() async throws {
        try await Self.withDeviceStory { directory, _, _, laptop in
            let run = try await runLogtool(["dump", "laptop", "--kind", "batchResul"], in: directory)
            #expect(run.status == 64, "\(run)")
            #expect(run.standardError.contains("batchResult (12)"), "\(run)")
            #expect(run.standardError.contains("recordSaved (103)"), "\(run)")
        }
    }

    /// The engine's log cannot hold an undecodable entry (its index decodes every append), so
    /// the laptop's entries are copied into a device log of its own, followed by a batchResult
    /// that is not one; a second copy has a flipped payload byte (a checksum mismatch).
    @Test func aCorruptDeviceEntryIsReportedAtItsOffset() async throws {
        try await Self.withDeviceStory { directory, _, _, laptop in
            let entries = try laptop.logEntries()
            let count = entries.count
            let copy = directory.appendingPathComponent("copy")
            try Log.open(at: copy, named: "device", options: .init(durability: .fast))
                .append(entries + [NewEntry(kind: 12, payload: [0xFF, 0xFF]), entries[0]])
            for json in [false, true] {
                let run = try await runLogtool(["dump", "copy"] + (json ? ["--json"] : []), in: directory)
                #expect(run.status == 1, "\(run)")
                #expect(run.lines.count == count)
                #expect(
                    run.standardError.hasPrefix(
                        "logtool: error: corrupt entry at offset \(count + 1) of log \"device\" in \(copy.path): batchResult (kind 12) payload: "
                    ),
                    "\(run)")
                #expect(run.standardError.filter { $0 == "\n" }.count == 1)
            }
            let filtered = try await runLogtool(["dump", "copy", "--record", "n2"], in: directory)
            #expect(filtered.status == 1, "a filter does not hide a corrupt entry: \(filtered)")

            let damaged = directory.appendingPathComponent("damaged")
            try Log.open(at: damaged, named: "device", options: .init(durability: .fast)).append(entries)
            try corruptEntry(at: 5, of: "device", in: damaged, .flippedPayloadByte)
            let run = try await runLogtool(["dump", "damaged"], in: directory)
            #expect(run.status == 1, "\(run)")
            #expect(run.lines.count == 4)
            #expect(
                run.standardError.hasPrefix(
                    "logtool: error: corrupt entry at offset 5 of log \"device\" in \(damaged.path): "), "\(run)")
            #expect(run.standardError.filter { $0 == "\n" }.count == 1)
        }
    }
}

extension TestDevice {
    /// The entries of the device's log through `last` (all by default), to append to another log.
    func logEntries(through last: LogOffset? = nil) throws -> [NewEntry] {
        var entries: [NewEntry] = []
        try engine.deviceLog.log.forEachEntry(through: last) {
            entries.append(NewEntry(kind: $0.kind, payload: $0.payload, time: $0.time))
        }
        return entries
    }
}
