import Foundation
import LogStore
import LogSyncServer
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// `logtool dump` on the logs of a real `SyncServer`, run as a child process.
@Suite("logtool dump of server logs")
struct ServerDumpCommandTests {
    /// What the story below writes to alice's private log, after the size column, offset by
    /// offset (`fingerprint=*` stands for the request's checksum).
    static let expectedPrivateLog = [
        "zoneSaved  zone=Notes capabilities=[fetchChanges,atomic,sharing,zoneWideSharing]",
        "zoneSaved  zone=Trash capabilities=[fetchChanges,atomic,sharing,zoneWideSharing]",
        "recordSaved  zone=Notes record=n1 type=Note tag=3 keys=[body,title]",
        "recordSaved  zone=Notes record=n2 type=Note tag=4 keys=[title]",
        "requestOutcome  request=phone-1 fingerprint=* saved=2 deleted=0 failed=0",
        "recordSaved  zone=Trash record=t1 type=Note tag=6 keys=[title]",
        "recordDeleted  zone=Notes record=n2 type=Note",
        "zoneDeleted  zone=Trash reason=deleted",
        "recordSaved  zone=Notes record=n3 type=Note tag=9 keys=[title]",
        "clientChangeTokenUpdated  zone=Notes device=phone token=746f6b2d31 tokenSize=5",
        "requestOutcome  request=phone-2 fingerprint=* saved=1 deleted=0 failed=1 errors=[n1:serverRecordChanged]",
        "subscriptionSaved  subscription=engine kind=database",
    ]

    /// A server in `directory/data` on which alice's phone creates two zones, saves records
    /// (one request with an ID), deletes a record and a zone, has a save rejected, and
    /// subscribes; bob only registers. Returns the server, still open.
    static func writeServerStory(in directory: URL) async throws -> SyncServer {
        let server = try SyncServer(.init(directory: directory.appendingPathComponent("data"), durability: .fast))
        let phone = server.database(for: "alice", device: "phone")
        let notes = RecordZone.ID(zoneName: "Notes")
        let trash = RecordZone.ID(zoneName: "Trash")
        func note(_ name: String, in zone: RecordZone.ID, _ fields: [String: String]) -> Record {
            var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
            for (key, value) in fields { record[key] = .string(value) }
            return record
        }

        _ = try await phone.modifyZones(saving: [RecordZone(zoneID: notes), RecordZone(zoneID: trash)], deleting: [])
        let first = try await phone.modifyRecords(
            saving: [
                note("n1", in: notes, ["title": "Groceries", "body": "milk, eggs"]),
                note("n2", in: notes, ["title": "Draft"]),
            ],
            deleting: [], requestID: "phone-1")
        #expect(first.saveResults.values.allSatisfy { (try? $0.get()) != nil })
        _ = try await phone.modifyRecords(saving: [note("t1", in: trash, ["title": "Old"])], deleting: [])
        _ = try await phone.modifyRecords(saving: [], deleting: [Record.ID(recordName: "n2", zoneID: notes)])
        _ = try await phone.modifyZones(saving: [], deleting: [trash])
        // n1 without its change tag: serverRecordChanged; n3 is saved (not atomic).
        let second = try await phone.modifyRecords(
            ModifyRecordsRequest(
                recordsToSave: [note("n3", in: notes, ["title": "New"]), note("n1", in: notes, ["title": "Stale"])],
                atomically: false, requestID: "phone-2", clientChangeToken: Data("tok-1".utf8)))
        #expect(second.saveResults.values.filter { (try? $0.get()) == nil }.count == 1)
        _ = try await phone.modifySubscriptions(saving: [Subscription(subscriptionID: "engine")], deleting: [])
        _ = try server.userRecordID(for: "bob@example.com")
        return server
    }

