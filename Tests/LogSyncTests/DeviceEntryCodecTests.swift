import Foundation
import LogStore
import SwiftProtobuf
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// The byte form of device log entries (DeviceEntry+Codec.swift, Proto/device_log.proto).
@Suite("Device entry codec")
struct DeviceEntryCodecTests {
    typealias F = Fixtures

    struct Sample: Sendable, CustomTestStringConvertible {
        var entry: DeviceEntry
        var kind: EntryKind
        var testDescription: String { "\(entry.name) \(String(describing: entry).prefix(50))" }
    }

    static let samples: [Sample] = {
        let kinds = DeviceEntry.Kind.self
        var big = F.clientRecord(F.a)
        big["tags"] = .list([.string("home"), .int64(3)])
        big["removed"] = nil
        big.parent = Record.Reference(recordID: F.b, action: .deleteSelf)
        // F123: a hierarchy's root, as the server returns it, names its share.
        var sharedRoot = F.serverRecord(F.id("root"), tag: "2")
        sharedRoot.applySystemFields(
            sharedRoot.systemFields.with(tag: "2", share: Record.Reference(recordID: F.id("share-1"))))
        var conflict = SyncError.serverRecordChanged(serverRecord: F.serverRecord(F.a, tag: "9"), clientRecord: big)
        conflict.requestID = "dev-1"
        let changes: [RecordChange] = [.saveRecord(F.a), .deleteRecord(F.b), .saveRecord(F.id("s", F.shared))]
        let zoneChanges: [DatabaseChange] = [
            .saveZone(RecordZone(zoneID: F.notes)), .deleteZone(F.photos),
            .saveZone(RecordZone(zoneID: F.shared, capabilities: .customZoneDefault)),
        ]
        return [
            Sample(entry: .pendingRecordZoneChangesAdded(changes), kind: kinds.pendingRecordZoneChangesAdded),
            Sample(entry: .pendingRecordZoneChangesAdded([]), kind: kinds.pendingRecordZoneChangesAdded),
            Sample(entry: .pendingRecordZoneChangesRemoved(changes), kind: kinds.pendingRecordZoneChangesRemoved),
            Sample(entry: .pendingDatabaseChangesAdded(zoneChanges), kind: kinds.pendingDatabaseChangesAdded),
            Sample(entry: .pendingDatabaseChangesRemoved(zoneChanges), kind: kinds.pendingDatabaseChangesRemoved),
            Sample(entry: .untrackedChangesFlagged(true), kind: kinds.untrackedChangesFlagged),
            Sample(entry: .untrackedChangesFlagged(false), kind: kinds.untrackedChangesFlagged),
            Sample(
                entry: .batchPrepared(
                    recordsToSave: [big, F.clientRecord(F.c)], recordIDsToDelete: [F.b], atomicByZone: true),
                kind: kinds.batchPrepared),
            Sample(
                entry: .batchPrepared(recordsToSave: [], recordIDsToDelete: [], atomicByZone: false),
                kind: kinds.batchPrepared),
            Sample(
                entry: .batchPrepared(
                    recordsToSave: [F.clientRecord(F.a)], recordIDsToDelete: [F.b], atomicByZone: false,
                    requestID: "5f3a9c21-14"),
                kind: kinds.batchPrepared),
            Sample(
                entry: .batchResult(
                    saved: [F.serverRecord(F.a, tag: "1"), sharedRoot], deleted: [F.b],
                    failedSaves: [F.c: conflict, F.x: SyncError(.zoneBusy, retryAfter: .seconds(3))],
                    failedDeletes: [F.id("d"): SyncError(.unknownItem, "gone")]),
                kind: kinds.batchResult),
            Sample(
                entry: .batchResult(saved: [], deleted: [], failedSaves: [:], failedDeletes: [:]),
                kind: kinds.batchResult),
            Sample(
                entry: .databaseChangesSent(
                    savedZones: [RecordZone(zoneID: F.notes, capabilities: .customZoneDefault)],
                    deletedZoneIDs: [F.photos],
                    failedZoneSaves: [F.shared: SyncError(.badDatabase)],
                    failedZoneDeletes: [RecordZone.ID(zoneName: "Z"): SyncError(.networkFailure)]),
                kind: kinds.databaseChangesSent),
        ] + syncStepSamples
    }()

