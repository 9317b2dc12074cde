import Foundation
import SyncModel
import Testing

@testable import LogSync

/// `SyncEngine.RecordZoneChangeBatch`: fields, the manual initializer and the builder (F51–F58).
@Suite("Record zone change batches")
struct RecordZoneChangeBatchTests {
    typealias F = Fixtures
    typealias Batch = SyncEngine.RecordZoneChangeBatch

    /// A record whose ``Record/estimatedSize`` is exactly `size` bytes (at least 4).
    static func record(_ id: Record.ID, size: Int) -> Record {
        var record = Record(recordType: "Note", recordID: id)
        record["body"] = .bytes(Data(count: size - "body".utf8.count))
        return record
    }

    /// Builds a batch with a provider that returns `records[id]`, and the IDs it was asked for.
    static func build(
        _ pending: [RecordChange], records: [Record.ID: Record]
    ) async -> (batch: Batch?, asked: [Record.ID]) {
        var asked: [Record.ID] = []
        let batch = await Batch(pendingChanges: pending) { id in
            asked.append(id)
            return records[id]
        }
        return (batch, asked)
    }

    /// A provider that has every record of `ids`, at `size` bytes each.
    static func records(_ ids: [Record.ID], size: Int = 20) -> [Record.ID: Record] {
        Dictionary(uniqueKeysWithValues: ids.map { ($0, record($0, size: size)) })
    }

    // MARK: Fields and manual init

    @Test("F51: fields round-trip through init; atomicByZone is mutable and false by default")
    func fieldsRoundTrip() {
        let a = F.clientRecord(F.a)
        var batch = Batch(recordsToSave: [a], recordIDsToDelete: [F.b])
        #expect(batch.recordsToSave == [a])
        #expect(batch.recordIDsToDelete == [F.b])
        #expect(batch.atomicByZone == false)
        batch.atomicByZone = true
        #expect(batch.atomicByZone)
        #expect(Batch().recordsToSave.isEmpty && Batch().recordIDsToDelete.isEmpty)
    }

    @Test("F52: the manual init does not enforce the item or byte limits")
    func manualInitDoesNotEnforceLimits() {
        let many = (0...Limits.maxItemsPerRequest).map { F.clientRecord(F.id("r\($0)")) }
        #expect(Batch(recordsToSave: many).recordsToSave.count == 401)
        let heavy = (0..<3).map { Self.record(F.id("h\($0)"), size: Limits.maxRecordBytes) }
        #expect(Batch(recordsToSave: heavy).recordsToSave.count == 3)
        let deletions = (0..<500).map { F.id("d\($0)") }
        #expect(Batch(recordsToSave: many, recordIDsToDelete: deletions).recordIDsToDelete.count == 500)
    }

    // MARK: Builder

    @Test("F53: [save A → nil, delete B, save C] gives {save [C], delete [B]}; the provider is asked for A and C")
    func nilProviderResultIsSkipped() async throws {
        let (batch, asked) = await Self.build(
            [.saveRecord(F.a), .deleteRecord(F.b), .saveRecord(F.c)], records: Self.records([F.c]))
        let built = try #require(batch)
        #expect(built.recordsToSave.map(\.recordID) == [F.c])
        #expect(built.recordIDsToDelete == [F.b])
        #expect(asked == [F.a, F.c])
        #expect(built.atomicByZone == false)
    }

    @Test("F53: order is kept; deletions never call the provider")
    func orderKeptDeletesNotAsked() async throws {
        let ids = (0..<10).map { F.id("r\($0)") }
        let pending: [RecordChange] = ids.enumerated().map {
            $0.offset.isMultiple(of: 3) ? .deleteRecord($0.element) : .saveRecord($0.element)
        }
        let (batch, asked) = await Self.build(pending, records: Self.records(ids))
        let built = try #require(batch)
        let saves = pending.compactMap { if case .saveRecord(let id) = $0 { id } else { nil } }
        let deletes = pending.compactMap { if case .deleteRecord(let id) = $0 { id } else { nil } }
        #expect(built.recordsToSave.map(\.recordID) == saves)
        #expect(built.recordIDsToDelete == deletes)
        #expect(asked == saves)
    }

    @Test(
        "F53: nil when nothing is taken",
        arguments: [
            [RecordChange](),
            [.saveRecord(Fixtures.a)],
            [.saveRecord(Fixtures.a), .saveRecord(Fixtures.b)],
        ])
    func nilWhenNothingTaken(pending: [RecordChange]) async {
        let (batch, asked) = await Self.build(pending, records: [:])
        #expect(batch == nil)
        #expect(asked == pending.map(\.recordID))
    }

    @Test("F53: a batch of deletions only is not nil")
    func deletionsOnly() async throws {
        let (batch, asked) = await Self.build([.deleteRecord(F.a), .saveRecord(F.b)], records: [:])
        #expect(try #require(batch).recordIDsToDelete == [F.a])
        #expect(asked == [F.b])
    }

