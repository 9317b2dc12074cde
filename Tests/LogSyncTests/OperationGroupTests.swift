import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// F69: every request of a send or a fetch carries its operation group to the server, which logs
/// each group once (`operationGroupStarted`) and names it on each modify request's outcome; with
/// no group in the options the engine makes a default one (F70 for scheduled syncs).
@Suite("Operation groups (F69)")
struct OperationGroupTests {
    /// What alice's private database log says about groups: each `operationGroupStarted`, in
    /// order, and the group of each `requestOutcome`.
    struct ServerGroups {
        var started: [(group: OperationGroup, firstRequest: String, device: DeviceID?)] = []
        var outcomes: [String?] = []
        var lastOffset: LogOffset = 0
    }

    static func serverGroups(
        _ server: SyncServer, user: UserID = "alice", scope: DatabaseScope = .private
    ) throws -> ServerGroups {
        var groups = ServerGroups()
        let log = try server.admin.log(of: user, scope: scope)
        try log.forEachEntry { entry in
            switch try ServerEntry(entry) {
            case .operationGroupStarted(let group, let firstRequest, let device):
                groups.started.append((group, firstRequest, device))
            case .requestOutcome(_, _, let outcome, _):
                groups.outcomes.append(outcome.operationGroupID)
            default:
                break
            }
        }
        groups.lastOffset = try log.lastOffset
        return groups
    }

