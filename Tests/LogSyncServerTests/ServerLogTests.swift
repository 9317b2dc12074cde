import CoreMetrics
import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

func withServer<R>(
    durability: Durability = .fast, metricsFactory: any MetricsFactory = MetricsSystem.factory,
    _ body: (SyncServer, URL) async throws -> R
) async throws -> R {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("logsync-server-tests-\(UUID().uuidString)", isDirectory: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let server = try SyncServer(.init(directory: directory, durability: durability, metricsFactory: metricsFactory))
    return try await body(server, directory)
}

@Suite("The server's log and its index")
struct ServerLogTests {
    /// The projection rule on a server database: after a random history of zone and record
    /// operations (deletions, re-creations, compaction included) and of wrapped zone keys, the index built incrementally
    /// equals the index rebuilt by replaying the log.
    @Test(arguments: [1 as UInt64, 2, 3])
    func indexEqualsItsRebuildAfterRandomHistories(seed: UInt64) async throws {
        try await withServer { server, _ in
            var random = SeededRandom(seed: seed)
            let database = server.database(for: "alice", device: "phone")
            let zones = (0..<3).map { RecordZone.ID(zoneName: "Z\($0)") }
            let device = DeviceKeyPair()
            try await database.registerDeviceKey(device.publicKey)
            var tags: [Record.ID: String] = [:]
            for step in 0..<400 {
                let zoneID = zones.randomElement(using: &random)!
                switch Int.random(in: 0..<20, using: &random) {
                case 0:
                    _ = try await database.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [zoneID]))
                    tags = tags.filter { $0.key.zoneID != zoneID }
                case 1:
                    let token = try server.admin.currentToken(of: "alice")
                    try server.admin.compactTombstones(of: "alice", before: token)
                case 2...4:
                    let victims = tags.keys.filter { $0.zoneID == zoneID }.prefix(3)
                    _ = try await database.modifyRecords(ModifyRecordsRequest(recordIDsToDelete: Array(victims)))
                    for id in victims { tags[id] = nil }
                default:
                    _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zoneID)]))
                    var batch: [Record] = []
                    for _ in 0..<Int.random(in: 1...5, using: &random) {
                        let id = Record.ID(recordName: "r\(Int.random(in: 0..<30, using: &random))", zoneID: zoneID)
                        guard !batch.contains(where: { $0.recordID == id }) else { continue }
                        var record = Record(recordType: "Note", recordID: id)
                        if let tag = tags[id] {
                            record.applySystemFields(Record.SystemFields(recordChangeTag: tag))
                        }
                        record["step"] = .int64(Int64(step))
                        batch.append(record)
                    }
                    let response = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: batch))
                    for (id, result) in response.saveResults {
                        tags[id] = try result.get().recordChangeTag
                    }
                    if step.isMultiple(of: 7) {
                        // A new version of the zone's key (F129), dropped again with the zone.
                        let keys = try await database.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [zoneID])).results[
                            zoneID]?.get()
                        let version = (keys?.latestVersion ?? 0) + 1  // versions follow one another
                        let wrap = ZoneKey.generate(zoneID: zoneID, version: version).wrapped(for: device.publicKey)
                        let saved = try await database.saveZoneKeys(SaveZoneKeysRequest(keys: [wrap]))
                        #expect((try? saved.results[wrap.id]?.get()) != nil)
                    }
                }
            }
            let log = try server.admin.log(of: "alice")
            #expect(try log.lastOffset > 300)
            let mismatch = try log.verifyProjections()
            #expect(mismatch == nil, "seed \(seed): \(String(describing: mismatch))")
            try Self.expectIndexEqualsEntryByEntry(log)
        }
    }

    /// F123: after a random history of records moved between parents, deleted and saved again,
    /// of hierarchy shares created and deleted, and of compactions, each live record's place in
    /// the index (its shared hierarchy's root, its depth) is the one its parent chain gives, and
    /// the index equals its rebuild from the log.
    @Test(arguments: [1 as UInt64, 2, 3])
    func hierarchiesEqualTheirParentChainsAfterRandomHistories(seed: UInt64) async throws {
        try await withServer { server, _ in
            var random = SeededRandom(seed: seed)
            let database = server.database(for: "alice", device: "phone")
            let zoneID = RecordZone.ID(zoneName: "Tree")
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zoneID)]))
            func id(_ index: Int) -> Record.ID { Record.ID(recordName: "r\(index)", zoneID: zoneID) }
            var sharesSaved = 0
            for step in 0..<300 {
                switch Int.random(in: 0..<20, using: &random) {
                case 0:
                    try server.admin.compactTombstones(of: "alice", before: try server.admin.currentToken(of: "alice"))
                case 1...3:
                    let victims = (0..<2).map { _ in id(Int.random(in: 0..<24, using: &random)) }
                    _ = try await database.modifyRecords(ModifyRecordsRequest(recordIDsToDelete: Array(Set(victims))))
                case 4...5:
                    let root = id(Int.random(in: 0..<24, using: &random))
                    let shareID = Record.ID(recordName: "share-\(root.recordName)", zoneID: zoneID)
                    if Bool.random(using: &random) {
                        _ = try await database.modifyRecords(ModifyRecordsRequest(recordIDsToDelete: [shareID]))
                    } else {
                        let share = Share(rootRecordID: root, shareID: shareID)
                        let response = try await database.modifyRecords(
                            ModifyRecordsRequest(recordsToSave: [share.record]))
                        if case .success? = response.saveResults[shareID] { sharesSaved += 1 }
                    }
                default:
                    var batch: [Record] = []
                    for _ in 0..<Int.random(in: 1...4, using: &random) {
                        let recordID = id(Int.random(in: 0..<24, using: &random))
                        guard !batch.contains(where: { $0.recordID == recordID }) else { continue }
                        var record = Record(recordType: "Note", recordID: recordID)
                        record["step"] = .int64(Int64(step))
                        let parent = Int.random(in: -8..<24, using: &random)
                        record.parent = parent < 0 ? nil : Record.Reference(recordID: id(parent))
                        batch.append(record)
                    }
                    _ = try await database.modifyRecords(
                        ModifyRecordsRequest(recordsToSave: batch, savePolicy: .changedKeys, atomically: false))
                }
            }
            let log = try server.admin.log(of: "alice")
            let (states, roots) = try log.read { reader in
                var states: [String: RecordState] = [:]
                var roots: Set<String> = []
                try reader.transaction.forEach(in: try reader.table("records", of: "index")) { key, value in
                    states[String(decoding: key.dropFirst(8), as: UTF8.self)] = try RecordState(decoding: Array(value))
                    return true
                }
                try reader.transaction.forEach(in: try reader.table("shareRoots", of: "index")) { key, _ in
                    roots.insert(String(decoding: key.dropFirst(8), as: UTF8.self))
                    return true
                }
                return (states, roots)
            }
            func expected(_ name: String, _ seen: Set<String> = []) -> (root: String, depth: UInt64) {
                let state = states[name]!
                let above: (root: String, depth: UInt64)
                if state.parent.isEmpty {
                    above = ("", 0)
                } else if let parent = states[state.parent], !parent.isTombstone, !seen.contains(state.parent) {
                    let chain = expected(state.parent, seen.union([name]))
                    above = (chain.root, chain.depth + 1)
                } else {
                    above = ("", 1)
                }
                return (roots.contains(name) ? name : above.root, above.depth)
            }
            var live = 0
            for (name, state) in states where !state.isTombstone && state.recordType == "Note" {
                live += 1
                let place = expected(name)
                #expect(state.hierarchyRoot == place.root, "seed \(seed): \(name)'s root")
                #expect(state.depth == place.depth, "seed \(seed): \(name)'s depth")
            }
            #expect(live > 5)
            #expect(sharesSaved > 3, "seed \(seed): \(sharesSaved) shares saved")
            let mismatch = try log.verifyProjections()
            #expect(mismatch == nil, "seed \(seed): \(String(describing: mismatch))")
            try Self.expectIndexEqualsEntryByEntry(log)
        }
    }

    /// The projection rule on `log`, and its index equal to one applied entry by entry (see
    /// ``expectIndexEqualsEntryByEntry(_:sourceLocation:)``).
    static func expectProjectionsHold(_ log: Log, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try log.verifyProjections() == nil, sourceLocation: sourceLocation)
        try expectIndexEqualsEntryByEntry(log, sourceLocation: sourceLocation)
    }

    /// The index applies runs of record changes together (`ServerIndex.apply(_:to:)` of many
    /// entries); appended one entry at a time, as the projection's single-entry `apply` does,
    /// the log must give the same tables.
    static func expectIndexEqualsEntryByEntry(_ log: Log, sourceLocation: SourceLocation = #_sourceLocation) throws {
        struct EntryByEntry: Projection {
            let index = ServerIndex()
            var name: String { index.name }
            var version: UInt32 { index.version }
            var tableNames: [String] { index.tableNames }
            func apply(_ entry: LogEntry, to tables: ProjectionTables) throws { try index.apply(entry, to: tables) }
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "entry-by-entry-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let copy = try Log.open(
            at: directory, named: log.name, options: .init(durability: .fast), projections: [EntryByEntry()])
        var cursor = try log.entries()
        while let entry = try cursor.next() {
            _ = try copy.append(NewEntry(kind: entry.kind, payload: entry.payload, time: entry.time))
        }
        func contents(_ log: Log) throws -> [String: [[UInt8]: [UInt8]]] {
            try log.read { reader in
                var tables: [String: [[UInt8]: [UInt8]]] = [:]
                for name in ServerIndex().tableNames {
                    var rows: [[UInt8]: [UInt8]] = [:]
                    try reader.transaction.forEach(in: try reader.table(name, of: "index")) { key, value in
                        rows[Array(key)] = Array(value)
                        return true
                    }
                    tables[name] = rows
                }
                return tables
            }
        }
        let (batched, single) = (try contents(log), try contents(copy))
        for name in ServerIndex().tableNames {
            #expect(batched[name] == single[name], "table \(name)", sourceLocation: sourceLocation)
        }
    }

    /// A request is one transaction: its entries are consecutive and a failed atomic zone
    /// leaves no entry at all (F148).
    @Test func aFailedAtomicZoneWritesNothing() async throws {
        try await withServer { server, _ in
            let database = server.database(for: "alice")
            let zone = RecordZone.ID(zoneName: "Atomic")
            _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
            var existing = Record(recordType: "Note", recordID: Record.ID(recordName: "a", zoneID: zone))
            existing["v"] = 1
            _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [existing]))
            let before = try server.admin.log(of: "alice").lastOffset

            var fresh = Record(recordType: "Note", recordID: Record.ID(recordName: "b", zoneID: zone))
            fresh["v"] = 2
            var conflicting = Record(recordType: "Note", recordID: existing.recordID)  // no tag: conflict
            conflicting["v"] = 3
            let response = try await database.modifyRecords(
                ModifyRecordsRequest(recordsToSave: [fresh, conflicting], atomically: true))
            #expect(throws: SyncError.self) { try response.saveResults[fresh.recordID]?.get() }
            #expect(try server.admin.log(of: "alice").lastOffset == before)
        }
    }

    /// Everything committed survives a restart of the server on the same directory.
    @Test func aRestartedServerKeepsEveryCommit() async throws {
        try await withServer(durability: .durable) { server, directory in
            let zone = RecordZone.ID(zoneName: "Notes")
            do {
                let database = server.database(for: "bob")
                _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zone)]))
                let records = (0..<20).map { index -> Record in
                    var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n\(index)", zoneID: zone))
                    record["index"] = .int64(Int64(index))
                    return record
                }
                _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: records))
            }
            server.shutdown()
            server.databases.withLock { $0.removeAll() }
            let restarted = try SyncServer(.init(directory: directory, durability: .durable))
            let changes = try await restarted.database(for: "bob").fetchZoneChanges(
                FetchZoneChangesRequest(zoneID: zone))
            #expect(changes.modifications.count == 20)
            #expect(
                Set(changes.modifications.compactMap { $0.record["index"] })
                    == Set((0..<20).map { RecordValue.int64(Int64($0)) }))
        }
    }
}