    @Test("F54: 444 saves split into 400 + 44 over two builds, removing what the first took")
    func splits444() async throws {
        let ids = (0..<444).map { F.id(String(format: "r%03d", $0)) }
        let records = Self.records(ids)
        var pending: [RecordChange] = ids.map { .saveRecord($0) }
        var sizes: [Int] = []
        while let batch = await Self.build(pending, records: records).batch {
            #expect(batch.recordsToSave.count + batch.recordIDsToDelete.count <= Limits.maxItemsPerRequest)
            #expect(batch.recordsToSave.reduce(0) { $0 + $1.estimatedSize } <= Limits.maxRequestBytes)
            sizes.append(batch.recordsToSave.count)
            let taken = Set(batch.recordsToSave.map(\.recordID))
            pending.removeAll { taken.contains($0.recordID) }
            try #require(sizes.count <= 3)
        }
        #expect(sizes == [400, 44])
        #expect(pending.isEmpty)
    }

    @Test("F54: deletions count toward the 400 items; the provider is not asked once the batch is full")
    func deletionsCountTowardItems() async throws {
        let deletions: [RecordChange] = (0..<400).map { .deleteRecord(F.id("d\($0)")) }
        let (batch, asked) = await Self.build(deletions + [.saveRecord(F.a)], records: Self.records([F.a]))
        let built = try #require(batch)
        #expect(built.recordIDsToDelete.count == 400)
        #expect(built.recordsToSave.isEmpty)
        #expect(asked.isEmpty)
    }

    @Test("F54: exactly 2 MB fits; a deletion still fits after it; the next byte does not")
    func twoMegabyteBoundary() async throws {
        let half = Limits.maxRequestBytes / 2  // 1 MB: the largest valid record
        let records = [
            F.a: Self.record(F.a, size: half), F.b: Self.record(F.b, size: half), F.c: Self.record(F.c, size: 4),
        ]
        let pending: [RecordChange] = [.saveRecord(F.a), .saveRecord(F.b), .deleteRecord(F.x), .saveRecord(F.c)]
        let (batch, asked) = await Self.build(pending, records: records)
        let built = try #require(batch)
        #expect(built.recordsToSave.map(\.recordID) == [F.a, F.b])
        #expect(built.recordIDsToDelete == [F.x])
        #expect(asked == [F.a, F.b, F.c])  // C's size is known only once it is provided
    }

    @Test("F54: records of many fields fill a batch by elements before 400 items or 2 MB")
    func elementsLimit() async throws {
        // 300 small fields a record: 300 × 3 elements (entry, value, changed key) + 3.
        let ids = (0..<400).map { F.id("w\($0)") }
        let records = Dictionary(
            uniqueKeysWithValues: ids.map { id in
                var record = Record(recordType: "Wide", recordID: id)
                for field in 0..<300 { record["f\(field)"] = .bool(true) }
                return (id, record)
            })
        let perRecord = try #require(records[ids[0]]).requestElements
        #expect(perRecord == 903)
        let (batch, _) = await Self.build(ids.map { .saveRecord($0) }, records: records)
        let taken = try #require(batch).recordsToSave.count
        #expect(taken == (Limits.maxElementsPerRequest - 8) / perRecord)
        #expect(taken * 300 * 2 < Limits.maxRequestBytes, "the bytes did not stop it")
    }

    @Test("F54: three records near 1 MB each make batches of 2 and 1")
    func nearOneMegabyteRecords() async throws {
        let ids = [F.a, F.b, F.c]
        let records = Self.records(ids, size: 999_000)
        var pending: [RecordChange] = ids.map { .saveRecord($0) } + [.deleteRecord(F.x)]
        let first = try #require(await Self.build(pending, records: records).batch)
        #expect(first.recordsToSave.map(\.recordID) == [F.a, F.b])
        #expect(first.recordIDsToDelete.isEmpty)  // the walk stops at C: D is not taken ahead of it
        pending.removeFirst(2)
        let second = try #require(await Self.build(pending, records: records).batch)
        #expect(second.recordsToSave.map(\.recordID) == [F.c])
        #expect(second.recordIDsToDelete == [F.x])
    }

    @Test("F54: a first record over 2 MB is taken alone (spec choice: the server rejects it)")
    func oversizedFirstRecordTakenAlone() async throws {
        let records = [F.a: Self.record(F.a, size: 2_500_000), F.b: Self.record(F.b, size: 10)]
        let (batch, _) = await Self.build([.saveRecord(F.a), .saveRecord(F.b)], records: records)
        #expect(try #require(batch).recordsToSave.map(\.recordID) == [F.a])
    }

