import Foundation
import LogStore
import LogToolCore
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSync
@testable import LogSyncDiagnostics

/// `DeviceEntryDescription` through `EntryDecoder.device`: the kinds a short engine run does
/// not write, long lists cut short, other kinds left alone, undecodable payloads reported at
/// their offset.
@Suite("DeviceEntryDescription")
struct DeviceEntryDescriptionTests: EntryIDs {

    static let cases: [(DeviceEntry, String, String)] = [
        (
            .pendingRecordZoneChangesAdded((1...6).map { .saveRecord(id("n\($0)")) }),
            "pendingRecordZoneChangesAdded", "count=6 changes=[save:Notes/n1,save:Notes/n2,save:Notes/n3,…+3]"
        ),
        (
            .pendingRecordZoneChangesRemoved([.deleteRecord(id("s1", in: bobs))]),
            "pendingRecordZoneChangesRemoved", "count=1 changes=[delete:Shared@_bob/s1]"
        ),
        (
            .pendingDatabaseChangesRemoved([.deleteZone(notes)]), "pendingDatabaseChangesRemoved",
            "count=1 changes=[delete:Notes]"
        ),
        (.untrackedChangesFlagged(true), "untrackedChangesFlagged", "pending=true"),
        (
            .sendStarted(.init(reason: .scheduled, options: .init(scope: .recordIDs([id("n1")])))),
            "sendStarted", "reason=scheduled scope=recordIDs scopeIDs=[Notes/n1]"
        ),
        (.sendFinished(error: SyncError(.networkFailure)), "sendFinished", "error=networkFailure"),
        (
            .databaseChangesSent(
                savedZones: [], deletedZoneIDs: [notes], failedZoneSaves: [bobs: SyncError(.permissionFailure)],
                failedZoneDeletes: [:]),
            "databaseChangesSent", "saved=0 deleted=1 failed=1 deletions=[Notes] errors=[Shared@_bob:permissionFailure]"
        ),
        (
            .fetchStarted(
                .init(reason: .manual, options: .init(scope: .allExcluding([bobs]), prioritizedZoneIDs: [notes]))),
            "fetchStarted", "reason=manual scope=allExcluding scopeIDs=[Shared@_bob] prioritized=[Notes]"
        ),
        (
            .fetchStarted(
                .init(
                    reason: .scheduled,
                    options: .init(
                        defaultZoneConfiguration: .init(resultsLimit: 50),
                        zoneConfigurations: [
                            notes: .init(shouldFetchAssetContents: false, resultsLimit: 10), bobs: .init(),
                        ]))),
            "fetchStarted",
            "reason=scheduled scope=all zoneDefault=limit50 zoneConfigs=[Notes:noAssets+limit10,Shared@_bob:default]"
        ),
        (
            .databaseChangesFetched(
                modifications: [], deletions: [.init(zoneID: notes, reason: .purged)],
                changeToken: DatabaseChangeToken(offset: 42),
                moreComing: true),
            "databaseChangesFetched", "modified=0 deleted=1 deletions=[Notes:purged] token=42 moreComing=true"
        ),
        (
            .zoneChangesFetched(
                zoneID: bobs, modifications: [], deletions: [.init(recordID: id("s1", in: bobs), recordType: "Note")],
                changeToken: ZoneChangeToken(zoneID: bobs, incarnation: 1, offset: 9), moreComing: false),
            "zoneChangesFetched", "zone=Shared owner=_bob modified=0 deleted=1 deletions=[s1] token=9 moreComing=false"
        ),
        (
            .zoneFetchFinished(zoneID: notes, error: SyncError(.zoneNotFound)), "zoneFetchFinished",
            "zone=Notes error=zoneNotFound"
        ),
        (.fetchFinished(error: nil), "fetchFinished", ""),
        (.changeTokenReset(zoneID: nil), "changeTokenReset", ""),
        (.changeTokenReset(zoneID: notes), "changeTokenReset", "zone=Notes"),
        (.eventsDelivered(through: LogOffset(17)), "eventsDelivered", "through=17"),
        (
            .accountChanged(previous: Record.ID(recordName: "_user1"), current: Record.ID(recordName: "_user2")),
            "accountChanged", "user=_user2 previous=_user1"
        ),
        (.accountChanged(previous: Record.ID(recordName: "_user1"), current: nil), "accountChanged", "previous=_user1"),
        (.subscriptionEnsured("logsync-database"), "subscriptionEnsured", "subscription=logsync-database"),
        (.pushReceived(zoneID: nil), "pushReceived", ""),
        (
            .syncScheduled(work: .send, reason: .localChanges, after: .milliseconds(500)),
            "syncScheduled", "work=send after=500ms cause=localChanges"
        ),
        (
            .syncScheduled(
                work: .fetch, reason: .retry(failures: 2, after: .seconds(4), serverRetryAfter: true),
                after: .seconds(4)),
            "syncScheduled", "work=fetch after=4s cause=retry failures=2 serverRetryAfter=true"
        ),
        (.syncDeferred(reason: "no network"), "syncDeferred", #"reason="no network""#),
    ]

    static func logEntry(_ entry: DeviceEntry, offset: UInt64 = 5) -> LogEntry {
        let new = entry.newEntry
        return LogEntry(
            offset: LogOffset(offset), kind: new.kind, time: EntryTime(microsecondsSince1970: 0), payload: new.payload)
    }

    @Test(arguments: cases.indices)
    func describesEachKind(index: Int) throws {
        let (entry, name, fields) = Self.cases[index]
        let description = try #require(try EntryDecoder.device.describe(Self.logEntry(entry)))
        #expect(description.kindName == name)
        #expect(EntryFormatter.fieldsText(description.fields) == fields)
        #expect(EntryDecoder.device.name(of: entry.newEntry.kind) == name)
    }

    @Test func everyKindInUseHasAName() {
        #expect(Set(DeviceEntryDescription.kinds.map(\.kind)) == Set(DeviceEntry.Kind.inUse))
        #expect(Set(DeviceEntryDescription.kinds.map(\.name)).count == DeviceEntry.Kind.inUse.count)
        #expect(
            DeviceEntryDescription.kinds.map(\.kind.rawValue)
                == DeviceEntryDescription.kinds.map(\.kind.rawValue).sorted())
    }

