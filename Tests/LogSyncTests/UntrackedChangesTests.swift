import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSync

/// `hasPendingUntrackedChanges` and `zoneIDsWithUnfetchedServerChanges` (F24, F25).
@Suite("State flags")
struct UntrackedChangesTests {
    @Test("F24: hasPendingUntrackedChanges round-trips through the log")
    func untrackedRoundTrip() async throws {
        try withEngine { engine, directory in
            #expect(try engine.state.hasPendingUntrackedChanges == false)
            try engine.state.setHasPendingUntrackedChanges(true)
            #expect(try engine.state.hasPendingUntrackedChanges == true)
            try engine.state.setHasPendingUntrackedChanges(true)
            #expect(try engine.state.hasPendingUntrackedChanges == true)
            try engine.state.setHasPendingUntrackedChanges(false)
            #expect(try engine.state.hasPendingUntrackedChanges == false)
            #expect(try engine.deviceLog.log.entryCount == 3)
            // It does not touch the pending lists.
            #expect(try engine.state.pendingRecordZoneChanges.isEmpty)
        }
    }

    @Test("F25: zoneIDsWithUnfetchedServerChanges is empty until fetch fills it")
    func unfetchedZonesEmpty() async throws {
        try withEngine { engine, directory in
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(Fixtures.a)])
            #expect(try engine.state.zoneIDsWithUnfetchedServerChanges == [])
        }
    }
}