    /// Alice's phone on a ticking server of its own, both in `directory`, a fresh temporary
    /// directory removed when `body` returns.
    static func withPhone(
        _ body: (_ server: SyncServer, _ phone: TestDevice, _ directory: URL) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let server = try makeTickingServer(directory)
            try await body(server, try TestDevice("phone", server: server, directory: directory), directory)
        }
    }

    /// The device creates the zone Notes and writes note A, "Groceries", in it.
    static func writeGroceries(on device: TestDevice) throws {
        try device.createZone(Fixtures.notes)
        try device.write(Fixtures.a, "Groceries")
    }

    static let importGroup = OperationGroup(
        operationGroupID: "import-2024", name: "Import notes", quantity: 2, expectedSendSize: .kilobytes,
        expectedReceiveSize: .megabytes)

    @Test("F69 a custom send group reaches the server's log once, and names each batch's outcome")
    func customSendGroup() async throws {
        try await Self.withPhone { server, phone, _ in
            // The phone imports two notes into a new zone, in one group.
            try Self.writeGroceries(on: phone)
            try await phone.engine.sendChanges(SyncEngine.SendChangesOptions(operationGroup: Self.importGroup))

            var logged = try Self.serverGroups(server)
            #expect(logged.started.map(\.group) == [Self.importGroup])
            #expect(logged.started.first?.firstRequest == "modifyZones")
            #expect(logged.started.first?.device == "phone")
            #expect(logged.outcomes == ["import-2024"])

            // The second note, later, in the same group: its outcome names the group, no new group entry.
            try phone.write(Fixtures.b, "Recipes")
            try await phone.engine.sendChanges(SyncEngine.SendChangesOptions(operationGroup: Self.importGroup))
            logged = try Self.serverGroups(server)
            #expect(logged.started.count == 1)
            #expect(logged.outcomes == ["import-2024", "import-2024"])
        }
    }

    @Test("F69 a custom fetch group is logged by its first request; its later requests write nothing")
    func customFetchGroup() async throws {
        try await Self.withPhone { server, phone, directory in
            let laptop = try TestDevice("laptop", server: server, directory: directory)
            try Self.writeGroceries(on: phone)
            try await phone.engine.sendChanges()

            // The laptop fetches the database and the zone in one group, twice.
            let group = OperationGroup(operationGroupID: "catch-up", name: "Catch up after launch")
            try await laptop.engine.fetchChanges(SyncEngine.FetchChangesOptions(operationGroup: group))
            #expect(laptop.title(Fixtures.a) == "Groceries")
            let afterFirst = try Self.serverGroups(server)
            let entry = try #require(afterFirst.started.last)
            #expect(entry.group == group)
            #expect(entry.firstRequest == "fetchDatabaseChanges")
            #expect(entry.device == "laptop")

            try await laptop.engine.fetchChanges(SyncEngine.FetchChangesOptions(operationGroup: group))
            #expect(
                try Self.serverGroups(server).lastOffset == afterFirst.lastOffset,
                "a fetch of a known group appends nothing")
        }
    }

    @Test(
        "F69 without a group a sync sends the engine's default one for its kind, logged once however many syncs use it")
    func defaultGroups() async throws {
        try await Self.withPhone { server, phone, _ in
            try Self.writeGroceries(on: phone)
            try await phone.engine.sendChanges()
            try await phone.engine.fetchChanges()

            let logged = try Self.serverGroups(server)
            let prefix = phone.engine.requestIDPrefix
            #expect(
                logged.started.map(\.group) == [
                    OperationGroup(
                        operationGroupID: "\(prefix)-sendChanges-manual", name: "SyncEngine sendChanges manual"),
                    OperationGroup(
                        operationGroupID: "\(prefix)-fetchChanges-manual", name: "SyncEngine fetchChanges manual"),
                ])
            #expect(logged.outcomes == ["\(prefix)-sendChanges-manual"])

            // More syncs of the same kinds carry the same groups and write no group entry.
            try phone.write(Fixtures.b, "Recipes")
            try await phone.sync()
            let again = try Self.serverGroups(server)
            #expect(again.started.count == 2)
            #expect(again.outcomes == ["\(prefix)-sendChanges-manual", "\(prefix)-sendChanges-manual"])
        }
    }

    @Test("F69 F70 a scheduled fetch carries a default group named for the schedule")
    func scheduledFetchUsesTheDefaultGroup() async throws {
        try await Self.withPhone { server, phone, _ in
            let engine = phone.engine
            // What the scheduler runs for a push: a fetch with the default options, reason scheduled.
            try await engine.runSync(.fetch(SyncEngine.FetchChangesOptions())) {
                try await engine.runFetch(
                    SyncEngine.FetchChangesContext(reason: .scheduled, options: SyncEngine.FetchChangesOptions()))
            }
            let started = try #require(try Self.serverGroups(server).started.first)
            #expect(started.group.name == "SyncEngine fetchChanges scheduled")
            #expect(started.firstRequest == "fetchDatabaseChanges")
        }
    }

    @Test("F69 a malformed group is refused before anything is sent, naming its field")
    func malformedGroupIsRefused() async throws {
        try await Self.withPhone { server, phone, _ in
            try phone.write(Fixtures.a, "Groceries")
            let cases: [(OperationGroup, String)] = [
                (OperationGroup(operationGroupID: "g1", quantity: -1), "quantity is -1"),
                (OperationGroup(operationGroupID: "g2", name: String(repeating: "n", count: 1025)), "more than 1024"),
                (OperationGroup(operationGroupID: ""), "operation group ID"),
            ]
            for (group, named) in cases {
                let send = try await #require(throws: SyncError.self) {
                    try await phone.engine.sendChanges(SyncEngine.SendChangesOptions(operationGroup: group))
                }
                #expect(send.code == .invalidArguments)
                #expect(send.message.contains(named), "\(send.message)")
                let fetch = try await #require(throws: SyncError.self) {
                    try await phone.engine.fetchChanges(SyncEngine.FetchChangesOptions(operationGroup: group))
                }
                #expect(fetch.code == .invalidArguments)
                // The server refuses it the same way from any client.
                let direct = try await #require(throws: SyncError.self) {
                    _ = try await server.database(for: "alice").fetchDatabaseChanges(
                        FetchDatabaseChangesRequest(operationGroup: group))
                }
                #expect(direct.code == .invalidArguments)
                #expect(direct.message.contains(named), "\(direct.message)")
            }
            #expect(try phone.engine.state.pendingRecordZoneChanges.count == 1, "nothing was sent")
        }
    }
}