    /// The entries of a send or a fetch (kinds 10, 14, 20–25, 50), each case with its variants.
    static let syncStepSamples: [Sample] = {
        let kinds = DeviceEntry.Kind.self
        let z = RecordZone.ID(zoneName: "Z")
        func send(_ reason: SyncEngine.SyncReason, _ scope: SyncEngine.SendChangesOptions.Scope) -> DeviceEntry {
            .sendStarted(SyncEngine.SendChangesContext(reason: reason, options: .init(scope: scope)))
        }
        func fetch(
            _ reason: SyncEngine.SyncReason, _ scope: SyncEngine.FetchChangesOptions.Scope,
            _ prioritized: [RecordZone.ID] = []
        ) -> DeviceEntry {
            .fetchStarted(
                SyncEngine.FetchChangesContext(
                    reason: reason, options: .init(scope: scope, prioritizedZoneIDs: prioritized)))
        }
        let databaseToken = DatabaseChangeToken(offset: 42, database: 7)
        let zoneToken = ZoneChangeToken(zoneID: F.notes, incarnation: 2, offset: 42, database: 7)
        var missingZone = SyncError(.zoneNotFound, "no zone", item: .zone(F.shared))
        missingZone.requestID = "dev-2"
        return [
            Sample(entry: send(.scheduled, .all), kind: kinds.sendStarted),
            Sample(entry: send(.manual, .zoneIDs([F.notes, F.shared])), kind: kinds.sendStarted),
            Sample(entry: send(.manual, .allExcluding([F.photos])), kind: kinds.sendStarted),
            Sample(entry: send(.scheduled, .recordIDs([F.a, F.id("s", F.shared)])), kind: kinds.sendStarted),
            Sample(entry: send(.manual, .zoneIDs([])), kind: kinds.sendStarted),
            Sample(entry: .sendFinished(error: nil), kind: kinds.sendFinished),
            Sample(
                entry: .sendFinished(error: SyncError(.networkFailure, retryAfter: .seconds(2))),
                kind: kinds.sendFinished),
            Sample(entry: fetch(.scheduled, .all), kind: kinds.fetchStarted),
            Sample(entry: fetch(.manual, .zoneIDs([F.notes]), [F.notes, F.photos]), kind: kinds.fetchStarted),
            Sample(entry: fetch(.manual, .allExcluding([F.shared]), [F.photos]), kind: kinds.fetchStarted),
            Sample(
                entry: .fetchStarted(
                    SyncEngine.FetchChangesContext(
                        reason: .scheduled,
                        options: .init(
                            scope: .all, defaultZoneConfiguration: .init(resultsLimit: 50),
                            zoneConfigurations: [
                                F.photos: .init(shouldFetchAssetContents: false),
                                F.notes: .init(shouldFetchAssetContents: false, resultsLimit: 10),
                                F.shared: .init(),
                            ]))),
                kind: kinds.fetchStarted),
            Sample(
                entry: .databaseChangesFetched(
                    modifications: [F.notes, F.shared],
                    deletions: [
                        SyncModel.DatabaseChange.Deletion(zoneID: F.photos, reason: .purged),
                        SyncModel.DatabaseChange.Deletion(zoneID: z, reason: .encryptedDataReset),
                        SyncModel.DatabaseChange.Deletion(zoneID: F.notes, reason: .deleted),
                    ],
                    changeToken: databaseToken, moreComing: true),
                kind: kinds.databaseChangesFetched),
            Sample(
                entry: .databaseChangesFetched(
                    modifications: [], deletions: [], changeToken: DatabaseChangeToken(offset: 0), moreComing: false),
                kind: kinds.databaseChangesFetched),
            Sample(
                entry: .zoneChangesFetched(
                    zoneID: F.notes,
                    modifications: [F.serverRecord(F.a, tag: "3"), F.serverRecord(F.c, tag: "4", title: "")],
                    deletions: [RecordZoneChange.Deletion(recordID: F.b, recordType: "Note")],
                    changeToken: zoneToken, moreComing: true),
                kind: kinds.zoneChangesFetched),
            Sample(
                entry: .zoneChangesFetched(
                    zoneID: F.shared, modifications: [], deletions: [],
                    changeToken: ZoneChangeToken(zoneID: F.shared, incarnation: 1, offset: 0), moreComing: false),
                kind: kinds.zoneChangesFetched),
            Sample(entry: .zoneFetchFinished(zoneID: F.notes, error: nil), kind: kinds.zoneFetchFinished),
            Sample(entry: .zoneFetchFinished(zoneID: F.shared, error: missingZone), kind: kinds.zoneFetchFinished),
            Sample(entry: .fetchFinished(error: nil), kind: kinds.fetchFinished),
            Sample(entry: .fetchFinished(error: SyncError(.operationCancelled)), kind: kinds.fetchFinished),
            Sample(entry: .changeTokenReset(zoneID: nil), kind: kinds.changeTokenReset),
            Sample(entry: .changeTokenReset(zoneID: F.shared), kind: kinds.changeTokenReset),
            Sample(entry: .eventsDelivered(through: 1), kind: kinds.eventsDelivered),
            Sample(entry: .eventsDelivered(through: LogOffset(1 << 40)), kind: kinds.eventsDelivered),
            // F104–F108: first check, sign-out, sign-in, switch.
            Sample(entry: .accountChanged(previous: nil, current: nil), kind: kinds.accountChanged),
            Sample(entry: .accountChanged(previous: F.userA, current: nil), kind: kinds.accountChanged),
            Sample(entry: .accountChanged(previous: nil, current: F.userA), kind: kinds.accountChanged),
            Sample(entry: .accountChanged(previous: F.userA, current: F.userB), kind: kinds.accountChanged),
            Sample(entry: .subscriptionEnsured("logsync-database"), kind: kinds.subscriptionEnsured),
            Sample(entry: .pushReceived(zoneID: nil), kind: kinds.pushReceived),
            Sample(entry: .pushReceived(zoneID: F.notes), kind: kinds.pushReceived),
            Sample(
                entry: .syncScheduled(work: .send, reason: .localChanges, after: .seconds(1)), kind: kinds.syncScheduled
            ),
            Sample(entry: .syncScheduled(work: .fetch, reason: .pushHint, after: .zero), kind: kinds.syncScheduled),
            Sample(entry: .syncScheduled(work: .fetch, reason: .catchUp, after: .zero), kind: kinds.syncScheduled),
            Sample(
                entry: .syncScheduled(
                    work: .send, reason: .retry(failures: 3, after: .milliseconds(13_250), serverRetryAfter: true),
                    after: .milliseconds(13_250)),
                kind: kinds.syncScheduled),
            Sample(entry: .syncDeferred(reason: "network down, power ok"), kind: kinds.syncDeferred),
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

    @Test(
        "Entries whose records are written directly hold exactly the bytes SwiftProtobuf writes for the whole message",
        arguments: samples)
    func recordsWrittenDirectlyAreCanonical(_ sample: Sample) throws {
        let payload = sample.entry.newEntry.payload
        func canonical<M: SwiftProtobuf.Message>(_ type: M.Type) throws -> [UInt8] {
            ProtoWire.serialize(try ProtoWire.decode(type, from: payload))
        }
        switch sample.kind {
        case DeviceEntry.Kind.zoneChangesFetched:
            #expect(try canonical(Logsync_Device_ZoneChangesFetched.self) == payload)
        case DeviceEntry.Kind.batchPrepared: #expect(try canonical(Logsync_Device_BatchPrepared.self) == payload)
        case DeviceEntry.Kind.batchResult: #expect(try canonical(Logsync_Device_BatchResult.self) == payload)
        default: break
        }
    }

    // F103: the request ID a batch is sent under is field 4 of BatchPrepared, optional.
    @Test("batchPrepared keeps its request ID; one without (an older log) reads as nil, and an empty ID is not written")
    func batchPreparedRequestID() throws {
        let records = [F.clientRecord(F.a)]
        let with = DeviceEntry.batchPrepared(
            recordsToSave: records, recordIDsToDelete: [F.b], atomicByZone: true, requestID: "abc-7")
        let message = try ProtoWire.decode(Logsync_Device_BatchPrepared.self, from: with.newEntry.payload)
        #expect(message.requestID == "abc-7")
        #expect(try DeviceEntry(Self.logEntry(with.newEntry)) == with)

        // The bytes an older build wrote: fields 1–3 only. They decode, without a request ID, and
        // are the bytes this build writes for a batch without one.
        var old = Logsync_Device_BatchPrepared()
        old.recordsToSave = records.map(\.proto)
        old.recordIdsToDelete = [F.b.proto]
        old.atomicByZone = true
        let oldEntry = LogEntry(
            offset: 5, kind: DeviceEntry.Kind.batchPrepared, time: EntryTime(microsecondsSince1970: 0),
            payload: ProtoWire.serialize(old))
        let decoded = try DeviceEntry(oldEntry)
        #expect(
            decoded
                == .batchPrepared(recordsToSave: records, recordIDsToDelete: [F.b], atomicByZone: true, requestID: nil))
        let without = DeviceEntry.batchPrepared(recordsToSave: records, recordIDsToDelete: [F.b], atomicByZone: true)
        #expect(without.newEntry.payload == ProtoWire.serialize(old))
        // The field adds its tag, length and text to the older bytes, nothing else.
        #expect(with.newEntry.payload == ProtoWire.serialize(old) + [0x22, 5] + Array("abc-7".utf8))
    }

    @Test("Every case is sampled")
    func everyKindSampled() {
        // batchSaved (15) is a batchResult written against its batchPrepared: BatchSavedTests.
        #expect(
            Set(Self.samples.map(\.kind)) == Set(DeviceEntry.Kind.inUse).subtracting([DeviceEntry.Kind.batchSaved]))
    }

