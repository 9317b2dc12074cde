import ChildProcesses
import Foundation
import LogSync
import LogSyncHTTP
import LogSyncTesting
import PostgresProcess
import SyncModel
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Several `logsync-server` processes serving one PostgreSQL database, as a deployment runs
/// them behind a load balancer: alice's devices talk to different nodes and must see one
/// database. Each test has its own database, directory and nodes; each reads as the devices'
/// timeline.
@Suite("Several logsync-server nodes on one PostgreSQL database", .timeLimit(.minutes(3)))
struct MultiNodeTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static func note(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: notes) }

    /// A new note record titled `title`.
    static func record(_ name: String, _ title: String) -> Record {
        var record = Record(recordType: "Note", recordID: note(name))
        record["title"] = .string(title)
        return record
    }

    /// The titles of the records a fetch brought, by record name.
    static func titles(_ response: FetchZoneChangesResponse) -> [String: String] {
        Dictionary(
            uniqueKeysWithValues: response.modifications.map { modification in
                (modification.record.recordID.recordName, Self.title(modification.record))
            })
    }

    static func title(_ record: Record) -> String {
        if case .string(let title)? = record["title"] { return title }
        return "(no title)"
    }

    /// A fresh database on the test process's PostgreSQL.
    static func freshDatabase() async throws -> String {
        try await PostgresTestServer.shared().createDatabase()
    }

    /// A cluster on a fresh database, alice's token, and the nodes `node1` and `node2`, started
    /// in that order.
    static func withAliceOnTwoNodes(
        _ body: (_ cluster: Cluster, _ token: String, _ node1: Node, _ node2: Node) async throws -> Void
    ) async throws {
        try await Cluster.with(store: try await freshDatabase()) { cluster in
            let token = try await cluster.addUser("alice")
            let node1 = try await cluster.startNode("node1")
            try await body(cluster, token, node1, try await cluster.startNode("node2"))
        }
    }

    /// Whether `events`, from index `start` on, hold a send that saved the note `name`.
    static func saved(_ name: String, after start: Int = 0) -> @Sendable ([SyncEngine.Event]) -> Bool {
        { events in
            events.dropFirst(start).contains { event in
                guard case .sentRecordZoneChanges(let sent) = event else { return false }
                return sent.savedRecords.contains { $0.recordID == note(name) }
            }
        }
    }

    /// Whether `events`, from index `start` on, hold a fetch that brought the note `name`.
    static func fetched(_ name: String, after start: Int = 0) -> @Sendable ([SyncEngine.Event]) -> Bool {
        { events in
            events.dropFirst(start).contains { event in
                guard case .fetchedRecordZoneChanges(let changes) = event else { return false }
                return changes.modifications.contains { $0.record.recordID == note(name) }
            }
        }
    }

    /// Saves the engines' database subscription through `database`, so that commits are pushed.
    static func subscribe(_ database: HTTPCloudDatabase) async throws {
        let response = try await database.modifySubscriptions(
            saving: [Subscription(subscriptionID: SyncEngine.defaultSubscriptionID)], deleting: [])
        _ = try response.saveResults[SyncEngine.defaultSubscriptionID]?.get()
    }

    // F142, F157: change tokens are log offsets in the shared database, so a token one node
    // gave names the same point of alice's log on every node.
    @Test("F142 a record saved on node 1 is fetched on node 2, and a change token from either node works on the other")
    func recordAcrossNodes() async throws {
        try await Self.withAliceOnTwoNodes { cluster, token, node1, node2 in
            let phone = cluster.client(on: node1, token: token, device: "phone").database()
            let laptop = cluster.client(on: node2, token: token, device: "laptop").database()

            // phone, on node 1: creates the Notes zone and a note.
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            let saved = try await phone.modifyRecords(saving: [Self.record("groceries", "Groceries")], deleting: [])
            _ = try saved.saveResults[Self.note("groceries")]?.get()

            // laptop, on node 2: sees the zone and fetches the note from the start.
            let zones = try await laptop.fetchDatabaseChanges(since: nil)
            #expect(zones.modifications.map(\.zoneID).contains(Self.notes), "\(zones)")
            let first = try await laptop.fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(Self.titles(first) == ["groceries": "Groceries"])

            // phone, on node 1: fetches too; both nodes name the same point of the log.
            let phoneFirst = try await phone.fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(phoneFirst.changeToken == first.changeToken)

            // phone, on node 1: a second note.
            let second = try await phone.modifyRecords(saving: [Self.record("todo", "Todo")], deleting: [])
            _ = try second.saveResults[Self.note("todo")]?.get()

            // laptop, on node 2, with the token node 1 gave the phone: the new note alone.
            let next = try await laptop.fetchZoneChanges(zoneID: Self.notes, since: phoneFirst.changeToken)
            #expect(Self.titles(next) == ["todo": "Todo"])
            #expect(next.changeToken != phoneFirst.changeToken)

            // phone, on node 1, with the token node 2 gave the laptop: nothing newer.
            let nothing = try await phone.fetchZoneChanges(zoneID: Self.notes, since: next.changeToken)
            #expect(nothing.modifications.isEmpty && nothing.deletions.isEmpty, "\(nothing)")
            #expect(nothing.changeToken == next.changeToken)

            // Database tokens too: node 1 answers node 2's with the zone the new note changed,
            // and node 2 answers node 1's new one with nothing.
            let changed = try await phone.fetchDatabaseChanges(since: zones.changeToken)
            #expect(changed.modifications.map(\.zoneID) == [Self.notes], "\(changed)")
            let noZones = try await laptop.fetchDatabaseChanges(since: changed.changeToken)
            #expect(noZones.modifications.isEmpty && noZones.deletions.isEmpty, "\(noZones)")
            #expect(noZones.changeToken == changed.changeToken)
        }
    }

    // F92, F145: the change tag is checked against the record in the shared database, whichever
    // node took the first save; the refusal carries the server's record, the device merges into
    // it and saves again.
    @Test(
        "F92 F145 a conflict across nodes: the save on node 2 gets serverRecordChanged with node 1's record, the device merges and both end with the merge"
    )
    func conflictAcrossNodes() async throws {
        try await Self.withAliceOnTwoNodes { cluster, token, node1, node2 in
            let phone = try TestDevice(
                "phone", database: cluster.client(on: node1, token: token, device: "phone").database(),
                directory: cluster.directory.appendingPathComponent("phone"))
            let laptop = try TestDevice(
                "laptop", database: cluster.client(on: node2, token: token, device: "laptop").database(),
                directory: cluster.directory.appendingPathComponent("laptop"))
            laptop.resolveConflicts { local, server in "\(server) + \(local)" }
            let id = Self.note("groceries")

            // phone, on node 1: creates the note; laptop, on node 2: fetches it. The same base.
            try phone.createZone(Self.notes)
            try phone.write(id, "Groceries")
            try await phone.sync()
            try await laptop.sync()
            #expect(laptop.title(id) == "Groceries")

            // Both edit the note before seeing the other's edit.
            try phone.write(id, "milk")
            try laptop.write(id, "eggs")

            // phone, on node 1: its save lands first.
            try await phone.engine.sendChanges()
            #expect(try phone.engine.state.pendingRecordZoneChanges.isEmpty)

            // laptop, on node 2: refused, with the record node 1 committed.
            let failure = await #expect(throws: SyncError.self) { try await laptop.engine.sendChanges() }
            #expect(failure?.code == .partialFailure, "\(String(describing: failure))")
            let conflict = failure?.partialErrors[.record(id)]
            #expect(conflict?.code == .serverRecordChanged, "\(String(describing: failure))")
            #expect(conflict?.serverRecord.map(Self.title) == "milk", "the error carries node 1's record")

            // laptop: merged into the server's record, and sends the merge (again, if the send
            // above has not already), now on the server's change tag.
            #expect(laptop.title(id) == "milk + eggs")
            try await laptop.engine.sendChanges()
            #expect(try laptop.engine.state.pendingRecordZoneChanges.isEmpty)

            // phone, on node 1: fetches the merge. Both end with it, and so does the database.
            try await phone.sync()
            try await laptop.sync()
            #expect(phone.title(id) == "milk + eggs")
            #expect(laptop.title(id) == "milk + eggs")
            #expect(laptop.unacknowledgedEdits.isEmpty && phone.unacknowledgedEdits.isEmpty)
            let server = try await cluster.client(on: node1, token: token, device: "check").database()
                .fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(Self.titles(server) == ["groceries": "milk + eggs"])
        }
    }

    // F83, F113, F154: a commit on node 1 is NOTIFYed to node 2, which pushes a hint to its
    // devices: the raw hint names the zone, and an automatic engine on node 2 fetches the change.
    @Test(
        "F83 F113 F154 push across nodes: a commit on node 1 reaches a device on node 2 as a hint, and its engine fetches"
    )
    func pushAcrossNodes() async throws {
        try await Self.withAliceOnTwoNodes { cluster, token, node1, node2 in
            let phoneDatabase = cluster.client(on: node1, token: token, device: "phone").database()
            try await Self.subscribe(phoneDatabase)
            _ = try await phoneDatabase.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])

            // watch, on node 2: listens to its push channel.
            let watchClient = cluster.client(on: node2, token: token, device: "watch")
            let watch = PushRecorder()
            watch.record(watchClient.database().pushHints())
            await watchClient.waitForPushChannels()

            // laptop, on node 2: an automatic engine (on a test clock: only work due at once,
            // such as a pushed fetch, runs), caught up, its push channel open.
            let laptopClient = cluster.client(on: node2, token: token, device: "laptop")
            let laptop = try TestDevice(
                "laptop", database: laptopClient.database(),
                directory: cluster.directory.appendingPathComponent("laptop")
            ) { configuration in
                configuration.automaticallySync = true
                configuration.clock = TestClock()
            }
            try await laptop.waitForEvents("the laptop's catch-up fetch") {
                $0.contains { $0.kind == .didFetchChanges }
            }
            await laptopClient.waitForPushChannels()
            let mark = laptop.events.count

            // phone, on node 1: saves a note.
            let saved = try await phoneDatabase.modifyRecords(
                saving: [Self.record("pushed", "from node 1")], deleting: [])
            _ = try saved.saveResults[Self.note("pushed")]?.get()

            // watch, on node 2: a hint for the Notes zone within 20 s.
            try await waitUntil("the watch on node 2 got a hint for node 1's commit") {
                watch.hints.contains { $0.zoneID == Self.notes }
            }
            // laptop, on node 2: its engine fetched the note on the push alone.
            try await laptop.waitForEvents(
                "the laptop fetched the pushed note", limit: .seconds(20), Self.fetched("pushed", after: mark))
            #expect(laptop.title(Self.note("pushed")) == "from node 1")
        }
    }

    // F103, F160: node 1 dies mid-stream. Every save it acknowledged is in the shared database;
    // the save whose answer was lost is resent on node 2 under its request ID and lands once;
    // the logs' offsets have no gap; node 2 serves on.
    @Test(
        "F103 F160 a node killed mid-stream: node 2 serves every save node 1 acknowledged, offsets dense, the lost answer replayed by request ID"
    )
    func nodeKilled() async throws {
        try await Self.withAliceOnTwoNodes { cluster, token, node1, node2 in
            let onNode1 = cluster.client(on: node1, token: token, device: "phone").database()
            _ = try await onNode1.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])

            // phone, on node 1: saves notes one request at a time, as fast as node 1 answers.
            let acknowledged = Locked<[Int]>([])
            let limit = 5_000
            let sender = Task { () -> (inFlight: Int, failure: (any Error)?) in
                for number in 0..<limit {
                    do {
                        let response = try await onNode1.modifyRecords(
                            saving: [Self.record("n\(number)", "note \(number)")], deleting: [],
                            requestID: RequestID("phone-\(number)"))
                        _ = try response.saveResults[Self.note("n\(number)")]?.get()
                        acknowledged.change { $0.append(number) }
                    } catch {
                        return (number, error)
                    }
                }
                return (limit, nil)
            }

            // node 1 is killed after the first few acknowledgements, while the phone sends on.
            try await waitUntil("node 1 acknowledged five saves") { acknowledged.value.count >= 5 }
            node1.process.send(SIGKILL)
            let (inFlight, failure) = await sender.value
            #expect(await node1.process.finish().status == 128 + SIGKILL)
            #expect(inFlight < limit, "node 1 answered every save before it died")
            #expect((failure as? SyncError) != nil, "\(String(describing: failure))")
            let acked = acknowledged.value
            #expect(acked == Array(0..<inFlight), "every save before the one in flight was acknowledged")

            // phone, now on node 2: resends the save whose answer was lost, under its request ID.
            // Whether node 1 committed it or not, it is saved once and not refused as a conflict
            // with itself.
            let onNode2 = cluster.client(on: node2, token: token, device: "phone").database()
            let committedByNode1 = try await fetchAll(onNode2, zone: Self.notes).records["n\(inFlight)"]
            let resent = try await onNode2.modifyRecords(
                saving: [Self.record("n\(inFlight)", "note \(inFlight)")], deleting: [],
                requestID: RequestID("phone-\(inFlight)"))
            let resentRecord = try resent.saveResults[Self.note("n\(inFlight)")]?.get()
            #expect(resentRecord != nil)
            if let committedByNode1 {
                // node 1 committed it before it died: node 2 replays that outcome, no second write.
                #expect(resentRecord?.recordChangeTag == committedByNode1.recordChangeTag)
            }

            // phone, on node 2: every note node 1 acknowledged, and the resent one; no other.
            let (records, token2) = try await fetchAll(onNode2, zone: Self.notes)
            let expected = Set((0...inFlight).map { "n\($0)" })
            #expect(Set(records.keys) == expected, "missing: \(expected.subtracting(records.keys).sorted())")
            for number in 0...inFlight { #expect(records["n\(number)"].map(Self.title) == "note \(number)") }

            // The logs in PostgreSQL: every offset up to each log's end holds an entry.
            let extents = try logExtents(cluster.store)
            #expect(!extents.isEmpty)
            for extent in extents { #expect(extent.isDense, "\(extent)") }

            // node 2 serves on: a new save, and a fetch from the last token brings it alone.
            let after = try await onNode2.modifyRecords(saving: [Self.record("after", "after the kill")], deleting: [])
            _ = try after.saveResults[Self.note("after")]?.get()
            let latest = try await onNode2.fetchZoneChanges(zoneID: Self.notes, since: token2)
            #expect(Self.titles(latest) == ["after": "after the kill"])
        }
    }

    // F84, F90, F152: PostgreSQL stops under two running nodes. Requests are refused with
    // serviceUnavailable and a retry-after; an automatic engine keeps its change pending and
    // resends on its own after the retry-after once PostgreSQL is back; nothing acknowledged
    // before is lost; node 2's LISTEN connection is made again and pushes flow across nodes.
    @Test(
        "F84 F90 F152 PostgreSQL restarted mid-run: 503 with retry-after meanwhile, the engine's own retry lands, nothing lost, push across nodes resumes"
    )
    func postgresRestarted() async throws {
        // A PostgreSQL of its own: stopping the shared one would break the other tests.
        let postgres = try await PostgresTestServer()
        do {
            try await Self.restartScenario(postgres)
        } catch {
            await postgres.destroy()
            throw error
        }
        await postgres.destroy()
    }

    /// The timeline of ``postgresRestarted()`` on `postgres`.
    static func restartScenario(_ postgres: PostgresTestServer) async throws {
        try await Cluster.with(store: try await postgres.createDatabase()) { cluster in
            let token = try await cluster.addUser("alice")
            let node1 = try await cluster.startNode("node1")
            let node2 = try await cluster.startNode("node2")
            let phone = cluster.client(on: node1, token: token, device: "phone").database()
            try await Self.subscribe(phone)

            // laptop, on node 1: an automatic engine on the real clock, which retries by itself.
            let laptop = try TestDevice(
                "laptop", database: cluster.client(on: node1, token: token, device: "laptop").database(),
                directory: cluster.directory.appendingPathComponent("laptop")
            ) { configuration in configuration.automaticallySync = true }

            // watch, on node 2: listens to its push channel.
            let watchClient = cluster.client(on: node2, token: token, device: "watch")
            let watch = PushRecorder()
            watch.record(watchClient.database().pushHints())
            await watchClient.waitForPushChannels()

            // laptop: a note before the outage, acknowledged; the watch hears of it across nodes.
            try laptop.createZone(Self.notes)
            try laptop.write(Self.note("before"), "before the outage")
            try await laptop.waitForEvents(
                "the note before the outage was saved", limit: .seconds(20), Self.saved("before"))
            try await waitUntil("the watch on node 2 got a hint before the outage") {
                watch.hints.contains { $0.zoneID == Self.notes }
            }

            // PostgreSQL stops.
            try await postgres.stop()

            // phone, on node 1 and on node 2: refused with serviceUnavailable and a retry-after.
            let onNode2 = cluster.client(on: node2, token: token, device: "tablet").database()
            for (database, node) in [(phone, node1), (onNode2, node2)] {
                let refused = await #expect(throws: SyncError.self, "\(node.name)") {
                    _ = try await database.fetchZoneChanges(zoneID: Self.notes, since: nil)
                }
                #expect(refused?.code == .serviceUnavailable, "\(node.name): \(String(describing: refused))")
                #expect(refused?.retryAfter != nil, "\(node.name): \(String(describing: refused))")
            }

            // laptop: writes during the outage; its engine's send is refused the same way and the
            // save stays pending. When each send of the note ended, and how, is kept.
            let sends = Locked<[(at: ContinuousClock.Instant, saved: Bool)]>([])
            laptop.onEvent { event, _ in
                guard case .sentRecordZoneChanges(let sent) = event else { return }
                if sent.savedRecords.contains(where: { $0.recordID == Self.note("during") }) {
                    sends.change { $0.append((.now, true)) }
                } else if sent.failedRecordSaves.contains(where: { $0.record.recordID == Self.note("during") }) {
                    sends.change { $0.append((.now, false)) }
                }
            }
            let mark = laptop.events.count
            try laptop.write(Self.note("during"), "written during the outage")
            try await laptop.waitForEvents("the engine's send during the outage was refused", limit: .seconds(20)) {
                events in
                events.dropFirst(mark).contains { event in
                    guard case .sentRecordZoneChanges(let sent) = event else { return false }
                    return sent.failedRecordSaves.contains {
                        $0.record.recordID == Self.note("during") && $0.error.code == .serviceUnavailable
                            && $0.error.retryAfter != nil
                    }
                }
            }
            #expect(try laptop.engine.state.pendingRecordZoneChanges.contains(.saveRecord(Self.note("during"))))

            // PostgreSQL starts again on the same port.
            try await postgres.startAgain()

            // laptop: its engine retries after the retry-after on its own, and the save lands.
            try await laptop.waitForEvents(
                "the engine's own retry saved the note", limit: .seconds(30), Self.saved("during", after: mark))
            try await waitUntil("the laptop has nothing pending") {
                try laptop.engine.state.pendingRecordZoneChanges.isEmpty
            }
            // The engine never sent again sooner than the server's retry-after (1 s; a little
            // less allowed for the time between the answer and its event).
            let attempts = sends.value
            #expect(attempts.last?.saved == true && attempts.dropLast().allSatisfy { !$0.saved }, "\(attempts)")
            for (earlier, later) in zip(attempts, attempts.dropFirst()) {
                #expect(later.at - earlier.at >= .milliseconds(900), "\(attempts)")
            }

            // tablet, on node 2: the note from before the outage and the one written during it.
            let (records, _) = try await fetchAll(onNode2, zone: Self.notes)
            #expect(
                records.mapValues(Self.title) == ["before": "before the outage", "during": "written during the outage"])

            // phone, on node 1: saves notes until the watch on node 2 hears of one (node 2's
            // LISTEN connection is made again with a backoff; a NOTIFY before it is not heard).
            let hintsBefore = watch.hints.count
            var number = 0
            try await waitUntil(
                "the watch on node 2 got a hint for a commit on node 1 after the restart", limit: .seconds(30)
            ) {
                if watch.hints.dropFirst(hintsBefore).contains(where: { $0.zoneID == Self.notes }) { return true }
                if number % 25 == 0 {  // a save every half second
                    do {
                        let saved = try await phone.modifyRecords(
                            saving: [Self.record("after\(number)", "after")], deleting: [])
                        _ = try saved.saveResults[Self.note("after\(number)")]?.get()
                    } catch let error as SyncError where error.code == .serviceUnavailable {
                        // A pooled connection that died with the restart: made again on a later try.
                    }
                }
                number += 1
                return false
            }
        }
    }
}
