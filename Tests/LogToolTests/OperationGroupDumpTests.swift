import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import TemporaryDirectory
import Testing

/// F69: `logtool dump` of a server log shows each operation group's entry and the group of each
/// request outcome, as an engine's sends and fetches left them.
@Suite("logtool dump of operation groups")
struct OperationGroupDumpTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    @Test(
        "F69 logtool dump shows a group's entry once, with its name, quantity, sizes and first request, and the group on outcomes"
    )
    func dumpShowsGroups() async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(.init(directory: directory.appendingPathComponent("data"), durability: .fast))
            defer { server.shutdown() }
            let phone = try TestDevice("phone", server: server, directory: directory)
            let laptop = try TestDevice("laptop", server: server, directory: directory)
            // The phone imports two notes in one group, in two sends; the laptop catches up in a
            // group of its own.
            let importing = OperationGroup(
                operationGroupID: "import-1", name: "Import notes", quantity: 2, expectedSendSize: .kilobytes)
            try phone.createZone(Self.notes)
            try phone.write(Record.ID(recordName: "n1", zoneID: Self.notes), "Groceries")
            try await phone.engine.sendChanges(SyncEngine.SendChangesOptions(operationGroup: importing))
            try phone.write(Record.ID(recordName: "n2", zoneID: Self.notes), "Recipes")
            try await phone.engine.sendChanges(SyncEngine.SendChangesOptions(operationGroup: importing))
            try await laptop.engine.fetchChanges(
                SyncEngine.FetchChangesOptions(
                    operationGroup: OperationGroup(operationGroupID: "catch-up", expectedReceiveSize: .kilobytes)))

            let run = try await runLogtool(["dump", "data/users/u1", "--log", "private"], in: directory)
            #expect(run.status == 0, "\(run)")
            let described = run.lines.compactMap { describedPart(of: $0) }
            let groups = described.filter { $0.hasPrefix("operationGroupStarted") }
            #expect(
                groups == [
                    "operationGroupStarted  group=import-1 name=\"Import notes\" quantity=2 sendSize=kilobytes firstRequest=modifyZones device=phone",
                    "operationGroupStarted  group=catch-up receiveSize=kilobytes firstRequest=fetchDatabaseChanges device=laptop",
                ], "\(run)")
            let outcomes = described.filter { $0.hasPrefix("requestOutcome") }
            #expect(outcomes.count == 2)
            #expect(outcomes.allSatisfy { $0.hasSuffix(" group=import-1") }, "\(outcomes)")

            // --kind selects them, by name.
            let selected = try await runLogtool(
                ["dump", "data/users/u1", "--log", "private", "--kind", "operationGroupStarted"], in: directory)
            #expect(selected.lines.count == 2, "\(selected)")
        }
    }
}
