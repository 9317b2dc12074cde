import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSync

/// The last known server record of each record ID.
@Suite("Last known server records")
struct ServerRecordTests {
    typealias F = Fixtures

    @Test("Saved records become the last known server records; deletions forget them")
    func savedAndDeleted() async throws {
        try await withTemporaryDirectory { directory in
            let engine = try makeEngine(directory)
            let log = engine.deviceLog
            #expect(try log.lastKnownServerRecord(for: F.a) == nil)
            try log.append(.batchPrepared(recordsToSave: [F.clientRecord(F.a), F.clientRecord(F.b)], recordIDsToDelete: [], atomicByZone: true))
            let a1 = F.serverRecord(F.a, tag: "1")
            let b1 = F.serverRecord(F.b, tag: "2")
            try log.append(.batchResult(saved: [a1, b1], deleted: [], failedSaves: [:], failedDeletes: [:]))
            #expect(try log.lastKnownServerRecord(for: F.a) == a1)
            #expect(try log.lastKnownServerRecord(for: F.a)?.recordChangeTag == "1")
            #expect(try log.lastKnownServerRecord(for: F.b) == b1)

            let a2 = F.serverRecord(F.a, tag: "3", title: "Milk")
            try log.append(.batchResult(saved: [a2], deleted: [F.b], failedSaves: [:], failedDeletes: [:]))
            #expect(try log.lastKnownServerRecord(for: F.a) == a2)
            #expect(try log.lastKnownServerRecord(for: F.b) == nil)
            #expect(try log.lastKnownServerRecord(for: F.id("A", F.photos)) == nil)
        }
    }

    @Test("A conflict's serverRecord becomes the last known server record (F92)")
    func conflictServerRecord() async throws {
        try await withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            try log.append(.batchResult(saved: [F.serverRecord(F.a, tag: "1")], deleted: [], failedSaves: [:], failedDeletes: [:]))
            let theirs = F.serverRecord(F.a, tag: "7", title: "Theirs")
            try log.append(.batchResult(
                saved: [], deleted: [],
                failedSaves: [F.a: .serverRecordChanged(serverRecord: theirs, clientRecord: F.clientRecord(F.a))],
                failedDeletes: [:]))
            #expect(try log.lastKnownServerRecord(for: F.a) == theirs)
            // A transient failure changes nothing.
            try log.append(.batchResult(saved: [], deleted: [], failedSaves: [F.a: SyncError(.zoneBusy)], failedDeletes: [:]))
            #expect(try log.lastKnownServerRecord(for: F.a) == theirs)
        }
    }

    @Test("unknownItem, zoneNotFound and userDeletedZone forget the record", arguments: [
        SyncError.Code.unknownItem, .zoneNotFound, .userDeletedZone,
    ])
    func goneOnServer(_ code: SyncError.Code) async throws {
        try await withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            try log.append(.batchResult(
                saved: [F.serverRecord(F.a, tag: "1"), F.serverRecord(F.b, tag: "2")], deleted: [], failedSaves: [:], failedDeletes: [:]))
            try log.append(.batchResult(
                saved: [], deleted: [], failedSaves: [F.a: SyncError(code)], failedDeletes: [F.b: SyncError(code)]))
            #expect(try log.lastKnownServerRecord(for: F.a) == nil)
            #expect(try log.lastKnownServerRecord(for: F.b) == nil)
        }
    }

    @Test("A deleted zone's records are forgotten, other zones' kept")
    func zoneDeletionForgets() async throws {
        try await withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            let inPhotos = F.id("P", F.photos)
            try log.append(.batchResult(
                saved: [F.serverRecord(F.a, tag: "1"), F.serverRecord(F.b, tag: "2"), F.serverRecord(inPhotos, tag: "3")],
                deleted: [], failedSaves: [:], failedDeletes: [:]))
            try log.append(.databaseChangesSent(savedZones: [], deletedZoneIDs: [F.notes], failedZoneSaves: [:], failedZoneDeletes: [:]))
            #expect(try log.lastKnownServerRecord(for: F.a) == nil)
            #expect(try log.lastKnownServerRecord(for: F.b) == nil)
            #expect(try log.lastKnownServerRecord(for: inPhotos)?.recordChangeTag == "3")
        }
    }
}
