import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSync

/// The pending record change list of `SyncEngine.State` (F16–F20).
@Suite("Pending record zone changes")
struct PendingRecordChangesTests {
    typealias F = Fixtures

    @Test("F16: the list equals what was added")
    func listEqualsAdds() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .deleteRecord(F.b)])
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a), .deleteRecord(F.b)])
            #expect(try engine.deviceLog.log.entryCount == 1)
        }
    }

    // F16, F58: a delegate builds its batch from the pending changes the send's scope covers.
    @Test("F16: the pending changes a send's scope covers, in order")
    func pendingChangesInScope() async throws {
        try withEngine { engine, _ in
            let photo = F.id("P", F.photos)
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .deleteRecord(photo), .saveRecord(F.b)])
            #expect(try engine.state.pendingRecordZoneChanges(in: .all).count == 3)
            #expect(
                try engine.state.pendingRecordZoneChanges(in: .zoneIDs([F.notes])) == [
                    .saveRecord(F.a), .saveRecord(F.b),
                ])
            #expect(try engine.state.pendingRecordZoneChanges(in: .allExcluding([F.notes])) == [.deleteRecord(photo)])
            #expect(
                try engine.state.pendingRecordZoneChanges(in: .recordIDs([F.b, photo])) == [
                    .deleteRecord(photo), .saveRecord(F.b),
                ])
        }
    }

    @Test("F16: record contents are never in the pending state")
    func contentsNotInPending() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            let small = try pendingBytes(engine.deviceLog)
            // The app's change entry holds an ID only.
            let added = try #require(try engine.deviceLog.log.entry(at: 1))
            #expect(added.payload.count < 64)

            // A batch carrying a 200 kB record puts the contents in the log, not in the state.
            var big = F.clientRecord(F.a)
            big["body"] = .bytes(Data(repeating: 7, count: 200_000))
            try engine.deviceLog.append(
                .batchPrepared(recordsToSave: [big], recordIDsToDelete: [], atomicByZone: false))
            let prepared = try #require(try engine.deviceLog.log.entry(at: 2))
            #expect(prepared.payload.count > 200_000)
            #expect(try pendingBytes(engine.deviceLog) < small + 64)  // + the in-flight mark only
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)])
        }
    }

    /// The bytes of the pending and in-flight tables.
    func pendingBytes(_ deviceLog: DeviceLog) throws -> Int {
        try deviceLog.log.read { reader in
            var total = 0
            for name in ["recordPending", "recordOrder", "recordInFlight", "zonePending", "zoneOrder"] {
                try reader.transaction.forEach(in: reader.table(name, of: DeviceIndex.projectionName)) { key, value in
                    total += key.count + value.count
                    return true
                }
            }
            return total
        }
    }

    @Test("F18: adding a pending change again keeps its first position")
    func dedupKeepsFirstPosition() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.b)])
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a), .saveRecord(F.b)])
            // Within one call too.
            try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(F.c), .saveRecord(F.b), .deleteRecord(F.c)])
            #expect(
                try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a), .saveRecord(F.b), .deleteRecord(F.c)])
        }
    }

    /// A change to X, and its opposite after it.
    static let oppositeChanges: [(first: RecordChange, then: RecordChange)] = [
        (.saveRecord(F.x), .deleteRecord(F.x)),
        (.deleteRecord(F.x), .saveRecord(F.x)),
    ]

    @Test("F19: save then delete leaves only the delete; delete then save, only the save", arguments: oppositeChanges)
    func laterOfOppositeChangesStays(first: RecordChange, then later: RecordChange) async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [first, .saveRecord(F.a)])
            try engine.state.add(pendingRecordZoneChanges: [later])
            let list = try engine.state.pendingRecordZoneChanges
            #expect(list.filter { $0.recordID == F.x } == [later])
            #expect(list.count == 2)
            // Spec choice: the survivor takes the later position.
            #expect(list == [.saveRecord(F.a), later])
        }
    }

    @Test("F19: opposite changes within one call")
    func oppositeInOneCall() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.x), .deleteRecord(F.x), .saveRecord(F.x)])
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.x)])
        }
    }

    @Test("F20: remove takes exact matches only")
    func removeExactMatches() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(F.a)])
            try engine.state.remove(pendingRecordZoneChanges: [.saveRecord(F.a)])
            #expect(try engine.state.pendingRecordZoneChanges == [.deleteRecord(F.a)])
            try engine.state.remove(pendingRecordZoneChanges: [.deleteRecord(F.a)])
            #expect(try engine.state.pendingRecordZoneChanges == [])
            // Removing what was never pending (in a zone never seen) is a no-op.
            try engine.state.remove(pendingRecordZoneChanges: [.saveRecord(F.id("nope", F.photos))])
            #expect(try engine.state.pendingRecordZoneChanges == [])
        }
    }

    @Test("F20: remove keeps the order of the rest")
    func removeKeepsOrder() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .saveRecord(F.b), .deleteRecord(F.c)])
            try engine.state.remove(pendingRecordZoneChanges: [.saveRecord(F.b)])
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(F.a), .deleteRecord(F.c)])
        }
    }

    @Test("Empty adds and removes append nothing")
    func emptyCallsAppendNothing() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [])
            try engine.state.remove(pendingRecordZoneChanges: [])
            try engine.state.add(pendingDatabaseChanges: [])
            try engine.state.remove(pendingDatabaseChanges: [])
            #expect(try engine.deviceLog.log.entryCount == 0)
        }
    }

    @Test("Records of different zones with the same name are different records")
    func sameNameOtherZone() async throws {
        try withEngine { engine, directory in
            let inNotes = F.id("same", F.notes)
            let inPhotos = F.id("same", F.photos)
            let shared = F.id("same", F.shared)
            try engine.state.add(pendingRecordZoneChanges: [
                .saveRecord(inNotes), .deleteRecord(inPhotos), .saveRecord(shared),
            ])
            try engine.state.remove(pendingRecordZoneChanges: [.deleteRecord(inPhotos)])
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(inNotes), .saveRecord(shared)])
        }
    }

    @Test("IDs with names over CloudKit's limits or holding NUL are kept exactly")
    func unusualNames() async throws {
        try withEngine { engine, directory in
            let longZone = RecordZone.ID(
                zoneName: String(repeating: "z", count: 300), ownerName: String(repeating: "o", count: 300))
            let ids = [
                Record.ID(recordName: String(repeating: "r", count: 600), zoneID: longZone),
                Record.ID(recordName: String(repeating: "r", count: 601), zoneID: longZone),
                Record.ID(recordName: "nul\u{0}name", zoneID: RecordZone.ID(zoneName: "z\u{0}", ownerName: "")),
                Record.ID(recordName: "", zoneID: RecordZone.ID(zoneName: "", ownerName: "")),
                Record.ID(recordName: "é", zoneID: F.notes),
            ]
            try engine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })
            #expect(try engine.state.pendingRecordZoneChanges == ids.map { .saveRecord($0) })
            try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(ids[0])])
            try engine.state.remove(pendingRecordZoneChanges: [.saveRecord(ids[2])])
            #expect(
                try engine.state.pendingRecordZoneChanges == [ids[1], ids[3], ids[4]].map { .saveRecord($0) } + [
                    .deleteRecord(ids[0])
                ])
            #expect(try engine.deviceLog.log.verifyProjections() == nil)
        }
    }
}
