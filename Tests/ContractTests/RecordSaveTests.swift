import Foundation
import LogSyncServer
import SyncModel
import Testing

/// What a save does to a record: server-set system fields (F130, F158), partial field updates
/// (F132), system-field archives (F131) and value round trips (F129).
@Suite("Record saves (F129–F132, F158)")
struct RecordSaveTests {
    // F130, F158: the server sets a new tag on every save, the creation fields once, the
    // modification fields every time, and returns the saved record.
    @Test("F130 F158 the server sets the system fields", arguments: Harnesses.all)
    func systemFieldsAreSetByTheServer(harness: any ContractHarness) async throws {
        try await withPhone(harness) { server, phone in
            let me = try await phone.database.currentUserRecordID()
            try await phone.createZone("Notes")
            let t0 = server.clock.now

            let first = try await phone.save(newRecord("n1", ["title": "v1"]))
            #expect(first.recordChangeTag != nil)
            #expect(first.creationDate == t0)
            #expect(first.modificationDate == t0)
            #expect(first.creatorUserRecordID == me)
            #expect(first.lastModifiedUserRecordID == me)
            #expect(first.recordType == "Note")
            #expect(first["title"] == "v1")

            server.clock.advance(by: 60)
            let second = try await phone.save(first.setting(["title": "v2"]))
            #expect(second.recordChangeTag != nil)
            #expect(second.recordChangeTag != first.recordChangeTag)
            #expect(second.creationDate == t0, "creation fields are set once")
            #expect(second.creatorUserRecordID == me)
            #expect(second.modificationDate == t0.addingTimeInterval(60))
            #expect(second.lastModifiedUserRecordID == me)
        }
    }

    // F130: modificationDate is monotonic per record even when the server's clock steps back.
    @Test("F130 modificationDate is monotonic when the clock steps back", arguments: Harnesses.all)
    func modificationDateIsMonotonic(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            var record = try await phone.save(newRecord("n1", ["n": 0]))
            var tags: Set<String?> = [record.recordChangeTag]
            for step in 1...5 {
                let previous = try #require(record.modificationDate)
                server.clock.advance(by: step.isMultiple(of: 2) ? 3_600 : -3_600)
                record = try await phone.save(record.setting(["n": .int64(Int64(step))]))
                let current = try #require(record.modificationDate)
                #expect(current >= previous, "save \(step): \(current) is before \(previous)")
                tags.insert(record.recordChangeTag)
            }
            #expect(tags.count == 6, "every save gets a new tag (F130)")
            #expect(!tags.contains(nil))
        }
    }

    // F130: system fields a client forges (here by editing an archive) are ignored.
    @Test("F130 a client cannot set system fields", arguments: Harnesses.all)
    func forgedSystemFieldsAreIgnored(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let bob = try await server.device("bob", "phone")
            try await bob.createZone("Notes")
            let bobs = try await bob.save(newRecord("b1", ["title": "bob's"]))

            server.clock.advance(by: 3_600)
            let alice = try await server.device("alice", "phone")
            let me = try await alice.database.currentUserRecordID()
            try await alice.createZone("Notes")
            let forged = try forgingSystemFields(
                of: newRecord("n1", ["title": "forged"]), from: bobs, keepingTag: false)
            #expect(forged.creationDate == bobs.creationDate, "the forgery took")

            let saved = try await alice.save(forged)
            #expect(saved.creationDate == server.clock.now)
            #expect(saved.modificationDate == server.clock.now)
            #expect(saved.creatorUserRecordID == me)
            #expect(saved.lastModifiedUserRecordID == me)
            #expect(saved.recordChangeTag != nil)
        }
    }

    // F132: keys absent from a save keep their server values; a key set to nil is removed.
    @Test("F132 partial field updates", arguments: Harnesses.all)
    func partialFieldUpdates(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { server, phone, laptop in
            let v1 = try await phone.save(newRecord("n1", ["a": 1, "b": 2]))

            // F131: an archive of the system fields, with only `a` set, passes the tag check.
            let onlyA = v1.systemFieldsCopy().setting(["a": 10])
            #expect(onlyA.changedKeys() == ["a"])
            let v2 = try await phone.save(onlyA)
            #expect(v2["a"] == 10)
            #expect(v2["b"] == 2, "an absent key keeps its server value")
            let fetched2 = try #require(try await laptop.fetchRecord(v1.recordID))
            #expect(fetched2.allKeys() == ["a", "b"])
            #expect(fetched2["a"] == 10)
            #expect(fetched2["b"] == 2)

            let removeA = v2.systemFieldsCopy().setting(["a": nil])
            #expect(removeA.changedKeys() == ["a"])
            let v3 = try await phone.save(removeA)
            #expect(v3["a"] == nil)
            #expect(v3["b"] == 2)
            let fetched3 = try #require(try await laptop.fetchRecord(v1.recordID))
            #expect(fetched3.allKeys() == ["b"], "a key set to nil is removed")
        }
    }

    // F129: every value type survives a round trip through the server.
    @Test("F129 every value type round-trips", arguments: Harnesses.all)
    func valueTypesRoundTrip(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness, zone: "Notes") { _, phone, laptop in
            let target = try await phone.save(newRecord("target"))
            let photo = try await phone.uploadAsset(Array("a photo".utf8)).withoutFile
            let page = try await phone.uploadAsset(Array("a page".utf8)).withoutFile
            let values: [String: RecordValue] = [
                "string": "Grüße, 世界 🌍",
                "emptyString": "",
                "int": .int64(Int64.min),
                "double": 3.25,
                "bool": true,
                "bytes": .bytes(Data([0, 1, 2, 254, 255])),
                "emptyBytes": .bytes(Data()),
                "date": .date(Date(timeIntervalSince1970: 1_000_000)),
                "reference": .reference(Record.Reference(recordID: target.recordID, action: .deleteSelf)),
                "asset": .asset(photo),
                "assets": .list([.asset(page), .asset(photo)]),
                "place": .location(
                    Location(
                        latitude: 51.5007, longitude: -0.1246, altitude: 12.5, horizontalAccuracy: 8,
                        verticalAccuracy: 4,
                        course: 270.25, speed: 1.5, timestamp: Date(timeIntervalSince1970: 1_700_000_000.123456))),
                "route": .list([
                    .location(Location(latitude: -90, longitude: 180)),
                    .location(Location(latitude: 0.5, longitude: -179.5)),
                ]),
                "list": .list([.int64(1), .int64(2), .int64(3)]),
                "strings": .list([.string("a"), .string("b")]),
                "emptyList": .list([]),
                // F129: an encrypted field as every request carries it, sealed on the device.
                "sealed": .encrypted(
                    .sealed(
                        ZoneKey.generate(zoneID: RecordZone.ID(zoneName: "Notes"), version: 1)
                            .seal(
                                .string("secret"),
                                recordID: Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes")),
                                key: "sealed"))),
            ]
            var record = newRecord("n1", type: "Everything", values)
            record.parent = Record.Reference(recordID: target.recordID)
            let saved = try await phone.save(record)
            let fetched = try #require(try await laptop.fetchRecord(record.recordID))
            for (key, value) in values {
                #expect(saved[key] == value, "saved \(key)")
                #expect(fetched[key] == value, "fetched \(key)")
            }
            #expect(fetched.allKeys() == values.keys.sorted())
            #expect(fetched.recordType == "Everything")
            #expect(fetched.parent?.recordID == target.recordID)
        }
    }

    // F126, F127, F129, F135: a record breaking a naming or value rule fails alone, per item,
    // with invalidArguments; its sibling in a non-atomic request is saved.
    @Test("F126 F135 invalid records fail per item", arguments: Harnesses.all, InvalidRecord.allCases)
    func invalidRecordsFailPerItem(harness: any ContractHarness, invalid: InvalidRecord) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            try await phone.createZone("Other")
            let bad = invalid.record
            let response = try await phone.modify(saving: [bad, newRecord("fine")], atomically: false)
            let error = expectFailure(response.saveResults[bad.recordID], .invalidArguments)
            #expect(error?.item == .record(bad.recordID))
            expectSuccess(response.saveResults[recordID("fine")])
        }
    }
}

