import SyncModel
import Testing

@testable import LogSyncServer

/// The capabilities a zone reports (F128): a custom zone's log entry written before the server
/// reported `sharing` (fetchChanges, atomic, zoneWideSharing) reports `sharing` too.
struct ZoneCapabilitiesTests {
    @Test("F128 F123 a custom zone recorded without sharing reports it; the default zone reports nothing")
    func reported() {
        let recordedBefore: RecordZone.Capabilities = [.fetchChanges, .atomic, .zoneWideSharing]
        #expect(recordedBefore.reported == .customZoneDefault)
        #expect(RecordZone.Capabilities.customZoneDefault.reported == .customZoneDefault)
        #expect(RecordZone.Capabilities([]).reported == [])
        #expect(RecordZone.Capabilities.fetchChanges.reported == .fetchChanges)
    }
}
