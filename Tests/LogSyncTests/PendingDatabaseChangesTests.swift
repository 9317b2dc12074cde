import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSync

/// The pending database (zone) change list of `SyncEngine.State` (F19, F20, F22).
@Suite("Pending database changes")
struct PendingDatabaseChangesTests {
    typealias F = Fixtures

    @Test("F22: equality and hashing look at the case and the zone ID")
    func equalityByZoneID() {
        let plain = RecordZone(zoneID: F.notes)
        let fromServer = RecordZone(zoneID: F.notes, capabilities: .customZoneDefault)
        #expect(DatabaseChange.saveZone(plain) == .saveZone(fromServer))
        #expect(Set([DatabaseChange.saveZone(plain), .saveZone(fromServer)]).count == 1)
        #expect(DatabaseChange.saveZone(plain) != .deleteZone(F.notes))
        #expect(DatabaseChange.saveZone(plain) != .saveZone(RecordZone(zoneID: F.photos)))
        #expect(DatabaseChange.deleteZone(F.notes).zoneID == F.notes)
        #expect(DatabaseChange.saveZone(fromServer).zoneID == F.notes)
    }

    @Test("F22: saving a zone twice (two zone values, one ID) gives one entry")
    func saveZoneTwice() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: F.notes))])
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: F.notes, capabilities: .customZoneDefault))
            ])
            let list = try engine.state.pendingDatabaseChanges
            #expect(list.count == 1)
            // The first zone value is kept.
            guard case .saveZone(let zone) = try #require(list.first) else {
                Issue.record("not a save")
                return
            }
            #expect(zone.capabilities == [])
        }
    }

    @Test("F22: adding a pending zone change again keeps its first position")
    func zoneDedupKeepsFirstPosition() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: F.notes)), .deleteZone(F.photos),
            ])
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: F.notes))])
            #expect(
                try engine.state.pendingDatabaseChanges == [
                    .saveZone(RecordZone(zoneID: F.notes)), .deleteZone(F.photos),
                ])
        }
    }

    @Test("F19, F22: saveZone then deleteZone leaves only the delete")
    func saveZoneThenDelete() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: F.notes)), .saveZone(RecordZone(zoneID: F.photos)),
            ])
            try engine.state.add(pendingDatabaseChanges: [.deleteZone(F.notes)])
            let list = try engine.state.pendingDatabaseChanges
            #expect(list.filter { $0.zoneID == F.notes } == [.deleteZone(F.notes)])
            #expect(list == [.saveZone(RecordZone(zoneID: F.photos)), .deleteZone(F.notes)])
        }
    }

    @Test("F19, F22: deleteZone then saveZone leaves only the save")
    func deleteZoneThenSave() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingDatabaseChanges: [.deleteZone(F.notes)])
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: F.notes))])
            #expect(try engine.state.pendingDatabaseChanges == [.saveZone(RecordZone(zoneID: F.notes))])
        }
    }

    @Test("F20, F22: remove takes exact matches, by case and zone ID")
    func removeZoneExact() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingDatabaseChanges: [
                .deleteZone(F.notes), .saveZone(RecordZone(zoneID: F.shared)),
            ])
            try engine.state.remove(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: F.notes))])
            #expect(try engine.state.pendingDatabaseChanges.count == 2)
            try engine.state.remove(pendingDatabaseChanges: [.deleteZone(F.notes)])
            // A different zone value with the same ID matches.
            try engine.state.remove(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: F.shared, capabilities: .customZoneDefault))
            ])
            #expect(try engine.state.pendingDatabaseChanges == [])
        }
    }

    @Test("Zone changes sent: successes and permanent failures leave, transient failures stay")
    func databaseChangesSent() async throws {
        try withEngine { engine, directory in
            let z = (1...5).map { RecordZone.ID(zoneName: "Z\($0)") }
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: z[0])), .deleteZone(z[1]), .saveZone(RecordZone(zoneID: z[2])),
                .saveZone(RecordZone(zoneID: z[3])), .deleteZone(z[4]),
            ])
            try engine.deviceLog.append(
                .databaseChangesSent(
                    savedZones: [RecordZone(zoneID: z[0], capabilities: .customZoneDefault)], deletedZoneIDs: [z[1]],
                    failedZoneSaves: [z[2]: SyncError(.zoneBusy), z[3]: SyncError(.badDatabase)],
                    failedZoneDeletes: [z[4]: SyncError(.networkFailure)]))
            #expect(
                try engine.state.pendingDatabaseChanges == [.saveZone(RecordZone(zoneID: z[2])), .deleteZone(z[4])])
        }
    }
}
