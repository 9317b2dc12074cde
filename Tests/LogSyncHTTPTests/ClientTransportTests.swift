import Foundation
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel
import Testing

@testable import LogSyncHTTP

/// The client's side of the transport: failures of the network become codes the engine retries
/// (F89, F103), and both body formats work end to end.
@Suite("HTTP: client transport", .timeLimit(.minutes(2)))
struct ClientTransportTests {
    // F89: no server listening is a network failure, which the engine retries.
    @Test("F89 a server that is not there: networkFailure, transient")
    func noServer() async throws {
        // A port bound but not listening, held for the whole test so no other server takes it.
        let socket = try #require(try LoopbackSocket())
        let port = socket.port
        defer { withExtendedLifetime(socket) {} }
        let client = HTTPSyncClient(
            .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(LiveServer.aliceToken)))
        for operation in [WireOperation.fetchDatabaseChanges, .modifyRecords] {
            let error = await #expect(throws: SyncError.self) {
                switch operation {
                case .modifyRecords: _ = try await client.database().modifyRecords(saving: [], deleting: [])
                default: _ = try await client.database().fetchDatabaseChanges(since: nil)
                }
            }
            #expect(error?.code == .networkFailure, "\(String(describing: error))")
            #expect(error?.isTransient == true)
            #expect(error?.message.contains("could not connect to the server at http://127.0.0.1:\(port)") == true)
        }
    }

    // F103: a lost answer to modifyRecords may hide an applied request: serverResponseLost, which
    // the engine resends with the same request ID. A lost read is a plain network failure.
    @Test("F103 a connection lost after sending: serverResponseLost for modifyRecords, networkFailure otherwise")
    func lostAnswers() {
        let reset = IOError(errnoCode: ECONNRESET, reason: "read")
        let server = URL(string: "http://127.0.0.1:1")!
        #expect(TransportFailure.map(reset, operation: .modifyRecords, server: server).code == .serverResponseLost)
        #expect(TransportFailure.map(reset, operation: .fetchZoneChanges, server: server).code == .networkFailure)
        #expect(TransportFailure.map(reset, operation: .modifyZones, server: server).code == .networkFailure)
        let refused = IOError(errnoCode: ECONNREFUSED, reason: "connect")
        #expect(TransportFailure.map(refused, operation: .modifyRecords, server: server).code == .networkFailure)
        #expect(
            TransportFailure.map(CancellationError(), operation: .modifyRecords, server: server).code
                == .operationCancelled)
    }

    // F89, F90: a proxy's 503 page without an error body still gives a code the engine retries,
    // with the Retry-After wait.
    @Test("F89 F90 a status without an error body maps to a retried code with its Retry-After")
    func bareStatus() {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html")
        headers.add(name: "Retry-After", value: "12")
        let error = HTTPSyncClient.error(
            status: 503, headers: headers, body: Array("<html>busy</html>".utf8), operation: .fetchZones)
        #expect(error.code == .serviceUnavailable)
        #expect(error.retryAfter == .seconds(12))
        #expect(error.cause == "<html>busy</html>")
        #expect(error.message == "fetchZones got HTTP 503 without an error body")
    }

    // F90, F152: a server's throttling error crosses exactly, with a Retry-After header for
    // proxies and people and the exact wait in the body.
    @Test("F90 F152 throttling crosses exactly, with Retry-After")
    func throttling() async throws {
        try await withLiveServer { live, _ in
            live.server.admin.failNextRequests(
                of: "alice", with: SyncError(.requestRateLimited, "slow down", retryAfter: .milliseconds(2500)))
            let response = try await rawRequest(live, "/v1/databases/private/allSubscriptions", headers: aliceHeaders())
            #expect(response.status == 429)
            #expect(response.header("Retry-After") == "3")
            #expect(
                try response.error() == SyncError(.requestRateLimited, "slow down", retryAfter: .milliseconds(2500)))
        }
    }

    @Test("a client speaking JSON gets the same answers", arguments: WireFormat.allCases)
    func formats(format: WireFormat) async throws {
        try await withLiveServer { live, _ in
            let database = live.client(LiveServer.aliceToken, device: "phone", format: format).database()
            let zone = RecordZone.ID(zoneName: "Notes")
            _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone))
            note["title"] = "Groceries"
            note["when"] = .date(Date(timeIntervalSince1970: 1_700_000_000.25))
            let saved = try #require(
                try await database.modifyRecords(saving: [note], deleting: []).saveResults[note.recordID]?.get())
            let fetched = try await database.fetchZoneChanges(zoneID: zone, since: nil)
            #expect(fetched.modifications.map(\.record) == [saved])
            let changes = try await database.fetchDatabaseChanges(since: nil)
            #expect(changes.modifications.map(\.zoneID) == [zone])
            let again = try await database.fetchDatabaseChanges(since: changes.changeToken)
            #expect(again.modifications.isEmpty && again.changeToken == changes.changeToken)
        }
    }
}
