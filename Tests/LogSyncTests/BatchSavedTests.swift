import Foundation
import LogStore
import SwiftProtobuf
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// `batchSaved` (kind 15): a batch's result written against its `batchPrepared`, each saved
/// record stored as what the server changed in the record as sent (DeviceEntry+BatchSaved.swift).
@Suite("batchSaved: a result written against its batchPrepared")
struct BatchSavedTests {
    typealias F = Fixtures

    static let created = Date(timeIntervalSince1970: 1_700_000_000)
    static let later = Date(timeIntervalSince1970: 1_700_000_100.25)

    /// The system fields a server gives a save.
    static func systemFields(
        tag: String, created: Date = created, modified: Date = later, creator: Record.ID = F.userA,
        lastModifier: Record.ID = F.userA, share: Record.Reference? = nil
    ) -> Record.SystemFields {
        Record.SystemFields(
            recordChangeTag: tag, creationDate: created, modificationDate: modified, creatorUserRecordID: creator,
            lastModifiedUserRecordID: lastModifier, share: share)
    }

    /// `record` as a server answers a save of it: system fields set, nothing marked changed.
    static func answered(_ record: Record, _ systemFields: Record.SystemFields) -> Record {
        var saved = record
        saved.applySystemFields(systemFields)
        return saved
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var prepared: Record
        var saved: Record
        /// Whether the saved record is stored whole rather than as changes.
        var whole = false
        var testDescription: String { name }
    }

    static let cases: [Case] = {
        let digest = AssetHasher.digest(of: Array("a photo".utf8))
        let photo = URL(fileURLWithPath: "/tmp/photo.jpg")
        // An edit of a record the device knew: its last known server record with fields set.
        var known = answered(F.clientRecord(F.a), systemFields(tag: "1", modified: created))
        known["done"] = .int64(1)
        var withAsset = F.clientRecord(F.b)
        withAsset["photo"] = .asset(Asset(digest: digest, size: 10, fileURL: photo))
        var removing = F.clientRecord(F.c)
        removing["old"] = .string("x")
        var removed = removing
        removed["old"] = nil
        var child = F.clientRecord(F.x)
        child.parent = Record.Reference(recordID: F.a)
        var merged = answered(known, systemFields(tag: "2", lastModifier: F.userB))
        merged["body"] = .string("kept by the server")  // F132: a key the save did not send
        var rewritten = answered(withAsset, systemFields(tag: "3"))
        rewritten.setValueKeepingChangeState(.asset(Asset(digest: digest, size: 12, fileURL: photo)), forKey: "photo")
        var otherType = answered(F.clientRecord(F.a), systemFields(tag: "4"))
        otherType = Record(
            recordType: "Other", recordID: F.a, values: otherType.fields, changed: [], parent: nil,
            parentChanged: false, systemFields: otherType.systemFields)
        var moved = answered(child, systemFields(tag: "5"))
        moved.parent = Record.Reference(recordID: F.b)
        return [
            Case(
                name: "a new record: every system field new",
                prepared: F.clientRecord(F.a), saved: answered(F.clientRecord(F.a), systemFields(tag: "1"))),
            Case(
                name: "modified at creation by its creator",
                prepared: F.clientRecord(F.a),
                saved: answered(F.clientRecord(F.a), systemFields(tag: "1", modified: created))),
            Case(
                name: "an edit: creation and creator as prepared, a new tag, date and user",
                prepared: known, saved: answered(known, systemFields(tag: "2", lastModifier: F.userB))),
            Case(name: "a field the server kept that the save did not send (F132)", prepared: known, saved: merged),
            Case(
                name: "an asset whose file stays (F134)", prepared: withAsset,
                saved: answered(withAsset, systemFields(tag: "3"))),
            Case(name: "an asset the server rewrote", prepared: withAsset, saved: rewritten),
            Case(
                name: "a field set to nil is gone", prepared: removed,
                saved: answered(removed, systemFields(tag: "6"))),
            Case(
                name: "a field the server dropped", prepared: removing,
                saved: answered(F.clientRecord(F.c), systemFields(tag: "6"))),
            Case(
                name: "a root that names its share (F123)", prepared: F.clientRecord(F.a),
                saved: answered(
                    F.clientRecord(F.a), systemFields(tag: "7", share: Record.Reference(recordID: F.id("share-1"))))),
            Case(
                name: "a parent set, no longer marked changed", prepared: child,
                saved: answered(child, systemFields(tag: "8"))),
            Case(
                name: "a record left marked changed", prepared: F.clientRecord(F.a),
                saved: Record(
                    recordType: "Note", recordID: F.a, values: ["title": .string("Groceries")], changed: ["title"],
                    parent: nil, parentChanged: false, systemFields: systemFields(tag: "9"))),
            Case(name: "another type: whole", prepared: F.clientRecord(F.a), saved: otherType, whole: true),
            Case(name: "another parent: whole", prepared: child, saved: moved, whole: true),
        ]
    }()

