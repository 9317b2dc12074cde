import Foundation
import LogStore
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncTesting
import LogSyncWire
import SyncModel
import Testing

@testable import LogSyncServer

/// F69 over HTTP: the groups of a send (with an asset upload) and of a fetch (with an asset
/// download) reach the server in the request bodies and the asset requests' header, and the
/// server's log shows each group once.
@Suite("HTTP: operation groups (F69)", .timeLimit(.minutes(2)))
struct OperationGroupHTTPTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// Each `operationGroupStarted` of alice's private log: the group, its first request and
    /// device; and the groups named by the `requestOutcome` entries.
    static func logged(
        _ live: LiveServer
    ) throws -> (started: [(OperationGroup, String, DeviceID?)], outcomes: [String?]) {
        var started: [(OperationGroup, String, DeviceID?)] = []
        var outcomes: [String?] = []
        try live.server.admin.log(of: "alice").forEachEntry { entry in
            switch try ServerEntry(entry) {
            case .operationGroupStarted(let group, let first, let device): started.append((group, first, device))
            case .requestOutcome(_, _, let outcome, _): outcomes.append(outcome.operationGroupID)
            default: break
            }
        }
        return (started, outcomes)
    }

    @Test(
        "F69 a send's and a fetch's groups reach the server's log over HTTP, asset requests included",
        arguments: WireFormat.allCases)
    func groupsOverHTTP(format: WireFormat) async throws {
        try await withLiveServer { live, directory in
            let phoneClient = live.client(LiveServer.aliceToken, device: "phone", format: format)
            let laptopClient = live.client(LiveServer.aliceToken, device: "laptop", format: format)
            defer {
                phoneClient.close()
                laptopClient.close()
            }
            let phone = try TestDevice(
                "phone", database: phoneClient.database(), directory: directory.appendingPathComponent("phone"))
            let laptop = try TestDevice(
                "laptop", database: laptopClient.database(), directory: directory.appendingPathComponent("laptop"))

            // The phone creates the zone under a default group.
            try phone.createZone(Self.notes)
            try await phone.engine.sendChanges()
            let zoneGroup = try #require(try Self.logged(live).started.first)
            #expect(zoneGroup.0.name == "SyncEngine sendChanges manual")
            #expect(zoneGroup.1 == "modifyZones")

            // Then a note with a photo, in its own group: the upload is the group's first request.
            let photo = directory.appendingPathComponent("photo.jpg")
            try Data((0..<5000).map { UInt8($0 % 251) }).write(to: photo)
            let note = Record.ID(recordName: "n1", zoneID: Self.notes)
            try phone.write(note, "Holiday")
            try phone.attach(note, "photo", .asset(Asset(fileURL: photo)))
            let upload = OperationGroup(
                operationGroupID: "photos-\(format)", name: "Upload holiday photos", quantity: 1,
                expectedSendSize: .kilobytes)
            try await phone.engine.sendChanges(SyncEngine.SendChangesOptions(operationGroup: upload))

            // The laptop fetches it in a group of its own: the database changes come first, the
            // photo's download later in the same group.
            let catchUp = OperationGroup(
                operationGroupID: "catch-up-\(format)", name: "Catch up", expectedReceiveSize: .kilobytes)
            try await laptop.engine.fetchChanges(SyncEngine.FetchChangesOptions(operationGroup: catchUp))
            #expect(laptop.title(note) == "Holiday")

            let (started, outcomes) = try Self.logged(live)
            #expect(started.count == 3)
            #expect(started.dropFirst().map(\.0) == [upload, catchUp])
            #expect(started.dropFirst().map(\.1) == ["uploadAsset", "fetchDatabaseChanges"])
            #expect(started.dropFirst().map(\.2) == ["phone", "laptop"])
            #expect(outcomes == ["photos-\(format)"])
        }
    }

    @Test("F69 a malformed group in a request body or an asset header is refused, naming the field")
    func malformedGroupsAreRefused() async throws {
        try await withLiveServer { live, directory in
            let client = live.client(LiveServer.aliceToken, device: "phone")
            defer { client.close() }
            let database = client.database()
            let before = try live.lastOffset(of: "alice")
            let bad = OperationGroup(operationGroupID: "g", name: "ok", quantity: -3)
            let error = try await #require(throws: SyncError.self) {
                _ = try await database.fetchDatabaseChanges(FetchDatabaseChangesRequest(operationGroup: bad))
            }
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains("quantity is -3"), "\(error.message)")

            let file = directory.appendingPathComponent("a.bin")
            try Data([1, 2, 3]).write(to: file)
            let digest = AssetHasher.digest(of: [1, 2, 3])
            let upload = try await #require(throws: SyncError.self) {
                _ = try await database.uploadAsset(
                    AssetUploadRequest(
                        zoneID: .default, digest: digest, size: 3, fileURL: file,
                        operationGroup: OperationGroup(operationGroupID: String(repeating: "x", count: 300))))
            }
            #expect(upload.code == .invalidArguments)
            #expect(upload.message.contains("operation group ID"), "\(upload.message)")
            #expect(try live.lastOffset(of: "alice") == before, "nothing was written")
        }
    }
}
