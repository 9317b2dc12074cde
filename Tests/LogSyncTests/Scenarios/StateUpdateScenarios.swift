import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncTestKit
import Testing

@testable import LogSync

/// `stateUpdate` after the app's own edits, and the delegate's type (F15, F26, F27, F34).
@Suite("Scenario: state updates")
struct StateUpdateScenarios {
    static let notes = RecordZone.ID(zoneName: "Notes")

    // F26, F34: no network involved; the event reflects the edit.
    @Test("F26 an app's add produces a stateUpdate whose offset covers the add")
    func addProducesStateUpdate() async throws {
        try await withDevice("A") { _, phone in
            let note = Record.ID(recordName: "n", zoneID: Self.notes)
            try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(note)])
            let added = try phone.engine.deviceLog.log.lastOffset
            var update: SyncEngine.Event.StateUpdate?
            for _ in 0..<100_000 where update == nil {
                await Task.yield()
                update =
                    phone.events.compactMap { event -> SyncEngine.Event.StateUpdate? in
                        if case .stateUpdate(let update) = event { update } else { nil }
                    }.last
            }
            let offset = try #require(update?.offset)
            #expect(offset >= added)
            // The state at that offset holds the save (F34: the newest update reflects every edit).
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(note)])
            #expect(phone.syncEvents.isEmpty)
        }
    }

    // F26: many edits in a row give at most as many updates, and the last covers them all.
    @Test("F26 a burst of edits is coalesced into fewer stateUpdates, the last covering every edit")
    func burstCoalesced() async throws {
        try await withDevice("A") { _, phone in
            for i in 0..<50 {
                try phone.engine.state.add(pendingRecordZoneChanges: [
                    .saveRecord(Record.ID(recordName: "n\(i)", zoneID: Self.notes))
                ])
            }
            let last = try phone.engine.deviceLog.log.lastOffset
            var offsets: [LogOffset] = []
            for _ in 0..<100_000 where offsets.last != last {
                await Task.yield()
                offsets = phone.events.compactMap { event -> LogOffset? in
                    if case .stateUpdate(let update) = event { update.offset } else { nil }
                }
            }
            #expect(offsets.last == last)
            #expect(offsets.count <= 50)
            #expect(offsets == offsets.sorted())
        }
    }

    // F15: the delegate protocol is class-bound and Sendable; a final class and an actor conform.
    // (That a struct cannot conform is a compile-time fact: `SyncEngineDelegate: AnyObject`.)
    @Test("F15 a final class and an actor can be delegates")
    func delegateTypes() async throws {
        actor ActorDelegate: SyncEngineDelegate {
            func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}
            func nextRecordZoneChangeBatch(
                _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
            ) async -> SyncEngine.RecordZoneChangeBatch? { nil }
        }
        let delegates: [any SyncEngineDelegate] = [IdleDelegate.shared, ActorDelegate()]
        #expect(delegates.count == 2)
        #expect((SyncEngineDelegate.self as Any.Type) is AnyObject.Type == false)  // a protocol, not a class
        #expect(delegates.allSatisfy { type(of: $0) is AnyObject.Type })
    }
}