    @Test("Kinds are in 1–99 and distinct, reserved ones included")
    func kindsInRange() {
        let kinds = DeviceEntry.Kind.self
        let reserved: [EntryKind] = [6, 16, 26, 33, 42, 51, 90]
        let all = kinds.inUse + reserved
        #expect(Set(all).count == all.count, "a kind is listed twice: \(all.sorted { $0.rawValue < $1.rawValue })")
        #expect(all.allSatisfy { (1...99).contains($0.rawValue) })
        #expect(reserved.allSatisfy { !kinds.inUse.contains($0) }, "a reserved kind is written")
    }

    @Test("The numbers of the sync-step kinds are the documented ones, forever")
    func syncStepKindNumbers() {
        let kinds = DeviceEntry.Kind.self
        let numbers: [(EntryKind, UInt16)] = [
            (kinds.sendStarted, 10), (kinds.batchPrepared, 11), (kinds.batchResult, 12),
            (kinds.databaseChangesSent, 13), (kinds.batchSaved, 15),
            (kinds.sendFinished, 14), (kinds.fetchStarted, 20), (kinds.databaseChangesFetched, 21),
            (kinds.zoneChangesFetched, 22),
            (kinds.zoneFetchFinished, 23), (kinds.fetchFinished, 24), (kinds.changeTokenReset, 25),
            (kinds.eventsDelivered, 50),
            (kinds.accountChanged, 30), (kinds.subscriptionEnsured, 31), (kinds.pushReceived, 32),
            (kinds.syncScheduled, 40),
            (kinds.syncDeferred, 41),
        ]
        for (kind, number) in numbers { #expect(kind.rawValue == number) }
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
        let entry = LogEntry(
            offset: 7, kind: kind, time: EntryTime(microsecondsSince1970: 0), payload: [0xFF, 0xFF, 0xFF])
        let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
        #expect(error?.code == .corruptEntry)
        #expect(error?.offset == LogOffset(7))
        #expect(error?.description.contains("at offset 7") == true)
        #expect(error?.message.contains("kind \(kind)") == true)
    }

    @Test("An unknown kind is a corrupt entry naming the offset")
    func unknownKind() {
        // 0 is no kind; 6, 33, 42 and 90 are reserved (not written yet); 101 is a server kind.
        for kind: EntryKind in [0, 6, 33, 42, 90, 99, 101, 65535] {
            let entry = LogEntry(offset: 9, kind: kind, time: EntryTime(microsecondsSince1970: 0), payload: [])
            let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
            #expect(error?.code == .corruptEntry)
            #expect(error?.offset == LogOffset(9))
            #expect(error?.message.contains("not a device entry kind") == true)
        }
    }

    @Test("Messages that describe no value are corrupt entries")
    func invalidMessages() throws {
        let kinds = DeviceEntry.Kind.self
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
            (kinds.pendingRecordZoneChangesAdded, ProtoWire.serialize(changes), "changes[0]: has no change set"),
            (kinds.pendingRecordZoneChangesRemoved, ProtoWire.serialize(changes2), "changes[0]"),
            (kinds.batchResult, ProtoWire.serialize(result), "failed_saves[0].error is missing"),
            (kinds.batchResult, ProtoWire.serialize(result2), "a second time"),
            (kinds.pendingDatabaseChangesAdded, ProtoWire.serialize(zones), "has no change set"),
        ]
        for (kind, payload, expected) in cases {
            let entry = LogEntry(offset: 3, kind: kind, time: EntryTime(microsecondsSince1970: 0), payload: payload)
            let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
            #expect(error?.code == .corruptEntry)
            #expect(error?.offset == LogOffset(3))
            #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
        }
    }

