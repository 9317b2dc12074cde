import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Testing

@testable import LogSync

private typealias F = Fixtures

/// Push hints and the database subscription (F5, F6, F25, F83, F111, F113, F115).
@Suite("Automatic: push")
struct PushTests {
    /// The laptop, which has created the Notes zone, and a phone launched after it, its catch-up
    /// fetch over.
    static func laptopAndPhone(
        _ server: SyncServer, _ directory: URL, conditions: ManualConditions = ManualConditions()
    ) async throws -> (laptop: OtherDevice, phone: Launch) {
        let laptop = OtherDevice(server: server)
        try await laptop.createZones(F.notes)
        let phone = try launch(server: server, directory: directory, conditions: conditions)
        await phone.waitForCatchUp()
        return (laptop, phone)
    }

    @Test("F5 F25 F115 manual mode: a push lists the zone as unfetched and makes no request; fetchChanges drains it")
    func pushInManualMode() async throws {
        try await withServer { directory, server in
            let laptop = OtherDevice(server: server)
            try await laptop.createZones(F.notes)
            try await laptop.saveSubscription(SyncEngine.defaultSubscriptionID)
            let phone = try launch(server: server, directory: directory, automatic: false)
            phone.delegate.setTitle(F.b, "B")
            try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.b)])

            try await laptop.write([F.a])
            await waitUntil("the push arrived") {
                try phone.engine.state.zoneIDsWithUnfetchedServerChanges == [F.notes]
            }
            await phone.clock.advance(by: .seconds(3600))
            await letOthersRun()
            #expect(try phone.engine.pushesReceived() == [F.notes])
            #expect(phone.database.total == 0, "neither the push nor the add made a request")
            #expect(phone.events.withoutStateUpdates.isEmpty)
            #expect(try phone.engine.scheduled().isEmpty)

            try await phone.engine.fetchChanges()
            #expect(phone.events.fetchedRecordIDs == [F.a])
            #expect(try phone.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
            #expect(phone.events.willFetchContexts.map(\.reason) == [.manual])
        }
    }

    @Test("F83 F115 automatic mode: a push schedules a fetch at once, with reason .scheduled")
    func pushSchedulesFetch() async throws {
        try await withServer { directory, server in
            let (laptop, phone) = try await Self.laptopAndPhone(server, directory)
            let before = try phone.engine.deviceLog.log.lastOffset
            #expect(phone.events.fetchedRecordIDs.isEmpty)

            try await laptop.write([F.a])
            await waitUntil("the pushed change was fetched") { phone.events.fetchedRecordIDs == [F.a] }
            #expect(try phone.engine.pushesReceived() == [F.notes])
            #expect(
                try phone.engine.scheduled(.fetch, from: before.next).first
                    == Scheduled(work: .fetch, reason: .pushHint, after: .zero))
            #expect(phone.events.willFetchContexts.map(\.reason) == [.scheduled, .scheduled])
            #expect(phone.events.willFetchContexts.allSatisfy { $0.options.scope == .all })
            await phone.engine.operations.drain()
            #expect(try phone.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
            #expect(phone.database.count("modifyRecords") == 0)
            #expect(phone.events.isSequenceOfSyncs)
        }
    }

    @Test("F87 a change made while no engine ran (its push lost) is fetched by the catch-up at the next launch")
    func pushBeforeEngineExistsIsNotLost() async throws {
        try await withServer { directory, server in
            // A first launch catches up and is closed.
            let laptop = try await Self.laptopAndPhone(server, directory).laptop
            try await laptop.write([F.a])  // nobody listens: the hint goes nowhere
            let second = try launch(server: server, directory: directory)
            await second.waitForCatchUp()
            #expect(second.events.fetchedRecordIDs == [F.a])
            #expect(try second.engine.pushesReceived().isEmpty)
            #expect(second.events.willFetchContexts.map(\.reason) == [.scheduled])
        }
    }

    @Test(
        "F84 F89 a pushed fetch that fails transiently is retried after the server's retry-after; the zone stays unfetched meanwhile"
    )
    func failedFetchIsRetried() async throws {
        try await withServer { directory, server in
            let conditions = ManualConditions()
            let (laptop, phone) = try await Self.laptopAndPhone(server, directory, conditions: conditions)

            // Offline while the push arrives, so that the failure is injected before the fetch.
            conditions.conditions = SyncEngine.Conditions(networkAvailable: false)
            await waitUntil("the scheduler defers") { try !phone.engine.deferrals().isEmpty }
            try await laptop.write([F.a])
            await waitUntil("the push arrived") { try phone.engine.pushesReceived() == [F.notes] }
            server.admin.failNextRequests(
                of: "alice", count: 1,
                with: SyncError(.serviceUnavailable, "down for a moment", retryAfter: .seconds(5)))
            conditions.conditions = SyncEngine.Conditions(networkAvailable: true)
            let retried = await waitUntil("a fetch retry is scheduled") { try !phone.engine.retries(.fetch).isEmpty }
            guard retried else { return }
            #expect(try phone.engine.retries(.fetch).map(\.after) == [.seconds(5)])
            #expect(phone.events.fetchedRecordIDs.isEmpty)
            #expect(try phone.engine.state.zoneIDsWithUnfetchedServerChanges == [F.notes])
            await phone.waitForScheduler()
            #expect(phone.clock.sleepingDeadlines == [TestClock.Instant(offset: .seconds(5))])
            await phone.clock.advance(by: .milliseconds(4_999))
            await letOthersRun()
            #expect(phone.events.fetchedRecordIDs.isEmpty, "not before the retry-after")

            await phone.clock.advance(by: .milliseconds(1))
            await waitUntil("the retried fetch brought the change") { phone.events.fetchedRecordIDs == [F.a] }
            await phone.engine.operations.drain()
            #expect(try phone.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
            #expect(phone.events.isSequenceOfSyncs)
        }
    }

    @Test("F113 100 writes: hints coalesce, yet every change is fetched")
    func hundredWritesAllFetched() async throws {
        try await withServer { directory, server in
            let (laptop, phone) = try await Self.laptopAndPhone(server, directory)

            let ids = (0..<100).map { F.id("W\($0)") }
            for id in ids { try await laptop.write([id]) }
            await waitUntil("all 100 changes were fetched", seconds: 60) {
                Set(phone.events.fetchedRecordIDs) == Set(ids)
            }
            // The server hands hints on after the commits' answers (F154): the last may come
            // after the fetch that brought its change, and prompt one more.
            await waitUntil("no zone is left unfetched", seconds: 60) {
                (try? phone.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty) == true
            }
            await phone.engine.operations.drain()
            let pushes = try phone.engine.pushesReceived().count
            let fetches = phone.events.count(of: .willFetchChanges)
            #expect(pushes >= 1 && pushes <= 100)
            #expect(fetches <= pushes + 1, "at most one fetch per hint, plus the catch-up")
            #expect(try phone.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
            #expect(phone.events.isSequenceOfSyncs)
            try expectProjectionsHold(phone.engine)
        }
    }

    @Test("F6 F111 nil subscriptionID: exactly one subscription across restarts and devices")
    func oneSubscriptionAcrossRestarts() async throws {
        try await withServer { directory, server in
            let laptop = OtherDevice(server: server)
            var created = 0
            for _ in 0..<3 {
                let phone = try launch(server: server, directory: directory)
                await phone.waitForCatchUp()
                created += phone.database.count("modifySubscriptions")
            }
            let tablet = try launch("tablet", server: server, directory: directory)
            await tablet.waitForCatchUp()
            created += tablet.database.count("modifySubscriptions")
            #expect(created == 1)
            #expect(try await laptop.subscriptions() == [SyncEngine.defaultSubscriptionID])
            #expect(
                try tablet.engine.ensuredSubscriptions() == [SyncEngine.defaultSubscriptionID], "the tablet found it")
        }
    }

    @Test("F6 F111 a configured \"legacy-sub\" that exists: nothing is created, and its hints trigger fetches")
    func legacySubscription() async throws {
        try await withServer { directory, server in
            let laptop = OtherDevice(server: server)
            try await laptop.createZones(F.notes)
            try await laptop.saveSubscription("legacy-sub")
            let phone = try launch(server: server, directory: directory, subscriptionID: "legacy-sub")
            await phone.waitForCatchUp()
            #expect(phone.database.count("modifySubscriptions") == 0)
            #expect(try await laptop.subscriptions() == ["legacy-sub"])
            #expect(try phone.engine.ensuredSubscriptions() == ["legacy-sub"])

            try await laptop.write([F.a])
            await waitUntil("the legacy subscription's hint triggered a fetch") {
                phone.events.fetchedRecordIDs == [F.a]
            }
            #expect(try phone.engine.pushesReceived() == [F.notes])
            #expect(phone.events.willFetchContexts.map(\.reason) == [.scheduled, .scheduled])
        }
    }

    @Test("F111 a subscription deleted on the server is re-created at the next launch")
    func deletedSubscriptionIsRecreated() async throws {
        try await withServer { directory, server in
            let laptop = OtherDevice(server: server)
            try await laptop.createZones(F.notes)
            do {
                let first = try launch(server: server, directory: directory)
                await first.waitForCatchUp()
                #expect(first.database.count("modifySubscriptions") == 1)
            }
            try await laptop.deleteSubscription(SyncEngine.defaultSubscriptionID)
            #expect(try await laptop.subscriptions().isEmpty)

            let second = try launch(server: server, directory: directory)
            await second.waitForCatchUp()
            #expect(second.database.count("modifySubscriptions") == 1)
            #expect(try await laptop.subscriptions() == [SyncEngine.defaultSubscriptionID])

            // And pushes come again.
            try await laptop.write([F.a])
            await waitUntil("the re-created subscription's hint triggered a fetch") {
                second.events.fetchedRecordIDs == [F.a]
            }
        }
    }
}