/// A copy of `record` carrying `source`'s system fields, made by editing the record's archived
/// form the way a client could: the server must ignore them (F130).
func forgingSystemFields(of record: Record, from source: Record, keepingTag: Bool) throws -> Record {
    var json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(record)) as? [String: Any])
    var systemFields = try #require(
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(source.systemFields)) as? [String: Any])
    if !keepingTag { systemFields["recordChangeTag"] = nil }
    json["systemFields"] = systemFields
    return try JSONDecoder().decode(Record.self, from: JSONSerialization.data(withJSONObject: json))
}

/// Records that break one rule of F126, F127, F129 or F135 each.
enum InvalidRecord: String, Sendable, CaseIterable, CustomStringConvertible {
    case nameWithUnderscore, nameTooLong, nonASCIIName, emptyFieldKey, crossZoneReference, mixedList, nestedList
    case locationOutOfRange, locationCourseTooLarge

    var description: String { rawValue }

    var record: Record {
        switch self {
        case .nameWithUnderscore: newRecord("_x")
        case .nameTooLong: newRecord(String(repeating: "n", count: Limits.maxNameLength + 1))
        case .nonASCIIName: newRecord("naïve")
        case .emptyFieldKey: newRecord("n1", ["": "value"])
        case .crossZoneReference:
            newRecord("n1", ["link": .reference(Record.Reference(recordID: recordID("target", in: "Other")))])
        case .mixedList: newRecord("n1", ["list": .list([.int64(1), .string("two")])])
        case .nestedList: newRecord("n1", ["list": .list([.list([.int64(1)])])])
        case .locationOutOfRange: newRecord("n1", ["where": .location(Location(latitude: 91, longitude: 0))])
        case .locationCourseTooLarge:
            newRecord("n1", ["route": .list([.location(Location(latitude: 1, longitude: 1, course: 720))])])
        }
    }
}