    /// The system fields a batch's saved records may share: none, the request's (as the server
    /// gives every record of a request), another user's at another time.
    static let sharedFields: [Record.SystemFields] = [
        Record.SystemFields(),
        Record.SystemFields(
            creationDate: created, modificationDate: later, creatorUserRecordID: F.userA,
            lastModifiedUserRecordID: F.userA),
        Record.SystemFields(
            creationDate: later, modificationDate: created, creatorUserRecordID: F.userB,
            lastModifiedUserRecordID: F.userB),
    ]

    @Test("The saved record is rebuilt exactly from the prepared one and the server's changes", arguments: cases)
    func rebuildsExactly(_ sample: Case) throws {
        for shared in Self.sharedFields {
            let change = SavedRecordDelta.change(sample.saved, from: sample.prepared, at: 1, shared: shared)
            #expect(change.hasRecord == sample.whole)
            // Through its bytes, as the log holds it.
            let decoded = try ProtoWire.decode(
                Logsync_Device_SavedRecordChange.self, from: ProtoWire.serialize(change))
            let rebuilt = try SavedRecordDelta.record(
                decoded, preparedIn: [F.clientRecord(F.x), sample.prepared], at: LogOffset(3), shared: shared)
            // Exactly the record the old form stores: the same value and the same bytes.
            let expected = try Record(protoBytes: sample.saved.protoBytes())
            #expect(rebuilt == expected)
            #expect(rebuilt.protoBytes() == sample.saved.protoBytes())
            if !sample.whole {
                #expect(ProtoWire.serialize(change).count < sample.saved.protoBytes().count)
            }
        }
    }

    /// A log holding a batchPrepared and, against it, the result `result`.
    static func logWithResult(
        _ directory: URL, prepared: [Record], deleting: [Record.ID] = [], _ result: DeviceEntry
    ) throws -> (DeviceLog, prepared: LogOffset, result: LogOffset) {
        let log = try openDeviceLog(directory)
        try log.append(.pendingRecordZoneChangesAdded(prepared.map { .saveRecord($0.recordID) }))
        let preparedOffset = try log.append(
            .batchPrepared(recordsToSave: prepared, recordIDsToDelete: deleting, atomicByZone: false, requestID: "r-2"))
        let range = try log.append(
            [result], preparedBatch: PreparedBatchReference(offset: preparedOffset, recordsToSave: prepared))
        return (log, preparedOffset, range.lowerBound)
    }

