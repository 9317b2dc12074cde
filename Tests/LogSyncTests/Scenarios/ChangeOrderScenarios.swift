import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

/// A database whose fetches report each page's changes in a shuffled order (F157): the zones
/// modified and deleted of a database page, the records modified and deleted of a zone page,
/// each list shuffled by a seeded generator. The server reports commit order; nothing promises
/// it, so the engine must not depend on it.
final class ShufflingDatabase: ForwardingDatabase {
    let base: InProcessDatabase
    private let random: Mutex<SeededRandom>
    /// How many pages came back in another order than the server's.
    private let reordered = Mutex(0)

    init(_ base: InProcessDatabase, seed: UInt64) {
        self.base = base
        random = Mutex(SeededRandom(seed: seed))
    }

    var reorderedPages: Int { reordered.withLock { $0 } }

    private func shuffled<T: Equatable>(_ items: [T]) -> [T] {
        let count = items.count
        let order = random.withLock { random in Array(0..<count).shuffled(using: &random) }
        let result = order.map { items[$0] }
        if result != items { reordered.withLock { $0 += 1 } }
        return result
    }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await base.modifyRecords(request)
    }

    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        var response = try await base.fetchDatabaseChanges(request)
        response.modifications = shuffled(response.modifications)
        response.deletions = shuffled(response.deletions)
        return response
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        var response = try await base.fetchZoneChanges(request)
        response.modifications = shuffled(response.modifications)
        response.deletions = shuffled(response.deletions)
        return response
    }
}

/// F157: the order in which a page reports its changes does not change where a device ends up.
@Suite("Scenario: order of reported changes")
struct ChangeOrderScenarios {
    static let zones = (0..<3).map { RecordZone.ID(zoneName: "Z\($0)") }

    // F157: the phone writes, rewrites, deletes and recreates notes over three zones (one zone
    // deleted and created again) in rounds; after each round the laptop, whose every page comes
    // back shuffled, and the tablet, which gets the server's order, fetch in small pages. Both
    // hold the server's notes after every round, and their engines agree on what is pending
    // (nothing) and on the zones they know.
    @Test(
        "F157 a device whose fetched pages come back shuffled ends with the same notes as one that gets the server's order",
        arguments: [1 as UInt64, 2, 3])
    func shuffledPagesSameFinalState(seed: UInt64) async throws {
        try await withServer { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            let shuffling = ShufflingDatabase(server.database(for: "alice", device: "laptop"), seed: seed)
            let laptop = try TestDevice(
                "laptop", database: shuffling, directory: directory.appendingPathComponent("laptop")
            ) { $0.fetchResultsLimit = 5 }
            let tablet = try TestDevice("tablet", server: server, directory: directory, fetchResultsLimit: 5)
            var random = SeededRandom(seed: seed &* 7919)
            for zone in Self.zones { try phone.createZone(zone) }
            try await phone.sync()

            for round in 0..<6 {
                for step in 0..<25 {
                    let zone = Self.zones.randomElement(using: &random)!
                    let id = Record.ID(recordName: "n\(Int.random(in: 0..<12, using: &random))", zoneID: zone)
                    if Int.random(in: 0..<4, using: &random) == 0, phone.notes[id] != nil {
                        try phone.delete(id)
                    } else {
                        try phone.write(id, "round \(round) step \(step)")
                    }
                }
                try await phone.sync()
                if round == 3 {
                    // A zone goes, with its notes (all sent), and comes back empty.
                    try phone.deleteZone(Self.zones[1])
                    try await phone.sync()
                    try phone.createZone(Self.zones[1])
                    try phone.write(Record.ID(recordName: "fresh", zoneID: Self.zones[1]), "after the re-creation")
                    try await phone.sync()
                }
                try await laptop.sync()
                try await tablet.sync()
                #expect(laptop.notes == phone.notes, "round \(round): the laptop (shuffled) holds the phone's notes")
                #expect(tablet.notes == phone.notes, "round \(round): the tablet holds the phone's notes")
            }
            #expect(shuffling.reorderedPages > 0, "pages really came back in another order")
            #expect(try laptop.engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(try laptop.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
            #expect(try laptop.engine.deviceLog.log.verifyProjections() == nil)
        }
    }
}