    /// A payload of a sync-step kind that parses as the kind's message but describes no entry.
    struct Corruption: Sendable, CustomTestStringConvertible {
        var kind: EntryKind
        var payload: [UInt8]
        /// What the error message must say: the field and its problem.
        var expected: String
        var testDescription: String { "kind \(kind): \(expected)" }

        init(_ kind: EntryKind, _ message: some SwiftProtobuf.Message, _ expected: String) {
            self.kind = kind
            self.payload = ProtoWire.serialize(message)
            self.expected = expected
        }
    }

    static let corruptions: [Corruption] = {
        let kinds = DeviceEntry.Kind.self
        let databaseToken = DatabaseChangeToken(offset: 3, database: 1).data
        let zoneToken = ZoneChangeToken(zoneID: F.notes, incarnation: 1, offset: 3, database: 1).data
        var flipped = databaseToken
        flipped[flipped.startIndex + 12] ^= 0x01
        let noError = Logsync_Model_SyncError()  // a SyncError without its code
        var noZoneRecordID = Logsync_Model_RecordID()
        noZoneRecordID.recordName = "A"

        var corruptions: [Corruption] = []
        func add(_ kind: EntryKind, _ message: some SwiftProtobuf.Message, _ expected: String) {
            corruptions.append(Corruption(kind, message, expected))
        }

        // sendStarted (F42): reason and scope are required, the scope's oneof must be set.
        add(kinds.sendStarted, Logsync_Device_SendStarted.with { $0.reason = .manual }, "SendStarted.scope is missing")
        add(
            kinds.sendStarted, Logsync_Device_SendStarted.with { $0.scope.scope = .all(true) },
            "SendStarted.reason is missing")
        add(
            kinds.sendStarted,
            Logsync_Device_SendStarted.with {
                $0.reason = .UNRECOGNIZED(7)
                $0.scope.scope = .all(true)
            }, "SendStarted.reason has unknown value 7")
        add(
            kinds.sendStarted,
            Logsync_Device_SendStarted.with {
                $0.reason = .scheduled
                $0.scope = Logsync_Device_SendScope()
            }, "SendScope has no scope set")
        add(
            kinds.sendStarted,
            Logsync_Device_SendStarted.with {
                $0.reason = .scheduled
                $0.scope.scope = .recordIds(.with { $0.recordIds = [noZoneRecordID] })
            }, "SendScope.record_ids[0]: RecordID.zone_id is missing")
        // sendFinished (F45).
        add(
            kinds.sendFinished, Logsync_Device_SendFinished.with { $0.error = noError },
            "SendFinished.error: SyncError.code is missing")
        // fetchStarted (F36).
        add(
            kinds.fetchStarted, Logsync_Device_FetchStarted.with { $0.reason = .manual },
            "FetchStarted.scope is missing")
        add(
            kinds.fetchStarted, Logsync_Device_FetchStarted.with { $0.scope.scope = .all(true) },
            "FetchStarted.reason is missing")
        add(
            kinds.fetchStarted,
            Logsync_Device_FetchStarted.with {
                $0.reason = .manual
                $0.scope = Logsync_Device_FetchScope()
            }, "FetchScope has no scope set")
        // databaseChangesFetched (F37): a database token is required; deletions need a zone and a reason.
        add(
            kinds.databaseChangesFetched,
            Logsync_Device_DatabaseChangesFetched.with { $0.modifications = [F.notes.proto] },
            "DatabaseChangesFetched.change_token: invalid database token: 0 bytes is too short")
        add(
            kinds.databaseChangesFetched,
            Logsync_Device_DatabaseChangesFetched.with { $0.changeToken = Data(repeating: 0xAB, count: 40) },
            "DatabaseChangesFetched.change_token: invalid database token: not a LogSync change token")
        add(
            kinds.databaseChangesFetched, Logsync_Device_DatabaseChangesFetched.with { $0.changeToken = flipped },
            "DatabaseChangesFetched.change_token: invalid database token: checksum mismatch")
        add(
            kinds.databaseChangesFetched, Logsync_Device_DatabaseChangesFetched.with { $0.changeToken = zoneToken },
            "DatabaseChangesFetched.change_token: invalid database token: this is a zone token")
        add(
            kinds.databaseChangesFetched,
            Logsync_Device_DatabaseChangesFetched.with {
                $0.changeToken = databaseToken
                $0.deletions = [
                    .with {
                        $0.zoneID = F.photos.proto
                        $0.reason = .deleted
                    }, .with { $0.reason = .purged },
                ]
            }, "DatabaseChangesFetched.deletions[1].zone_id is missing")
        add(
            kinds.databaseChangesFetched,
            Logsync_Device_DatabaseChangesFetched.with {
                $0.changeToken = databaseToken
                $0.deletions = [.with { $0.zoneID = F.photos.proto }]
            }, "DatabaseChangesFetched.deletions[0].reason: ZoneDeletionReason is missing")
        // zoneChangesFetched (F39): a zone and a zone token are required; deletions need a full record ID.
        add(
            kinds.zoneChangesFetched, Logsync_Device_ZoneChangesFetched.with { $0.changeToken = zoneToken },
            "ZoneChangesFetched.zone_id is missing")
        add(
            kinds.zoneChangesFetched, Logsync_Device_ZoneChangesFetched.with { $0.zoneID = F.notes.proto },
            "ZoneChangesFetched.change_token: invalid zone token: 0 bytes is too short")
        add(
            kinds.zoneChangesFetched,
            Logsync_Device_ZoneChangesFetched.with {
                $0.zoneID = F.notes.proto
                $0.changeToken = databaseToken
            }, "ZoneChangesFetched.change_token: invalid zone token: this is a database token")
        add(
            kinds.zoneChangesFetched,
            Logsync_Device_ZoneChangesFetched.with {
                $0.zoneID = F.notes.proto
                $0.changeToken = zoneToken
                $0.deletions = [.with { $0.recordType = "Note" }]
            }, "ZoneChangesFetched.deletions[0].record_id is missing")
        add(
            kinds.zoneChangesFetched,
            Logsync_Device_ZoneChangesFetched.with {
                $0.zoneID = F.notes.proto
                $0.changeToken = zoneToken
                $0.deletions = [.with { $0.recordID = noZoneRecordID }]
            }, "ZoneChangesFetched.deletions[0].record_id: RecordID.zone_id is missing")
        add(
            kinds.zoneChangesFetched,
            Logsync_Device_ZoneChangesFetched.with {
                $0.zoneID = F.notes.proto
                $0.changeToken = zoneToken
                $0.modifications = [F.serverRecord(F.a, tag: "1").proto, Logsync_Model_Record()]
            }, "ZoneChangesFetched.modifications[1]: Record.record_id is missing")
        // zoneFetchFinished (F40), fetchFinished (F41).
        add(kinds.zoneFetchFinished, Logsync_Device_ZoneFetchFinished(), "ZoneFetchFinished.zone_id is missing")
        add(
            kinds.zoneFetchFinished,
            Logsync_Device_ZoneFetchFinished.with {
                $0.zoneID = F.notes.proto
                $0.error = noError
            }, "ZoneFetchFinished.error: SyncError.code is missing")
        add(
            kinds.fetchFinished, Logsync_Device_FetchFinished.with { $0.error = noError },
            "FetchFinished.error: SyncError.code is missing")
        // eventsDelivered (F29): offsets start at 1, so "through 0" (also the empty message) is no offset.
        add(
            kinds.eventsDelivered, Logsync_Device_EventsDelivered.with { $0.through = 0 },
            "EventsDelivered.through is 0")
        add(kinds.eventsDelivered, Logsync_Device_EventsDelivered(), "EventsDelivered.through is 0")
        // accountChanged (F104–F108): a user ID must be whole.
        add(
            kinds.accountChanged, Logsync_Device_AccountChanged.with { $0.previousUser = noZoneRecordID },
            "AccountChanged.previous_user: RecordID.zone_id is missing")
        add(
            kinds.accountChanged, Logsync_Device_AccountChanged.with { $0.currentUser = noZoneRecordID },
            "AccountChanged.current_user: RecordID.zone_id is missing")
        // subscriptionEnsured (F111): the ID is required.
        add(
            kinds.subscriptionEnsured, Logsync_Device_SubscriptionEnsured(),
            "SubscriptionEnsured.subscription_id is missing")
        // syncScheduled (F82–F90): work and cause are required, the wait is not negative.
        add(
            kinds.syncScheduled, Logsync_Device_SyncScheduled.with { $0.cause = .pushHint },
            "SyncScheduled.work is missing"
        )
        add(
            kinds.syncScheduled, Logsync_Device_SyncScheduled.with { $0.work = .send }, "SyncScheduled.cause is missing"
        )
        add(
            kinds.syncScheduled,
            Logsync_Device_SyncScheduled.with {
                $0.work = .UNRECOGNIZED(9)
                $0.cause = .retry
            }, "SyncScheduled.work has unknown value 9")
        add(
            kinds.syncScheduled,
            Logsync_Device_SyncScheduled.with {
                $0.work = .fetch
                $0.cause = .retry
                $0.afterMicroseconds = -1
            }, "SyncScheduled.after_microseconds is negative")
        return corruptions
    }()