    @Test(
        "Records read back one call after another keep the entries read: the same records as reading each alone, and a later entry's record once it is the last known"
    )
    func keptEntriesBetweenCalls() throws {
        try withTemporaryDirectory { directory in
            let prepared = [F.clientRecord(F.a), F.clientRecord(F.b), F.clientRecord(F.c)]
            let saved = prepared.enumerated().map { Self.answered($1, Self.systemFields(tag: "s\($0)")) }
            let (log, _, _) = try Self.logWithResult(
                directory, prepared: prepared,
                .batchResult(saved: saved, deleted: [], failedSaves: [:], failedDeletes: [:]))
            let y = F.id("Y")
            let page = [F.serverRecord(F.x, tag: "p1"), F.serverRecord(y, tag: "p2")]
            try log.append(
                .zoneChangesFetched(
                    zoneID: F.notes, modifications: page, deletions: [],
                    changeToken: ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 2), moreComing: false))
            // Back and forth between the batchSaved (with its batchPrepared) and the page.
            let order = [F.a, F.x, F.b, y, F.c, F.a, F.a, y]
            for id in order {
                let alone = try log.lastKnownServerRecord(for: id, keepingEntries: false)
                #expect(alone != nil)
                #expect(try log.lastKnownServerRecord(for: id) == alone)
            }
            #expect(try log.lastKnownServerRecord(for: F.b) == saved[1])
            #expect(try log.lastKnownServerRecord(for: y) == page[1])

            // A later page brings b again: its record is the one now, not the kept entry's.
            let b2 = F.serverRecord(F.b, tag: "p3", title: "Milk")
            try log.append(
                .zoneChangesFetched(
                    zoneID: F.notes, modifications: [b2], deletions: [],
                    changeToken: ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 3), moreComing: false))
            #expect(try log.lastKnownServerRecord(for: F.b) == b2)
            #expect(try log.lastKnownServerRecord(for: F.c) == saved[2])
            #expect(try log.lastKnownServerRecord(for: y) == page[1])
        }
    }

    // F21, F44, F91, F92: a result with saves, a conflict, a zone gone and a deletion.
    @Test(
        "F92 a partial failure written against its batchPrepared: read back as the batchResult, the index as for kind 12"
    )
    func partialFailure() throws {
        try withTemporaryDirectory { directory in
            let prepared = [F.clientRecord(F.a), F.clientRecord(F.b), F.clientRecord(F.c), F.clientRecord(F.x)]
            let savedA = Self.answered(F.clientRecord(F.a), Self.systemFields(tag: "11"))
            var savedX = Self.answered(F.clientRecord(F.x), Self.systemFields(tag: "12"))
            savedX["extra"] = .int64(3)
            let conflict = F.serverRecord(F.b, tag: "7", title: "Theirs")
            let result = DeviceEntry.batchResult(
                saved: [savedX, savedA], deleted: [F.id("gone")],
                failedSaves: [
                    F.b: .serverRecordChanged(serverRecord: conflict, clientRecord: F.clientRecord(F.b)),
                    F.c: SyncError(.zoneNotFound, "no zone", item: .record(F.c)),
                ], failedDeletes: [:])
            let (log, preparedOffset, offset) = try Self.logWithResult(
                directory, prepared: prepared, deleting: [F.id("gone")], result)
            let entry = try #require(try log.log.entry(at: offset))
            #expect(entry.kind == DeviceEntry.Kind.batchSaved)
            #expect(try DeviceEntry(entry, in: log.log) == result)
            #expect(try DeviceEntry.BatchSavedOutline(entry).preparedOffset == preparedOffset)
            // Without the log it cannot be read, and says so.
            let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
            #expect(error?.offset == offset)
            #expect(error?.message.contains("read with its log") == true)
            // Smaller than the same result written whole.
            #expect(entry.payload.count < result.newEntry.payload.count)

            try log.read { snapshot throws in
                #expect(try snapshot.lastKnownServerRecord(for: F.a) == savedA)
                #expect(try snapshot.lastKnownServerRecord(for: F.x) == savedX)
                #expect(try snapshot.lastKnownServerRecord(for: F.b) == conflict)
                #expect(try snapshot.lastKnownServerRecord(for: F.c) == nil)
                #expect(try snapshot.pendingRecordZoneChanges().isEmpty)
                #expect(try snapshot.inFlightRecordChanges().isEmpty)
                #expect(try snapshot.unansweredBatch() == nil)
                #expect(Set(try snapshot.lastKnownServerRecords().map(\.recordID)) == [F.a, F.b, F.x])
            }
            // The rebuild reads the entry without the log's other entries, and agrees.
            #expect(try log.log.verifyProjections() == nil)
        }
    }

    @Test("The same history written as kind 12 and as kind 15 gives the same index and the same records")
    func sameAsTheOldForm() throws {
        try withTemporaryDirectory { directory in
            let prepared = [F.clientRecord(F.a), F.clientRecord(F.b)]
            let result = DeviceEntry.batchResult(
                saved: [
                    Self.answered(prepared[0], Self.systemFields(tag: "1")),
                    Self.answered(prepared[1], Self.systemFields(tag: "2")),
                ],
                deleted: [], failedSaves: [:], failedDeletes: [:])
            let (new, _, _) = try Self.logWithResult(
                directory.appendingPathComponent("new"), prepared: prepared, result)
            let old = try openDeviceLog(directory.appendingPathComponent("old"))
            try old.append(.pendingRecordZoneChangesAdded(prepared.map { .saveRecord($0.recordID) }))
            try old.append(
                .batchPrepared(recordsToSave: prepared, recordIDsToDelete: [], atomicByZone: false, requestID: "r-2"))
            let offset = try old.append(result)
            #expect(try old.log.entry(at: offset)?.kind == DeviceEntry.Kind.batchResult)
            let ids = [F.a, F.b]
            #expect(
                try new.read { try $0.referenceState(recordIDs: ids) }
                    == old.read { try $0.referenceState(recordIDs: ids) })
            #expect(try ReferenceState.replaying(new) == ReferenceState.replaying(old))
            #expect(try ReferenceState.replaying(new) == new.read { try $0.referenceState(recordIDs: ids) })
            #expect(try new.read { try $0.lastKnownServerRecords() } == old.read { try $0.lastKnownServerRecords() })
        }
    }

    @Test("A batchSaved whose reference leads nowhere is a corrupt entry naming its offset")
    func corruptReferences() throws {
        let prepared = DeviceEntry.batchPrepared(
            recordsToSave: [F.clientRecord(F.a)], recordIDsToDelete: [], atomicByZone: false, requestID: "r-1")
        let result = DeviceEntry.batchResult(
            saved: [Self.answered(F.clientRecord(F.a), Self.systemFields(tag: "1"))], deleted: [], failedSaves: [:],
            failedDeletes: [:])
        let good = result.decodedNewEntry(preparedAt: LogOffset(4), preparing: [F.clientRecord(F.a)])
        let time = EntryTime(microsecondsSince1970: 0)
        let entries: [LogOffset: LogEntry] = [
            4: LogEntry(
                offset: 4, kind: DeviceEntry.Kind.batchPrepared, time: time, payload: prepared.newEntry.payload),
            5: LogEntry(offset: 5, kind: DeviceEntry.Kind.untrackedChangesFlagged, time: time, payload: []),
        ]
        func message(_ change: (inout Logsync_Device_BatchSaved) -> Void) throws -> [UInt8] {
            var message = try ProtoWire.decode(Logsync_Device_BatchSaved.self, from: good.payload)
            change(&message)
            return ProtoWire.serialize(message)
        }
        let corruptions: [(payload: [UInt8], says: String)] = [
            (try message { $0.preparedOffset = 0 }, "offset 0, which is not an offset before it"),
            (try message { $0.preparedOffset = 9 }, "offset 9, which is not an offset before it"),
            (try message { $0.preparedOffset = 3 }, "offset 3, which the log does not hold"),
            (try message { $0.preparedOffset = 5 }, "offset 5, an entry of kind 5"),
            (
                try message { $0.saved[0].preparedIndex = 1 },
                "prepared_index 1 is beyond the 1 records of the batchPrepared at offset 4"
            ),
            (try message { $0.saved[0].kept = 4096 }, "kept has bits 4096"),
        ]
        let lookup = { (offset: LogOffset) throws(LogStoreError) -> LogEntry? in entries[offset] }
        #expect(
            try DeviceEntry(
                LogEntry(offset: 8, kind: DeviceEntry.Kind.batchSaved, time: time, payload: good.payload),
                reading: lookup) == result)
        for (payload, says) in corruptions {
            let entry = LogEntry(offset: 8, kind: DeviceEntry.Kind.batchSaved, time: time, payload: payload)
            let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry, reading: lookup) }
            #expect(error?.code == .corruptEntry)
            #expect(error?.offset == LogOffset(8))
            #expect(error?.description.contains("at offset 8") == true, "\(error?.description ?? "")")
            #expect(error?.message.contains(says) == true, "\(error?.message ?? "")")
        }
    }

    @Test(
        "The index refuses a batchSaved that does not answer the batch last prepared, or names a record past it, naming its offset"
    )
    func corruptReferenceRefusedAtAppend() throws {
        try withTemporaryDirectory { directory in
            let prepared = [F.clientRecord(F.a)]
            let saved = DeviceEntry.batchResult(
                saved: [Self.answered(F.clientRecord(F.a), Self.systemFields(tag: "1"))], deleted: [], failedSaves: [:],
                failedDeletes: [:])
            let (log, preparedOffset, _) = try Self.logWithResult(directory, prepared: prepared, saved)
            let last = try log.log.lastOffset
            var beyond = try ProtoWire.decode(
                Logsync_Device_BatchSaved.self,
                from: saved.decodedNewEntry(preparedAt: preparedOffset, preparing: prepared).payload)
            beyond.saved[0].preparedIndex = 3
            var elsewhere = beyond
            elsewhere.saved[0].preparedIndex = 0
            elsewhere.preparedOffset = 1
            for (message, says) in [
                (beyond, "refers to record 3 of the batchPrepared at offset \(preparedOffset.rawValue), which holds 1"),
                (elsewhere, "refers to the batchPrepared at offset 1, but the batch last prepared is at offset"),
            ] {
                // Appended raw (no decoded form): the index reads it as a rebuild does.
                let error = #expect(throws: LogStoreError.self) {
                    try log.log.append(
                        NewEntry(kind: DeviceEntry.Kind.batchSaved, payload: ProtoWire.serialize(message)))
                }
                #expect(error?.code == .corruptEntry)
                #expect(error?.offset == last.next)
                #expect(error?.message.contains(says) == true, "\(error?.message ?? "")")
            }
            #expect(try log.log.lastOffset == last)
        }
    }

    @Test("A last known server record in a batchSaved: its slot points there; a slot past its records is a typed error")
    func slotsIntoBatchSaved() throws {
        try withTemporaryDirectory { directory in
            let prepared = [F.clientRecord(F.a), F.clientRecord(F.b)]
            let savedB = Self.answered(prepared[1], Self.systemFields(tag: "2"))
            let (log, _, offset) = try Self.logWithResult(
                directory, prepared: prepared,
                .batchResult(saved: [savedB], deleted: [], failedSaves: [:], failedDeletes: [:]))
            #expect(
                try ServerRecordTests.slotBytes(log, F.b)
                    == ServerRecordSlot.entry(offset: offset.rawValue, ordinal: 0).bytes)
            #expect(try log.lastKnownServerRecord(for: F.b) == savedB)
            try ServerRecordTests.setSlotBytes(
                log, F.b, ServerRecordSlot.entry(offset: offset.rawValue, ordinal: 3).bytes)
            let error = try #require(throws: LogStoreError.self) { try log.lastKnownServerRecord(for: F.b) }
            #expect(error.code == .projectionInconsistent)
            #expect(error.message.contains("at offset \(offset.rawValue), which holds 1"), "\(error.message)")
        }
    }

    // F103: the result is written against the prepared entry the batch is resent from.
    @Test("F103 a send writes its result against its batchPrepared; the resend after a lost answer still reuses the ID")
    func sendWritesBatchSaved() async throws {
        try await withFlowHarness { flow in
            try flow.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .saveRecord(F.b)])
            flow.delegate.queue(
                SyncEngine.RecordZoneChangeBatch(recordsToSave: [F.clientRecord(F.a), F.clientRecord(F.b)]))
            let savedA = F.serverRecord(F.a, tag: "1")
            let savedB = F.serverRecord(F.b, tag: "2", title: "Server's")
            flow.database.fail(ModifyRecordsRequest.self, SyncError(.serverResponseLost, "the answer was lost"))
            flow.database.answer(ModifyRecordsRequest.self) { _ in
                ModifyRecordsResponse(saveResults: [F.a: .success(savedA), F.b: .success(savedB)])
            }
            let before = try flow.deviceLog.log.lastOffset
            try await flow.send()

            let requests = flow.database.requests(ModifyRecordsRequest.self)
            try #require(requests.count == 2)
            #expect(requests[0] == requests[1], "the same request, its ID included")
            let entries = try flow.entries(after: before)
            #expect(entries.map(\.entry.name) == ["sendStarted", "batchPrepared", "batchResult", "sendFinished"])
            let result = try #require(try flow.deviceLog.log.entry(at: entries[2].offset))
            #expect(result.kind == DeviceEntry.Kind.batchSaved)
            #expect(try DeviceEntry.BatchSavedOutline(result).preparedOffset == entries[1].offset)
            #expect(
                entries[2].entry
                    == .batchResult(saved: [savedA, savedB], deleted: [], failedSaves: [:], failedDeletes: [:]))
            try flow.read { snapshot throws in
                #expect(try snapshot.lastKnownServerRecord(for: F.a) == savedA)
                #expect(try snapshot.lastKnownServerRecord(for: F.b) == savedB)
                #expect(try snapshot.unansweredBatch() == nil)
            }
            #expect(try flow.deviceLog.log.verifyProjections() == nil)
        }
    }
}
