import Foundation
import LogStore
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel
import Synchronization
import Testing

/// Users partitioned across two PostgreSQL clusters (two servers started by the tests): the
/// directory on cluster "main", a second cluster "b"; placement, sync on both, a share across
/// them, and a user moved online from one to the other.
@Suite("PostgreSQL clusters")
struct ClusterTests {
    /// A new database on each server: the directory (cluster "main") and cluster "b".
    struct Databases {
        var main: String
        var b: String

        static func make() async throws -> Databases {
            Databases(
                main: try await PostgresTestServer.shared().createDatabase(),
                b: try await PostgresTestServer.shared(number: 1).createDatabase())
        }

        /// A partitioned store over both.
        func storage() throws -> PartitionedStorage {
            try PartitionedStorage(clusters: [
                PostgresCluster(
                    name: "main", storage: try PostgresStorage(url: main, connections: 2, logger: quietLogger)),
                PostgresCluster(name: "b", storage: try PostgresStorage(url: b, connections: 2, logger: quietLogger)),
            ])
        }

        /// A server (a node) on both clusters, its local files under `directory`.
        func node(_ directory: URL) throws -> SyncServer {
            try SyncServer(SyncServer.Configuration(directory: directory, durability: .fast), storage: storage())
        }

        /// How many entries the logs of user `number` hold on the database at `url`.
        static func entries(of number: UInt64, on url: String) async throws -> Int64 {
            try await sqlValue(
                url,
                "SELECT count(*) FROM logsync_entries JOIN logsync_logs USING (log_id) WHERE name LIKE 'u\(number)/%'")
        }
    }

    /// Runs `body` with new databases and two nodes on them, then shuts the nodes down.
    static func withTwoNodes(_ body: (Databases, SyncServer, SyncServer) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let databases = try await Databases.make()
        let (node1, node2) = try await onOwnThread {
            (
                try databases.node(directory.appendingPathComponent("1")),
                try databases.node(directory.appendingPathComponent("2"))
            )
        }
        defer {
            node1.shutdown()
            node2.shutdown()
        }
        try await body(databases, node1, node2)
    }

    static func partitioned(_ node: SyncServer) throws -> PartitionedStorage {
        try #require(node.storage as? PartitionedStorage)
    }

    static func number(of user: UserID, _ node: SyncServer) throws -> UInt64 {
        try #require(try UserMove.number(of: user, in: partitioned(node)))
    }

    static let notes = RecordZone.ID(zoneName: "Notes")