    /// The record and zone names a list leaves out still count for `--record` and `--zone`.
    @Test func filtersSeeEveryNamedRecordAndZone() throws {
        let entry = Self.logEntry(
            .pendingRecordZoneChangesAdded(
                (1...6).map { .saveRecord(Self.id("n\($0)")) } + [.saveRecord(Self.id("s1", in: Self.bobs))]))
        let description = try #require(try EntryDecoder.device.describe(entry))
        #expect(EntryFilter(recordName: "n6").matches(entry, description: description))
        #expect(EntryFilter(zoneName: "Shared").matches(entry, description: description))
        #expect(!EntryFilter(recordName: "n7").matches(entry, description: description))
        #expect(!EntryFilter(zoneName: "Trash").matches(entry, description: description))
    }

    @Test func otherKindsAreNotDescribed() throws {
        for kind: EntryKind in [0, 6, 99, 103, 120, 65535] {
            let entry = LogEntry(offset: 1, kind: kind, time: .init(microsecondsSince1970: 0), payload: [0xFF])
            #expect(try EntryDecoder.device.describe(entry) == nil)
        }
    }

    @Test func anUndecodablePayloadIsACorruptEntryAtItsOffset() {
        let entry = LogEntry(offset: 9, kind: 12, time: .init(microsecondsSince1970: 0), payload: [0xFF, 0xFF])
        #expect {
            _ = try EntryDecoder.device.describe(entry)
        } throws: { error in
            guard let error = error as? LogStoreError else { return false }
            return error.code == .corruptEntry && error.offset == LogOffset(9)
                && error.message.hasPrefix("batchResult (kind 12) payload: ")
        }
    }

    /// F134: a dump names each asset of the records an entry holds by digest, size and whether
    /// the content is on this device (`cached`), named by a file that is gone (`missing`) or
    /// not fetched (`not-cached`) — never by its content.
    @Test("F134 dumps show asset fields and whether the content is cached")
    func assetsAreShown() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("asset-dump-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let content = Array("a photo of the beach".utf8)
        let digest = AssetHasher.digest(of: content)
        let cachedFile = directory.appendingPathComponent(digest.hex)
        try Data(content).write(to: cachedFile)
        var note = Record(recordType: "Note", recordID: Self.id("n1"))
        note["photo"] = .asset(Asset(digest: digest, size: Int64(content.count), fileURL: cachedFile))
        note["pages"] = .list([
            .asset(Asset(digest: digest, size: Int64(content.count))),
            .asset(
                Asset(digest: digest, size: Int64(content.count), fileURL: directory.appendingPathComponent("gone"))),
        ])
        let entry = DeviceEntry.zoneChangesFetched(
            zoneID: Self.notes, modifications: [note], deletions: [],
            changeToken: ZoneChangeToken(zoneID: Self.notes, incarnation: 1, offset: 9), moreComing: false)
        let description = try #require(try EntryDecoder.device.describe(Self.logEntry(entry)))
        let text = EntryFormatter.fieldsText(description.fields)
        let short = digest.short
        #expect(
            text.hasSuffix(
                "assets=[n1.pages:\(short)/20B/not-cached,n1.pages:\(short)/20B/missing,n1.photo:\(short)/20B/cached]"),
            "\(text)")
        #expect(!text.contains("a photo"))
        let prepared = try #require(
            try EntryDecoder.device.describe(
                Self.logEntry(
                    .batchPrepared(recordsToSave: [note], recordIDsToDelete: [], atomicByZone: true, requestID: "r1"))))
        #expect(EntryFormatter.fieldsText(prepared.fields).contains("n1.photo:\(short)/20B/cached"))
    }

    /// The trace context a traced request's entry records (`batchPrepared`, the fetched pages)
    /// shows as `trace=<trace ID>`: a W3C `traceparent`'s trace-id, or a `…trace-id` header's
    /// value (another propagator's, a test tracer's); an entry without one shows none, and the
    /// entry reads as it did.
    @Test func tracedRequestsShowTheirTraceID() throws {
        let prepared = DeviceEntry.batchPrepared(
            recordsToSave: [], recordIDsToDelete: [Self.id("n1")], atomicByZone: false, requestID: "r1")
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let traced = prepared.newEntry.tracing(["traceparent": traceparent, "tracestate": "vendor=1"])
        let entry = LogEntry(
            offset: 7, kind: traced.kind, time: EntryTime(microsecondsSince1970: 0), payload: traced.payload)
        #expect(try DeviceEntry(entry) == prepared)
        #expect(try DeviceEntry.traceHeaders(of: entry) == ["traceparent": traceparent, "tracestate": "vendor=1"])
        let description = try #require(try EntryDecoder.device.describe(entry))
        #expect(
            EntryFormatter.fieldsText(description.fields)
                == "count=1 changes=[delete:Notes/n1] atomic=false request=r1 trace=4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(
            !EntryFormatter.fieldsText(try #require(try EntryDecoder.device.describe(Self.logEntry(prepared))).fields)
                .contains("trace"))

        let page = DeviceEntry.databaseChangesFetched(
            modifications: [Self.notes], deletions: [], changeToken: DatabaseChangeToken(offset: 3),
            moreComing: false)
        let tracedPage = page.newEntry.tracing(["in-memory-trace-id": "42", "in-memory-span-id": "43"])
        let pageEntry = LogEntry(
            offset: 8, kind: tracedPage.kind, time: EntryTime(microsecondsSince1970: 0), payload: tracedPage.payload)
        #expect(try DeviceEntry(pageEntry) == page)
        #expect(
            EntryFormatter.fieldsText(try #require(try EntryDecoder.device.describe(pageEntry)).fields).hasSuffix(
                " trace=42"))
        // A kind that records no trace context takes none.
        #expect(DeviceEntry.sendFinished(error: nil).newEntry.tracing(["traceparent": traceparent]).payload.isEmpty)
        #expect(DeviceEntry.traceID(in: ["traceparent": "not-a-traceparent"]) == nil)
    }

    /// A `batchSaved` entry (kind 15) holds its saved records as changes to those of its
    /// `batchPrepared`: read with its log it is described as the `batchResult` it stands for, plus
    /// `prepared`; alone, by counts and positions.
    @Test func batchSavedIsDescribedWithItsLog() throws {
        try withTemporaryDirectory { directory in
            let log = try DeviceLog(
                directory: directory, options: LogEnvironment.Options(durability: .fast, initialMapSize: 8 << 20))
            var note = Record(recordType: "Note", recordID: Self.id("n1"))
            note["title"] = .string("Groceries")
            try log.append(.pendingRecordZoneChangesAdded([.saveRecord(note.recordID)]))
            let preparedOffset = try log.append(
                .batchPrepared(recordsToSave: [note], recordIDsToDelete: [], atomicByZone: false, requestID: "r1"))
            var saved = note
            saved.applySystemFields(Record.SystemFields(recordChangeTag: "1"))
            let range = try log.append(
                [.batchResult(saved: [saved], deleted: [Self.id("n2")], failedSaves: [:], failedDeletes: [:])],
                preparedBatch: PreparedBatchReference(offset: preparedOffset, recordsToSave: [note]))
            let entry = try #require(try log.log.entry(at: range.lowerBound))
            #expect(entry.kind == DeviceEntry.Kind.batchSaved)
            let withLog = try #require(try EntryDecoder.forLog(log.log).describe(entry))
            #expect(withLog.kindName == "batchSaved")
            #expect(
                EntryFormatter.fieldsText(withLog.fields)
                    == "saved=1 deleted=1 failed=0 records=[Notes/n1] deletions=[Notes/n2] prepared=2")
            let alone = try #require(try EntryDecoder.device.describe(entry))
            #expect(
                EntryFormatter.fieldsText(alone.fields)
                    == "saved=1 deleted=1 failed=0 records=[prepared:0] deletions=[Notes/n2] prepared=2")
        }
    }

    /// Device kinds are decoded in a device log only: other logs use small kinds for their own
    /// entries (the demo's key–value entries are kinds 1–3).
    @Test func theStandardDecoderIsForDeviceLogs() throws {
        let entry = Self.logEntry(.untrackedChangesFlagged(false))
        #expect(try EntryDecoder.forLog(named: "device").describe(entry)?.kindName == "untrackedChangesFlagged")
        #expect(try EntryDecoder.forLog(named: "main").describe(entry) == nil)
        #expect(EntryDecoder.standard.name(of: 12) == "batchResult")
        #expect(EntryDecoder.standard.name(of: 103) == "recordSaved")
        #expect(try EntryFilter.kind(named: "BATCHRESULT", decoder: .standard) == 12)
    }
}
