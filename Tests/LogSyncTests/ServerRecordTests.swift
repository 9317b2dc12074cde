import Foundation
import LogStore
import LogSyncTesting
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSync

/// The last known server record of each record ID.
@Suite("Last known server records")
struct ServerRecordTests {
    typealias F = Fixtures

    @Test("Saved records become the last known server records; deletions forget them")
    func savedAndDeleted() async throws {
        try withEngine { engine, directory in
            let log = engine.deviceLog
            #expect(try log.lastKnownServerRecord(for: F.a) == nil)
            try log.append(
                .batchPrepared(
                    recordsToSave: [F.clientRecord(F.a), F.clientRecord(F.b)], recordIDsToDelete: [], atomicByZone: true
                ))
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

    /// Appends a send's result in which the save of `F.a` conflicted with the server's record
    /// (tag 7, titled "Theirs"), and returns that record.
    static func appendConflict(_ log: DeviceLog) throws -> Record {
        let theirs = F.serverRecord(F.a, tag: "7", title: "Theirs")
        try log.append(
            .batchResult(
                saved: [], deleted: [],
                failedSaves: [F.a: .serverRecordChanged(serverRecord: theirs, clientRecord: F.clientRecord(F.a))],
                failedDeletes: [:]))
        return theirs
    }

    @Test("A conflict's serverRecord becomes the last known server record (F92)")
    func conflictServerRecord() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            try log.append(
                .batchResult(saved: [F.serverRecord(F.a, tag: "1")], deleted: [], failedSaves: [:], failedDeletes: [:]))
            let theirs = try Self.appendConflict(log)
            #expect(try log.lastKnownServerRecord(for: F.a) == theirs)
            // A transient failure changes nothing.
            try log.append(
                .batchResult(saved: [], deleted: [], failedSaves: [F.a: SyncError(.zoneBusy)], failedDeletes: [:]))
            #expect(try log.lastKnownServerRecord(for: F.a) == theirs)
        }
    }