    @Test("F58: one batch mixes records of several zones")
    func crossZone() async throws {
        let inNotes = F.id("n", F.notes)
        let inPhotos = F.id("p", F.photos)
        let shared = F.id("s", F.shared)
        let (batch, _) = await Self.build(
            [.saveRecord(inNotes), .saveRecord(inPhotos), .deleteRecord(shared)],
            records: Self.records([inNotes, inPhotos]))
        let built = try #require(batch)
        #expect(built.recordsToSave.map(\.recordID) == [inNotes, inPhotos])
        #expect(built.recordIDsToDelete == [shared])
    }

    @Test("F50: the description names the records to save and delete")
    func description() {
        var batch = Batch(recordsToSave: [F.clientRecord(F.a)], recordIDsToDelete: [F.b])
        batch.atomicByZone = true
        let text = String(describing: batch)
        #expect(text.hasPrefix("RecordZoneChangeBatch("))
        #expect(text.contains(F.a.description) && text.contains(F.b.description) && text.contains("atomicByZone"))
        let long = Batch(recordIDsToDelete: (0..<25).map { F.id("d\($0)") })
        #expect(String(describing: long).contains("15 more"))
    }

    // MARK: The cursor over the pending list (issue 16)

    /// A deterministic generator for the cursor's comparison.
    struct Mixer: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 11 ^ state
        }
    }

    @Test(
        "The cursor builds the same batches as the whole pending list, filtered, for every scope; the list read is the projection's",
        arguments: [1, 2, 3])
    func cursorMatchesWholeList(seed: UInt64) async throws {
        try await withEngine { engine, directory in
            var random = Mixer(state: seed)
            let zones = [F.notes, F.photos]
            let ids = (0..<300).map { F.id("r\($0)", zones[$0 % 2]) }
            // The app has most records; some are gone (the provider returns nil), some are heavy.
            var store: [Record.ID: Record] = [:]
            for id in ids where Int.random(in: 0..<10, using: &random) > 0 {
                store[id] = Self.record(id, size: Int.random(in: 0..<20, using: &random) == 0 ? 600_000 : 40)
            }
            for _ in 0..<30 {
                let changes: [RecordChange] = (0..<Int.random(in: 1...60, using: &random)).map { _ in
                    let id = ids.randomElement(using: &random)!
                    return Bool.random(using: &random) ? .saveRecord(id) : .deleteRecord(id)
                }
                try engine.state.add(pendingRecordZoneChanges: changes)
                if Bool.random(using: &random) {
                    try engine.state.remove(pendingRecordZoneChanges: Array(changes.prefix(5)))
                }
            }
            // The cached whole-list read equals the projection read without a cache, twice.
            let uncached = try engine.deviceLog.read { try $0.pendingRecordZoneChanges() }
            #expect(try engine.state.pendingRecordZoneChanges == uncached)
            #expect(try engine.state.pendingRecordZoneChanges == uncached)

            let scopes: [SyncEngine.SendChangesOptions.Scope] = [
                .all, .zoneIDs([F.photos]), .recordIDs(Array(ids.prefix(100))),
            ]
            for scope in scopes {
                var batches = 0
                while true {
                    let pending = try engine.state.pendingRecordZoneChanges.filter { scope.contains($0) }
                    let fromList = await Batch(pendingChanges: pending) { store[$0] }
                    let fromCursor = try await Batch(state: engine.state, scope: scope) { store[$0] }
                    #expect(fromCursor == fromList, "batch \(batches) of scope \(scope)")
                    guard let batch = fromList else { break }
                    batches += 1
                    // What the send would remove: the changes taken, and saves the app no longer has.
                    let taken =
                        batch.recordsToSave.map { RecordChange.saveRecord($0.recordID) }
                        + batch.recordIDsToDelete.map { RecordChange.deleteRecord($0) }
                    try engine.state.remove(pendingRecordZoneChanges: taken)
                    #expect(
                        try engine.state.pendingRecordZoneChanges
                            == engine.deviceLog.read { try $0.pendingRecordZoneChanges() })
                }
                #expect(
                    try engine.state.pendingRecordZoneChanges.filter { scope.contains($0) }.allSatisfy {
                        if case .saveRecord(let id) = $0 { return store[id] == nil }
                        return false
                    }, "only saves whose records are gone are left in scope \(scope)")
            }
        }
    }

    @Test("The cursor reads past a stretch of saves whose records are gone, as the whole list does")
    func cursorSkipsGoneRecordsAcrossChunks() async throws {
        try await withEngine { engine, directory in
            let gone = (0..<900).map { F.id("gone\($0)") }
            let kept = F.id("kept")
            try engine.state.add(pendingRecordZoneChanges: gone.map { .saveRecord($0) } + [.saveRecord(kept)])
            let batch = try await Batch(state: engine.state) { $0 == kept ? Self.record(kept, size: 10) : nil }
            #expect(batch?.recordsToSave.map(\.recordID) == [kept])
        }
    }
}
