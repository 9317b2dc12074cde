import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync

/// Accounts (F30, F78, F86, F104–F110) with a ``SimulatedAccount``: manual engines where a
/// manual call shows the behaviour, automatic ones on a `TestClock` where the engine must act
/// on its own; never a sleep, every wait bounded.
@Suite("Accounts")
struct AccountTests {
    let a = Fixtures.a
    let b = Fixtures.b
    let c = Fixtures.c

    // MARK: F86, F104: created signed out

    @Test(
        "F86, F104: an engine created signed out makes no request; after sign-in, accountChange(signIn), then it syncs")
    func dormantUntilSignIn() async throws {
        try await withAccountWorld(signedIn: nil) { world in
            let clock = TestClock()
            let app = try world.device("phone", clock: clock)
            let engine = app.engine

            // Dormant: the scheduler asked for the account and found none.
            #expect(await eventually { engine.knownAccountStatus == .noAccount })
            try app.writeNote(a, "written signed out")
            for _ in 0..<30 { await clock.advance(by: .seconds(10)) }
            #expect(world.account.requestsForwarded == 0)
            #expect(world.account.requestsRefused == 0, "the engine must not even try while signed out")
            #expect(app.events.withoutStateUpdates.isEmpty)
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(a)], "nothing lost, nothing sent")

