import Foundation
import LogStore
import SyncModel
import Testing

import struct LogSyncTesting.AlteredProjection

@testable import LogSyncServer

/// Schema modes (F137): a development server grows its schema from the records saved; a schema
/// deployed from it makes a server production, which refuses record types, fields and kinds of
/// value the schema does not have, per item, storing nothing of that item.
@Suite("Schema modes (F137)")
struct SchemaTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func record(
        _ name: String, type: Record.RecordType = "Note", zone: RecordZone.ID = notes, _ fields: [String: RecordValue]
    ) -> Record {
        var record = Record(recordType: type, recordID: Record.ID(recordName: name, zoneID: zone))
        for (key, value) in fields { record[key] = value }
        return record
    }

    static func prepare(
        _ server: SyncServer, user: UserID = "alice", atomic: Bool = false
    ) async throws -> InProcessDatabase {
        let database = server.database(for: user, device: "phone")
        let zone = RecordZone(zoneID: notes, capabilities: atomic ? .customZoneDefault : [.fetchChanges])
        _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [zone]))
        return database
    }

    /// A second server in its own directory inside `directory`.
    static func withSecondServer<R>(in directory: URL, _ body: (SyncServer, URL) async throws -> R) async throws -> R {
        let second = directory.appendingPathComponent("production-\(UUID().uuidString)", isDirectory: true)
        let server = try SyncServer(.init(directory: second, durability: .fast))
        defer { server.shutdown() }
        return try await body(server, second)
    }

    // F137: in development mode (the default) the first save of a type creates it, the first
    // value of a field creates the field with its kind; an open (empty) list takes the kind of
    // the first list with elements; share records take no part.
    @Test("F137 in development mode the schema grows with the records saved")
    func developmentGrows() async throws {
        try await withServer { server, _ in
            #expect(server.schemaMode == .development)
            let database = try await Self.prepare(server)
            #expect(try server.developmentSchema(of: "alice").isEmpty)
            _ = try await database.modifyRecords(
                ModifyRecordsRequest(recordsToSave: [
                    Self.record("n1", ["title": "Groceries", "tags": .list([])]),
                    Self.record("f1", type: "Folder", [:]),
                ]))
            #expect(
                try server.developmentSchema(of: "alice")
                    == RecordSchema([
                        "Note": ["title": .value(.string), "tags": .list(nil)], "Folder": [:],
                    ]))
            _ = try await database.modifyRecords(
                ModifyRecordsRequest(recordsToSave: [
                    Self.record(
                        "n2",
                        ["count": 3, "tags": .list([.string("home")]), "due": .date(Date(timeIntervalSince1970: 5))]),
                    Self.record("n3", ["title": 7]),  // development mode refuses no kind; the first kind stays
                ]))
            let share = Share(rootRecordID: Record.ID(recordName: "n1", zoneID: Self.notes))
            _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [share.record]))
            let grown = try server.developmentSchema(of: "alice")
            #expect(
                grown
                    == RecordSchema([
                        "Note": [
                            "title": .value(.string), "tags": .list(.string), "count": .value(.int64),
                            "due": .value(.date),
                        ],
                        "Folder": [:],
                    ]))
            #expect(grown.description == "Folder:\nNote: count int64, due date, tags list<string>, title string")
            #expect(try server.developmentSchema() == grown, "the server's schema adds up its users' databases")
            // The schema is a projection of the log: rebuilt, and applied entry by entry, the same.
            let log = try server.admin.log(of: "alice")
            try ServerLogTests.expectProjectionsHold(log)
        }
    }

    // F137: a production server (a schema deployed from a development server's data) refuses,
    // per item, a record of an unknown type, an unknown field and a value of another kind, with
    // invalidArguments naming the record, the type and the field; nothing of those items is
    // stored, the other items of the request are saved, and the mode survives a restart.
    @Test(
        "F137 production refuses unknown types, fields and kinds per item, naming record and field; the rest is saved")
    func productionRefuses() async throws {
        try await withServer { development, directory in
            let phone = try await Self.prepare(development)
            _ = try await phone.modifyRecords(
                ModifyRecordsRequest(recordsToSave: [
                    Self.record("n1", ["title": "a", "tags": .list([.string("x")])]),
                    Self.record("f1", type: "Folder", ["name": "Home"]),
                ]))
            try await Self.withSecondServer(in: directory) { production, productionDirectory in
                let deployment = try production.deploySchema(try development.developmentSchema())
                #expect(deployment.appended)
                #expect(production.schemaMode == .production)
                #expect(development.schemaMode == .development)
                let database = try await Self.prepare(production)
                let before = try production.admin.log(of: "alice").lastOffset

                let good = Self.record("n1", ["title": "kept", "tags": .list([.string("y")])])
                let unknownType = Self.record("p1", type: "Photo", ["title": "x"])
                let unknownField = Self.record("n2", ["title": "b", "colour": "red"])
                let wrongKind = Self.record("n3", ["title": 42])
                let share = Share(rootRecordID: good.recordID).record  // system types are always allowed
                let response = try await database.modifyRecords(
                    ModifyRecordsRequest(
                        recordsToSave: [good, unknownType, unknownField, wrongKind, share], atomically: false))

                #expect(try response.saveResults[good.recordID]?.get()["title"] == "kept")
                #expect((try? response.saveResults[share.recordID]?.get()) != nil)
                let expectations: [(Record, String)] = [
                    (
                        unknownType,
                        #"is of record type "Photo", which the production schema does not have (it has "Folder", "Note")"#
                    ),
                    (
                        unknownField,
                        #"sets field "colour", which record type "Note" of the production schema does not have (it has "tags", "title")"#
                    ),
                    (
                        wrongKind,
                        #"sets field "title" of record type "Note" to a int64 value; the production schema has it as string"#
                    ),
                ]
                for (record, words) in expectations {
                    guard case .failure(let error)? = response.saveResults[record.recordID] else {
                        Issue.record(
                            "\(record.recordID) was not refused: \(String(describing: response.saveResults[record.recordID]))"
                        )
                        continue
                    }
                    #expect(error.code == .invalidArguments)
                    #expect(error.item == .record(record.recordID))
                    #expect(error.message.contains(words), "\(error.message)")
                    #expect(
                        error.message.contains(record.recordID.description), "the record is named: \(error.message)")
                }
                // Nothing of the refused items is in the log: two records saved, one request.
                let log = try production.admin.log(of: "alice")
                #expect(try log.lastOffset.rawValue == before.rawValue + 2)
                let fetched = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: Self.notes))
                #expect(
                    Set(fetched.modifications.map(\.record.recordID.recordName)) == ["n1", share.recordID.recordName])
                #expect(try production.developmentSchema(of: "alice").recordTypes.keys.sorted() == ["Note"])

                // A restarted server on the same data is still in production mode.
                production.shutdown()
                let restarted = try SyncServer(.init(directory: productionDirectory, durability: .fast))
                defer { restarted.shutdown() }
                #expect(restarted.schemaMode == .production)
                #expect(restarted.deployedSchema == deployment.schema)
                let again = try await restarted.database(for: "alice").modifyRecords(
                    ModifyRecordsRequest(recordsToSave: [unknownField], atomically: false))
                #expect(throws: SyncError.self) { try again.saveResults[unknownField.recordID]?.get() }
            }
        }
    }

    // F137, F148: in an atomic zone, an item the production schema refuses fails the zone's other
    // items with batchRequestFailed, as any per-item error does; nothing is written.
    @Test("F137 an atomic request with an unknown field fails whole")
    func atomicFailsWhole() async throws {
        try await withServer { server, _ in
            try server.deploySchema(RecordSchema(["Note": ["title": .value(.string)]]))
            let database = try await Self.prepare(server, atomic: true)
            let before = try server.admin.log(of: "alice").lastOffset
            let good = Self.record("n1", ["title": "a"])
            let bad = Self.record("n2", ["title": "b", "body": "no such field"])
            let response = try await database.modifyRecords(
                ModifyRecordsRequest(recordsToSave: [good, bad], atomically: true))
            #expect(throws: SyncError.self) { try response.saveResults[bad.recordID]?.get() }
            if case .failure(let error)? = response.saveResults[good.recordID] {
                #expect(error.code == .batchRequestFailed)
            } else {
                Issue.record("the good item of the atomic zone was saved")
            }
            #expect(try server.admin.log(of: "alice").lastOffset == before)
        }
    }

    // F137: a later deployment adds types and fields to the deployed schema and keeps the others;
    // deploying nothing new appends nothing; a field given another kind is refused, naming it,
    // and writes nothing; an empty first deployment is refused.
    @Test("F137 deployments only add; a kind change is refused naming the field")
    func redeploy() async throws {
        try await withServer { server, _ in
            #expect(throws: SyncError.self) { try server.deploySchema(RecordSchema()) }
            #expect(server.schemaMode == .development)
            let first = try server.deploySchema(RecordSchema(["Note": ["title": .value(.string), "tags": .list(nil)]]))
            let second = try server.deploySchema(
                RecordSchema(["Note": ["body": .value(.string), "tags": .list(.int64)], "Folder": [:]]))
            #expect(second.appended)
            #expect(second.offset > first.offset)
            #expect(
                second.schema
                    == RecordSchema([
                        "Note": ["title": .value(.string), "body": .value(.string), "tags": .list(.int64)],
                        "Folder": [:],
                    ]))
            let same = try server.deploySchema(RecordSchema(["Folder": [:]]))
            #expect(!same.appended)
            #expect(same.offset == second.offset)
            do {
                try server.deploySchema(RecordSchema(["Note": ["title": .value(.int64)]]))
                Issue.record("a kind change was deployed")
            } catch let error as SyncError {
                #expect(error.code == .invalidArguments)
                #expect(
                    error.message
                        == #"field "title" of record type "Note" holds string in one schema and int64 in the other"#)
            }
            #expect(server.deployedSchema == second.schema)
            #expect(try server.users.deployedSchema()?.offset.rawValue == second.offset)
        }
    }

    // F137: the index of version 4 had no schema; opened by this version, it is rebuilt from the
    // log with the schema of every record saved before.
    @Test("F137 an index without the schema (version 4) is rebuilt from the log with it")
    func olderIndexIsRebuilt() async throws {
        try await withServer { _, directory in
            let expected: RecordSchema
            do {
                let server = try SyncServer(.init(directory: directory, durability: .fast))
                let database = try await Self.prepare(server)
                _ = try await database.modifyRecords(
                    ModifyRecordsRequest(recordsToSave: [Self.record("n1", ["title": "a", "n": 1])]))
                expected = try server.developmentSchema(of: "alice")
                server.shutdown()
            }
            #expect(expected.recordTypes["Note"]?.count == 2)
            let userDirectory = LMDBStorage.userDirectory(in: directory, number: 1)
            do {
                let environment = try LogEnvironment.open(at: userDirectory, options: .init(durability: .fast))
                let old = try environment.openLog(named: "private", projections: [Self.versionFourIndex])
                let rows = try old.read { reader in
                    var count = 0
                    try reader.transaction.forEach(in: try reader.table("schema", of: "index")) { _, _ in
                        count += 1
                        return true
                    }
                    return count
                }
                #expect(rows == 0)
            }
            let server = try SyncServer(.init(directory: directory, durability: .fast))
            defer { server.shutdown() }
            #expect(try server.developmentSchema(of: "alice") == expected)
        }
    }

    /// The server's index as version 4 kept it: the same tables, no schema rows.
    static let versionFourIndex = AlteredProjection(ServerIndex(), version: 4) { index, entry, tables in
        try index.apply(entry, to: tables)
        var keys: [[UInt8]] = []
        try tables.forEach(in: "schema") { key, _ in
            keys.append(Array(key))
            return true
        }
        for key in keys { try tables.removeValue(forKey: key, in: "schema") }
    }
}