    static func note(_ name: String, zone: RecordZone.ID = notes) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
        record["text"] = .string(name)
        return record
    }

    /// Saves `names` as notes, one request each, each acknowledged.
    static func save(_ names: [String], _ database: any CloudDatabase) async throws {
        for name in names {
            let response = try await database.modifyRecords(saving: [note(name)], deleting: [])
            #expect(try response.saveResults[note(name).recordID]?.get() != nil, "\(name) is acknowledged")
        }
    }

    /// The names of the notes changed since `token`, following pages, and the last token.
    static func changes(
        _ database: any CloudDatabase, since token: ZoneChangeToken?
    ) async throws -> (names: [String], token: ZoneChangeToken?) {
        var names: [String] = []
        var token = token
        while true {
            let page = try await database.fetchZoneChanges(zoneID: notes, since: token)
            names += page.modifications.map(\.record.recordID.recordName)
            token = page.changeToken
            if !page.moreComing { return (names, token) }
        }
    }

    // MARK: Placement

    @Test("new users go to the cluster with the fewest users, ties to the first listed; a user with logs stays")
    func placement() async throws {
        try await Self.withTwoNodes { databases, node1, node2 in
            // Alice, bob and carol, placed by the rule as they first write.
            for (index, user) in (["alice", "bob", "carol"] as [UserID]).enumerated() {
                let node = index.isMultiple(of: 2) ? node1 : node2
                _ = try await node.database(for: user).modifyZones(
                    saving: [RecordZone(zoneName: "Notes")], deleting: [])
            }
            // Erin, written by a node without clusters (as before the store had them): her
            // logs on main stay hers, though the rule would now say b.
            let plain = try await onOwnThread {
                try SyncServer(
                    SyncServer.Configuration(directory: try temporaryDirectory(), durability: .fast),
                    storage: try PostgresStorage(url: databases.main, connections: 1, logger: quietLogger))
            }
            _ = try await plain.database(for: "erin").modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            plain.shutdown()
            try await Self.save(["e1"], node2.database(for: "erin"))
            // Dave: main holds 3, b 1.
            _ = try await node1.database(for: "dave").modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])

            let storage = try Self.partitioned(node1)
            var placed: [UserID: String] = [:]
            for user in ["alice", "bob", "carol", "erin", "dave"] as [UserID] {
                placed[user] = try storage.clusterName(ofUser: try Self.number(of: user, node1), fresh: true)
            }
            #expect(placed == ["alice": "main", "bob": "b", "carol": "main", "erin": "main", "dave": "b"])
            #expect(try storage.userCounts() == ["main": 3, "b": 2])
            #expect(try await Self.changes(node1.database(for: "erin"), since: nil).names == ["e1"])

            // Each user's entries are on their cluster only.
            let bob = try Self.number(of: "bob", node1)
            #expect(try await Databases.entries(of: bob, on: databases.b) > 0)
            #expect(try await Databases.entries(of: bob, on: databases.main) == 0)
            let alice = try Self.number(of: "alice", node1)
            #expect(try await Databases.entries(of: alice, on: databases.main) > 0)
            #expect(try await Databases.entries(of: alice, on: databases.b) == 0)
        }
    }

    @Test("a bad cluster list, an unknown target and a second move elsewhere are refused, naming what is wrong")
    func refusals() async throws {
        let databases = try await Databases.make()
        let storage = try await onOwnThread { try databases.storage() }
        defer { storage.shutdown() }
        #expect(throws: ClusterError("a partitioned store needs at least one cluster")) {
            try PartitionedStorage(clusters: [])
        }
        let named = { (name: String) in PostgresCluster(name: name, storage: storage.directory) }
        #expect(throws: ClusterError("the cluster name \"main\" is given twice")) {
            try PartitionedStorage(clusters: [named("main"), named("main")])
        }
        let bad = #expect(throws: ClusterError.self) { try PartitionedStorage(clusters: [named("a b")]) }
        #expect(bad?.description.contains("\"a b\" cannot name a cluster") == true)

        let unknown = #expect(throws: ClusterError.self) {
            try UserMove(storage: storage, user: 3, to: "c").run()
        }
        #expect(unknown?.description == "no cluster is named \"c\" here (known: main, b)")
        // A move to b stopped after its first step: a move to main is refused until it ends.
        struct Stop: Error {}
        #expect(try storage.clusterName(ofUser: 3) == "main")
        _ = try await onOwnThread {
            try? UserMove(storage: storage, user: 3, to: "b").run { if $0 == .begin { throw Stop() } }
        }
        let second = #expect(throws: ClusterError.self) {
            try UserMove(storage: storage, user: 3, to: "main").run()
        }
        #expect(second?.description.contains("is being moved to cluster b") == true)
        let finished = try await onOwnThread { try UserMove(storage: storage, user: 3, to: "b").run() }
        #expect(finished.from == "main" && finished.to == "b")
        let again = try await onOwnThread { try UserMove(storage: storage, user: 3, to: "b").run() }
        #expect(again.from == "b" && again.to == "b")
    }

    // MARK: Sync and sharing across clusters

    @Test("F113 F119 devices of users on both clusters sync; a share from main to b is edited both ways")
    func crossClusterShare() async throws {
        try await Self.withTwoNodes { databases, node1, node2 in
            try node1.registerUser("alice", emailAddress: "alice@example.com")
            try node1.registerUser("bob", emailAddress: "bob@example.com")
            // Alice's phone on node 1, her laptop on node 2; bob's on node 2.
            let alicePhone = node1.database(for: "alice", device: "phone")
            let aliceLaptop = node2.database(for: "alice", device: "laptop")
            let bobPrivate = node2.database(for: "bob", device: "phone")
            _ = try await alicePhone.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            _ = try await bobPrivate.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            let storage = try Self.partitioned(node1)
            #expect(try storage.clusterName(ofUser: Self.number(of: "alice", node1), fresh: true) == "main")
            #expect(try storage.clusterName(ofUser: Self.number(of: "bob", node1), fresh: true) == "b")

            try await Self.save(["a1"], alicePhone)
            try await Self.save(["b1"], bobPrivate)
            #expect(try await Self.changes(aliceLaptop, since: nil).names == ["a1"])
            #expect(try await Self.changes(node1.database(for: "bob", device: "laptop"), since: nil).names == ["b1"])

            // Alice (main) shares her zone with bob (b).
            var share = Share(recordZoneID: Self.notes)
            share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
            let saved = try await alicePhone.modifyRecords(saving: [share.record], deleting: [])
            let savedShare = try #require(saved.saveResults[share.recordID]).get()
            let url = try #require(try Share(record: savedShare).url)
            let bobShared = node2.database(for: "bob", scope: .shared, device: "phone")
            let accepted = try await bobShared.acceptShares(AcceptSharesRequest(shareURLs: [url]))
            #expect(accepted.results.values.allSatisfy { (try? $0.get()) != nil })
            let owner = try node1.userRecordID(for: "alice").recordName
            let sharedZone = RecordZone.ID(zoneName: "Notes", ownerName: owner)

            // Bob edits in alice's zone: it lands in alice's log on main.
            _ = try await bobShared.modifyRecords(saving: [Self.note("from-bob", zone: sharedZone)], deleting: [])
            #expect(try await Self.changes(aliceLaptop, since: nil).names.contains("from-bob"))
            // Alice edits: bob's shared database on b sees it.
            try await Self.save(["from-alice"], alicePhone)
            let bobSees = try await node1.database(for: "bob", scope: .shared, device: "laptop").fetchZoneChanges(
                zoneID: sharedZone, since: nil)
            #expect(
                Set(bobSees.modifications.map(\.record.recordID.recordName)).isSuperset(of: [
                    "from-bob", "from-alice", "a1",
                ]))
            let bob = try Self.number(of: "bob", node1)
            #expect(try await Databases.entries(of: bob, on: databases.main) == 0)
        }
    }

    // MARK: Moves

    /// A value shared by tasks and threads, behind a lock.
    final class Shared<Value: Sendable>: Sendable {
        private let mutex: Mutex<Value>
        init(_ value: Value) { mutex = Mutex(value) }
        var value: Value { mutex.withLock { $0 } }
        func change(_ body: (inout Value) -> Void) { mutex.withLock { body(&$0) } }
    }

    /// Runs `body` from the move's thread, where blocking is harmless, until it ends.
    static func blocking(_ body: @escaping @Sendable () async throws -> Void) throws {
        let done = DispatchSemaphore(value: 0)
        let failure = Shared<(any Error)?>(nil)
        Task {
            do { try await body() } catch { failure.change { $0 = error } }
            done.signal()
        }
        done.wait()
        if let error = failure.value { throw error }
    }

    /// Whether `body` fails with a retryable `serviceUnavailable`.
    static func isRetryable(_ body: () async throws -> Void) async -> Bool {
        do {
            try await body()
            return false
        } catch let error as SyncError {
            return error.code == .serviceUnavailable && error.retryAfter != nil
        } catch {
            return false
        }
    }

    @Test("an online move: writes between its steps are all on the target, tokens go on, a stale node re-routes")
    func onlineMove() async throws {
        try await Self.withTwoNodes { databases, node1, node2 in
            let phone = node1.database(for: "alice", device: "phone")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            try await Self.save(["n1", "n2", "n3"], phone)
            let (before, token) = try await Self.changes(phone, since: nil)
            #expect(before == ["n1", "n2", "n3"])
            // Node 2 knows alice is on main, and keeps her log open.
            let stale = node2.database(for: "alice", device: "laptop")
            #expect(try await Self.changes(stale, since: nil).names == before)

            let alice = try Self.number(of: "alice", node1)
            let storage = try Self.partitioned(node1)
            #expect(try storage.clusterName(ofUser: alice) == "main")
            let move = UserMove(storage: try await onOwnThread { try databases.storage() }, user: alice, to: "b")
            defer { move.storage.shutdown() }
            let steps = Shared<[UserMove.Step]>([])
            let report = try await onOwnThread {
                try move.run { step in
                    steps.change { $0.append(step) }
                    try Self.blocking {
                        switch step {
                        case .begin:
                            try await Self.save(["n4"], phone)
                        case .copy:
                            // After the bulk copy, before the fence: left for the tail.
                            try await Self.save(["n5"], phone)
                        case .fence, .tail:
                            // Fenced: refused, retryably, on both nodes.
                            #expect(await Self.isRetryable { try await Self.save(["refused"], phone) })
                            #expect(await Self.isRetryable { try await Self.save(["refused"], stale) })
                        case .switchDirectory:
                            // Node 1 meets the fence on main and reads the directory again.
                            try await Self.save(["n6"], phone)
                        case .cleanup:
                            try await Self.save(["n7"], stale)
                        }
                    }
                }
            }
            #expect(steps.value == UserMove.Step.allCases)
            #expect(report.from == "main" && report.to == "b")
            #expect(try storage.clusterName(ofUser: alice, fresh: true) == "b")

            // Everything acknowledged is on b, nothing is left on main.
            #expect(try await Databases.entries(of: alice, on: databases.main) == 0)
            let onB = try await sqlValue(
                databases.b,
                "SELECT last_offset FROM logsync_logs WHERE name = 'u\(alice)/private'")
            #expect(try await Databases.entries(of: alice, on: databases.b) == onB)
            // The old token fetches exactly what followed it, on either node.
            #expect(try await Self.changes(phone, since: token).names == ["n4", "n5", "n6", "n7"])
            #expect(try await Self.changes(stale, since: token).names == ["n4", "n5", "n6", "n7"])
            // The stale node writes on to b.
            try await Self.save(["n8"], stale)
            #expect(try await Databases.entries(of: alice, on: databases.main) == 0)
            #expect(try await Self.changes(phone, since: nil).names.sorted() == (1...8).map { "n\($0)" })
        }
    }

    @Test("a device writing without pause through a move on two nodes loses no acknowledged write")
    func writesDuringMove() async throws {
        try await Self.withTwoNodes { databases, node1, node2 in
            let phone = node1.database(for: "alice", device: "phone")
            let laptop = node2.database(for: "alice", device: "laptop")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            try await Self.save(["first"], phone)
            _ = try await Self.changes(laptop, since: nil)
            let alice = try Self.number(of: "alice", node1)
            let mover = try await onOwnThread { try databases.storage() }
            defer { mover.shutdown() }

            let acknowledged = Shared<[String]>([])
            let moved = Shared(false)
            // Two devices, one per node, write until the move is over and a few writes more,
            // each write tried again while the move holds its fence.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (device, database) in [("phone", phone), ("laptop", laptop)] {
                    group.addTask {
                        var index = 0
                        var afterMove = 0
                        while afterMove < 3 {
                            if moved.value { afterMove += 1 }
                            let name = "\(device)-\(index)"
                            while true {
                                do {
                                    try await Self.save([name], database)
                                    break
                                } catch let error as SyncError where error.code == .serviceUnavailable {
                                    await Task.yield()
                                }
                            }
                            acknowledged.change { $0.append(name) }
                            index += 1
                        }
                    }
                }
                group.addTask {
                    _ = try await onOwnThread { try UserMove(storage: mover, user: alice, to: "b").run() }
                    moved.change { $0 = true }
                }
                try await group.waitForAll()
            }
            #expect(try await Databases.entries(of: alice, on: databases.main) == 0)
            let names = Set(try await Self.changes(node1.database(for: "alice"), since: nil).names)
            let missing = Set(acknowledged.value).subtracting(names)
            #expect(missing.isEmpty, "acknowledged but not on the target: \(missing.sorted())")
            #expect(names == Set(acknowledged.value).union(["first"]))
        }
    }

    @Test("moved to b and back while a node kept her log open: that node reads and writes the new rows")
    func movedAwayAndBack() async throws {
        try await Self.withTwoNodes { databases, node1, node2 in
            let phone = node1.database(for: "alice", device: "phone")
            let laptop = node2.database(for: "alice", device: "laptop")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            try await Self.save(["n1"], phone)
            let (seen, token) = try await Self.changes(laptop, since: nil)
            #expect(seen == ["n1"])
            let alice = try Self.number(of: "alice", node1)
            let mover = try await onOwnThread { try databases.storage() }
            defer { mover.shutdown() }
            _ = try await onOwnThread { try UserMove(storage: mover, user: alice, to: "b").run() }
            try await Self.save(["n2"], phone)
            _ = try await onOwnThread { try UserMove(storage: mover, user: alice, to: "main").run() }
            try await Self.save(["n3"], phone)
            // The laptop's node still holds the log of main's old rows.
            #expect(try await Self.changes(laptop, since: token).names == ["n2", "n3"])
            try await Self.save(["n4"], laptop)
            #expect(try await Self.changes(phone, since: token).names == ["n2", "n3", "n4"])
            #expect(try await Databases.entries(of: alice, on: databases.b) == 0)
        }
    }

    /// A crash after each step: the user is on one cluster with every acknowledged write, and
    /// running the move again finishes it.
    @Test("a move stopped after each step leaves the user whole on one cluster, and a rerun finishes it")
    func interruptedMoves() async throws {
        struct Stop: Error {}
        try await Self.withTwoNodes { databases, node1, node2 in
            for step in UserMove.Step.allCases {
                let user = UserID(rawValue: "user-\(step)")
                let phone = node1.database(for: user, device: "phone")
                _ = try await phone.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
                try await Self.save(["x1", "x2"], phone)
                let number = try Self.number(of: user, node1)
                let storage = try Self.partitioned(node1)
                let from = try storage.clusterName(ofUser: number, fresh: true)
                let to = from == "main" ? "b" : "main"
                let (fromURL, toURL) = from == "main" ? (databases.main, databases.b) : (databases.b, databases.main)
                let moverStore = try await onOwnThread { try databases.storage() }
                defer { moverStore.shutdown() }
                await #expect(throws: Stop.self) {
                    try await onOwnThread {
                        try UserMove(storage: moverStore, user: number, to: to).run { done in
                            if done == step { throw Stop() }
                        }
                    }
                }
                // The user is on exactly one cluster, whole.
                let at = try storage.clusterName(ofUser: number, fresh: true)
                #expect(at == (step == .switchDirectory || step == .cleanup ? to : from), "stopped after \(step)")
                let fenced = step == .fence || step == .tail
                if fenced {
                    #expect(await Self.isRetryable { try await Self.save(["y"], phone) }, "stopped after \(step)")
                } else {
                    try await Self.save(["x3-\(step)"], phone)
                }
                let expected = fenced ? ["x1", "x2"] : ["x1", "x2", "x3-\(step)"]
                if fenced {
                    // Reads wait too: the source is frozen, the target not yet named.
                    #expect(
                        await Self.isRetryable { _ = try await Self.changes(node2.database(for: user), since: nil) })
                } else {
                    #expect(try await Self.changes(node2.database(for: user), since: nil).names == expected)
                }

                _ = try await onOwnThread { try UserMove(storage: moverStore, user: number, to: to).run() }
                #expect(try storage.clusterName(ofUser: number, fresh: true) == to)
                #expect(try await Databases.entries(of: number, on: fromURL) == 0, "after \(step)")
                #expect(try await Databases.entries(of: number, on: toURL) > 0)
                try await Self.save(["x4"], phone)
                #expect(try await Self.changes(node2.database(for: user), since: nil).names == expected + ["x4"])
                let row = try #require(try storage.directoryRow(of: number))
                #expect(row.movingTo == nil && row.movedFrom == nil)
            }
        }
    }

    /// The single text a query returns.
    static func sqlText(_ url: String, _ query: String) async throws -> String? {
        let pool = PostgresPool(url: try PostgresURL(url), size: 1, logger: quietLogger)
        defer { pool.shutdownSoon() }
        return try await pool.run {
            try pool.withSession { session in try session.query(query).first?.decode(String?.self) }
        }
    }

    /// Appends `bytes` at `offset` of the owner's partial upload of `digest` and, with `store`,
    /// stores it.
    static func upload(
        _ storage: PartitionedStorage, owner: UInt64, _ bytes: [UInt8], at offset: Int64 = 0,
        digest: AssetDigest? = nil,
        store: Bool = true
    ) async throws -> AssetDigest {
        let digest = digest ?? AssetHasher.digest(of: bytes)
        try await storage.perform {
            let partial = AssetPartial(owner: owner, digest: digest, zone: 0)
            try bytes.withUnsafeBytes { try storage.assets.appendPartial(partial, at: offset, $0) }
            if store { try storage.assets.storePartial(partial) }
        }
        return digest
    }

    /// The stored content of `digest`, whole.
    static func content(_ storage: PartitionedStorage, owner: UInt64, _ digest: AssetDigest) async throws -> [UInt8] {
        try await storage.perform {
            var bytes: [UInt8] = []
            try storage.assets.read(owner: owner, digest: digest, from: 0, maxLength: .max) { bytes += $0 }
            return bytes
        }
    }

    @Test("a move carries the user's asset contents, bundles and partial uploads; a stale store follows them")
    func moveCarriesAssets() async throws {
        let databases = try await Databases.make()
        let (storage, stale) = try await onOwnThread { (try databases.storage(), try databases.storage()) }
        defer {
            storage.shutdown()
            stale.shutdown()
        }
        let owner: UInt64 = 7
        #expect(try storage.clusterName(ofUser: owner) == "main")
        let big = (0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let stored = try await Self.upload(storage, owner: owner, big)
        let partialDigest = AssetHasher.digest(of: Array(repeating: 9, count: 20))
        _ = try await Self.upload(
            storage, owner: owner, Array(repeating: 9, count: 10), digest: partialDigest, store: false)
        // The stale store reads from main, and remembers it.
        #expect(try await Self.content(stale, owner: owner, stored) == big)
        // A stored support bundle and a partial one, as rows.
        try await sql(
            databases.main,
            """
            INSERT INTO logsync_bundles (owner, id, size, uploaded_at, description) VALUES (7, 'kept', 3, now(), '{"id":"kept"}');
            INSERT INTO logsync_bundle_chunks (owner, id, stored, start, bytes) VALUES (7, 'kept', true, 0, '\\x010203');
            INSERT INTO logsync_bundle_partials (owner, id, length) VALUES (7, 'half', 2);
            INSERT INTO logsync_bundle_chunks (owner, id, stored, start, bytes) VALUES (7, 'half', false, 0, '\\x0405');
            """)
        let bundleRows = """
            SELECT string_agg(id || stored::text || encode(bytes, 'hex'), ',' ORDER BY id) FROM logsync_bundle_chunks WHERE owner = 7
            """

        let lateBytes: [UInt8] = Array("written after the copy".utf8)
        _ = try await onOwnThread {
            try UserMove(storage: storage, user: owner, to: "b").run { step in
                try Self.blocking {
                    switch step {
                    case .copy:
                        _ = try await Self.upload(storage, owner: owner, lateBytes)
                    case .fence:
                        #expect(
                            await Self.isRetryable {
                                _ = try await Self.upload(
                                    stale, owner: owner, Array(repeating: 9, count: 10), at: 10,
                                    digest: partialDigest, store: false)
                            })
                    default: break
                    }
                }
            }
        }
        // Through the stale store: the contents and the partial upload, from b.
        #expect(try await Self.content(stale, owner: owner, stored) == big)
        #expect(try await Self.content(stale, owner: owner, AssetHasher.digest(of: lateBytes)) == lateBytes)
        let partial = AssetPartial(owner: owner, digest: partialDigest, zone: 0)
        #expect(try await stale.perform { try stale.assets.partialLength(partial) } == 10)
        _ = try await Self.upload(
            stale, owner: owner, Array(repeating: 9, count: 10), at: 10, digest: partialDigest)
        #expect(try await Self.content(storage, owner: owner, partialDigest) == Array(repeating: 9, count: 20))
        for table in ["logsync_assets", "logsync_asset_chunks", "logsync_asset_partials"] {
            #expect(try await sqlValue(databases.main, "SELECT count(*) FROM \(table) WHERE owner = 7") == 0)
        }
        #expect(try await sqlValue(databases.b, "SELECT count(*) FROM logsync_assets WHERE owner = 7") == 3)
        for table in ["logsync_bundles", "logsync_bundle_chunks", "logsync_bundle_partials"] {
            #expect(try await sqlValue(databases.main, "SELECT count(*) FROM \(table) WHERE owner = 7") == 0)
            #expect(try await sqlValue(databases.b, "SELECT count(*) FROM \(table) WHERE owner = 7") > 0)
        }
        #expect(try await Self.sqlText(databases.b, bundleRows) == "halffalse0405,kepttrue010203")
    }
}