            // Sign in: one accountChange(signIn), then the catch-up fetch and the send.
            world.account.signIn("alice")
            #expect(await eventually(advancing: clock) { app.events.didSendContexts.count >= 1 })
            let alice = try world.userRecordID("alice")
            #expect(app.accountChanges == [.signIn(currentUser: alice)])
            let events = app.events.withoutStateUpdates
            let change = try #require(events.firstIndex(of: .accountChange))
            let fetch = try #require(events.firstIndex(of: .willFetchChanges))
            #expect(change == 0 && change < fetch, "the account change comes before any sync: \(events.kinds)")
            #expect(app.events.willFetchContexts.first?.reason == .scheduled)
            // The sample's policy re-added the note on signIn (F106), and it went to alice.
            #expect(try await world.serverNotes("alice") == [a: "written signed out"])
            #expect(try engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(world.account.requestsRefused == 0)
            try expectProjectionsHold(engine)
        }
    }

    @Test(
        "F86, F105, F106: automatic: a switch while running gives switchAccounts, then the new account is fetched and its pushes come"
    )
    func automaticSwitchFetchesNewAccount() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            try await world.seedServer("alice", [(a, "alice's")])
            try await world.seedServer("bob", [(b, "bob's")])
            let clock = TestClock()
            let app = try world.device("phone", clock: clock)
            let engine = app.engine
            #expect(await eventually(advancing: clock) { app.notes == [a: "alice's"] })

            // The switch, with no manual call: the event, then bob's data.
            world.account.switch(to: "bob")
            #expect(
                await eventually(advancing: clock) { app.notes == [b: "bob's"] },
                "bob's notes are fetched: \(app.notes)")
            let (alice, bob) = (try world.userRecordID("alice"), try world.userRecordID("bob"))
            #expect(app.accountChanges == [.switchAccounts(previousUser: alice, currentUser: bob)])

            // Bob's other device writes: the push (bob's, through the account) brings it. The
            // engine made sure bob's database has its subscription after that first fetch.
            let bobsDatabase = world.server.database(for: "bob")
            #expect(try await eventually(advancing: clock) { try await !bobsDatabase.allSubscriptions().isEmpty })
            try await world.seedServer("bob", [(c, "from bob's laptop")])
            #expect(
                await eventually(advancing: clock) { app.notes[c] == "from bob's laptop" },
                "a push hint of bob's database triggers a fetch")
            // Alice's writes no longer reach this device.
            try await world.seedServer("alice", [(Fixtures.x, "alice, elsewhere")])
            for _ in 0..<10 { await clock.advance(by: .seconds(10)) }
            #expect(app.notes[Fixtures.x] == nil)

            // Sign-out while running: the event, the app deletes its data, no request refused.
            world.account.signOut()
            #expect(await eventually(advancing: clock) { app.accountChanges.count == 2 })
            #expect(app.accountChanges.last == .signOut(previousUser: bob))
            #expect(app.notes.isEmpty)
            for _ in 0..<10 { await clock.advance(by: .seconds(10)) }
            #expect(world.account.requestsRefused == 0)
            var recorder = EventRecorder(name: "phone")
            recorder.record(app.events)
            recorder.finish()
            #expect(recorder.isValid, "\(recorder.report() ?? "")")
            try expectProjectionsHold(engine)
        }
    }

    // MARK: F78

    @Test("F78: signed out, fetchChanges and sendChanges throw notAuthenticated, with no request and no sync events")
    func noAccountShortCircuits() async throws {
        try await withAccountWorld(signedIn: nil) { world in
            let app = try world.device("phone")
            let engine = app.engine
            try app.writeNote(a, "offline")

            let fetchError = await #expect(throws: SyncError.self) { try await engine.fetchChanges() }
            #expect(fetchError?.code == .notAuthenticated)
            let sendError = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(sendError?.code == .notAuthenticated)
            // Twice, to be sure a known "no account" short-circuits too.
            await #expect(throws: SyncError.self) { try await engine.fetchChanges() }

            #expect(world.account.requestsForwarded == 0)
            #expect(world.account.requestsRefused == 0)
            #expect(app.events.withoutStateUpdates.isEmpty, "no fetch or send events: \(app.events.kinds)")
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(a)])
            try expectProjectionsHold(engine)
        }
    }

    // MARK: F105, F106

    @Test(
        "F105, F106: signOut, signIn and switchAccounts each give their case; pending is empty until the app re-adds, which goes to the new account"
    )
    func eachTransition() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            let app = try world.device("phone")
            let engine = app.engine
            let pending = PendingAtAccountChange(app)
            let (alice, bob, carol) = (
                try world.userRecordID("alice"), try world.userRecordID("bob"), try world.userRecordID("carol")
            )

            // Alice: the first account the log sees is recorded without an event (spec choice).
            try app.writeNote(a, "alice's")
            try await engine.sendChanges()
            #expect(app.accountChanges.isEmpty)
            #expect(try await world.serverNotes("alice") == [a: "alice's"])

            // Sign out: signOut(alice), before any sync; the app deletes its data.
            world.account.signOut()
            try app.writeNote(b, "queued for alice, then signed out")
            app.clearEvents()
            let error = await #expect(throws: SyncError.self) { try await engine.fetchChanges() }
            #expect(error?.code == .notAuthenticated)
            #expect(app.accountChanges == [.signOut(previousUser: alice)])
            #expect(app.events.withoutStateUpdates.kinds == [.accountChange], "no sync while signed out")
            #expect(app.notes.isEmpty)
            #expect(try engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(try engine.state.pendingDatabaseChanges.isEmpty)

            // Written while signed out, then bob signs in: signIn(bob). The engine's pending is
            // empty when the event arrives; the sample re-adds its zone and notes, and they go
            // to bob, not alice.
            try app.writeNote(c, "written signed out")
            world.account.signIn("bob")
            app.clearEvents()
            try await engine.sendChanges()
            #expect(app.accountChanges == [.signIn(currentUser: bob)])
            #expect(pending.counts.last.map { [$0.records, $0.zones] } == [0, 0])
            #expect(app.events.withoutStateUpdates.first?.kind == .accountChange)
            #expect(try await world.serverNotes("bob") == [c: "written signed out"])
            #expect(try await world.serverNotes("alice") == [a: "alice's"])
            #expect(try engine.state.pendingRecordZoneChanges.isEmpty)

            // Switch to carol: switchAccounts(bob, carol); the app deletes bob's data; carol's
            // database is empty and stays so.
            world.account.switch(to: "carol")
            app.clearEvents()
            try await engine.fetchChanges()
            #expect(app.accountChanges == [.switchAccounts(previousUser: bob, currentUser: carol)])
            #expect(app.events.withoutStateUpdates.first?.kind == .accountChange)
            #expect(app.notes.isEmpty)
            #expect(try await world.serverNotes("carol") == [:])
            #expect(try engine.deviceLog.read { try $0.knownZoneIDs() }.isEmpty, "bob's zones are forgotten")

            // And back to bob: a full fetch (tokens were wiped) brings bob's notes.
            world.account.switch(to: "bob")
            app.clearEvents()
            try await engine.fetchChanges()
            #expect(app.accountChanges == [.switchAccounts(previousUser: carol, currentUser: bob)])
            #expect(app.notes == [c: "written signed out"])
            try expectProjectionsHold(engine)
        }
    }

    // MARK: F30

    @Test("F30: three pending changes, sign-out: both pending lists are empty when accountChange arrives, and after")
    func signOutWipesPending() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            let app = try world.device("phone")
            let engine = app.engine
            let pending = PendingAtAccountChange(app)
            try await engine.fetchChanges()  // alice is recorded
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Fixtures.notes))])
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(a), .deleteRecord(b)])
            #expect(try engine.state.pendingRecordZoneChanges.count + engine.state.pendingDatabaseChanges.count == 3)

            world.account.signOut()
            await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(app.accountChanges == [.signOut(previousUser: try world.userRecordID("alice"))])
            #expect(pending.counts.map { [$0.records, $0.zones] } == [[0, 0]])
            #expect(try engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(try engine.state.pendingDatabaseChanges.isEmpty)
            #expect(try await world.serverNotes("alice").isEmpty, "nothing was sent")
            try expectProjectionsHold(engine)
        }
    }

    // MARK: F107, F108

    @Test("F107: recorded under U1, switched U1→U2→U3 while not running: on launch exactly one switchAccounts(U1, U3)")
    func oneEventForManyTransitions() async throws {
        try await withAccountWorld(signedIn: "u1") { world in
            do {
                let app = try await world.fetchedDevice()
                #expect(app.accountChanges.isEmpty)
            }
            // Offline, the app not running.
            world.account.switch(to: "u2")
            world.account.signOut()
            world.account.signIn("u2")
            world.account.switch(to: "u3")

            let app = try await world.fetchedDevice()
            let engine = app.engine
            #expect(
                app.accountChanges == [
                    .switchAccounts(
                        previousUser: try world.userRecordID("u1"), currentUser: try world.userRecordID("u3"))
                ])
            #expect(app.events.count(of: .accountChange) == 1)
            // Nothing more on the next calls.
            try await engine.fetchChanges()
            try await engine.sendChanges()
            #expect(app.events.count(of: .accountChange) == 1)
            try expectProjectionsHold(engine)
        }
    }

    @Test("F108: a log recorded under U1 launched with U2 signed in: switchAccounts before any sync or request")
    func lastKnownUserDetectsSwitchAcrossLaunches() async throws {
        try await withAccountWorld(signedIn: "u1") { world in
            do {
                let app = try await world.fetchedDevice()
                try app.writeNote(a, "u1's, never sent")
            }
            world.account.switch(to: "u2")

            let requestsBefore = world.account.requestsForwarded
            let requestsAtEvent = Mutex<Int?>(nil)
            let account = world.account
            let app = try world.device("phone")  // manual: no event before the first call
            app.onEvent { event, _ in
                if event.kind == .accountChange { requestsAtEvent.withLock { $0 = account.requestsForwarded } }
            }
            let engine = app.engine
            try await engine.sendChanges()
            let u1 = try world.userRecordID("u1")
            let u2 = try world.userRecordID("u2")
            #expect(app.accountChanges == [.switchAccounts(previousUser: u1, currentUser: u2)])
            #expect(app.events.withoutStateUpdates.first?.kind == .accountChange, "\(app.events.kinds)")
            #expect(requestsAtEvent.withLock { $0 } == requestsBefore, "no request before the event")
            #expect(try await world.serverNotes("u2").isEmpty, "u1's pending change is not sent to u2")
            #expect(try engine.deviceLog.read { try $0.lastKnownAccount() } == .user(u2))
            try expectProjectionsHold(engine)
        }
    }

    // MARK: F109

    @Test("F109: accountTemporarilyUnavailable: no accountChange, changes stay pending, sent once available (manual)")
    func temporarilyUnavailableManual() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            let app = try await world.fetchedDevice()
            let engine = app.engine
            try app.writeNote(a, "waits")

            world.account.setTemporarilyUnavailable(true)
            app.clearEvents()
            let error = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(error?.code == .accountTemporarilyUnavailable)
            await #expect(throws: SyncError.self) { try await engine.fetchChanges() }
            #expect(app.events.withoutStateUpdates.isEmpty, "\(app.events.kinds)")
            #expect(world.account.requestsRefused == 0, "the engine waits instead of trying")
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(a)])
            #expect(try engine.state.pendingDatabaseChanges.count == 1)

            world.account.setTemporarilyUnavailable(false)
            try await engine.sendChanges()
            #expect(app.accountChanges.isEmpty)
            #expect(try await world.serverNotes("alice") == [a: "waits"])
            #expect(try engine.state.pendingRecordZoneChanges.isEmpty)
            try expectProjectionsHold(engine)
        }
    }

    @Test("F109: a manual engine launched while the account is not ready syncs once it is")
    func launchedWhileTemporarilyUnavailable() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            world.account.setTemporarilyUnavailable(true)
            let app = try world.device("phone")
            let engine = app.engine
            try app.writeNote(a, "waits")
            await #expect(throws: SyncError.self) { try await engine.sendChanges() }

            world.account.setTemporarilyUnavailable(false)
            try await engine.sendChanges()
            #expect(app.accountChanges.isEmpty)
            #expect(try await world.serverNotes("alice") == [a: "waits"])
            try expectProjectionsHold(engine)
        }
    }

    @Test("F109: automatic: while unavailable nothing is sent and no event comes; once available the change is sent")
    func temporarilyUnavailableAutomatic() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            let clock = TestClock()
            let app = try world.device("phone", clock: clock)
            let engine = app.engine
            #expect(await eventually(advancing: clock) { app.events.didFetchContexts.count >= 1 })
            // The catch-up fetch ends by making sure of the subscription, after didFetchChanges:
            // let it finish, so that no request of it meets the unavailable account.
            await engine.operations.drain()

            world.account.setTemporarilyUnavailable(true)
            #expect(await eventually { engine.knownAccountStatus == .temporarilyUnavailable })
            app.clearEvents()
            try app.writeNote(a, "waits")
            for _ in 0..<30 { await clock.advance(by: .seconds(10)) }
            #expect(app.events.withoutStateUpdates.isEmpty, "\(app.events.kinds)")
            #expect(world.account.requestsRefused == 0)
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(a)])

            world.account.setTemporarilyUnavailable(false)
            #expect(await eventually(advancing: clock) { app.events.didSendContexts.count >= 1 })
            #expect(app.accountChanges.isEmpty)
            #expect(try await world.serverNotes("alice") == [a: "waits"])
            try expectProjectionsHold(engine)
        }
    }

    // MARK: F110

    @Test("F110: engine 1 disposed, engine 2 on a fresh log: engine 1 emits nothing more, engine 2 fetches everything")
    func replaceEngine() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            try await world.seedServer("alice", [(a, "one"), (b, "two")])
            let clock = TestClock()
            let app1 = try world.device("engine1", clock: clock)
            var engine1: SyncEngine? = app1.engine
            #expect(
                await eventually(advancing: clock) { app1.notes.count == 2 && app1.events.didFetchContexts.count >= 1 })
            try app1.writeNote(c, "queued in engine 1")

            // Dispose of engine 1: cancel it and let it go, the device too; from now on the
            // device records what engine 1 still delivers, which must be nothing.
            await engine1!.cancelOperations()
            app1.clearEvents()
            weak let released = engine1
            engine1 = nil
            app1.releaseEngine()
            #expect(await eventually { released == nil }, "nothing keeps a disposed engine alive")

            // Engine 2, nil state (a fresh log): a full fetch.
            let app2 = try world.device("engine2")
            let engine2 = app2.engine
            try await engine2.fetchChanges()
            #expect(app2.notes == [a: "one", b: "two"])
            #expect(app2.events.fetchedRecordZoneChanges.flatMap(\.modifications).count == 2)

            // Time passes, the server changes (push hints): engine 1 stays silent.
            try await world.seedServer("alice", [(Fixtures.x, "later")])
            for _ in 0..<30 { await clock.advance(by: .seconds(10)) }
            #expect(app1.events.isEmpty, "engine 1 emitted \(app1.events.kinds)")
            #expect(try await world.serverNotes("alice")[c] == nil, "engine 1's queued change was never sent")
            try await engine2.fetchChanges()
            #expect(app2.notes[Fixtures.x] == "later")
            try expectProjectionsHold(engine2)
            let log1 = try openDeviceLog(world.directory.appendingPathComponent("engine1"))
            #expect(try log1.log.verifyProjections() == nil)
        }
    }

    // MARK: F8, F118, F125

    @Test("F8, F118, F125: a private and a shared engine of one user side by side: each delegate sees only its engine")
    func privateAndSharedEngines() async throws {
        try await withAccountWorld(signedIn: "alice") { world in
            let privateApp = try world.device("private")
            let sharedApp = try world.device("shared", database: world.account.database(for: .shared))
            let (privateEngine, sharedEngine) = (privateApp.engine, sharedApp.engine)
            let (privateSink, sharedSink) = (privateApp.recordingEngines(), sharedApp.recordingEngines())
            #expect(sharedEngine.database.databaseScope == .shared)

            try privateApp.writeNote(a, "private note")
            async let privateSync: Void = {
                try await privateEngine.sendChanges()
                try await privateEngine.fetchChanges()
            }()
            async let sharedSync: Void = sharedEngine.fetchChanges()
            _ = try await (privateSync, sharedSync)

            // F8: each delegate got only its own engine's events, and `syncEngine` names it.
            #expect(!privateSink.entries.isEmpty && !sharedSink.entries.isEmpty)
            #expect(privateSink.entries.allSatisfy { $0.engine === privateEngine })
            #expect(sharedSink.entries.allSatisfy { $0.engine === sharedEngine })
            #expect(privateApp.events.count(of: .didSendChanges) == 1)
            #expect(sharedApp.events.count(of: .willSendChanges) == 0)
            #expect(sharedApp.events.fetchedRecordZoneChanges.isEmpty)

            // F125: pending changes, tokens and subscriptions are per engine.
            try privateEngine.state.add(pendingRecordZoneChanges: [.saveRecord(b)])
            #expect(try sharedEngine.state.pendingRecordZoneChanges.isEmpty)
            #expect(try privateEngine.deviceLog.read { try $0.zoneChangeToken(for: Fixtures.notes) } != nil)
            #expect(try sharedEngine.deviceLog.read { try $0.zoneChangeToken(for: Fixtures.notes) } == nil)
            #expect(try sharedEngine.deviceLog.read { try $0.knownZoneIDs() }.isEmpty)
            let privateToken = try #require(try privateEngine.deviceLog.read { try $0.databaseChangeToken() })
            let sharedToken = try #require(try sharedEngine.deviceLog.read { try $0.databaseChangeToken() })
            #expect(privateToken != sharedToken)
            // Each checked its own database's subscription; the server keeps them apart.
            #expect(try await world.server.database(for: "alice", scope: .private).allSubscriptions().count == 1)
            #expect(try await world.server.database(for: "alice", scope: .shared).allSubscriptions().count == 1)

            // F118: a second engine on the same (user, database) in one process is allowed, as
            // in development, to simulate devices. The production warning or refusal that F118
            // asks for is not implemented: LogSync cannot tell production from development.
            let secondApp = try world.device("private-2")
            let secondPrivate = secondApp.engine
            let secondSink = secondApp.recordingEngines()
            try await secondPrivate.fetchChanges()
            #expect(secondApp.notes == [a: "private note"])
            #expect(secondSink.entries.allSatisfy { $0.engine === secondPrivate })

            try expectProjectionsHold(privateEngine, sharedEngine, secondPrivate)
        }
    }
}
