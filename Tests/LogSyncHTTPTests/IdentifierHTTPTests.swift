import ChildProcesses
import Foundation
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import NIOHTTP1
import SyncModel
import TemporaryDirectory
import Testing

/// Identifiers over HTTP: whatever a client puts where an identifier goes, the answer is never a
/// 5xx, and a bad identifier is refused with `invalidArguments` (Docs/Protocol.md, "Identifiers").
@Suite("Identifiers over HTTP")
struct IdentifierHTTPTests {
    /// Strings that break some identifier rule, for every position an identifier takes.
    static let badTexts: [String] = [
        "", String(repeating: "x", count: 256), String(repeating: "y", count: 10_000), "a\u{0}b", "a\u{1B}b",
        "a\u{FFFD}",
        "_x", "zoné",
    ]

    /// One request body per operation and identifier position, each carrying `text` there.
    static func bodies(_ text: String) -> [(String, [UInt8])] {
        let notes = RecordZone.ID(zoneName: "Notes")
        let zone = RecordZone.ID(zoneName: text)
        let owner = RecordZone.ID(zoneName: "Notes", ownerName: text)
        func record(_ id: Record.ID, type: String = "Note", key: String = "title") -> Record {
            var record = Record(recordType: type, recordID: id)
            record[key] = "value"
            return record
        }
        var linking = record(Record.ID(recordName: "n1", zoneID: notes))
        linking["link"] = .reference(Record.Reference(recordID: Record.ID(recordName: text, zoneID: notes)))
        let records: [(String, ModifyRecordsRequest)] = [
            ("record name", ModifyRecordsRequest(recordsToSave: [record(Record.ID(recordName: text, zoneID: notes))])),
            (
                "deleted record name",
                ModifyRecordsRequest(recordIDsToDelete: [Record.ID(recordName: text, zoneID: notes)])
            ),
            ("record zone", ModifyRecordsRequest(recordsToSave: [record(Record.ID(recordName: "n1", zoneID: zone))])),
            ("record owner", ModifyRecordsRequest(recordsToSave: [record(Record.ID(recordName: "n1", zoneID: owner))])),
            (
                "record type",
                ModifyRecordsRequest(recordsToSave: [record(Record.ID(recordName: "n1", zoneID: notes), type: text)])
            ),
            (
                "field key",
                ModifyRecordsRequest(recordsToSave: [record(Record.ID(recordName: "n1", zoneID: notes), key: text)])
            ),
            ("reference", ModifyRecordsRequest(recordsToSave: [linking])),
            (
                "request ID",
                ModifyRecordsRequest(
                    recordsToSave: [record(Record.ID(recordName: "n1", zoneID: notes))], requestID: RequestID(text))
            ),
        ]
        var bodies: [(String, [UInt8])] = records.map { ("modifyRecords \($0.0)", Wire.encode($0.1, as: .protobuf)) }
        bodies += [
            (
                "modifyZones save",
                Wire.encode(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]), as: .protobuf)
            ),
            (
                "modifyZones owner",
                Wire.encode(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: owner)]), as: .protobuf)
            ),
            ("modifyZones delete", Wire.encode(ModifyZonesRequest(zoneIDsToDelete: [zone]), as: .protobuf)),
            ("fetchZones", Wire.encode(FetchZonesRequest(zoneIDs: [zone, owner]), as: .protobuf)),
            ("fetchZoneChanges zone", Wire.encode(FetchZoneChangesRequest(zoneID: zone), as: .protobuf)),
            ("fetchZoneChanges owner", Wire.encode(FetchZoneChangesRequest(zoneID: owner), as: .protobuf)),
            (
                "fetchZoneChanges desired key",
                Wire.encode(FetchZoneChangesRequest(zoneID: notes, desiredKeys: [text]), as: .protobuf)
            ),
            (
                "modifySubscriptions save",
                Wire.encode(
                    ModifySubscriptionsRequest(
                        subscriptionsToSave: [Subscription(subscriptionID: Subscription.ID(text))]), as: .protobuf)
            ),
            (
                "modifySubscriptions zone",
                Wire.encode(
                    ModifySubscriptionsRequest(
                        subscriptionsToSave: [Subscription(subscriptionID: "s", kind: .recordZone(zone))]),
                    as: .protobuf)
            ),
            (
                "modifySubscriptions delete",
                Wire.encode(
                    ModifySubscriptionsRequest(
                        subscriptionIDsToDelete: [Subscription.ID(text)]), as: .protobuf)
            ),
        ]
        return bodies
    }

    static func operation(of label: String) -> String { String(label.prefix { $0 != " " }) }

    @Test("no identifier a client sends gives a 5xx, on any operation, and nothing bad is stored")
    func noServerErrors() async throws {
        try await withLiveServer { live, _ in
            let setup = live.client(LiveServer.aliceToken, device: "phone").database(.private)
            _ = try await setup.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            let before = try live.lastOffset(of: "alice")
            for text in Self.badTexts {
                for (label, body) in Self.bodies(text) {
                    let response = try await rawRequest(
                        live, "/v1/databases/private/\(Self.operation(of: label))", headers: aliceHeaders(), body: body)
                    #expect(response.status < 500, "\(label) \(quotedForTest(text)): \(response)")
                    // 404: "_x" is a valid owner name, another user's, whose zone a read does not find.
                    #expect([200, 400, 404].contains(response.status), "\(label) \(quotedForTest(text)): \(response)")
                }
                // The device header, on every operation. (Control characters in a header are the
                // HTTP parser's to refuse, and the client refuses to send them.)
                guard !text.unicodeScalars.contains(where: { $0.value < 0x20 }) else { continue }
                for operation in WireOperation.allCases {
                    let response = try await rawRequest(
                        live, "/v1/databases/private/\(operation)", headers: aliceHeaders([("LogSync-Device", text)]),
                        body: [])
                    #expect(response.status < 500, "device \(quotedForTest(text)) on \(operation): \(response)")
                }
            }
            // No zone with a bad name or owner was stored.
            _ = before
            let zones = try await setup.fetchZones(FetchZonesRequest(zoneIDs: nil))
            #expect(Set(zones.results.keys) == [.default, RecordZone.ID(zoneName: "Notes")])
        }
    }

    @Test("bytes that are not UTF-8 in an identifier are refused with 400, in the body and in the device header")
    func invalidUTF8() async throws {
        try await withLiveServer { live, _ in
            // The zone name "ZZZZ" becomes Z 0xFF Z Z on the wire.
            var body = Wire.encode(ModifyZonesRequest(zonesToSave: [RecordZone(zoneName: "ZZZZ")]), as: .protobuf)
            let at = try #require(body.indices.first { body[$0...].starts(with: Array("ZZZZ".utf8)) })
            body[at + 1] = 0xFF
            let response = try await rawRequest(
                live, "/v1/databases/private/modifyZones", headers: aliceHeaders(), body: body)
            #expect(response.status == 400, "\(response)")
            #expect(try response.error().code == .invalidArguments)

            // The same in a JSON body.
            var json = Wire.encode(ModifyZonesRequest(zonesToSave: [RecordZone(zoneName: "ZZZZ")]), as: .json)
            let jsonAt = try #require(json.indices.first { json[$0...].starts(with: Array("ZZZZ".utf8)) })
            json[jsonAt + 1] = 0xFF
            let jsonResponse = try await rawRequest(
                live, "/v1/databases/private/modifyZones",
                headers: [("Authorization", "Bearer \(LiveServer.aliceToken)"), ("Content-Type", "application/json")],
                body: json)
            #expect(jsonResponse.status == 400, "\(jsonResponse)")

            let connection = try await RawConnection.open(to: live)
            defer { connection.close() }
            try await connection.send(
                bytes: Array(
                    "POST /v1/databases/private/allSubscriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(LiveServer.aliceToken)\r\nContent-Length: 0\r\nLogSync-Device: ph"
                        .utf8)
                    + [0xFF, 0xFE] + Array("one\r\n\r\n".utf8))
            try await connection.waitUntil("the answer") { $0.text.contains("\r\n\r\n") }
            #expect(connection.text.hasPrefix("HTTP/1.1 400"), "\(connection.text.prefix(300))")
            #expect(connection.text.contains("device ID"))
        }
    }

    /// A push upgrade request, raw, with `headers` added.
    static func upgrade(_ path: String, _ headers: [String]) -> String {
        ([
            "GET \(path) HTTP/1.1", "Host: x", "Upgrade: websocket", "Connection: Upgrade",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
        ] + headers)
        .joined(separator: "\r\n") + "\r\n\r\n"
    }

    @Test(
        "a refused push upgrade gets the documented status with an error body: 401, 404, 400; a good one 101",
        arguments: [
            ("/v1/databases/private/push", [], 401),
            ("/v1/databases/private/push", ["Authorization: Bearer lsk_nobody-0123456789abcdef"], 401),
            ("/v1/databases/private/push", ["Authorization: Basic YWxpY2U6eA=="], 401),
            ("/v1/databases/public2/push", ["Authorization: Bearer \(LiveServer.aliceToken)"], 404),
            ("/v2/databases/private/push", ["Authorization: Bearer \(LiveServer.aliceToken)"], 404),
            (
                "/v1/databases/private/push",
                [
                    "Authorization: Bearer \(LiveServer.aliceToken)",
                    "LogSync-Device: \(String(repeating: "d", count: 256))",
                ], 400
            ),
            (
                "/v1/databases/private/push",
                ["Authorization: Bearer \(LiveServer.aliceToken)", "LogSync-Device: phone"], 101
            ),
        ] as [(String, [String], Int)])
    func pushUpgradeStatuses(path: String, headers: [String], status: Int) async throws {
        try await withLiveServer { live, _ in
            let connection = try await RawConnection.open(to: live)
            defer { connection.close() }
            try await connection.send(Self.upgrade(path, headers))
            try await connection.waitUntil("the answer") { $0.text.contains("\r\n\r\n") }
            #expect(connection.text.hasPrefix("HTTP/1.1 \(status)"), "\(connection.text.prefix(300))")
            if status == 401 {
                #expect(connection.text.lowercased().contains("www-authenticate: bearer"))
                #expect(connection.text.contains("token") || connection.text.contains("Authorization"))
            }
        }
    }

    @Test("a push upgrade whose device header is not UTF-8 gets 400 naming the header")
    func pushUpgradeWithInvalidDevice() async throws {
        try await withLiveServer { live, _ in
            let connection = try await RawConnection.open(to: live)
            defer { connection.close() }
            // Without its final CRLF (one Character), so that one more header follows.
            let request = Self.upgrade("/v1/databases/private/push", ["Authorization: Bearer \(LiveServer.aliceToken)"])
            try await connection.send(
                bytes: Array(request.dropLast().utf8) + Array("LogSync-Device: ph".utf8) + [0xFF]
                    + Array("\r\n\r\n".utf8))
            try await connection.waitUntil("the answer") { $0.text.contains("\r\n\r\n") }
            #expect(connection.text.hasPrefix("HTTP/1.1 400"), "\(connection.text.prefix(300))")
            #expect(connection.text.contains("device ID"))
        }
    }

    @Test("a token file line whose user ID breaks the rules is refused, naming the line")
    func tokenFileUserIDs() throws {
        let digest = "sha256:" + String(repeating: "ab", count: 32)
        for user in ["a\u{1}b", String(repeating: "u", count: 512), "a\u{FFFD}"] {
            let error = #expect(throws: TokenStore.FileError.self) {
                try TokenStore.parse("# tokens\n\(digest) \(user)\n", path: "tokens")
            }
            #expect(error?.line == 2)
            #expect(error?.problem.contains("invalid user ID") == true, "\(String(describing: error))")
        }
        #expect(
            try TokenStore.parse("\(digest) alice smith\n", path: "tokens").users.values.map(\.rawValue) == [
                "alice smith"
            ])
    }

    @Test("logsync-server user add refuses invalid user IDs with a clear error and writes nothing")
    func userAddRefusesInvalidIDs() async throws {
        try await withServerData { data in
            for (user, rule) in [
                (String(repeating: "u", count: 10_000), "more than 511"),
                (String(repeating: "u", count: 512), "more than 511"),
                ("", "must not be empty"), ("a\u{1}b", "control characters"), (" alice", "space"),
            ] {
                let added = try await ChildProcess.run(["user", "add", user, "--data", data.path])
                #expect(added.status != 0, "\(added)")
                #expect(added.output.isEmpty, "no token is printed")
                #expect(added.errorOutput.contains("invalid user ID"), "\(added)")
                #expect(added.errorOutput.contains(rule), "\(added)")
            }
            #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("tokens").path))
            let longest = try await ChildProcess.run([
                "user", "add", String(repeating: "u", count: 511), "--data", data.path,
            ])
            #expect(longest.status == 0, "\(longest)")
        }
    }
}

/// A string for a failure message: short, with control characters visible.
func quotedForTest(_ text: String) -> String {
    let shown = text.count > 40 ? String(text.prefix(40)) + "…(\(text.utf8.count) bytes)" : text
    return shown.unicodeScalars.map { $0.value < 0x20 ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined()
}
