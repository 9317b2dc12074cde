import AsyncHTTPClient
import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import NIOCore
import NIOPosix
import SyncModel
import Synchronization
import Testing

/// Oversized and malformed requests over HTTP: refused with the right status and an error body
/// naming what was wrong, before anything is written.
@Suite("HTTP: body limits and malformed requests", .timeLimit(.minutes(2)))
struct RequestLimitTests {
    static let limit = 64 * 1024

    // The server answers from the declared length alone: the test sends the headers and no body,
    // so a server that waited for the body would never answer.
    @Test("a declared Content-Length over the limit: 413 before the body is read")
    func declaredLengthOverLimit() async throws {
        try await withLiveServer(configuration: .init(maxRequestBodyBytes: Self.limit)) { live, _ in
            let before = try live.lastOffset(of: "alice")
            let head =
                "POST /v1/databases/private/modifyRecords HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer \(LiveServer.aliceToken)\r\nContent-Type: application/x-protobuf\r\n"
                + "Content-Length: 100000000\r\n\r\n"
            let answer = try await exchange(port: live.port, send: Array(head.utf8))
            #expect(answer.hasPrefix("HTTP/1.1 413"), "\(answer.prefix(200))")
            #expect(answer.lowercased().contains("connection: close"))
            #expect(answer.contains("larger than this server's limit of \(Self.limit) bytes"))
            #expect(try live.lastOffset(of: "alice") == before)
        }
    }

    @Test("a streamed body over the limit: 413 once the limit is passed, nothing written")
    func streamedBodyOverLimit() async throws {
        try await withLiveServer(configuration: .init(maxRequestBodyBytes: Self.limit)) { live, _ in
            let before = try live.lastOffset(of: "alice")
            var request = HTTPClientRequest(url: live.baseURL.absoluteString + "/v1/databases/private/modifyRecords")
            request.method = .POST
            for (name, value) in aliceHeaders() { request.headers.add(name: name, value: value) }
            // No length: chunked, 4 KiB at a time, up to 4 MiB unless the server stops reading.
            let chunks = Array(repeating: ByteBuffer(repeating: 0x0A, count: 4096), count: 1024)
            request.body = .stream(chunks.async, length: .unknown)
            do {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                #expect(response.status.code == 413)
                let body = try await response.body.collect(upTo: 1 << 20)
                let error = try Wire.decode(SyncError.self, from: Array(body.readableBytesView), as: .protobuf)
                #expect(error.code == .limitExceeded)
                #expect(error.message.contains("more than \(Self.limit) bytes"))
            } catch {
                // The server may close the connection while the client is still sending; that too
                // is a refusal, and what matters is that nothing was written.
                let text = "\(error)"
                #expect(
                    ["remoteConnectionClosed", "Connection reset", "EPIPE", "I/O on closed channel"].contains {
                        text.contains($0)
                    },
                    "\(error)")
            }
            #expect(try live.lastOffset(of: "alice") == before)
        }
    }

    // F151: a request within the body limit but over the server's 2 MB of field data is judged
    // by the server, with the same error as in process.
    @Test("F151 a body within the limit but over 2 MB of field data: 413 limitExceeded from the server's rule")
    func overFieldDataLimit() async throws {
        try await withLiveServer { live, _ in
            let alice = live.client(LiveServer.aliceToken).database()
            _ = try await alice.modifyZones(saving: [RecordZone(zoneName: "Blobs")], deleting: [])
            let records = (0..<3).map { index in
                var record = Record(
                    recordType: "Blob",
                    recordID: Record.ID(recordName: "b\(index)", zoneID: RecordZone.ID(zoneName: "Blobs")))
                record["k"] = .bytes(Data(count: 700_000))
                return record
            }
            let before = try live.lastOffset(of: "alice")
            let error = await #expect(throws: SyncError.self) {
                _ = try await alice.modifyRecords(saving: records, deleting: [])
            }
            #expect(error?.code == .limitExceeded)
            #expect(error?.message.contains("more than 2000000") == true, "\(String(describing: error))")
            #expect(try live.lastOffset(of: "alice") == before)
        }
    }

    @Test(
        "malformed bodies: 400 invalidArguments naming the problem, nothing written",
        arguments: [
            (
                "application/x-protobuf", [0xFF, 0xFF, 0xFF, 0xFF] as [UInt8],
                "cannot decode logsync.wire.ModifyRecordsRequest from 4 bytes"
            ),
            (
                "application/x-protobuf", [0x0A, 0x7F, 0x01],
                "cannot decode logsync.wire.ModifyRecordsRequest from 3 bytes"
            ),
            ("application/json", Array("{\"recordsToSave\": [".utf8), "bytes of JSON"),
            (
                "application/json", Array("{\"savePolicy\": \"SAVE_POLICY_ALL_KEYS\", \"dropTables\": true}".utf8),
                "bytes of JSON"
            ),
            (
                "application/json",
                Array(
                    "{\"recordsToSave\": [{\"recordType\": \"Note\"}], \"savePolicy\": \"SAVE_POLICY_ALL_KEYS\"}".utf8),
                "records_to_save[0]: Record.record_id is missing"
            ),
            ("application/x-protobuf", [], "save_policy is missing"),
        ])
    func malformed(contentType: String, body: [UInt8], expected: String) async throws {
        try await withLiveServer { live, _ in
            let before = try live.lastOffset(of: "alice")
            let response = try await rawRequest(
                live, "/v1/databases/private/modifyRecords",
                headers: [("Authorization", "Bearer \(LiveServer.aliceToken)"), ("Content-Type", contentType)],
                body: body)
            #expect(response.status == 400, "\(response)")
            let error = try response.error()
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains(expected), "\(error)")
            #expect(try live.lastOffset(of: "alice") == before)
        }
    }

    @Test("requests the server does not understand get a status and an error body naming why")
    func refusedRequests() async throws {
        try await withLiveServer { live, _ in
            let unsupported = try await rawRequest(
                live, "/v1/databases/private/modifyZones",
                headers: [("Authorization", "Bearer \(LiveServer.aliceToken)"), ("Content-Type", "text/plain")],
                body: Array("zones".utf8))
            #expect(unsupported.status == 415)
            #expect(try unsupported.error().message.contains("Content-Type \"text/plain\" is not supported"))

            let version = try await rawRequest(
                live, "/v2/databases/private/modifyZones", headers: aliceHeaders(), body: [])
            #expect(version.status == 404)
            #expect(try version.error().code == .incompatibleVersion)

            let operation = try await rawRequest(
                live, "/v1/databases/private/dropDatabase", headers: aliceHeaders(), body: [])
            #expect(operation.status == 404)
            #expect(try operation.error().message.contains("there is no operation \"dropDatabase\""))

            let route = try await rawRequest(live, "/admin", method: .GET, headers: aliceHeaders())
            #expect(route.status == 404)
            #expect(try route.error().message.contains("no route GET /admin"))

            let stray = try await rawRequest(
                live, "/v1/databases/private/allSubscriptions", headers: aliceHeaders(), body: [1, 2, 3])
            #expect(stray.status == 400)
            #expect(try stray.error().message == "allSubscriptions takes no request body, but got 3 bytes")

            let json = try await rawRequest(
                live, "/v1/databases/private/allSubscriptions",
                headers: [("Authorization", "Bearer \(LiveServer.aliceToken)"), ("Accept", "application/json")])
            #expect(json.status == 200)
            #expect(json.header("Content-Type") == "application/json")
            #expect(String(decoding: json.body, as: UTF8.self) == "{}")
        }
    }
}
