import Foundation
import LogStore
import SwiftProtobuf
import SyncModel
import Testing

@testable import LogSync

/// The byte form of device log entries (DeviceEntryCodec.swift, Proto/device_log.proto).
@Suite("Device entry codec")
struct DeviceEntryCodecTests {
    typealias F = Fixtures

    struct Sample: Sendable, CustomTestStringConvertible {
        var entry: DeviceEntry
        var kind: EntryKind
        var testDescription: String { "\(entry.name) \(String(describing: entry).prefix(50))" }
    }

    static let samples: [Sample] = {
        let K = DeviceEntry.Kind.self
        var big = F.clientRecord(F.a)
        big["tags"] = .list([.string("home"), .int64(3)])
        big["removed"] = nil
        big.parent = Record.Reference(recordID: F.b, action: .deleteSelf)
        var conflict = SyncError.serverRecordChanged(serverRecord: F.serverRecord(F.a, tag: "9"), clientRecord: big)
        conflict.requestID = "dev-1"
        let changes: [RecordChange] = [.saveRecord(F.a), .deleteRecord(F.b), .saveRecord(F.id("s", F.shared))]
        let zoneChanges: [DatabaseChange] = [
            .saveZone(RecordZone(zoneID: F.notes)), .deleteZone(F.photos),
            .saveZone(RecordZone(zoneID: F.shared, capabilities: .customZoneDefault)),
        ]
        return [
            Sample(entry: .pendingRecordZoneChangesAdded(changes), kind: K.pendingRecordZoneChangesAdded),
            Sample(entry: .pendingRecordZoneChangesAdded([]), kind: K.pendingRecordZoneChangesAdded),
            Sample(entry: .pendingRecordZoneChangesRemoved(changes), kind: K.pendingRecordZoneChangesRemoved),
            Sample(entry: .pendingDatabaseChangesAdded(zoneChanges), kind: K.pendingDatabaseChangesAdded),
            Sample(entry: .pendingDatabaseChangesRemoved(zoneChanges), kind: K.pendingDatabaseChangesRemoved),
            Sample(entry: .untrackedChangesFlagged(true), kind: K.untrackedChangesFlagged),
            Sample(entry: .untrackedChangesFlagged(false), kind: K.untrackedChangesFlagged),
            Sample(entry: .batchPrepared(recordsToSave: [big, F.clientRecord(F.c)], recordIDsToDelete: [F.b], atomicByZone: true),
                   kind: K.batchPrepared),
            Sample(entry: .batchPrepared(recordsToSave: [], recordIDsToDelete: [], atomicByZone: false), kind: K.batchPrepared),
            Sample(entry: .batchResult(
                saved: [F.serverRecord(F.a, tag: "1")], deleted: [F.b],
                failedSaves: [F.c: conflict, F.x: SyncError(.zoneBusy, retryAfter: .seconds(3))],
                failedDeletes: [F.id("d"): SyncError(.unknownItem, "gone")]),
                   kind: K.batchResult),
            Sample(entry: .batchResult(saved: [], deleted: [], failedSaves: [:], failedDeletes: [:]), kind: K.batchResult),
            Sample(entry: .databaseChangesSent(
                savedZones: [RecordZone(zoneID: F.notes, capabilities: .customZoneDefault)], deletedZoneIDs: [F.photos],
                failedZoneSaves: [F.shared: SyncError(.badDatabase)],
                failedZoneDeletes: [RecordZone.ID(zoneName: "Z"): SyncError(.networkFailure)]),
                   kind: K.databaseChangesSent),
        ]
    }()

    static func logEntry(_ new: NewEntry, offset: LogOffset = 42) -> LogEntry {
        LogEntry(offset: offset, kind: new.kind, time: EntryTime(microsecondsSince1970: 1), payload: new.payload)
    }

    @Test("Every case round-trips with its kind", arguments: samples)
    func roundTrip(_ sample: Sample) throws {
        let new = sample.entry.newEntry
        #expect(new.kind == sample.kind)
        #expect(new.time == nil)
        #expect(try DeviceEntry(Self.logEntry(new)) == sample.entry)
        #expect(DeviceEntry.Kind.inUse.contains(sample.kind))
    }

    @Test("Every case is sampled")
    func everyKindSampled() {
        #expect(Set(Self.samples.map(\.kind)) == Set(DeviceEntry.Kind.inUse))
    }

    @Test("Kinds are in 1–99 and distinct, reserved ones included")
    func kindsInRange() {
        let K = DeviceEntry.Kind.self
        let all = K.inUse + [
            K.sendStarted, K.sendFinished, K.fetchStarted, K.databaseChangesFetched, K.zoneChangesFetched,
            K.zoneFetchFinished, K.fetchFinished, K.accountChanged, K.subscriptionEnsured, K.retryScheduled,
            K.eventsDelivered,
        ]
        #expect(Set(all).count == all.count)
        #expect(all.allSatisfy { (1...99).contains($0.rawValue) })
    }

