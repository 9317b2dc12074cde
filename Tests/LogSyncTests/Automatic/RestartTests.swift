import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

private typealias F = Fixtures

/// What a launch finds in the log of the one before (F29, F88): pending work is scheduled, and
/// fetched changes the delegate may not have handled are delivered again.
@Suite("Automatic: restart")
struct RestartTests {
    /// The laptop writes note A to the Notes zone, then a first manual launch fetches
    /// `fetches` times (the later fetches find nothing new) and is closed.
    static func firstLaunchFetchedA(_ server: SyncServer, _ directory: URL, fetches: Int) async throws {
        let laptop = OtherDevice(server: server)
        try await laptop.createZones(F.notes)
        try await laptop.write([F.a])
        let first = try launch(server: server, directory: directory, automatic: false)
        for _ in 0..<fetches { try await first.engine.fetchChanges() }
        #expect(first.events.fetchedRecordIDs == [F.a])
    }

    @Test("F88 pending changes left in the log schedule a send at start, without a new add; reopening costs no replay")
    func pendingChangesSurviveRestart() async throws {
        try await withServer { directory, server in
            try await OtherDevice(server: server).createZones(F.notes)
            do {
                let first = try launch(server: server, directory: directory, automatic: false)
                try first.engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a), .saveRecord(F.b)])
                await first.engine.operations.drain()
                #expect(first.database.total == 0)
            }

            let delegate = TestDevice.Delegate(policy: .scripted)
            delegate.setTitle(F.a, "A")
            delegate.setTitle(F.b, "B")
            let second = try launch(server: server, directory: directory, delegate: delegate)
            #expect(
                second.appliedAtOpen == [DeviceIndex.projectionName: second.lastOffsetAtOpen],
                "the projection is current: no replay")
            let start = second.lastOffsetAtOpen.next
            #expect(
                try second.engine.scheduled(.send, from: start) == [
                    Scheduled(work: .send, reason: .localChanges, after: .seconds(1))
                ])
            #expect(
                !(try second.engine.logEntries(from: start).contains {
                    if case .pendingRecordZoneChangesAdded = $0 { true } else { false }
                }))
            await second.waitForCatchUp()
            await second.waitForScheduler()
            await second.clock.advance(by: .seconds(1))
            await waitUntil("the pending changes were sent") {
                try second.engine.state.pendingRecordZoneChanges.isEmpty
            }
            #expect(Set(second.events.savedRecordIDs) == [F.a, F.b])
            #expect(second.events.willSendContexts.map(\.reason) == [.scheduled])
            #expect(second.database.count("modifyRecords") == 1)
        }
    }

    @Test("F88 nothing pending: a restart schedules no send")
    func nothingPendingNoSend() async throws {
        try await withServer { directory, server in
            do {
                let first = try launch(server: server, directory: directory)
                await first.waitForCatchUp()
            }
            let second = try launch(server: server, directory: directory)
            await second.waitForCatchUp()
            #expect(try second.engine.scheduled(.send, from: second.lastOffsetAtOpen.next).isEmpty)
            #expect(second.events.count(of: .willSendChanges) == 0)
        }
    }

    @Test(
        "F29 stopped between a fetched page and its handling: the next launch delivers it again, framed by will/did; nothing lost"
    )
    func undeliveredChangesAreRedelivered() async throws {
        try await withServer { directory, server in
            let laptop = OtherDevice(server: server)
            try await laptop.createZones(F.notes)
            try await laptop.write([F.a, F.b, F.c])

            // Launch 1 stops inside the handling of the zone's page.
            let stalling = StallingDelegate()
            let log1 = try DeviceLog(
                directory: directory.appendingPathComponent("phone", isDirectory: true),
                options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20))
            var configuration = SyncEngine.Configuration(
                database: server.database(for: "alice", device: "phone"), deviceLog: log1, delegate: stalling)
            configuration.automaticallySync = false
            let engine1 = try SyncEngine(configuration)
            let fetchEnded = Mutex(false)
            let fetch = Task {
                defer { fetchEnded.withLock { $0 = true } }
                try await engine1.fetchChanges()
            }
            defer { stalling.release() }
            guard await waitUntil("launch 1 holds the fetched page", { stalling.isStalled }) else { return }
            let (delivered, fetched) = try log1.read { (try $0.deliveredOffset(), try $0.fetchedThrough()) }
            let fetchedOffset = try #require(fetched)
            #expect((delivered ?? .zero) < fetchedOffset, "the page is in the log, its delivery is not")
            #expect(stalling.sink.events.fetchedRecordIDs.count == 3)

            // Launch 2 on the same log, with a new delegate: the page comes again.
            let phone = try launch(server: server, directory: directory, automatic: false)
            await waitUntil("the undelivered changes were delivered again") {
                phone.events.count(of: .didFetchChanges) == 1
            }
            let events = phone.events
            #expect(Set(events.fetchedRecordIDs) == [F.a, F.b, F.c])
            #expect(events.fetchedRecordIDs.count == 3)
            #expect(events.isFetchSequence, "framed by will/did: \(events.kinds)")
            #expect(events.zonesFetched == [F.notes])
            #expect(events.willFetchContexts.map(\.reason) == [.scheduled])
            #expect(phone.database.total == 0, "delivered from the log, not fetched again")
            let deliveredNow = try phone.engine.deviceLog.read { try $0.deliveredOffset() }
            #expect((deliveredNow ?? .zero) >= fetchedOffset)

            // A third launch finds nothing left to deliver.
            let third = try launch(server: server, directory: directory, automatic: false)
            await letOthersRun()
            await third.engine.operations.drain()
            #expect(third.events.isEmpty)

            stalling.release()
            await waitUntil("launch 1's fetch ended") { fetchEnded.withLock { $0 } }
            _ = await fetch.result
        }
    }

    @Test("F5 F29 a restart after a fetch that found nothing new delivers no event (no empty will/did fetch)")
    func emptyFetchIsNotRedelivered() async throws {
        try await withServer { directory, server in
            try await Self.firstLaunchFetchedA(server, directory, fetches: 2)  // the second: one empty database page
            let second = try launch(server: server, directory: directory, automatic: false)
            await letOthersRun()
            await second.engine.operations.drain()
            #expect(second.events.isEmpty, "a manual engine delivered \(second.events.kinds) at open")
            let (delivered, fetched) = try second.engine.deviceLog.read {
                (try $0.deliveredOffset(), try $0.fetchedThrough())
            }
            #expect(delivered == fetched, "the mark caught up, so the next open costs nothing")
        }
    }

    @Test("F29 everything delivered: a restart delivers nothing again")
    func deliveredChangesAreNotRedelivered() async throws {
        try await withServer { directory, server in
            try await Self.firstLaunchFetchedA(server, directory, fetches: 1)
            let second = try launch(server: server, directory: directory, automatic: false)
            #expect(second.appliedAtOpen == [DeviceIndex.projectionName: second.lastOffsetAtOpen])
            await letOthersRun()
            await second.engine.operations.drain()
            #expect(second.events.isEmpty)
        }
    }
}
