import Foundation
import LogStore
import SyncModel
import SyncTestKit
import Testing

@testable import LogSync

/// `FetchFlow` alone, against a ``ScriptedDatabase``: the pages it asks for, what it appends to
/// the device log, the tokens and records the index keeps, and the events the delegate hears.
@Suite("FetchFlow")
struct FetchFlowTests {
    static func zoneToken(_ zoneID: RecordZone.ID, _ offset: ChangeOffset) -> ZoneChangeToken {
        ZoneChangeToken(zoneID: zoneID, incarnation: 1, offset: offset)
    }

    static func modified(_ records: Record...) -> [RecordZoneChange.Modification] {
        records.map { RecordZoneChange.Modification(record: $0) }
    }

    // F37, F39, F46: the database's feed in two pages, then a zone's in two pages and another's
    // in one; each page is logged with its token and delivered when it holds changes.
    @Test(
        "F37 F39 F46 a fetch across pages with moreComing: every page logged, delivered in order, the last tokens kept")
    func pagesWithMoreComing() async throws {
        try await withFlowHarness { flow in
            let (notes, photos) = (Fixtures.notes, Fixtures.photos)
            let firstDatabasePage = DatabaseChangeToken(offset: 10)
            let databaseToken = DatabaseChangeToken(offset: 20)
            let firstNotesPage = Self.zoneToken(notes, 11)
            let notesToken = Self.zoneToken(notes, 19)
            let photosToken = Self.zoneToken(photos, 20)
            let a = Fixtures.serverRecord(Fixtures.a, tag: "1")
            let b = Fixtures.serverRecord(Fixtures.b, tag: "2")
            let c = Fixtures.serverRecord(Fixtures.c, tag: "3")
            let gone = RecordZoneChange.Deletion(recordID: Fixtures.x, recordType: "Note")
            flow.database.answer(FetchDatabaseChangesRequest.self) { _ in
                FetchDatabaseChangesResponse(
                    modifications: [.init(zoneID: notes)], changeToken: firstDatabasePage, moreComing: true)
            }
            flow.database.answer(FetchDatabaseChangesRequest.self) { _ in
                FetchDatabaseChangesResponse(modifications: [.init(zoneID: photos)], changeToken: databaseToken)
            }
            flow.database.answer(FetchZoneChangesRequest.self) { _ in
                FetchZoneChangesResponse(
                    zoneID: notes, modifications: Self.modified(a, b), changeToken: firstNotesPage, moreComing: true)
            }
            flow.database.answer(FetchZoneChangesRequest.self) { _ in
                FetchZoneChangesResponse(
                    zoneID: notes, modifications: Self.modified(c), deletions: [gone], changeToken: notesToken)
            }
            flow.database.answer(FetchZoneChangesRequest.self) { _ in
                FetchZoneChangesResponse(zoneID: photos, changeToken: photosToken)
            }
            let before = try flow.deviceLog.log.lastOffset

            try await flow.fetch()

            // Each page asked for from the token of the one before; the subscription checked after.
            #expect(flow.database.requests(FetchDatabaseChangesRequest.self).map(\.since) == [nil, firstDatabasePage])
            let zoneRequests = flow.database.requests(FetchZoneChangesRequest.self)
            #expect(zoneRequests.map(\.zoneID) == [notes, notes, photos])
            #expect(zoneRequests.map(\.since) == [nil, firstNotesPage, nil])
            #expect(flow.database.requestNames.last == "AllSubscriptions")

            #expect(
                try flow.entryNames(after: before) == [
                    "fetchStarted", "databaseChangesFetched", "databaseChangesFetched",
                    "zoneChangesFetched", "zoneChangesFetched", "zoneFetchFinished",
                    "zoneChangesFetched", "zoneFetchFinished", "fetchFinished",
                ])
            let entries = try flow.entries(after: before)
            #expect(
                entries.map(\.entry).contains(
                    .zoneChangesFetched(
                        zoneID: notes, modifications: [c], deletions: [gone], changeToken: notesToken, moreComing: false
                    )))
            let lastPageWithChanges = try #require(
                entries.last {
                    if case .zoneChangesFetched(_, let modifications, _, _, _) = $0.entry {
                        !modifications.isEmpty
                    } else {
                        false
                    }
                })

            try flow.read { snapshot throws in
                #expect(try snapshot.databaseChangeToken() == databaseToken)
                #expect(try snapshot.zoneChangeToken(for: notes) == notesToken)
                #expect(try snapshot.zoneChangeToken(for: photos) == photosToken)
                #expect(try snapshot.zoneIDsWithUnfetchedServerChanges().isEmpty)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.c) == c)
                #expect(
                    try snapshot.deliveredOffset() == lastPageWithChanges.offset,
                    "F29: delivery rides with the next entry")
            }

            let events = flow.delegate.events
            #expect(events.isFetchSequence)
            #expect(
                events.withoutStateUpdates.kinds == [
                    .willFetchChanges, .fetchedDatabaseChanges, .fetchedDatabaseChanges,
                    .willFetchRecordZoneChanges, .fetchedRecordZoneChanges, .fetchedRecordZoneChanges,
                    .didFetchRecordZoneChanges,
                    .willFetchRecordZoneChanges, .didFetchRecordZoneChanges, .didFetchChanges,
                ])
            #expect(events.fetchedRecordZoneChanges.map { $0.modifications.map(\.record) } == [[a, b], [c]])
            #expect(events.fetchedRecordZoneChanges.last?.deletions == [gone])
            #expect(events.zoneFetchResults.allSatisfy { $0.error == nil })
        }
    }

    // F100, F144: the server expired the zone's token; the zone is listed again from the start,
    // and the record the listing leaves out is reported deleted.
    @Test("F100 F144 a zone whose token expired is reset and listed again, and a record it no longer holds is deleted")
    func expiredZoneToken() async throws {
        try await withFlowHarness { flow in
            let notes = Fixtures.notes
            let (a, b) = (Fixtures.serverRecord(Fixtures.a, tag: "1"), Fixtures.serverRecord(Fixtures.b, tag: "2"))
            let oldToken = Self.zoneToken(notes, 5)
            flow.database.answer(FetchDatabaseChangesRequest.self) { _ in
                FetchDatabaseChangesResponse(
                    modifications: [.init(zoneID: notes)], changeToken: DatabaseChangeToken(offset: 5))
            }
            flow.database.answer(FetchZoneChangesRequest.self) { _ in
                FetchZoneChangesResponse(zoneID: notes, modifications: Self.modified(a, b), changeToken: oldToken)
            }
            try await flow.fetch()

            // Meanwhile b was deleted, and the server compacted its tombstone away.
            let a2 = Fixtures.serverRecord(Fixtures.a, tag: "3", title: "Groceries and more")
            let newToken = Self.zoneToken(notes, 30)
            flow.database.answer(FetchDatabaseChangesRequest.self) { _ in
                FetchDatabaseChangesResponse(
                    modifications: [.init(zoneID: notes)], changeToken: DatabaseChangeToken(offset: 30))
            }
            flow.database.fail(
                FetchZoneChangesRequest.self, SyncError(.changeTokenExpired, "compacted", item: .zone(notes)))
            flow.database.answer(FetchZoneChangesRequest.self) { _ in
                FetchZoneChangesResponse(zoneID: notes, modifications: Self.modified(a2), changeToken: newToken)
            }
            let before = try flow.deviceLog.log.lastOffset
            let eventsBefore = flow.delegate.events.count

            try await flow.fetch()

            #expect(flow.database.requests(FetchZoneChangesRequest.self).map(\.since) == [nil, oldToken, nil])
            #expect(
                try flow.entryNames(after: before) == [
                    "fetchStarted", "databaseChangesFetched", "changeTokenReset", "zoneChangesFetched",
                    "zoneChangesFetched",
                    "zoneFetchFinished", "fetchFinished",
                ])
            let entries = try flow.entries(after: before).map(\.entry)
            let gone = RecordZoneChange.Deletion(recordID: Fixtures.b, recordType: "Note")
            #expect(entries.contains(.changeTokenReset(zoneID: notes)))
            #expect(
                entries.contains(
                    .zoneChangesFetched(
                        zoneID: notes, modifications: [], deletions: [gone], changeToken: newToken, moreComing: false)))
            #expect(entries.contains(.zoneFetchFinished(zoneID: notes, error: nil)))

            try flow.read { snapshot throws in
                #expect(try snapshot.zoneChangeToken(for: notes) == newToken)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.a) == a2)
                #expect(try snapshot.lastKnownServerRecord(for: Fixtures.b) == nil)
                #expect(try snapshot.zoneIDsWithUnfetchedServerChanges().isEmpty)
            }

            let events = Array(flow.delegate.events.dropFirst(eventsBefore))
            #expect(events.isFetchSequence)
            #expect(events.fetchedRecordZoneChanges.map { $0.modifications.map(\.record) } == [[a2], []])
            #expect(events.fetchedRecordZoneChanges.map(\.deletions) == [[], [gone]])
            #expect(events.zoneFetchResults.map(\.error) == [nil])
        }
    }
}