    @Test("Encoding is deterministic: failures are written in ID order")
    func deterministic() {
        var failures: [Record.ID: SyncError] = [:]
        for i in 0..<50 { failures[F.id("r\(i)", i % 2 == 0 ? F.notes : F.shared)] = SyncError(.zoneBusy) }
        let entry = DeviceEntry.batchResult(saved: [], deleted: [], failedSaves: failures, failedDeletes: failures)
        var copy: [Record.ID: SyncError] = [:]
        for (key, value) in failures.reversed() { copy[key] = value }
        let twin = DeviceEntry.batchResult(saved: [], deleted: [], failedSaves: copy, failedDeletes: copy)
        #expect(entry.newEntry.payload == twin.newEntry.payload)
    }

    @Test("Garbage payloads are corrupt entries naming the offset", arguments: DeviceEntry.Kind.inUse)
    func garbagePayload(_ kind: EntryKind) {
        let entry = LogEntry(offset: 7, kind: kind, time: EntryTime(microsecondsSince1970: 0), payload: [0xFF, 0xFF, 0xFF])
        let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
        #expect(error?.code == .corruptEntry)
        #expect(error?.offset == LogOffset(7))
        #expect(error?.description.contains("at offset 7") == true)
        #expect(error?.message.contains("kind \(kind)") == true)
    }

    @Test("An unknown kind is a corrupt entry naming the offset")
    func unknownKind() {
        for kind: EntryKind in [0, 10, 50, 101, 65535] {
            let entry = LogEntry(offset: 9, kind: kind, time: EntryTime(microsecondsSince1970: 0), payload: [])
            let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
            #expect(error?.code == .corruptEntry)
            #expect(error?.offset == LogOffset(9))
            #expect(error?.message.contains("not a device entry kind") == true)
        }
    }

    @Test("Messages that describe no value are corrupt entries")
    func invalidMessages() throws {
        let K = DeviceEntry.Kind.self
        // A change with no case set.
        var changes = Logsync_Device_PendingRecordZoneChanges()
        changes.changes = [Logsync_Device_PendingRecordZoneChange()]
        // A record ID without its zone.
        var noZone = Logsync_Device_PendingRecordZoneChange()
        noZone.change = .saveRecord(Logsync_Model_RecordID())
        var changes2 = Logsync_Device_PendingRecordZoneChanges()
        changes2.changes = [noZone]
        // A failure without its error.
        var failure = Logsync_Device_RecordFailure()
        failure.recordID = F.a.proto
        var result = Logsync_Device_BatchResult()
        result.failedSaves = [failure]
        // The same ID failing twice.
        var twice = Logsync_Device_RecordFailure()
        twice.recordID = F.a.proto
        twice.error = SyncError(.zoneBusy).proto
        var result2 = Logsync_Device_BatchResult()
        result2.failedDeletes = [twice, twice]
        // A zone change with no case set.
        var zones = Logsync_Device_PendingDatabaseChanges()
        zones.changes = [Logsync_Device_PendingDatabaseChange()]

        let cases: [(EntryKind, [UInt8], String)] = [
            (K.pendingRecordZoneChangesAdded, ProtoWire.serialize(changes), "changes[0]: has no change set"),
            (K.pendingRecordZoneChangesRemoved, ProtoWire.serialize(changes2), "changes[0]"),
            (K.batchResult, ProtoWire.serialize(result), "failed_saves[0].error is missing"),
            (K.batchResult, ProtoWire.serialize(result2), "a second time"),
            (K.pendingDatabaseChangesAdded, ProtoWire.serialize(zones), "has no change set"),
        ]
        for (kind, payload, expected) in cases {
            let entry = LogEntry(offset: 3, kind: kind, time: EntryTime(microsecondsSince1970: 0), payload: payload)
            let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
            #expect(error?.code == .corruptEntry)
            #expect(error?.offset == LogOffset(3))
            #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
        }
    }

    @Test("A corrupt payload is refused at append, naming the offset it would have had")
    func corruptAppendRefused() async throws {
        try await withTemporaryDirectory { directory in
            let deviceLog = try openDeviceLog(directory)
            try deviceLog.append(.untrackedChangesFlagged(true))
            let error = #expect(throws: LogStoreError.self) {
                try deviceLog.log.append(NewEntry(kind: DeviceEntry.Kind.batchResult, payload: [0x0A, 0x05, 0x01]))
            }
            #expect(error?.code == .corruptEntry)
            #expect(error?.offset == LogOffset(2))
            #expect(try deviceLog.log.lastOffset == LogOffset(1))
            #expect(try deviceLog.read { try $0.hasPendingUntrackedChanges() })
        }
    }

    @Test("Change types describe themselves with their case and ID")
    func descriptions() {
        #expect(RecordChange.saveRecord(F.a).description == "saveRecord(record \"A\" in zone \"Notes\")")
        #expect(RecordChange.deleteRecord(F.b).description == "deleteRecord(record \"B\" in zone \"Notes\")")
        #expect(RecordChange.deleteRecord(F.b).recordID == F.b)
        #expect(DatabaseChange.saveZone(RecordZone(zoneID: F.notes)).description == "saveZone(zone \"Notes\")")
        #expect(DatabaseChange.deleteZone(F.shared).description == "deleteZone(zone \"Shared\" of owner \"_bob\")")
    }
}
