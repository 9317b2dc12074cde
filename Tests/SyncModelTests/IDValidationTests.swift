import Testing

@testable import SyncModel

/// Naming rules of record IDs and zone IDs (F126, F127).
struct IDValidationTests {
    static let longest = String(repeating: "x", count: 255)
    static let tooLong = String(repeating: "x", count: 256)

    // F127
    @Test func defaultZoneIDIsDefaultZoneOfDefaultOwner() {
        #expect(RecordZone.ID.default.zoneName == "_defaultZone")
        #expect(RecordZone.ID.default.ownerName == "__defaultOwner__")
        #expect(RecordZone.ID.defaultOwnerName == "__defaultOwner__")
        #expect(RecordZone.ID.default == RecordZone.ID(zoneName: "_defaultZone", ownerName: "__defaultOwner__"))
        #expect(RecordZone.ID() == .default)
        #expect(RecordZone.ID.default.isDefaultZone)
        #expect(Record.ID(recordName: "r").zoneID == .default)
        #expect(throws: Never.self) { try RecordZone.ID.default.validate() }
    }

    // F126
    @Test("F126 valid record names", arguments: ["a", "note-1", "A.B:c", "x_", longest, "0"])
    func validRecordName(_ name: String) throws {
        try Record.ID(recordName: name, zoneID: Fixture.notes).validate()
    }

    // F126
    @Test(
        "F126 invalid record names",
        arguments: [
            ("", "must not be empty"),
            ("_x", "must not start with \"_\""),
            ("_defaultZone", "must not start with \"_\""),
            (tooLong, "256 bytes long, more than 255"),
            ("café", "must be ASCII"),
            ("名前", "must be ASCII"),
        ])
    func invalidRecordName(_ name: String, rule: String) throws {
        let id = Record.ID(recordName: name, zoneID: Fixture.notes)
        let error = try #require(throws: SyncError.self) { try id.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.item == .record(id))
        #expect(error.message.contains(rule))
        #expect(error.message.contains(id.description), "the message names the offending ID")
    }

    // F126: a generated name (a UUID, as in CloudKit) passes the rules.
    @Test func generatedRecordNameIsValid() throws {
        let id = Record.ID(zoneID: Fixture.notes)
        #expect(id.recordName.count == 36)
        try id.validate()
        #expect(Record.ID(zoneID: Fixture.notes) != id)
    }

    // F127
    @Test("F127 valid zone names", arguments: ["Notes", "_defaultZone", "a-b.c", longest])
    func validZoneName(_ name: String) throws {
        try RecordZone.ID(zoneName: name).validate()
    }

    // F127
    @Test(
        "F127 invalid zone names",
        arguments: [
            ("", "must not be empty"),
            ("_Notes", "must not start with \"_\""),
            ("__defaultOwner__", "must not start with \"_\""),
            ("_defaultzone", "must not start with \"_\""),
            (tooLong, "more than 255"),
            ("Zoné", "must be ASCII"),
        ])
    func invalidZoneName(_ name: String, rule: String) throws {
        let id = RecordZone.ID(zoneName: name)
        let error = try #require(throws: SyncError.self) { try id.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.item == .zone(id))
        #expect(error.message.contains("invalid zone name"))
        #expect(error.message.contains(rule))
    }

    // F127: owner names may start with "_" (the default owner does) but follow the other rules.
    @Test("F127 valid owner names", arguments: ["__defaultOwner__", "_a1b2c3", "user", longest])
    func validOwnerName(_ name: String) throws {
        try RecordZone.ID(zoneName: "Notes", ownerName: name).validate()
    }

    // F127
    @Test(
        "F127 invalid owner names",
        arguments: [("", "must not be empty"), (tooLong, "more than 255"), ("Ünter", "must be ASCII")])
    func invalidOwnerName(_ name: String, rule: String) throws {
        let id = RecordZone.ID(zoneName: "Notes", ownerName: name)
        let error = try #require(throws: SyncError.self) { try id.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("invalid owner name"))
        #expect(error.message.contains(rule))
    }

    // F126 + F127: a record ID in a badly named zone fails, and the error names the record.
    @Test func recordIDInInvalidZoneNamesTheRecord() throws {
        let id = Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "_bad"))
        let error = try #require(throws: SyncError.self) { try id.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.item == .record(id))
        #expect(error.message.contains("invalid zone name \"_bad\""))
        #expect(error.message.contains("record \"n1\""))
    }

    @Test func descriptionsQuoteNamesAndShowForeignOwners() {
        #expect(Fixture.notes.description == #"zone "Notes""#)
        #expect(Fixture.sharedNotes.description == #"zone "Notes" of owner "_owner42""#)
        #expect(Fixture.n1.description == #"record "n1" in zone "Notes""#)
        #expect(Record.ID(recordName: "a\"b\nc").description == #"record "a\"b\nc" in zone "_defaultZone""#)
    }
}
