import Foundation
import Testing

@testable import SyncModel

/// `SyncError` fields and its one-line description (F90, F92, F98, F99, F101).
struct SyncErrorTests {
    @Test func descriptionNamesCodeAndItem() {
        let error = SyncError(.serverRecordChanged, "tag \"3\" is stale", item: .record(Fixture.n1))
        #expect(error.description == #"serverRecordChanged (14) for record "n1" in zone "Notes": tag "3" is stale"#)
    }

    @Test func descriptionNamesRequest() {
        let error = SyncError(.limitExceeded, "too big", requestID: "dev1-7")
        #expect(error.description == #"limitExceeded (27) in request "dev1-7": too big"#)
    }

    @Test func descriptionOfZoneAndSubscriptionItems() {
        #expect(
            SyncError(.zoneNotFound, item: .zone(Fixture.sharedNotes)).description
                == #"zoneNotFound (26) for zone "Notes" of owner "_owner42""#)
        #expect(
            SyncError(.permissionFailure, item: .subscription("engine")).description
                == #"permissionFailure (10) for subscription "engine""#)
        #expect(SyncError(.internalError).description == "internalError (1)")
    }

    @Test func descriptionIsOneLineWithDetails() {
        var error = SyncError(
            .serviceUnavailable, "first line\nsecond line", retryAfter: .milliseconds(2500),
            cause: "connection reset\nby peer")
        error.partialErrors = [.record(Fixture.n1): SyncError(.zoneBusy)]
        #expect(!error.description.contains("\n"))
        #expect(
            error.description
                == "serviceUnavailable (6): first line second line (retry after 2.5 s; 1 item error; cause: connection reset by peer)"
        )
    }

    // F90
    @Test func retryAfterInSeconds() {
        #expect(SyncError(.requestRateLimited, retryAfter: .seconds(3)).retryAfterSeconds == 3)
        #expect(SyncError(.zoneBusy, retryAfter: .milliseconds(250)).retryAfterSeconds == 0.25)
        #expect(SyncError(.zoneBusy).retryAfterSeconds == nil)
    }

    // F92
    @Test func serverRecordChangedCarriesThreeRecords() {
        let server = Fixture.savedNote(tag: "9")
        var client = Fixture.savedNote(tag: "7")
        client["title"] = "Mine"
        let ancestor = Fixture.savedNote(tag: "7")
        let error = SyncError.serverRecordChanged(serverRecord: server, clientRecord: client, ancestorRecord: ancestor)
        #expect(error.code == .serverRecordChanged)
        #expect(error.item == .record(Fixture.n1))
        #expect(error.serverRecord?.recordChangeTag == "9")
        #expect(error.clientRecord?["title"] == "Mine")
        #expect(error.ancestorRecord == ancestor)
    }

    // F98, F99
    @Test func zoneDeletionReasons() {
        let purged = SyncError(.userDeletedZone, item: .zone(Fixture.notes), zoneDeletionReason: .purged)
        #expect(!purged.userDidResetEncryptedDataKey)
        #expect(purged.description.contains("(zone purged)"))
        let reset = SyncError(.zoneNotFound, item: .zone(Fixture.notes), zoneDeletionReason: .encryptedDataReset)
        #expect(reset.userDidResetEncryptedDataKey)
        #expect(ZoneDeletionReason.allCases.map(\.rawValue) == [0, 1, 2])
    }

    // F101: per-item errors keyed by record, zone and subscription IDs survive the wire.
    @Test func partialErrorsRoundTrip() throws {
        var conflict = SyncError.serverRecordChanged(serverRecord: Fixture.savedNote(), clientRecord: nil)
        conflict.requestID = "r1"
        let error = SyncError(
            .partialFailure, "2 of 3 items failed", requestID: "r1",
            partialErrors: [
                .record(Fixture.n1): conflict,
                .record(Fixture.n2): SyncError(.batchRequestFailed, item: .record(Fixture.n2)),
                .zone(Fixture.photos): SyncError(.zoneNotFound, item: .zone(Fixture.photos)),
                .subscription("engine"): SyncError(.requestRateLimited, retryAfter: .seconds(5)),
            ])
        let decoded = try jsonRoundTrip(error)
        #expect(decoded == error)
        #expect(decoded.partialErrors[.record(Fixture.n1)]?.serverRecord?.recordChangeTag == "7")
        #expect(decoded.partialErrors[.subscription("engine")]?.retryAfter == .seconds(5))
    }

    @Test func syncErrorIsAnError() {
        let error: any Error = SyncError(.networkFailure)
        #expect((error as? SyncError)?.code == .networkFailure)
        #expect(String(describing: error) == "networkFailure (4)")
    }
}