    @Test func privateLogLinesNameKindsZonesRecordsAndTags() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            let run = try await runLogtool(["dump", "data/users/u1", "--log", "private"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.standardError.isEmpty)
            #expect(run.lines.map(offsetOfTextLine) == Array(1...12))
            #expect(run.lines.map { describedPart(of: $0).map(maskingFingerprint) } == Self.expectedPrivateLog)
            #expect(run.lines[2].hasPrefix("     3  "))
            #expect(run.lines[2].contains("  kind 103  size "))
        }
    }

    @Test func jsonLinesCarryKindNameAndFields() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            let run = try await runLogtool(["dump", "data/users/u1", "--log", "private", "--json"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.lines.count == 12)
            let objects = try run.lines.map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            for (index, object) in objects.enumerated() {
                #expect(
                    Set(object.keys) == [
                        "offset", "time", "timeMicros", "kind", "kindName", "size", "fields", "payloadBase64",
                    ])
                #expect(object["offset"] as? Int == index + 1)
                #expect(
                    object["kindName"] as? String == Self.expectedPrivateLog[index].components(separatedBy: "  ")[0])
                #expect(
                    Data(base64Encoded: try #require(object["payloadBase64"] as? String))?.count == object["size"]
                        as? Int)
            }
            let n1 = try #require(objects[2]["fields"] as? [String: Any])
            #expect(n1["zone"] as? String == "Notes")
            #expect(n1["record"] as? String == "n1")
            #expect(n1["type"] as? String == "Note")
            #expect(n1["tag"] as? String == "3")
            #expect(n1["keys"] as? [String] == ["body", "title"])
            let request = try #require(objects[10]["fields"] as? [String: Any])
            #expect(request["request"] as? String == "phone-2")
            #expect(request["saved"] as? Int == 1)
            #expect(request["failed"] as? Int == 1)
            #expect(request["errors"] as? [String] == ["n1:serverRecordChanged"])
            #expect(objects[11]["kind"] as? Int == 105)
        }
    }

    @Test(
        arguments: [
            (["--kind", "recordSaved"], [3, 4, 6, 9]),
            (["--kind", "recordsaved", "--kind", "104"], [3, 4, 6, 7, 9]),
            (["--kind", "113"], [5, 11]),
            (["--record", "n1"], [3]),
            (["--record", "n2"], [4, 7]),
            (["--zone", "Trash"], [2, 6, 8]),
            (["--zone", "Notes", "--kind", "recordSaved"], [3, 4, 9]),
            (["--zone", "Notes", "--from", "8"], [9, 10]),
            (["--record", "n9"], []),
            (["--kind", "1"], []),
        ] as [([String], [UInt64])])
    func filters(options: [String], expected: [UInt64]) async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            let run = try await runLogtool(["dump", "data/users/u1", "--log", "private"] + options, in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.lines.map(offsetOfTextLine) == expected)
            let json = try await runLogtool(
                ["dump", "data/users/u1", "--log", "private", "--json"] + options, in: directory)
            #expect(
                try json.lines.map { try JSONDecoder().decode(DumpedEntry.self, from: Data($0.utf8)).offset }
                    == expected)
        }
    }

    @Test func anUnknownKindNameIsAUsageError() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            let run = try await runLogtool(
                ["dump", "data/users/u1", "--log", "private", "--kind", "recordSave"], in: directory)
            #expect(run.status == 64, "\(run)")
            #expect(run.standardOutput.isEmpty)
            #expect(run.standardError.contains("unknown kind \"recordSave\""), "\(run)")
            #expect(run.standardError.contains("recordSaved (103)"), "\(run)")
        }
    }

    @Test func theRegistryShowsEachUserAndTheirDirectory() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            let run = try await runLogtool(["dump", "data/registry"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(
                run.lines.map { describedPart(of: $0) } == [
                    "userRegistered  user=alice directory=users/u1",
                    "userRegistered  user=bob@example.com directory=users/u2",
                ])
            let json = try await runLogtool(
                ["dump", "data/registry", "--json", "--kind", "userRegistered"], in: directory)
            let first = try #require(json.lines.first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
            #expect(object["kindName"] as? String == "userRegistered")
            #expect((object["fields"] as? [String: String]) == ["user": "alice", "directory": "users/u1"])
        }
    }

    // F137: the registry's schemaDeployed entry reads as its record types and each field with its
    // kind, in text and JSON.
    @Test("F137 a deployed schema reads as its types and fields")
    func theRegistryShowsADeployedSchema() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            try server.deploySchema(try server.developmentSchema())
            server.shutdown()
            let run = try await runLogtool(["dump", "data/registry", "--kind", "schemaDeployed"], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(
                run.lines.map { describedPart(of: $0) } == [
                    "schemaDeployed  types=[Note] fields=[Note.body:string,Note.title:string]"
                ])
            let json = try await runLogtool(
                ["dump", "data/registry", "--json", "--kind", "schemaDeployed"], in: directory)
            let line = try #require(json.lines.first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["kind"] as? Int == 117)
            let fields = try #require(object["fields"] as? [String: Any])
            #expect(fields["types"] as? [String] == ["Note"])
            #expect(fields["fields"] as? [String] == ["Note.body:string", "Note.title:string"])
        }
    }

    /// `logtool dump` decodes sharing: the owner's share record with its participants, the
    /// participant's shared-database entries, and the registry's e-mail addresses (F119).
    @Test func sharingEntriesAreDecoded() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            try server.registerUser("carol", emailAddress: "carol@example.com")
            let alice = server.database(for: "alice", device: "phone")
            var share = Share(recordZoneID: RecordZone.ID(zoneName: "Notes"))
            share.addParticipant(Share.Participant(emailAddress: "carol@example.com", permission: .readWrite))
            let saved = try await alice.modifyRecords(saving: [share.record], deleting: [])
            let result = try #require(saved.saveResults[share.recordID])
            let url = try #require(try Share(record: try result.get()).url)
            let carol = server.database(for: "carol", scope: .shared, device: "tablet")
            _ = try #require(try await carol.acceptShares(AcceptSharesRequest(shareURLs: [url])).results[url]).get()
            _ = try await carol.modifyRecords(
                saving: [],
                deleting: [
                    Record.ID(
                        recordName: Share.zoneWideShareRecordName,
                        zoneID: RecordZone.ID(zoneName: "Notes", ownerName: "_user1"))
                ])

            let owner = try await runLogtool(
                ["dump", "data/users/u1", "--log", "private", "--kind", "recordSaved"], in: directory)
            #expect(owner.status == 0, "\(owner)")
            let shares = owner.lines.compactMap { describedPart(of: $0) }.filter { $0.contains("type=cloudkit.share") }
            #expect(shares.count == 3, "saved, accepted, left: \(shares)")
            #expect(
                shares.first?.contains(
                    "publicPermission=none participants=[_user1:owner:readWrite:accepted,_user3:privateUser:readWrite:pending]"
                ) == true, "\(shares)")
            #expect(shares.last?.contains("_user3:privateUser:readWrite:removed]") == true, "\(shares)")

            let participant = try await runLogtool(["dump", "data/users/u3", "--log", "shared"], in: directory)
            #expect(participant.status == 0, "\(participant)")
            let described = participant.lines.compactMap { describedPart(of: $0) }
            #expect(
                described.first?.hasPrefix(
                    "sharedZoneJoined  zone=Notes owner=_user1 share=cloudkit.zoneshare ownerOffset=") == true,
                "\(described)")
            #expect(described.last == "sharedZoneLeft  zone=Notes owner=_user1 reason=left", "\(described)")
            let registry = try await runLogtool(["dump", "data/registry", "--kind", "userEmailSet"], in: directory)
            #expect(
                registry.lines.map { describedPart(of: $0) } == ["userEmailSet  userNumber=3 email=carol@example.com"])
        }
    }

    @Test func aUsersEnvironmentWithoutLogIsAmbiguousOnceSharedIsUsed() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            _ = try await server.database(for: "alice", scope: .shared, device: "phone").allSubscriptions()
            let run = try await runLogtool(["dump", "data/users/u1"], in: directory)
            #expect(run.status == 1)
            #expect(
                run.standardError.hasSuffix("holds 2 logs (private, shared); choose one with --log NAME\n"), "\(run)")
        }
    }

    /// The server's own log cannot hold an undecodable entry (its index decodes every append),
    /// so the story is copied into a log of its own, followed by a recordSaved that is not one.
    @Test func anUndecodableServerEntryIsReportedAtItsOffset() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.writeServerStory(in: directory)
            defer { server.shutdown() }
            var entries: [NewEntry] = []
            try server.admin.log(of: "alice").forEachEntry {
                entries.append(NewEntry(kind: $0.kind, payload: $0.payload, time: $0.time))
            }
            let copy = directory.appendingPathComponent("copy")
            try Log.open(at: copy, named: "private", options: .init(durability: .fast))
                .append(entries + [NewEntry(kind: 103, payload: [0xFF, 0xFF]), entries[0]])
            for json in [false, true] {
                let run = try await runLogtool(["dump", copy.path] + (json ? ["--json"] : []), in: directory)
                #expect(run.status == 1, "\(run)")
                #expect(run.lines.count == 12)
                #expect(
                    run.standardError.hasPrefix(
                        "logtool: error: corrupt entry at offset 13 of log \"private\" in \(copy.path): recordSaved (kind 103) payload: "
                    ),
                    "\(run)")
                #expect(run.standardError.filter { $0 == "\n" }.count == 1)
            }
            let filtered = try await runLogtool(["dump", copy.path, "--kind", "zoneSaved"], in: directory)
            #expect(filtered.status == 1, "a filter does not hide a corrupt entry: \(filtered)")
            #expect(filtered.lines.map(offsetOfTextLine) == [1, 2])
        }
    }
}

/// What a text line shows after the size column: the kind name and fields of a described
/// entry (or the hex preview of another).
func describedPart(of line: String) -> String? {
    guard let size = line.range(of: "  size ") else { return nil }
    let rest = line[size.upperBound...].drop { $0 == " " }.drop { $0.isNumber }
    guard rest.hasPrefix("  ") else { return nil }
    return String(rest.dropFirst(2))
}

/// `line` with the value of `fingerprint=` replaced by `*`.
func maskingFingerprint(_ line: String) -> String {
    line.replacing(/fingerprint=0x[0-9a-f]{8}/, with: "fingerprint=*")
}
