import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

private typealias F = Fixtures

/// The automatic sync driver on a test clock with manual conditions: nothing sleeps for real
/// (Docs/Engine.md, Automatic sync; F5, F17, F59, F70, F81–F90).
@Suite("Automatic: scheduler")
struct SchedulerTests {
    /// A server whose user already has the Notes zone, so sends need no zone change.
    static func serverWithNotes(_ directory: URL) async throws -> SyncServer {
        let server = try makeServer(directory)
        try await OtherDevice(server: server).createZones(F.notes)
        return server
    }

    /// A phone launched on ``serverWithNotes(_:)``, its catch-up fetch over.
    static func caughtUpPhone(_ directory: URL) async throws -> (server: SyncServer, phone: Launch) {
        let server = try await serverWithNotes(directory)
        let phone = try launch(server: server, directory: directory)
        await phone.waitForCatchUp()
        return (server, phone)
    }

    /// A caught-up phone with note A pending and its send scheduled on the clock (due after the
    /// one-second debounce).
    static func phoneWithPendingNote(_ directory: URL) async throws -> (server: SyncServer, phone: Launch) {
        let (server, phone) = try await caughtUpPhone(directory)
        phone.delegate.setTitle(F.a, "A")
        try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
        await phone.waitForScheduler()
        return (server, phone)
    }

