import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Testing

/// TestDevice on its own: the notes app every scenario and the simulation are made of.
@Suite("Test devices")
struct TestDeviceTests: NoteIDs {
    static var groceries: Record.ID { note("groceries") }

    @Test("A note written on one device reaches the other, and the edit counts as acknowledged")
    func writeReachesOtherDevice() async throws {
        try await withDevices("phone", "laptop") { _, phone, laptop in
            try phone.createZone(Self.notes)
            try phone.write(Self.groceries, "Milk")
            #expect(phone.unacknowledgedEdits[Self.groceries] == ["title": "Milk"])

            try await phone.sync()
            try await laptop.sync()
            #expect(laptop.title(Self.groceries) == "Milk")
            #expect(phone.unacknowledgedEdits.isEmpty)
            #expect(phone.tally.acknowledged == 1)
            #expect(phone.syncEvents.contains { $0.kind == .sentRecordZoneChanges })
            try phone.expectProjectionsHold()
            try laptop.expectProjectionsHold()
        }
    }

    @Test("A conflict is settled by the policy's merge, sent again on the server's record, and won")
    func conflictMergedByPolicy() async throws {
        try await withDevices("phone", "laptop") { _, phone, laptop in
            try await phone.seedNote(Self.groceries, "Milk", in: Self.notes, syncing: laptop)

            laptop.resolveConflicts { local, server in "\(server) + \(local)" }
            try phone.write(Self.groceries, "Bread")
            try laptop.write(Self.groceries, "Eggs")
            try await phone.sync()
            let conflict = await #expect(throws: SyncError.self) { try await laptop.engine.sendChanges() }
            #expect(conflict?.partialErrors[.record(Self.groceries)]?.code == .serverRecordChanged)
            try await laptop.sync()  // sends the merge, queued again on the server's record
            try await phone.sync()

            #expect(laptop.tally.conflictsWon == 1)
            #expect(laptop.title(Self.groceries) == "Bread + Eggs")
            #expect(phone.title(Self.groceries) == "Bread + Eggs")
            #expect(laptop.unacknowledgedEdits.isEmpty)
        }
    }

    @Test("startEngine relaunches the app on the same log: its notes and pending saves survive")
    func relaunchKeepsNotesAndPendingSaves() async throws {
        try await withDevices("phone", "laptop") { _, phone, laptop in
            try phone.createZone(Self.notes)
            try phone.write(Self.groceries, "Milk")
            let before = phone.engine
            try phone.startEngine()
            #expect(phone.engine !== before)
            #expect(phone.title(Self.groceries) == "Milk")
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(Self.groceries)])

            try await phone.sync()
            try await laptop.sync()
            #expect(laptop.title(Self.groceries) == "Milk")
        }
    }

    @Test("waitForEvents returns at once when the events so far already satisfy it")
    func waitForEventsAlreadySatisfied() async throws {
        try await withDevice("phone") { _, phone in
            try phone.createZone(Self.notes)
            try await phone.sync()
            try await phone.waitForEvents("a whole send", limit: .seconds(5)) { events in
                events.contains { $0.kind == .didSendChanges }
            }
            phone.clearEvents()
            #expect(phone.events.isEmpty)
        }
    }

    @Test("An engine with IdleDelegate sends nothing: its pending save stays pending")
    func idleDelegateSendsNothing() async throws {
        try await withServer { directory, server in
            let log = try DeviceLog(
                directory: directory.appendingPathComponent("idle"), options: LogEnvironment.Options(durability: .fast))
            var configuration = SyncEngine.Configuration(
                database: server.database(for: "alice"), deviceLog: log, delegate: IdleDelegate.shared)
            configuration.automaticallySync = false
            let engine = try SyncEngine(configuration)
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(Self.groceries)])
            try await engine.sendChanges()
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(Self.groceries)])
            let zones = try await server.database(for: "alice").fetchAllZones()
            #expect(zones.allSatisfy { $0.zoneID != Self.notes })
        }
    }

    // F12, F21, F42, F61
    @Test(
        "A scripted device reacts to nothing: a failed save is not queued again, a save of a note it lacks stays pending, fetched notes are not taken; queued batches go one per call, then nil; every call's context is kept"
    )
    func scriptedPolicyReactsToNothing() async throws {
        try await withServer { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory, policy: .scripted)
            let lost = Self.note("lost", RecordZone.ID(zoneName: "Missing"))  // a zone never created
            let unknown = Self.note("unknown")
            try phone.write(lost, "Lost")
            try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(unknown)])
            let error = await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            #expect(error?.partialErrors[.record(lost)]?.code == .zoneNotFound)
            // A reacting device would queue the zone and the save again, and drop the unknown save.
            #expect(try phone.engine.state.pendingDatabaseChanges == [])
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(unknown)])

            try phone.createZone(Self.notes)
            phone.queue([SyncEngine.RecordZoneChangeBatch(recordsToSave: [newNote(Self.groceries, "Milk")])])
            phone.clearEvents()
            let asked = phone.batchContexts.count
            try await phone.engine.sendChanges()
            #expect(phone.batchContexts.count == asked + 2, "the queued batch, then nil")
            let send = try #require(phone.events.willSendContexts.first)
            #expect(phone.batchContexts.dropFirst(asked).allSatisfy { $0 == send })
            #expect(phone.events.sentRecordZoneChanges.flatMap(\.savedRecords).map(\.recordID) == [Self.groceries])

            try await phone.engine.fetchChanges()
            let fetch = try #require(phone.events.willFetchContexts.first)
            #expect(!phone.fetchContexts.isEmpty)
            #expect(phone.fetchContexts.allSatisfy { $0 == fetch })
            #expect(
                phone.events.fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID) == [
                    Self.groceries
                ])
            #expect(phone.notes == [lost: "Lost"])
            try phone.expectProjectionsHold()
        }
    }
}

/// TestClock: time that moves only when the test moves it.
@Suite("Test clock")
struct TestClockTests {
    @Test("A sleeper wakes when the clock is advanced to its deadline, not before")
    func sleeperWakesAtDeadline() async throws {
        let clock = TestClock()
        let start = clock.now
        let woke = Signal()
        let sleeper = Task {
            try await clock.sleep(until: start.advanced(by: .seconds(10)))
            await woke.fire()
        }
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleepingDeadlines == [start.advanced(by: .seconds(10))])

        await clock.advance(by: .seconds(9))
        #expect(clock.sleepingDeadlines.count == 1, "9 s is not yet the deadline")
        await clock.advance(by: .seconds(1))
        await woke.wait()
        try await sleeper.value
        #expect(clock.now == start.advanced(by: .seconds(10)))
        #expect(clock.sleepingDeadlines.isEmpty)
    }

    @Test("A cancelled sleeper throws CancellationError and leaves the clock")
    func cancelledSleeper() async throws {
        let clock = TestClock()
        let sleeper = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(60))) }
        #expect(await clock.waitForSleepers(count: 1))
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleepingDeadlines.isEmpty)
    }
}