    @Test(
        "Sync-step payloads that describe no entry are corrupt entries naming the offset and the field",
        arguments: corruptions)
    func corruptSyncSteps(_ corruption: Corruption) throws {
        let entry = LogEntry(
            offset: 5, kind: corruption.kind, time: EntryTime(microsecondsSince1970: 0), payload: corruption.payload)
        let error = #expect(throws: LogStoreError.self) { try DeviceEntry(entry) }
        #expect(error?.code == .corruptEntry)
        #expect(error?.offset == LogOffset(5))
        #expect(error?.description.contains("at offset 5") == true, "\(error?.description ?? "no error")")
        #expect(error?.message.contains("(kind \(corruption.kind)) payload") == true, "\(error?.message ?? "no error")")
        #expect(error?.message.contains(corruption.expected) == true, "\(error?.message ?? "no error")")
    }

    @Test("Every sync-step kind has a corrupt-payload case, but those whose every message is an entry")
    func everySyncStepKindCorrupted() {
        let kinds = DeviceEntry.Kind.self
        let corrupted = Set(Self.corruptions.map(\.kind))
        let steps = Set(Self.syncStepSamples.map(\.kind))
        #expect(corrupted == steps.subtracting([kinds.changeTokenReset, kinds.pushReceived, kinds.syncDeferred]))
    }

