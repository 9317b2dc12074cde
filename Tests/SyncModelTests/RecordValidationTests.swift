import SyncModel
import Testing

/// Per-record checks: references stay in the zone, list shapes, type and key names (F129, F135).
struct RecordValidationTests {
    static let otherZoneTarget = Record.ID(recordName: "x", zoneID: Fixture.photos)

    @Test func validRecordPasses() throws {
        var record = Fixture.savedNote()
        record["folder"] = .reference(Record.Reference(recordID: Fixture.n2, action: .deleteSelf))
        record["tags"] = .list([.string("a"), .string("b")])
        record["refs"] = .list([.reference(Record.Reference(recordID: Fixture.n2))])
        record["empty"] = .list([])
        try record.validate()
    }

    // F135: a cross-zone reference is rejected.
    @Test func crossZoneReferenceIsRejected() throws {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["folder"] = .reference(Record.Reference(recordID: Self.otherZoneTarget))
        let error = try #require(throws: SyncError.self) { try record.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.item == .record(Fixture.n1))
        #expect(error.message.contains(#"field "folder""#))
        #expect(error.message.contains("leaves the record's zone"))
    }

    // F135: a reference into the same-named zone of another owner is another zone.
    @Test func referenceToAnotherOwnersZoneIsRejected() {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["r"] = .list([
            .reference(Record.Reference(recordID: Record.ID(recordName: "x", zoneID: Fixture.sharedNotes)))
        ])
        #expect(throws: SyncError.self) { try record.validate() }
    }

    // F135
    @Test func crossZoneParentIsRejected() throws {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record.parent = Record.Reference(recordID: Self.otherZoneTarget)
        let error = try #require(throws: SyncError.self) { try record.validate() }
        #expect(error.message.contains("parent"))
    }

    // F129: lists hold values of one kind and do not nest.
    @Test(
        "F129 bad lists",
        arguments: [
            (RecordValue.list([.string("a"), .int64(1)]), "mixes string and int64"),
            (.list([.list([.int64(1)])]), "must not be nested"),
        ])
    func badListIsRejected(_ value: RecordValue, problem: String) throws {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["l"] = value
        let error = try #require(throws: SyncError.self) { try record.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains(problem))
    }

    // F129: a location holds what a measurement could give: coordinates within range, a course
    // under 360 degrees, finite numbers; the error names the field.
    @Test(
        "F129 out-of-range locations",
        arguments: [
            (Location(latitude: 90.5, longitude: 0), "latitude 90.5 is outside"),
            (Location(latitude: 0, longitude: -180.01), "longitude -180.01 is outside"),
            (Location(latitude: 10, longitude: 10, course: 360), "course 360.0 is 360 or more"),
            (Location(latitude: .nan, longitude: 0), "latitude is nan"),
            (Location(latitude: 0, longitude: 0, speed: .infinity), "speed is inf"),
        ])
    func badLocationIsRejected(_ location: Location, problem: String) throws {
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["where"] = .list([.location(Location(latitude: 1, longitude: 2)), .location(location)])
        let error = try #require(throws: SyncError.self) { try record.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.item == .record(Fixture.n1))
        #expect(error.message.contains(problem), "\(error.message)")
        #expect(error.message.contains("\"where\""), "\(error.message)")
        record["where"] = .location(
            Location(latitude: -90, longitude: 180, horizontalAccuracy: -1, course: 359.99, speed: -1))
        try record.validate()
    }

    @Test("bad type and key names", arguments: [("", "title"), ("Note", ""), ("Nöte", "title"), ("Note", "tïtle")])
    func badNames(type: String, key: String) throws {
        var record = Record(recordType: type, recordID: Fixture.n1)
        record[key] = "x"
        let error = try #require(throws: SyncError.self) { try record.validate() }
        #expect(error.code == .invalidArguments)
    }

    // F126: the ID is checked first.
    @Test func invalidIDIsReportedFirst() throws {
        var record = Record(recordType: "", recordID: Record.ID(recordName: "_n", zoneID: Fixture.notes))
        record["k"] = .bytes(.init(count: 2_000_000))
        let error = try #require(throws: SyncError.self) { try record.validate() }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("invalid record name"))
    }
}