    @Test("F5 automaticallySync false: adding changes makes no request at all until a manual send")
    func manualModeMakesNoRequests() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.serverWithNotes(directory)
            let phone = try launch(server: server, directory: directory, automatic: false)
            phone.delegate.setTitle(F.a, "A")
            try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            try phone.engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: F.photos))])
            await phone.clock.advance(by: .seconds(3600))
            await letOthersRun()
            #expect(phone.database.total == 0)
            #expect(phone.clock.sleepingDeadlines.isEmpty)
            #expect(try phone.engine.scheduled().isEmpty)
            #expect(phone.events.withoutStateUpdates.isEmpty)

            try await phone.engine.sendChanges()
            #expect(phone.database.count("modifyRecords") == 1)
            #expect(phone.events.willSendContexts.map(\.reason) == [.manual])
            #expect(try phone.engine.state.pendingRecordZoneChanges.isEmpty)
        }
    }

    @Test("F5 F17 F82 automaticallySync true: ten adds schedule exactly one send, run after the debounce")
    func tenAddsOneSend() async throws {
        try await withTemporaryDirectory { directory in
            let (_, phone) = try await Self.caughtUpPhone(directory)
            #expect(phone.database.count("modifyRecords") == 0)

            let ids = (0..<10).map { F.id("N\($0)") }
            for id in ids {
                phone.delegate.setTitle(id, "note \(id.recordName)")
                try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            }
            #expect(
                try phone.engine.scheduled(.send) == [Scheduled(work: .send, reason: .localChanges, after: .seconds(1))]
            )
            await phone.waitForScheduler()
            #expect(phone.clock.sleepingDeadlines == [TestClock.Instant(offset: .seconds(1))])
            await phone.clock.advance(by: .milliseconds(999))
            await letOthersRun()
            #expect(phone.database.count("modifyRecords") == 0, "not before the debounce")

            await phone.clock.advance(by: .milliseconds(1))
            await waitUntil("the scheduled send ended") { phone.events.count(of: .didSendChanges) == 1 }
            await phone.engine.operations.drain()
            await letOthersRun()
            #expect(phone.events.count(of: .willSendChanges) == 1)
            #expect(phone.database.count("modifyRecords") == 1)
            #expect(Set(phone.events.savedRecordIDs) == Set(ids))
            #expect(try phone.engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(try phone.engine.scheduled(.send).count == 1, "nothing more to send, nothing more scheduled")
            // F59 F70: a scheduled send has reason .scheduled and the default scope.
            #expect(phone.events.willSendContexts.map(\.reason) == [.scheduled])
            #expect(phone.events.willSendContexts.allSatisfy { $0.options.scope == .all })
            #expect(phone.delegate.batchContexts.allSatisfy { $0.reason == .scheduled && $0.options.scope == .all })
            #expect(phone.events.isSequenceOfSyncs)
            try expectProjectionsHold(phone.engine)
        }
    }

    @Test("F24 F82 setting hasPendingUntrackedChanges schedules a send")
    func untrackedFlagSchedulesSend() async throws {
        try await withTemporaryDirectory { directory in
            let (_, phone) = try await Self.caughtUpPhone(directory)
            try phone.engine.state.setHasPendingUntrackedChanges(true)
            #expect(try phone.engine.scheduled(.send).map(\.reason) == [.localChanges])
            await phone.waitForScheduler()
            await phone.clock.advance(by: .seconds(1))
            await waitUntil("the scheduled send ended") { phone.events.count(of: .didSendChanges) == 1 }
            #expect(phone.delegate.batchContexts.count >= 1, "the delegate was asked for a batch")
        }
    }

    @Test("F59 F70 the catch-up fetch at start is .scheduled with the default scope")
    func scheduledFetchContext() async throws {
        try await withTemporaryDirectory { directory in
            let (_, phone) = try await Self.caughtUpPhone(directory)
            #expect(phone.events.willFetchContexts.map(\.reason) == [.scheduled])
            #expect(phone.events.willFetchContexts.allSatisfy { $0.options.scope == .all })
            #expect(phone.delegate.fetchContexts.allSatisfy { $0.reason == .scheduled })
            #expect(try phone.engine.scheduled(.fetch).first == Scheduled(work: .fetch, reason: .catchUp, after: .zero))
        }
    }

    @Test("F84 F90 requestRateLimited with retryAfter 13 s: no retry before 13 s on the clock, one after")
    func retryAfterIsHonoured() async throws {
        try await withTemporaryDirectory { directory in
            let (server, phone) = try await Self.phoneWithPendingNote(directory)

            server.admin.failNextRequests(
                of: "alice", count: 1, with: SyncError(.requestRateLimited, "slow down", retryAfter: .seconds(13)))
            await phone.clock.advance(by: .seconds(1))
            await waitUntil("a retry is scheduled") { try !phone.engine.retries(.send).isEmpty }
            #expect(
                try phone.engine.retries(.send) == [
                    Scheduled(
                        work: .send, reason: .retry(failures: 1, after: .seconds(13), serverRetryAfter: true),
                        after: .seconds(13))
                ])
            #expect(phone.database.count("modifyRecords") == 1)
            #expect(
                try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)], "F89: the change stays pending")
            await phone.waitForScheduler()
            #expect(phone.clock.sleepingDeadlines == [TestClock.Instant(offset: .seconds(14))])

            await phone.clock.advance(by: .milliseconds(12_999))
            await letOthersRun()
            #expect(phone.database.count("modifyRecords") == 1, "no retry before the server's 13 s")
            #expect(phone.clock.sleepingDeadlines == [TestClock.Instant(offset: .seconds(14))])

            await phone.clock.advance(by: .milliseconds(1))
            await waitUntil("the retry sent the change") { try phone.engine.state.pendingRecordZoneChanges.isEmpty }
            await phone.engine.operations.drain()
            #expect(phone.database.count("modifyRecords") == 2)
            #expect(phone.events.savedRecordIDs == [F.a])
            #expect(phone.events.willSendContexts.map(\.reason) == [.scheduled, .scheduled])
            #expect(phone.events.isSequenceOfSyncs)
        }
    }

    @Test("F90 repeated zoneBusy without a hint: the waits grow (exponential backoff with jitter)")
    func zoneBusyBacksOff() async throws {
        try await withTemporaryDirectory { directory in
            let (server, phone) = try await Self.phoneWithPendingNote(directory)

            let failures = 4
            server.admin.failNextRequests(of: "alice", count: failures, with: SyncError(.zoneBusy, "busy"))
            await phone.clock.advance(by: .seconds(1))
            var sleptFrom: [Duration] = []
            var deadlines: [Duration] = []
            for attempt in 1...failures {
                let ok = await waitUntil("retry \(attempt) is scheduled") {
                    try phone.engine.retries(.send).count == attempt
                }
                guard ok else { return }
                await phone.waitForScheduler()
                guard let deadline = phone.clock.sleepingDeadlines.first else { return }
                sleptFrom.append(phone.clock.now.offset)
                deadlines.append(deadline.offset)
                #expect(phone.database.count("modifyRecords") == attempt)
                await phone.clock.advance(to: deadline)
            }
            await waitUntil("the change was sent at last") { try phone.engine.state.pendingRecordZoneChanges.isEmpty }
            #expect(phone.database.count("modifyRecords") == failures + 1)

            let retries = try phone.engine.retries(.send)
            let waits = retries.map(\.after)
            for (index, retry) in retries.enumerated() {
                #expect(retry.reason == .retry(failures: index + 1, after: retry.after, serverRetryAfter: false))
                let base = Duration.seconds(2) * (1 << index)
                #expect(
                    retry.after >= base * 0.8 && retry.after <= base * 1.2,
                    "wait \(index + 1) is 2 s · 2^\(index) ± 20 %")
                // The log keeps the wait in microseconds.
                let slept = deadlines[index] - sleptFrom[index]
                #expect(
                    slept - retry.after < .microseconds(1) && retry.after - slept < .microseconds(1),
                    "the scheduler sleeps the logged wait")
            }
            #expect(zip(waits, waits.dropFirst()).allSatisfy { $0 < $1 }, "growing waits: \(waits)")
        }
    }

    static let transientCodes: [SyncError.Code] = [
        .notAuthenticated, .accountTemporarilyUnavailable, .networkFailure, .networkUnavailable, .requestRateLimited,
        .serviceUnavailable, .zoneBusy,
    ]

    @Test(
        "F89 each transient code keeps the change pending and schedules a retry that sends it",
        arguments: transientCodes)
    func transientCodesAreRetried(_ code: SyncError.Code) async throws {
        try await withTemporaryDirectory { directory in
            let (server, phone) = try await Self.phoneWithPendingNote(directory)

            server.admin.failNextRequests(of: "alice", count: 1, with: SyncError(code, "transient \(code.name)"))
            await phone.clock.advance(by: .seconds(1))
            let retried = await waitUntil("a retry is scheduled") { try phone.engine.retries(.send).count == 1 }
            guard retried else { return }
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)])
            let failed = phone.events.sentRecordZoneChanges.flatMap(\.failedRecordSaves)
            #expect(failed.map(\.error.code) == [code])
            if case .retry(let count, _, let fromServer) = try phone.engine.retries(.send)[0].reason {
                #expect(count == 1 && !fromServer)
            }

            await phone.waitForScheduler()
            guard let deadline = phone.clock.sleepingDeadlines.first else { return }
            await phone.clock.advance(to: deadline)
            await waitUntil("the retry sent the change") { try phone.engine.state.pendingRecordZoneChanges.isEmpty }
            #expect(phone.events.savedRecordIDs == [F.a])
            #expect(phone.events.willSendContexts.map(\.reason) == [.scheduled, .scheduled], "no app action needed")
        }
    }

    @Test("F81 network down: nothing runs and a syncDeferred entry says why; network up: the fetch and the send run")
    func networkGatesSyncs() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.serverWithNotes(directory)
            let conditions = ManualConditions(SyncEngine.Conditions(networkAvailable: false))
            let phone = try launch(server: server, directory: directory, conditions: conditions)
            await waitUntil("the scheduler defers") { try !phone.engine.deferrals().isEmpty }
            phone.delegate.setTitle(F.a, "A")
            try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.a)])
            await phone.clock.advance(by: .seconds(60))
            await letOthersRun()
            #expect(phone.database.total == 0, "no request, not even the account check")
            #expect(try phone.engine.deferrals() == ["network down, power ok"], "deferred once, with the reason")
            #expect(phone.events.withoutStateUpdates.isEmpty)
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(F.a)])

            conditions.conditions = SyncEngine.Conditions(networkAvailable: true)
            await waitUntil("the send ran") { try phone.engine.state.pendingRecordZoneChanges.isEmpty }
            #expect(phone.events.count(of: .willFetchChanges) == 1, "the catch-up fetch ran too")
            #expect(phone.events.savedRecordIDs == [F.a])
            #expect(phone.events.willSendContexts.map(\.reason) == [.scheduled])

            // Down again: the next change waits, with one more explanation.
            conditions.conditions = SyncEngine.Conditions(networkAvailable: true, powerAllowsSync: false)
            phone.delegate.setTitle(F.b, "B")
            try phone.engine.state.add(pendingRecordZoneChanges: [.saveRecord(F.b)])
            await waitUntil("the scheduler defers again") { try phone.engine.deferrals().count == 2 }
            await phone.clock.advance(by: .seconds(60))
            await letOthersRun()
            #expect(try phone.engine.deferrals().last == "network up, power low")
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(F.b)])
        }
    }

    @Test(
        "F86 no account: dormant, only the account is asked; after sign-in an accountChange(signIn) and a sync follow")
    func dormantWithoutAccount() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await Self.serverWithNotes(directory)
            let conditions = ManualConditions()
            let phone = try launch(server: server, directory: directory, conditions: conditions, signedIn: false)
            await waitUntil("the scheduler defers") { try !phone.engine.deferrals().isEmpty }
            await phone.clock.advance(by: .seconds(60))
            await letOthersRun()
            #expect(try phone.engine.deferrals() == ["no account"])
            #expect(phone.database.total == phone.database.count("currentUserRecordID"), "no database request")
            #expect(phone.events.withoutStateUpdates.isEmpty)

            phone.database.signedIn = true
            conditions.signal()
            await waitUntil("the catch-up fetch ran") { phone.events.count(of: .didFetchChanges) == 1 }
            let kinds = phone.events.withoutStateUpdates.kinds
            #expect(kinds.first == .accountChange)
            if case .accountChange(let change) = phone.events.withoutStateUpdates.first {
                #expect(change.changeType == .signIn(currentUser: try server.userRecordID(for: "alice")))
            }
            #expect(kinds.dropFirst().first == .willFetchChanges)
        }
    }

    @Test(
        "F85 F87 first launch against a server with data: a full catch-up fetch and exactly one subscription; a second launch creates none"
    )
    func bootstrapAndSecondLaunch() async throws {
        try await withServer { directory, server in
            let laptop = OtherDevice(server: server)
            try await laptop.createZones(F.notes, F.photos)
            let notes = (0..<3).map { F.id("N\($0)") }
            let photos = (0..<3).map { F.id("P\($0)", F.photos) }
            try await laptop.write(notes + photos)

            do {
                let first = try launch(server: server, directory: directory)
                await first.waitForCatchUp()
                #expect(first.database.databaseTokens.first == .some(nil), "the first fetch starts from no token")
                #expect(Set(first.events.fetchedRecordIDs) == Set(notes + photos), "everything is fetched")
                #expect(first.events.willFetchContexts.map(\.reason) == [.scheduled])
                #expect(first.database.count("modifySubscriptions") == 1)
                #expect(try await laptop.subscriptions() == [SyncEngine.defaultSubscriptionID])
                #expect(try first.engine.ensuredSubscriptions() == [SyncEngine.defaultSubscriptionID])
                #expect(first.events.isSequenceOfSyncs)
            }

            let second = try launch(server: server, directory: directory)
            await second.waitForCatchUp()
            #expect(second.database.count("modifySubscriptions") == 0, "the subscription exists: none created")
            #expect(try await laptop.subscriptions() == [SyncEngine.defaultSubscriptionID])
            #expect(
                second.database.databaseTokens.first != .some(nil), "the catch-up fetch resumes from the stored token")
            #expect(second.events.fetchedRecordIDs.isEmpty, "nothing new, nothing delivered again")
            #expect(second.events.willFetchContexts.map(\.reason) == [.scheduled])
        }
    }
}