    @Test(
        "Sync-step entries encode to the same bytes every time, and again after a round trip",
        arguments: syncStepSamples)
    func syncStepDeterministic(_ sample: Sample) throws {
        let bytes = sample.entry.newEntry.payload
        #expect(sample.entry.newEntry.payload == bytes)
        let decoded = try DeviceEntry(Self.logEntry(sample.entry.newEntry))
        #expect(decoded.newEntry.payload == bytes)
        #expect(decoded.newEntry.kind == sample.kind)
    }

    @Test("Sync-step payloads have the documented bytes (field numbers are forever)")
    func syncStepGoldenBytes() throws {
        let shared: [UInt8] = [0x0A, 6] + Array("Shared".utf8) + [0x12, 4] + Array("_bob".utf8)
        #expect(DeviceEntry.eventsDelivered(through: 5).newEntry.payload == [0x08, 0x05])
        #expect(DeviceEntry.eventsDelivered(through: 300).newEntry.payload == [0x08, 0xAC, 0x02])
        #expect(DeviceEntry.changeTokenReset(zoneID: nil).newEntry.payload == [])
        #expect(
            DeviceEntry.changeTokenReset(zoneID: F.shared).newEntry.payload == [0x0A, UInt8(shared.count)] + shared)
        #expect(DeviceEntry.sendFinished(error: nil).newEntry.payload == [])
        #expect(DeviceEntry.fetchFinished(error: nil).newEntry.payload == [])
        #expect(
            DeviceEntry.zoneFetchFinished(zoneID: F.shared, error: nil).newEntry.payload == [0x0A, UInt8(shared.count)]
                + shared)
        // reason 2 (manual, raw value + 1), scope { all = true }.
        let send = DeviceEntry.sendStarted(SyncEngine.SendChangesContext(reason: .manual, options: .init(scope: .all)))
        #expect(send.newEntry.payload == [0x08, 0x02, 0x12, 0x02, 0x08, 0x01])
        // The token is stored as its own stable form (`DatabaseChangeToken.data`), field 3.
        let token = DatabaseChangeToken(offset: 9, database: 4)
        let fetched = DeviceEntry.databaseChangesFetched(
            modifications: [], deletions: [], changeToken: token, moreComing: false)
        #expect(fetched.newEntry.payload == [0x1A, UInt8(token.data.count)] + Array(token.data))
    }

    @Test("A corrupt payload is refused at append, naming the offset it would have had")
    func corruptAppendRefused() async throws {
        try withTemporaryDirectory { directory in
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

    @Test(
        "A fetched page written from its records' bytes is the entry its records encode to; cut or flipped, it is read or a corrupt entry naming its offset"
    )
    func zoneChangesFetchedFromRecordBytes() throws {
        let records = [F.serverRecord(F.a, tag: "1"), F.serverRecord(F.b, tag: "2", title: "Milk")]
        let entry = DeviceEntry.zoneChangesFetched(
            zoneID: F.notes, modifications: records,
            deletions: [RecordZoneChange.Deletion(recordID: F.id("gone"), recordType: "Note")],
            changeToken: ZoneChangeToken(zoneID: F.notes, incarnation: 2, offset: 42, database: 7), moreComing: true)
        let fromBytes = entry.decodedNewEntry(recordBytes: records.map { $0.protoBytes()[...] })
        #expect(fromBytes.kind == DeviceEntry.Kind.zoneChangesFetched)
        #expect(fromBytes.payload == entry.newEntry.payload)
        #expect(fromBytes.decoded as? DeviceEntry == entry)
        #expect(try DeviceEntry(Self.logEntry(fromBytes)) == entry)
        // Bytes that are not one per record, and other kinds: encoded as ever.
        #expect(entry.decodedNewEntry(recordBytes: [records[0].protoBytes()[...]]).payload == entry.newEntry.payload)
        let other = DeviceEntry.eventsDelivered(through: LogOffset(3))
        #expect(other.decodedNewEntry(recordBytes: []).payload == other.newEntry.payload)

        // Every cut and every flipped bit of the entry: a value, or a corrupt entry naming offset 42.
        func check(_ payload: [UInt8], _ what: String) {
            let logEntry = LogEntry(
                offset: 42, kind: fromBytes.kind, time: EntryTime(microsecondsSince1970: 1), payload: payload)
            do {
                _ = try DeviceEntry(logEntry)
            } catch {
                #expect(error.code == .corruptEntry, "\(what)")
                #expect(error.offset == LogOffset(42), "\(what)")
                #expect(error.description.contains("at offset 42"), "\(what)")
            }
        }
        let payload = fromBytes.payload
        for length in 0..<payload.count { check(Array(payload[..<length]), "cut at \(length)") }
        for bit in 0..<(payload.count * 8) {
            var flipped = payload
            flipped[bit / 8] ^= 1 << (bit % 8)
            check(flipped, "bit \(bit) flipped")
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
