import Foundation
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import Testing

@testable import LogSync

/// The send side of the engine, as device timelines: event delivery, batches, contexts,
/// zone-before-record order, per-item outcomes.
@Suite("Scenario: sending")
struct SendScenarios: NoteIDs {
    // MARK: Delegate (F4, F9–F12)

    // F9, F8 (the syncEngine argument names the emitter)
    @Test("One delegate for two engines: every event arrives once, from the engine that emitted it")
    func eachEventOnceFromItsEngine() async throws {
        try await withServer { directory, server in
            let delegate = TestDevice.Delegate(policy: .scripted)
            let sink = EventSink()
            delegate.onEvent { event, engine in sink.append(event, engine) }
            let engineA = try makeScriptedEngine("A", server: server, directory: directory, delegate: delegate)
            let engineB = try makeScriptedEngine("B", server: server, directory: directory, delegate: delegate)
            delegate.setTitle(Self.note("n1"), "Groceries")

            try engineA.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])
            try engineA.state.add(pendingRecordZoneChanges: [.saveRecord(Self.note("n1"))])
            await engineA.operations.drain()  // the stateUpdates of the adds
            sink.clear()

            try await engineA.sendChanges()
            let sent = sink.entries
            #expect(sent.allSatisfy { $0.engine === engineA })
            #expect(
                sent.map(\.event).withoutStateUpdates.kinds
                    == [.willSendChanges, .sentDatabaseChanges, .sentRecordZoneChanges, .didSendChanges])
            sink.clear()

            try await engineB.fetchChanges()
            let fetched = sink.entries
            #expect(fetched.allSatisfy { $0.engine === engineB })
            #expect(
                fetched.map(\.event).withoutStateUpdates.kinds == [
                    .willFetchChanges, .fetchedDatabaseChanges, .willFetchRecordZoneChanges, .fetchedRecordZoneChanges,
                    .didFetchRecordZoneChanges, .didFetchChanges,
                ])
            // Each payload once: one modification of n1 in all.
            #expect(
                fetched.map(\.event).fetchedRecordZoneChanges.flatMap(\.modifications).map(\.record.recordID)
                    == [Self.note("n1")])
            try expectProjectionsHold(engineA, engineB)
        }
    }

    // F10, F47, F46
    @Test(
        "A handler that suspends never overlaps the next event, across a send, a fetch and app edits running together")
    func serialDelivery() async throws {
        try await withServer(maxChangesPerPage: 5) { directory, server in
            let writer = try TestDevice("W", server: server, directory: directory)
            try writer.createZone(Self.photos)
            try writer.write((0..<12).map { (Self.note("p\($0)", Self.photos), "Photo \($0)") })
            try await writer.engine.sendChanges()

            let delegate = TestDevice.Delegate(policy: .scripted)
            let engine = try makeScriptedEngine("R", server: server, directory: directory, delegate: delegate)
            let inside = Atomic<Int>(0)
            let overlaps = Atomic<Int>(0)
            let trace = Mutex<[String]>([])
            delegate.onEvent { event, _ in
                if inside.add(1, ordering: .sequentiallyConsistent).newValue > 1 { overlaps.add(1, ordering: .relaxed) }
                trace.withLock { $0.append("enter \(event.kind)") }
                for _ in 0..<20 { await Task.yield() }
                trace.withLock { $0.append("exit \(event.kind)") }
                inside.subtract(1, ordering: .sequentiallyConsistent)
            }
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])
            let ids = (0..<6).map { Self.note("n\($0)") }
            for (index, id) in ids.enumerated() { delegate.setTitle(id, "Note \(index)") }
            try engine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })

            // Saves of notes the app has no contents for yet: each add queues a stateUpdate.
            @Sendable func edit() async throws {
                for index in 0..<5 {
                    try engine.state.add(pendingRecordZoneChanges: [.saveRecord(Self.note("later\(index)"))])
                    await Task.yield()
                }
            }
            async let send: Void = engine.sendChanges()
            async let fetch: Void = engine.fetchChanges()
            async let edits: Void = edit()
            _ = try await (send, fetch, edits)
            await engine.operations.drain()

            let overlapCount = overlaps.load(ordering: .relaxed)
            #expect(overlapCount == 0)
            let lines = trace.withLock { $0 }
            #expect(lines.count == 2 * delegate.events.count)
            // enter/exit alternate, each exit closing the event just entered.
            for pair in stride(from: 0, to: lines.count - 1, by: 2) {
                #expect(lines[pair].hasPrefix("enter ") && lines[pair + 1] == "exit " + lines[pair].dropFirst(6))
            }
            // The syncs did not interleave: whole sends and fetches, one after the other.
            #expect(delegate.events.isSequenceOfSyncs)
            #expect(delegate.events.count(of: .willFetchChanges) == 1)
            #expect(delegate.events.fetchedRecordZoneChanges.count >= 3)
            try expectProjectionsHold(engine, writer.engine)
        }
    }

    // F11
    @Test(
        "sendChanges and fetchChanges from inside handleEvent throw ReentrantCallError at once; a detached call works")
    func reentrantCallsThrow() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let refused = Mutex<[String]>([])
            let detached = Mutex<Task<Void, any Error>?>(nil)
            delegate.onEvent { event, syncEngine in
                switch event {
                case .willSendChanges:
                    do { try await syncEngine.sendChanges() } catch let error as SyncEngine.ReentrantCallError {
                        refused.withLock { $0.append(error.operation) }
                    } catch {}
                    do { try await syncEngine.fetchChanges() } catch let error as SyncEngine.ReentrantCallError {
                        refused.withLock { $0.append(error.operation) }
                    } catch {}
                    // The documented way out: a detached task, not awaited here.
                    let task = Task.detached { try await syncEngine.fetchChanges() }
                    detached.withLock { $0 = task }
                case .willFetchChanges:
                    do { try await syncEngine.sendChanges() } catch let error as SyncEngine.ReentrantCallError {
                        refused.withLock { $0.append(error.operation) }
                    } catch {}
                default:
                    break
                }
            }
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])
            try await engine.sendChanges()
            try await detached.withLock { $0 }?.value

            #expect(refused.withLock { $0 } == ["sendChanges", "fetchChanges", "sendChanges"])
            // The send went on normally, and the detached fetch ran after it.
            #expect(
                delegate.events.withoutStateUpdates.kinds.prefix(3) == [
                    .willSendChanges, .sentDatabaseChanges, .didSendChanges,
                ])
            #expect(delegate.events.count(of: .didFetchChanges) == 1)
            #expect(delegate.events.isSequenceOfSyncs)
            try expectProjectionsHold(engine)
        }
    }

    // F12, F57
    @Test("A delegate returning three batches then nil is asked four times; three sentRecordZoneChanges follow")
    func threeBatchesThenNil() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let batches = (0..<3).map { batch in
                SyncEngine.RecordZoneChangeBatch(
                    recordsToSave: (0..<2).map { newNote(Self.note("b\(batch)-\($0)"), "Note \(batch).\($0)") })
            }
            delegate.queue(batches)
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])

            try await engine.sendChanges()
            #expect(delegate.batchContexts.count == 4)
            let sent = delegate.events.sentRecordZoneChanges
            #expect(sent.count == 3)
            // One event per batch, holding exactly that batch's items (F57).
            for (batch, event) in zip(batches, sent) {
                #expect(event.savedRecords.map(\.recordID) == batch.recordsToSave.map(\.recordID))
                #expect(event.failedRecordSaves.isEmpty)
            }
            try expectProjectionsHold(engine)
        }
    }

    // MARK: Scope (F13, F68)

    // F13, F63, F68
    @Test("A send scoped to zone A hands the scope to the delegate; zone B's changes stay pending until a full send")
    func scopedSend() async throws {
        try await withDevices("A", "B") { _, phoneA, phoneB in
            let inNotes = Self.note("n1")
            let inPhotos = Self.note("p1", Self.photos)
            try phoneA.createZone(Self.notes)
            try phoneA.createZone(Self.photos)
            try phoneA.write([(inNotes, "Note"), (inPhotos, "Photo")])

            let options = SyncEngine.SendChangesOptions(scope: .zoneIDs([Self.notes]))
            try await phoneA.engine.sendChanges(options)
            #expect(phoneA.events.willSendContexts.last?.options == options)
            #expect(phoneA.events.sentRecordZoneChanges.flatMap(\.savedRecords).map(\.recordID) == [inNotes])
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == [.saveRecord(inPhotos)])
            #expect(try phoneA.engine.state.pendingDatabaseChanges.map(\.zoneID) == [Self.photos])

            try await phoneB.engine.fetchChanges()
            #expect(phoneB.notes == [inNotes: "Note"])

            // A full send sends the rest.
            try await phoneA.engine.sendChanges()
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == [])
            try await phoneB.engine.fetchChanges()
            #expect(phoneB.notes == [inNotes: "Note", inPhotos: "Photo"])
            try phoneA.expectProjectionsHold()
            try phoneB.expectProjectionsHold()
        }
    }

    // MARK: Database changes (F23, F47)

    // F23, F43
    @Test("A pending saveZone is sent by the engine itself; the server has the zone")
    func engineSendsZoneSaves() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])

            try await engine.sendChanges()
            let saved = delegate.events.sentDatabaseChanges.flatMap(\.savedZones)
            #expect(saved.map(\.zoneID) == [Self.notes])
            #expect(saved.first?.capabilities.contains(.atomic) == true)
            #expect(try engine.state.pendingDatabaseChanges == [])
            let zones = try await server.database(for: "alice").fetchAllZones()
            #expect(zones.map(\.zoneID).contains(Self.notes))
            try expectProjectionsHold(engine)
        }
    }

    // F47
    @Test("Zone and record changes pending together: the zone is saved first, then the record")
    func zoneBeforeRecords() async throws {
        try await withDevice("A") { _, phone in
            try phone.write(Self.note("n1"), "Note")  // queued before the zone, sent after it
            try phone.createZone(Self.notes)

            try await phone.engine.sendChanges()
            #expect(
                phone.syncEvents.kinds == [
                    .willSendChanges, .sentDatabaseChanges, .sentRecordZoneChanges, .didSendChanges,
                ])
            #expect(phone.events.sentRecordZoneChanges.first?.savedRecords.map(\.recordID) == [Self.note("n1")])
            try phone.expectProjectionsHold()
        }
    }

    // F47 step 4
    @Test("A saveZone added while handling sentRecordZoneChanges is sent before the next record batch")
    func zoneAddedDuringSendGoesFirst() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let photo = Self.note("p1", Self.photos)
            delegate.queue([
                SyncEngine.RecordZoneChangeBatch(recordsToSave: [newNote(Self.note("n1"), "Note")]),
                SyncEngine.RecordZoneChangeBatch(recordsToSave: [newNote(photo, "Photo")]),
            ])
            let added = Atomic<Bool>(false)
            delegate.onEvent { event, syncEngine in
                guard case .sentRecordZoneChanges = event, !added.exchange(true, ordering: .relaxed) else { return }
                try? syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.photos))])
            }
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])

            try await engine.sendChanges()
            let events = delegate.events.withoutStateUpdates
            #expect(
                events.kinds == [
                    .willSendChanges, .sentDatabaseChanges, .sentRecordZoneChanges, .sentDatabaseChanges,
                    .sentRecordZoneChanges, .didSendChanges,
                ])
            #expect(events.sentDatabaseChanges.map { $0.savedZones.map(\.zoneID) } == [[Self.notes], [Self.photos]])
            #expect(events.sentRecordZoneChanges.last?.savedRecords.map(\.recordID) == [photo])
            try expectProjectionsHold(engine)
        }
    }

    // MARK: Untracked changes (F24)

    /// ``withScriptedEngine(_:_:)`` for the engine `A`, once it has sent the zone Notes.
    static func withNotesZoneSent(
        _ body: (_ engine: SyncEngine, _ delegate: TestDevice.Delegate) async throws -> Void
    ) async throws {
        try await withScriptedEngine("A") { engine, delegate, _, _ in
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: notes))])
            try await engine.sendChanges()
            try await body(engine, delegate)
        }
    }

    // F24
    @Test(
        "hasPendingUntrackedChanges: the delegate is asked with an empty list; the flag clears after a clean pass only")
    func untrackedChanges() async throws {
        try await Self.withNotesZoneSent { engine, delegate in
            // The app's own outbox: one note into a zone the server does not have, so it fails.
            let outbox = Outbox([newNote(Self.note("x", RecordZone.ID(zoneName: "Missing")), "Lost")])
            let pendingWhenAsked = Mutex<[[SyncEngine.PendingRecordZoneChange]]>([])
            delegate.provideBatches { _, syncEngine in
                pendingWhenAsked.withLock {
                    $0.append((try? syncEngine.state.pendingRecordZoneChanges) ?? [.saveRecord(Self.note("?"))])
                }
                return outbox.nextBatch()
            }
            try engine.state.setHasPendingUntrackedChanges(true)
            #expect(try engine.state.pendingRecordZoneChanges == [])

            // A pass whose item fails keeps the flag.
            await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(pendingWhenAsked.withLock { $0 } == [[], []])
            #expect(delegate.events.sentRecordZoneChanges.last?.failedRecordSaves.first?.error.code == .zoneNotFound)
            #expect(try engine.state.hasPendingUntrackedChanges)

            // A clean pass clears it.
            outbox.fill([newNote(Self.note("n1"), "Kept")])
            try await engine.sendChanges()
            #expect(delegate.events.sentRecordZoneChanges.last?.savedRecords.map(\.recordID) == [Self.note("n1")])
            #expect(try engine.state.hasPendingUntrackedChanges == false)
            try expectProjectionsHold(engine)
        }
    }

    // F24, F32 (the flag's analogue of an edit made during an upload)
    @Test(
        "The untracked flag set again while a send runs, after the delegate's last answer, is not cleared by that send")
    func untrackedFlagSetDuringSend() async throws {
        try await Self.withNotesZoneSent { engine, delegate in
            let outbox = Outbox([newNote(Self.note("n1"), "First")])
            delegate.provideBatches { _, syncEngine in
                if let batch = outbox.nextBatch() { return batch }
                // The app's other task writes a note to its outbox and flags it, just as the
                // delegate answers that it has nothing more.
                outbox.fill([newNote(Self.note("n2"), "Second")])
                try? syncEngine.state.setHasPendingUntrackedChanges(true)
                return nil
            }
            try engine.state.setHasPendingUntrackedChanges(true)
            try await engine.sendChanges()
            #expect(delegate.events.sentRecordZoneChanges.last?.savedRecords.map(\.recordID) == [Self.note("n1")])
            // The second note was flagged after the delegate's nil: the flag must stay set, or
            // nothing would ever send it.
            #expect(try engine.state.hasPendingUntrackedChanges)
            try expectProjectionsHold(engine)
        }
    }

    // MARK: Contexts (F42, F45, F59, F60, F71)

    // F42, F45, F59, F60
    @Test(
        "One context per send: willSendChanges, every nextRecordZoneChangeBatch and didSendChanges get the same one",
        arguments: [false, true])
    func sendContextEquality(everyItemFails: Bool) async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let zone = everyItemFails ? RecordZone.ID(zoneName: "Missing") : Self.notes
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])
            let ids = [Self.note("a", zone), Self.note("b", zone)]
            for id in ids { delegate.setTitle(id, id.recordName) }
            try engine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })

            let options = SyncEngine.SendChangesOptions(scope: .recordIDs(ids))
            if everyItemFails {
                await #expect(throws: SyncError.self) { try await engine.sendChanges(options) }
            } else {
                try await engine.sendChanges(options)
            }
            let will = delegate.events.willSendContexts
            let did = delegate.events.didSendContexts
            #expect(will.count == 1)
            #expect(did == will)
            #expect(will.first?.reason == .manual)
            #expect(will.first?.options == options)
            #expect(!delegate.batchContexts.isEmpty)
            #expect(delegate.batchContexts.allSatisfy { $0 == will.first })
            let failed = delegate.events.sentRecordZoneChanges.flatMap(\.failedRecordSaves)
            #expect(failed.count == (everyItemFails ? 2 : 0))
            try expectProjectionsHold(engine)
        }
    }

    // F71
    @Test("Options changed after sendChanges was called do not change the running send")
    func sendOptionsAreCopied() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let inNotes = Self.note("n1")
            let inPhotos = Self.note("p1", Self.photos)
            delegate.setTitle(inNotes, "Note")
            delegate.setTitle(inPhotos, "Photo")
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: Self.notes)), .saveZone(RecordZone(zoneID: Self.photos)),
            ])
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(inNotes), .saveRecord(inPhotos)])
            let gate = Gate()
            delegate.onEvent(gate.holding(.willSendChanges))

            var options = SyncEngine.SendChangesOptions(scope: .zoneIDs([Self.notes]))
            let original = options
            let send = Task { [options] in try await engine.sendChanges(options) }
            await gate.reached.wait()
            options.scope = .all
            #expect(options != original)
            await gate.release()
            try await send.value

            #expect(delegate.events.willSendContexts.map(\.options) == [original])
            #expect(delegate.batchContexts.allSatisfy { $0.options == original })
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(inPhotos)])
            try expectProjectionsHold(engine)
        }
    }

    // MARK: Results (F44, F52, F55–F58, F74, F75)

    // F44, F56, F75, F92
    @Test("A saved record has a new change tag and dates; a save with a stale tag fails with serverRecordChanged")
    func changeTags() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let id = Self.note("n1")
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])

            delegate.queue([.init(recordsToSave: [newNote(id, "v1")])])
            try await engine.sendChanges()
            let first = try #require(delegate.events.sentRecordZoneChanges.last?.savedRecords.first)
            #expect(first.recordChangeTag != nil)
            #expect(first.creationDate != nil)
            #expect(first.modificationDate != nil)

            delegate.queue([.init(recordsToSave: [retitled(first, "v2")])])
            try await engine.sendChanges()
            let second = try #require(delegate.events.sentRecordZoneChanges.last?.savedRecords.first)
            #expect(second.recordChangeTag != nil)
            #expect(second.recordChangeTag != first.recordChangeTag)
            #expect(second["title"] == .string("v2"))

            // Built on the first version: its tag is stale.
            delegate.queue([.init(recordsToSave: [retitled(first, "v3")])])
            let error = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(error?.code == .partialFailure)
            #expect(error?.partialErrors[.record(id)]?.code == .serverRecordChanged)
            let failure = try #require(delegate.events.sentRecordZoneChanges.last?.failedRecordSaves.first)
            #expect(failure.record.recordID == id)
            #expect(failure.error.code == .serverRecordChanged)
            #expect(failure.error.serverRecord?.recordChangeTag == second.recordChangeTag)
            #expect(failure.error.serverRecord?["title"] == .string("v2"))

            // A brand-new record under an existing ID conflicts too (F56).
            delegate.queue([.init(recordsToSave: [newNote(id, "v4")])])
            await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(
                delegate.events.sentRecordZoneChanges.last?.failedRecordSaves.first?.error.code == .serverRecordChanged)
            try expectProjectionsHold(engine)
        }
    }

    // F52, F96 (spec choice: the request's limitExceeded is given to every item; the engine does not split)
    @Test(
        "A manual batch of 401 records: every item fails with limitExceeded, reported, none lost; re-added they are sent"
    )
    func oversizedManualBatch() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let ids = (0..<401).map { Self.note("n\($0)") }
            for id in ids { delegate.setTitle(id, id.recordName) }
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])
            try engine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })
            delegate.queue([.init(recordsToSave: ids.map { newNote($0, $0.recordName) })])

            let error = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            #expect(error?.code == .partialFailure)
            #expect(error?.partialErrors.count == 401)
            #expect(error?.partialErrors.values.allSatisfy { $0.code == .limitExceeded } == true)
            let sent = delegate.events.sentRecordZoneChanges
            #expect(sent.count == 1)
            #expect(sent.first?.savedRecords.isEmpty == true)
            #expect(Set(sent.first?.failedRecordSaves.map(\.record.recordID) ?? []) == Set(ids))
            #expect(sent.first?.failedRecordSaves.allSatisfy { $0.error.code == .limitExceeded } == true)
            // The server took nothing; the failure is not retried by itself (F21), so the app re-adds.
            let fetched = try await server.database(for: "alice").fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(fetched.modifications.isEmpty)
            #expect(try engine.state.pendingRecordZoneChanges == [])

            // Re-added and sent with automatic batches: all 401 arrive, in two requests.
            try engine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })
            delegate.clearEvents()
            delegate.provideBatches { context, syncEngine in
                let pending = (try? syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)) ?? []
                return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { newNote($0, $0.recordName) }
            }
            try await engine.sendChanges()
            #expect(delegate.events.sentRecordZoneChanges.map(\.savedRecords.count) == [400, 1])
            try expectProjectionsHold(engine)
        }
    }

    // F55, F58, F95, F148
    @Test(
        "atomicByZone: a stale record fails its zone-mates with batchRequestFailed, other zones save; off: only it fails",
        arguments: [true, false])
    func atomicByZone(atomic: Bool) async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let a = Self.note("A")
            let b = Self.note("B")
            let c = Self.note("C", Self.photos)
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: Self.notes)), .saveZone(RecordZone(zoneID: Self.photos)),
            ])
            delegate.queue([.init(recordsToSave: [newNote(a, "v1")])])
            try await engine.sendChanges()
            let v1 = try #require(delegate.events.sentRecordZoneChanges.last?.savedRecords.first)
            delegate.queue([.init(recordsToSave: [retitled(v1, "v2")])])
            try await engine.sendChanges()

            // Z1: A (stale tag), B; Z2: C — in one batch.
            delegate.queue([
                .init(recordsToSave: [retitled(v1, "v3"), newNote(b, "B"), newNote(c, "C")], atomicByZone: atomic)
            ])
            let error = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            let sent = try #require(delegate.events.sentRecordZoneChanges.last)
            let failures = Dictionary(
                uniqueKeysWithValues: sent.failedRecordSaves.map { ($0.record.recordID, $0.error.code) })
            #expect(failures[a] == .serverRecordChanged)
            #expect(error?.partialErrors[.record(a)]?.code == .serverRecordChanged)
            if atomic {
                #expect(failures[b] == .batchRequestFailed)
                #expect(error?.partialErrors[.record(b)]?.code == .batchRequestFailed)
                #expect(sent.savedRecords.map(\.recordID) == [c])
            } else {
                #expect(failures[b] == nil)
                #expect(Set(sent.savedRecords.map(\.recordID)) == [b, c])
            }
            try expectProjectionsHold(engine)
        }
    }

    // F57, F58, F101
    @Test("Three batches, one mixing zones: three events, and each event's items are exactly its batch's")
    func oneEventPerBatch() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let a = Self.note("A")
            let p = Self.note("P", Self.photos)
            try engine.state.add(pendingDatabaseChanges: [
                .saveZone(RecordZone(zoneID: Self.notes)), .saveZone(RecordZone(zoneID: Self.photos)),
            ])
            let batches: [SyncEngine.RecordZoneChangeBatch] = [
                .init(recordsToSave: [newNote(a, "A"), newNote(p, "P")]),  // two zones, one request (F58)
                .init(recordsToSave: [newNote(Self.note("B"), "B")], recordIDsToDelete: [p]),
                .init(recordsToSave: [newNote(a, "A again")], recordIDsToDelete: [Self.note("never")]),  // A conflicts
            ]
            delegate.queue(batches)

            let error = await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            let sent = delegate.events.sentRecordZoneChanges
            #expect(sent.count == 3)
            #expect(Set(sent.first?.savedRecords.map(\.recordID) ?? []) == [a, p])
            for (batch, event) in zip(batches, sent) {
                let reported = event.savedRecords.map(\.recordID) + event.failedRecordSaves.map(\.record.recordID)
                #expect(
                    reported.sorted { $0.recordName < $1.recordName }
                        == batch.recordsToSave.map(\.recordID).sorted { $0.recordName < $1.recordName })
                let deletions = event.deletedRecordIDs + Array(event.failedRecordDeletes.keys)
                #expect(Set(deletions) == Set(batch.recordIDsToDelete))
                #expect(deletions.count == batch.recordIDsToDelete.count)
            }
            #expect(sent.last?.failedRecordSaves.map(\.error.code) == [.serverRecordChanged])
            #expect(error?.partialErrors[.record(a)]?.code == .serverRecordChanged)
            try expectProjectionsHold(engine)
        }
    }

    // F73, F74
    @Test("sendChanges returns after didSendChanges was handled, with every pending change in scope sent")
    func sendReturnsAfterEverything() async throws {
        try await withDevice("A") { _, phone in
            let handledDid = Atomic<Bool>(false)
            phone.onEvent { event, _ in
                guard case .didSendChanges = event else { return }
                for _ in 0..<50 { await Task.yield() }
                handledDid.store(true, ordering: .sequentiallyConsistent)
            }
            try phone.createZone(Self.notes)
            try phone.write((0..<30).map { (Self.note("n\($0)"), "Note \($0)") })
            try phone.delete(Self.note("n0"))

            try await phone.engine.sendChanges()
            let didWasHandled = handledDid.load(ordering: .sequentiallyConsistent)
            #expect(didWasHandled)
            #expect(phone.syncEvents.last?.kind == .didSendChanges)
            #expect(try phone.engine.state.pendingRecordZoneChanges == [])
            // No event of the send comes later (stateUpdates of the app's edits may).
            let count = phone.syncEvents.count
            for _ in 0..<100 { await Task.yield() }
            #expect(phone.syncEvents.count == count)
            try phone.expectProjectionsHold()
        }
    }

    // F21, F89, F101
    @Test(
        "A transient failure of a record batch ends the send after reporting it; the changes stay pending and go next time"
    )
    func transientRecordFailure() async throws {
        try await withDevices("A", "B") { server, phoneA, phoneB in
            try phoneA.createZone(Self.notes)
            try await phoneA.engine.sendChanges()
            let ids = (0..<450).map { Self.note("n\($0)") }
            try phoneA.write(ids.map { ($0, $0.recordName) })

            server.admin.failNextRequests(
                of: "alice", with: SyncError(.serviceUnavailable, "injected", retryAfter: .seconds(3)))
            phoneA.clearEvents()
            let error = await #expect(throws: SyncError.self) { try await phoneA.engine.sendChanges() }
            #expect(error?.code == .serviceUnavailable)
            #expect(error?.retryAfter == .seconds(3))
            // The failed batch is reported item by item, and the send asked for no other.
            #expect(phoneA.syncEvents.kinds == [.willSendChanges, .sentRecordZoneChanges, .didSendChanges])
            let failed = phoneA.events.sentRecordZoneChanges.first?.failedRecordSaves ?? []
            #expect(failed.count == 400)
            #expect(failed.allSatisfy { $0.error.code == .serviceUnavailable })
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == ids.map { .saveRecord($0) })

            try await phoneA.engine.sendChanges()
            #expect(try phoneA.engine.state.pendingRecordZoneChanges == [])
            try await phoneB.fetchAndExpectConverged(with: phoneA)
        }
    }

    // F21, F23, F47, F89
    @Test("A transient failure of the zone save ends the send before any record; both stay pending and go next time")
    func transientZoneFailure() async throws {
        try await withDevice("A") { server, phone in
            try phone.createZone(Self.notes)
            try phone.write(Self.note("n1"), "Note")

            server.admin.failNextRequests(of: "alice", with: SyncError(.zoneBusy, "injected"))
            let error = await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            #expect(error?.code == .zoneBusy)
            #expect(phone.syncEvents.kinds == [.willSendChanges, .sentDatabaseChanges, .didSendChanges])
            #expect(phone.events.sentDatabaseChanges.first?.failedZoneSaves.first?.error.code == .zoneBusy)
            #expect(try phone.engine.state.pendingDatabaseChanges.map(\.zoneID) == [Self.notes])
            #expect(try phone.engine.state.pendingRecordZoneChanges == [.saveRecord(Self.note("n1"))])

            phone.clearEvents()
            try await phone.engine.sendChanges()
            #expect(
                phone.syncEvents.kinds == [
                    .willSendChanges, .sentDatabaseChanges, .sentRecordZoneChanges, .didSendChanges,
                ])
            #expect(try phone.engine.state.pendingDatabaseChanges == [])
            #expect(try phone.engine.state.pendingRecordZoneChanges == [])
            try phone.expectProjectionsHold()
        }
    }

    // F12, F21, F47, F91
    @Test("A delegate that re-queues an item failing the same way every time does not keep one send going forever")
    func requeuedFailureDoesNotLoop() async throws {
        try await withScriptedEngine("A") { engine, delegate, server, directory in
            let lost = Self.note("x", RecordZone.ID(zoneName: "Missing"))  // the zone is never created
            delegate.setTitle(lost, "Lost")
            let asks = Atomic<Int>(0)
            delegate.onEvent { event, syncEngine in
                guard case .sentRecordZoneChanges(let sent) = event else { return }
                // Like Apple's sample: re-queue what failed, to try again.
                try? syncEngine.state.add(
                    pendingRecordZoneChanges: sent.failedRecordSaves.map { .saveRecord($0.record.recordID) })
            }
            let pendingProvider:
                @Sendable (SyncEngine.SendChangesContext, SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? = {
                    context, syncEngine in
                    // A safety net so the test fails instead of hanging.
                    guard asks.add(1, ordering: .relaxed).newValue <= 20 else { return nil }
                    let pending = (try? syncEngine.state.pendingRecordZoneChanges(in: context.options.scope)) ?? []
                    return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { newNote($0, "Lost") }
                }
            delegate.provideBatches(pendingProvider)
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(lost)])

            await #expect(throws: SyncError.self) { try await engine.sendChanges() }
            let sent = delegate.events.sentRecordZoneChanges.count
            #expect(sent <= 2, "one send sent the same failing record \(sent) times")
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(lost)])
            try expectProjectionsHold(engine)
        }
    }

    // MARK: Delegate lifetime (F4)

    // F4
    @Test("A released delegate: the engine keeps no reference, delivers nothing more, and does not crash")
    func releasedDelegate() async throws {
        try await withServer { directory, server in
            let sink = EventSink()
            var delegate: TestDevice.Delegate? = TestDevice.Delegate(policy: .scripted)
            delegate?.onEvent { event, engine in sink.append(event, engine) }
            weak let probe = delegate
            let engine = try makeScriptedEngine("A", server: server, directory: directory, delegate: delegate!)
            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.notes))])
            try await engine.sendChanges()
            await engine.operations.drain()
            #expect(sink.events.count(of: .didSendChanges) == 1)

            delegate = nil
            #expect(probe == nil)
            sink.clear()

            try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.photos))])
            try engine.state.add(pendingRecordZoneChanges: [.saveRecord(Self.note("n1"))])
            try await engine.sendChanges()
            try await engine.fetchChanges()
            await engine.operations.drain()
            #expect(sink.events.isEmpty)
            // Zones need no delegate; the record, whose contents only a delegate could give, waits.
            #expect(try engine.state.pendingDatabaseChanges == [])
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(Self.note("n1"))])
            try expectProjectionsHold(engine)
        }
    }
}

/// An app's own outbox of notes it saves without pending changes, flagging them as untracked
/// changes instead (F24).
final class Outbox: Sendable {
    private let records: Mutex<[Record]>

    init(_ records: [Record]) { self.records = Mutex(records) }

    /// Puts `records` in the outbox, in place of what it held.
    func fill(_ records: [Record]) { self.records.withLock { $0 = records } }

    /// A batch that saves every note taken out of the outbox, or `nil` if it is empty.
    func nextBatch() -> SyncEngine.RecordZoneChangeBatch? {
        let taken = records.withLock { records in
            defer { records.removeAll() }
            return records
        }
        return taken.isEmpty ? nil : SyncEngine.RecordZoneChangeBatch(recordsToSave: taken)
    }
}