    @Test(
        "unknownItem, zoneNotFound and userDeletedZone forget the record",
        arguments: [
            SyncError.Code.unknownItem, .zoneNotFound, .userDeletedZone,
        ])
    func goneOnServer(_ code: SyncError.Code) async throws {
        try withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            try log.append(
                .batchResult(
                    saved: [F.serverRecord(F.a, tag: "1"), F.serverRecord(F.b, tag: "2")], deleted: [],
                    failedSaves: [:], failedDeletes: [:]))
            try log.append(
                .batchResult(
                    saved: [], deleted: [], failedSaves: [F.a: SyncError(code)], failedDeletes: [F.b: SyncError(code)]))
            #expect(try log.lastKnownServerRecord(for: F.a) == nil)
            #expect(try log.lastKnownServerRecord(for: F.b) == nil)
        }
    }

    @Test("A deleted zone's records are forgotten, other zones' kept")
    func zoneDeletionForgets() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            let inPhotos = F.id("P", F.photos)
            try log.append(
                .batchResult(
                    saved: [
                        F.serverRecord(F.a, tag: "1"), F.serverRecord(F.b, tag: "2"),
                        F.serverRecord(inPhotos, tag: "3"),
                    ],
                    deleted: [], failedSaves: [:], failedDeletes: [:]))
            try log.append(
                .databaseChangesSent(
                    savedZones: [], deletedZoneIDs: [F.notes], failedZoneSaves: [:], failedZoneDeletes: [:]))
            #expect(try log.lastKnownServerRecord(for: F.a) == nil)
            #expect(try log.lastKnownServerRecord(for: F.b) == nil)
            #expect(try log.lastKnownServerRecord(for: inPhotos)?.recordChangeTag == "3")
        }
    }

    // MARK: Stored once (issue 16)

    /// The raw `serverRecords` value of `id`.
    static func slotBytes(_ log: DeviceLog, _ id: Record.ID) throws -> [UInt8]? {
        try log.log.read { reader in
            let zone = try #require(
                try reader.transaction.value(
                    forKey: DeviceKey.zone(id.zoneID), in: reader.table("zones", of: DeviceIndex.projectionName)))
            let key = DeviceKey.record(zoneNumber: readBigEndian(zone), name: id.recordName)
            return try reader.transaction.value(
                forKey: key, in: reader.table("serverRecords", of: DeviceIndex.projectionName))
        }
    }

    /// Replaces the raw `serverRecords` value of `id`, as a damaged index would hold it.
    static func setSlotBytes(_ log: DeviceLog, _ id: Record.ID, _ bytes: [UInt8]) throws {
        let zone = try #require(
            try log.log.read { reader in
                try reader.transaction.value(
                    forKey: DeviceKey.zone(id.zoneID), in: reader.table("zones", of: DeviceIndex.projectionName))
            })
        let key = DeviceKey.record(zoneNumber: readBigEndian(zone), name: id.recordName)
        try log.log.environment.write { transaction in
            let table = try LogReader(log: log.log, transaction: transaction).table(
                "serverRecords", of: DeviceIndex.projectionName)
            try transaction.put(bytes, forKey: key, in: table)
        }
    }

    @Test(
        "A fetched or saved record is kept once: the index points at it in the entry that brought it; a conflict's is stored whole"
    )
    func recordsAreStoredOnce() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            let a1 = F.serverRecord(F.a, tag: "1")
            let b1 = F.serverRecord(F.b, tag: "2")
            let fetched = try log.append(
                .zoneChangesFetched(
                    zoneID: F.notes, modifications: [a1, b1], deletions: [],
                    changeToken: ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 1),
                    moreComing: false))
            #expect(try Self.slotBytes(log, F.b) == ServerRecordSlot.entry(offset: fetched.rawValue, ordinal: 1).bytes)
            #expect(try Self.slotBytes(log, F.b)?.count == 1 + 1 + (fetched.rawValue > 255 ? 2 : 1) + 2)
            #expect(try log.lastKnownServerRecord(for: F.b) == b1)

            let a2 = F.serverRecord(F.a, tag: "3", title: "Milk")
            let saved = try log.append(.batchResult(saved: [a2], deleted: [], failedSaves: [:], failedDeletes: [:]))
            #expect(try Self.slotBytes(log, F.a) == ServerRecordSlot.entry(offset: saved.rawValue, ordinal: 0).bytes)
            #expect(try log.lastKnownServerRecord(for: F.a) == a2)

            let theirs = try Self.appendConflict(log)
            #expect(try Self.slotBytes(log, F.a) == [0] + theirs.protoBytes())
            #expect(try log.lastKnownServerRecord(for: F.a) == theirs)
            // Reading them all reads each entry once and gives them in key order.
            #expect(
                try log.read { try $0.lastKnownServerRecords() }.compactMap(\.recordChangeTag).sorted() == ["2", "7"])
            #expect(try log.log.verifyProjections() == nil)
        }
    }

    @Test(
        "A damaged slot is a typed error naming the record: no such entry, an entry without records, an ordinal past its records, an unknown form"
    )
    func damagedSlots() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeEngine(directory).deviceLog
            let fetched = try log.append(
                .zoneChangesFetched(
                    zoneID: F.notes, modifications: [F.serverRecord(F.a, tag: "1")], deletions: [],
                    changeToken: ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 1), moreComing: false))
            let other = try log.append(
                .sendStarted(SyncEngine.SendChangesContext(reason: .manual, options: .init(scope: .all))))
            let damaged: [(bytes: [UInt8], says: String)] = [
                (ServerRecordSlot.entry(offset: 999, ordinal: 0).bytes, "at offset 999, which the log does not hold"),
                (ServerRecordSlot.entry(offset: other.rawValue, ordinal: 0).bytes, "an entry of kind"),
                (ServerRecordSlot.entry(offset: fetched.rawValue, ordinal: 5).bytes, "which holds 1"),
                ([1, 2, 3], "of 3 bytes starting with 1"),
                ([7] + Array(repeating: 0, count: 12), "starting with 7"),
                ([0, 0xFF, 0xFF], "undecodable server record"),
            ]
            for (bytes, says) in damaged {
                try Self.setSlotBytes(log, F.a, bytes)
                let error = try #require(throws: LogStoreError.self) { try log.lastKnownServerRecord(for: F.a) }
                #expect(error.code == .projectionInconsistent)
                #expect(error.message.contains(says), "\(error.message)")
                #expect(error.message.contains("A"), "names the record: \(error.message)")
            }
        }
    }

    @Test(
        "Finding records in an entry's bytes without decoding it: malformed bytes are typed errors, never a crash",
        arguments: [
            ([0x12, 0x05, 1, 2], "past the end"),  // field 2, length 5, two bytes left
            ([0x12], "cut off"),  // a tag and no length
            ([0x12, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], "longer than 10 bytes"),
            ([0x13], "wire type 3"),  // a group
            ([0x09, 1, 2, 3], "past the end"),  // fixed64 cut short
        ] as [([UInt8], String)])
    func protoFieldsOnBadBytes(_ bytes: [UInt8], _ says: String) throws {
        struct Bad: Error { let text: String }
        let error = try #require(throws: Bad.self) {
            try ProtoFields.lengthDelimited(field: 2, in: bytes) { Bad(text: $0) }
        }
        #expect(error.text.contains(says), "\(error.text)")
    }

    @Test("Finding records in an entry's bytes: every occurrence of the field, other fields skipped")
    func protoFieldsFindRecords() throws {
        var message = Logsync_Device_ZoneChangesFetched()
        message.zoneID = F.notes.proto
        message.modifications = [F.serverRecord(F.a, tag: "1").proto, F.serverRecord(F.b, tag: "2").proto]
        message.changeToken = Data([9, 9])
        message.moreComing = true
        let bytes = ProtoWire.serialize(message)
        let ranges = try ProtoFields.lengthDelimited(field: 2, in: bytes) { _ in LogStoreError(.corruptEntry, "") }
        #expect(try ranges.map { try Record(protoBytes: Array(bytes[$0])).recordChangeTag } == ["1", "2"])
    }

    @Test(
        "A device log whose index stored records whole (version 3) is rebuilt at open into slots, with the same records"
    )
    func olderIndexIsRebuilt() async throws {
        try withTemporaryDirectory { directory in
            let a1 = F.serverRecord(F.a, tag: "1")
            let b2 = F.serverRecord(F.b, tag: "2")
            do {
                let old = try DeviceLog(
                    directory: directory, options: LogEnvironment.Options(durability: .fast, initialMapSize: 8 << 20),
                    index: Self.versionThreeIndex)
                try old.append(
                    .zoneChangesFetched(
                        zoneID: F.notes, modifications: [a1], deletions: [],
                        changeToken: ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 1),
                        moreComing: false))
                try old.append(.batchResult(saved: [b2], deleted: [], failedSaves: [:], failedDeletes: [:]))
                #expect(try Self.slotBytes(old, F.a) == a1.protoBytes())
            }
            let log = try openDeviceLog(directory)
            #expect(
                try Self.slotBytes(log, F.a).map { try ServerRecordSlot(decoding: $0, for: "a") }
                    == .entry(offset: 1, ordinal: 0))
            #expect(try log.lastKnownServerRecord(for: F.a) == a1)
            #expect(try log.lastKnownServerRecord(for: F.b) == b2)
            #expect(try log.log.verifyProjections() == nil)
        }
    }

    /// The device index as version 3 kept it: each last known server record stored whole.
    static let versionThreeIndex = AlteredProjection(DeviceIndex(), version: 3) { index, entry, tables in
        try index.apply(entry, to: tables)
        let records: [Record]
        switch try DeviceEntry(entry) {
        case .zoneChangesFetched(_, let modifications, _, _, _): records = modifications
        case .batchResult(let saved, _, _, _): records = saved
        default: records = []
        }
        let writer = DeviceIndexWriter(tables: tables)
        for record in records {
            try tables.put(record.protoBytes(), forKey: try writer.recordKey(record.recordID), in: "serverRecords")
        }
    }
}
