import Foundation
import LogSyncWire
import SwiftProtobuf
import SyncModel
import Testing

/// A request body is measured before it is decoded (Docs/Protocol.md, "HTTP", "Limits"): the
/// measure agrees with what SwiftProtobuf builds from it, in both formats, and a body past a
/// limit is refused with `limitExceeded` naming the operation and the limit, whatever its bytes.
@Suite("Wire: request budgets")
struct RequestBudgetTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// A record with a value of every kind, a parent and system fields.
    static func richRecord(_ name: String) throws -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
        record["title"] = "Groceries"
        record["count"] = .int64(3)
        record["ratio"] = .double(0.5)
        record["done"] = .bool(true)
        record["blob"] = .bytes(Data([1, 2, 3]))
        record["when"] = .date(Date(timeIntervalSince1970: 1_700_000_000))
        record["link"] = .reference(
            Record.Reference(recordID: Record.ID(recordName: "other", zoneID: notes), action: .deleteSelf))
        record["tags"] = .list(["home", "food", "week"])
        record["photo"] = .asset(Asset(digest: try AssetDigest(bytes: Array(repeating: 7, count: 32)), size: 1234))
        record["place"] = .location(Location(latitude: 48.8584, longitude: 2.2945))
        record["secret"] = .encrypted(.sealed(SealedValue(keyVersion: 1, box: Data(count: 40))))
        record["removed"] = nil
        record.parent = Record.Reference(recordID: Record.ID(recordName: "folder", zoneID: notes))
        return record
    }

    /// A request of every operation that takes a body, with every field set.
    static func everyRequest() throws -> [(WireOperation, (WireFormat) -> [UInt8])] {
        let group = OperationGroup(operationGroupID: "g1", name: "sync", quantity: 3)
        let records = [try richRecord("n1"), try richRecord("n2")]
        let wrap = ZoneKey.generate(zoneID: notes, version: 3).wrapped(for: DeviceKeyPair().publicKey)
        return [
            (
                .modifyZones,
                {
                    Wire.encode(
                        ModifyZonesRequest(
                            zonesToSave: [RecordZone(zoneID: notes)], zoneIDsToDelete: [RecordZone.ID(zoneName: "Old")],
                            operationGroup: group), as: $0)
                }
            ),
            (
                .fetchZones,
                {
                    Wire.encode(
                        FetchZonesRequest(zoneIDs: [notes, RecordZone.ID(zoneName: "Other")], operationGroup: group),
                        as: $0)
                }
            ),
            (
                .modifyRecords,
                {
                    Wire.encode(
                        ModifyRecordsRequest(
                            recordsToSave: records, recordIDsToDelete: [Record.ID(recordName: "gone", zoneID: notes)],
                            savePolicy: .changedKeys,
                            atomically: true, requestID: "r1", clientChangeToken: Data([1]), operationGroup: group),
                        as: $0)
                }
            ),
            (
                .fetchDatabaseChanges,
                {
                    Wire.encode(
                        FetchDatabaseChangesRequest(
                            since: DatabaseChangeToken(offset: 9, database: 2), resultsLimit: 10, operationGroup: group),
                        as: $0)
                }
            ),
            (
                .fetchZoneChanges,
                {
                    Wire.encode(
                        FetchZoneChangesRequest(
                            zoneID: notes, resultsLimit: 5, desiredKeys: ["title", "count"], operationGroup: group),
                        as: $0)
                }
            ),
            (
                .modifySubscriptions,
                {
                    Wire.encode(
                        ModifySubscriptionsRequest(
                            subscriptionsToSave: [
                                Subscription(subscriptionID: "db"),
                                Subscription(subscriptionID: "z", kind: .recordZone(notes)),
                            ],
                            subscriptionIDsToDelete: ["old"]), as: $0)
                }
            ),
            (
                .fetchShareMetadata,
                { Wire.encode(shareMetadataRequest: URL(string: "https://example.com/share/1")!, as: $0) }
            ),
            (
                .acceptShares,
                {
                    Wire.encode(
                        AcceptSharesRequest(shareURLs: [
                            URL(string: "https://example.com/share/1")!, URL(string: "https://example.com/share/2")!,
                        ]), as: $0)
                }
            ),
            (
                .fetchShareParticipants,
                {
                    Wire.encode(
                        FetchShareParticipantsRequest(lookupInfos: [
                            UserIdentity.LookupInfo(emailAddress: "bob@example.com"),
                            UserIdentity.LookupInfo(userRecordName: "_user7"),
                        ]), as: $0)
                }
            ),
            (.registerDeviceKey, { Wire.encode(DeviceKeyPair().publicKey, as: $0) }),
            (.fetchZoneKeys, { Wire.encode(FetchZoneKeysRequest(zoneIDs: [notes]), as: $0) }),
            (.saveZoneKeys, { Wire.encode(SaveZoneKeysRequest(keys: [wrap, wrap]), as: $0) }),
        ]
    }

    @Test("every operation with a body has a request message and item fields the schema knows")
    func schemaKnowsEveryRequest() throws {
        for operation in WireOperation.allCases {
            guard let name = operation.requestMessageName else {
                #expect([.allSubscriptions, .currentUserRecordID].contains(operation))
                continue
            }
            let message = try #require(WireSchema.wire.message(named: name), "\(name)")
            for field in operation.itemFields {
                let found = try #require(message.field(named: field), "\(name).\(field)")
                #expect(found.field.isRepeated, "\(name).\(field) holds items, so it is repeated")
            }
        }
    }

    // The schema comes from protoc's descriptors; SwiftProtobuf's generated code comes from the
    // same files. A field the descriptors call a message that the code encodes otherwise (or the
    // other way round) makes the counts differ.
    @Test("the binary measure counts what SwiftProtobuf builds: every message, map entry and repeated element")
    func protobufCountsAgreeWithTheDecoder() throws {
        for (operation, encode) in try Self.everyRequest() {
            let body = encode(.protobuf)
            let shape = try RequestBudget.check(body, as: .protobuf, for: operation)
            let built = try Self.built(body, operation)
            #expect(shape.elements == built.elements, "\(operation): measured \(shape), built \(built)")
            #expect(shape.depth == built.depth, "\(operation): measured \(shape), built \(built)")
            #expect(shape.items == built.items, "\(operation): measured \(shape), built \(built)")
            #expect(shape.elements >= 1)
        }
    }

    @Test("a record's own count of its elements is what the measure of its request finds")
    func recordElements() throws {
        var opened = Record(recordType: "Note", recordID: Record.ID(recordName: "o", zoneID: Self.notes))
        opened["secret"] = .encrypted(.opened(.list(["a", "b"])))
        var saved = try Self.richRecord("s")
        saved.applySystemFields(
            Record.SystemFields(
                recordChangeTag: "3", creatorUserRecordID: Record.ID(recordName: "_user1", zoneID: .default),
                lastModifiedUserRecordID: Record.ID(recordName: "_user1", zoneID: .default)))
        for records in [
            [try Self.richRecord("n1")], [opened], [saved],
            [Record(recordType: "Empty", recordID: Record.ID(recordName: "e", zoneID: Self.notes))],
        ] {
            let body = Wire.encode(ModifyRecordsRequest(recordsToSave: records, savePolicy: .allKeys), as: .protobuf)
            let shape = try RequestBudget.check(body, as: .protobuf, for: .modifyRecords)
            #expect(shape.elements == 1 + records.reduce(0) { $0 + $1.requestElements }, "\(records)")
            let json = try RequestBudget.check(
                Wire.encode(ModifyRecordsRequest(recordsToSave: records, savePolicy: .allKeys), as: .json), as: .json,
                for: .modifyRecords)
            #expect(json.elements <= shape.elements)
        }
    }

    @Test("the JSON measure counts every object and array element, and the items of the item lists")
    func jsonCounts() throws {
        let json = Array(
            #"{"zonesToSave": [{"zoneId": {"zoneName": "A"}}, {}], "zone_ids_to_delete": [{"zoneName": "B", "ownerName": "o"}], "operationGroup": {"operationGroupId": "g"}, "x": [[1, 2], "s"]}"#
                .utf8)
        let shape = try RequestBudget.check(json, as: .json, for: .modifyZones)
        // The request, 3 zones, zoneId, the group; the array [1, 2], its 2 numbers and "s".
        #expect(shape == BodyShape(items: 3, elements: 1 + 3 + 1 + 1 + 4, depth: 4))
        for (operation, encode) in try Self.everyRequest() {
            let body = encode(.json)
            let shape = try RequestBudget.check(body, as: .json, for: operation)
            let built = try Self.built(encode(.protobuf), operation)
            #expect(shape.items == built.items, "\(operation): \(String(decoding: body, as: UTF8.self))")
            // A map is an object of its own, and its entries are members of it, not objects.
            #expect(
                shape.elements == built.elements - built.mapEntries + built.maps,
                "\(operation): measured \(shape), built \(built)")
        }
    }

    @Test(
        "401 items are refused before decoding, in both formats, for every operation with items",
        arguments: WireFormat.allCases)
    func tooManyItems(format: WireFormat) throws {
        for operation in WireOperation.allCases where !operation.itemFields.isEmpty {
            for count in [Limits.maxItemsPerRequest, Limits.maxItemsPerRequest + 1] {
                let body = Self.minimalItems(count, of: operation, as: format)
                if count <= Limits.maxItemsPerRequest {
                    #expect(try RequestBudget.check(body, as: format, for: operation).items == count, "\(operation)")
                } else {
                    let error = #expect(throws: SyncError.self, "\(operation)") {
                        try RequestBudget.check(body, as: format, for: operation)
                    }
                    #expect(error?.code == .limitExceeded)
                    #expect(
                        error?.message.contains("\(operation) carries more than 400 items") == true,
                        "\(String(describing: error))")
                }
            }
        }
    }

    @Test("the issue's body, 8 MiB of empty records, is refused at the 401st", arguments: WireFormat.allCases)
    func emptyRecords(format: WireFormat) {
        let body = Self.repeated(
            format == .protobuf ? [0x0A, 0x00] : Array("{},".utf8), toFill: 8 << 20, format: format,
            field: "recordsToSave")
        let error = #expect(throws: SyncError.self) { try RequestBudget.check(body, as: format, for: .modifyRecords) }
        #expect(error?.code == .limitExceeded)
        #expect(
            error?.message
                == "modifyRecords carries more than 400 items (records to save and record ids to delete); split it")
    }

    @Test("past the elements limit, within 400 items: refused, naming the limit", arguments: WireFormat.allCases)
    func tooManyElements(format: WireFormat) throws {
        // One record whose one field is a list of empty strings; then a zone fetch asking for
        // empty desired keys. Each counts one element per string, in both formats.
        let limit = Limits.maxElementsPerRequest
        for count in [limit - 10, limit + 1] {
            var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n", zoneID: Self.notes))
            record["list"] = .list(Array(repeating: .string(""), count: count))
            let body = Wire.encode(ModifyRecordsRequest(recordsToSave: [record], savePolicy: .allKeys), as: format)
            let keys = Wire.encode(
                FetchZoneChangesRequest(zoneID: Self.notes, desiredKeys: Array(repeating: "", count: count)), as: format
            )
            for (operation, body) in [(WireOperation.modifyRecords, body), (.fetchZoneChanges, keys)] {
                if count < limit {
                    #expect(try RequestBudget.check(body, as: format, for: operation).elements < limit)
                } else {
                    let error = #expect(throws: SyncError.self) {
                        try RequestBudget.check(body, as: format, for: operation)
                    }
                    #expect(error?.code == .limitExceeded)
                    #expect(
                        error?.message
                            == "the \(operation) request holds more than \(limit) elements (messages, map entries, list elements, strings); split it"
                    )
                }
            }
        }
    }

    @Test("nesting past the depth limit is refused; the deepest honest record passes", arguments: WireFormat.allCases)
    func nesting(format: WireFormat) throws {
        // Honest: a sealed list of references is the deepest a request gets.
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n", zoneID: Self.notes))
        record["links"] = .encrypted(
            .opened(.list([.reference(Record.Reference(recordID: Record.ID(recordName: "m", zoneID: Self.notes)))])))
        let honest = Wire.encode(ModifyRecordsRequest(recordsToSave: [record], savePolicy: .allKeys), as: format)
        #expect(try RequestBudget.check(honest, as: format, for: .modifyRecords).depth <= Limits.maxNestingDepth)

        // Hostile: lists of lists, deeper than any decoder should go.
        let levels = Limits.maxNestingDepth + 5
        let body: [UInt8]
        switch format {
        case .protobuf:
            // RecordValue.list_value (9) → RecordValueList.values (1) → RecordValue …, in a record's field.
            var value: [UInt8] = []
            for _ in 0..<levels {
                let list = Self.lengthDelimited(1, value)
                value = Self.lengthDelimited(9, list)
            }
            let entry = Self.lengthDelimited(1, Array("k".utf8)) + Self.lengthDelimited(2, value)
            body = Self.lengthDelimited(1, Self.lengthDelimited(3, entry))
        case .json:
            var value = "{}"
            for _ in 0..<levels { value = #"{"listValue": {"values": [\#(value)]}}"# }
            body = Array(#"{"recordsToSave": [{"fields": {"k": \#(value)}}]}"#.utf8)
        }
        let error = #expect(throws: SyncError.self) { try RequestBudget.check(body, as: format, for: .modifyRecords) }
        #expect(error?.code == .limitExceeded)
        #expect(error?.message == "the modifyRecords request nests more than \(Limits.maxNestingDepth) levels deep")
    }

    @Test("malformed bodies are left to the decoder, measured up to their fault")
    func malformed() throws {
        let bodies: [(WireFormat, [UInt8])] = [
            (.protobuf, [0xFF, 0xFF, 0xFF, 0xFF]), (.protobuf, [0x0A, 0x7F, 0x01]), (.protobuf, [0x0F]),
            (.protobuf, [0x0B, 0x0A, 0x00]),
            (.protobuf, [0x0A, 0x00, 0x0A, 0x00, 0x80]), (.json, Array("{\"recordsToSave\": [".utf8)),
            (.json, Array("{\"a\" 1}".utf8)),
            (.json, Array("[1, 2".utf8)), (.json, Array("\"abc".utf8)), (.json, []), (.json, Array("{}}}".utf8)),
        ]
        for (format, body) in bodies {
            let shape = try RequestBudget.check(body, as: format, for: .modifyRecords)
            #expect(shape.items <= 2, "\(body)")
            #expect(throws: SyncError.self, "\(body)") {
                _ = try Wire.decode(ModifyRecordsRequest.self, from: body, as: format)
            }
        }
        // An unknown field, in groups, is skipped as SwiftProtobuf skips it.
        let group: [UInt8] = [0x0A, 0x00, 0x9B, 0x01, 0x08, 0x01, 0x9C, 0x01, 0x18, 0x03]
        #expect(
            try RequestBudget.check(group, as: .protobuf, for: .modifyRecords)
                == BodyShape(items: 1, elements: 2, depth: 2))
    }

    @Test("operations without a body measure nothing")
    func noBody() throws {
        #expect(try RequestBudget.check([1, 2, 3], as: .protobuf, for: .allSubscriptions) == BodyShape())
    }

    // MARK: Helpers

    /// `count` items of the smallest kind the operation's first item list takes.
    static func minimalItems(_ count: Int, of operation: WireOperation, as format: WireFormat) -> [UInt8] {
        let message = WireSchema.wire.message(named: operation.requestMessageName!)!
        let (number, field) = message.field(named: operation.itemFields[0])!
        switch format {
        case .protobuf:
            return Array((0..<count).map { _ in lengthDelimited(number, []) }.joined())
        case .json:
            let element = field.kind == .lengthDelimited ? "\"\"" : "{}"
            return Array(
                "{\"\(field.jsonName)\": [\(Array(repeating: element, count: count).joined(separator: ","))]}".utf8)
        }
    }

    /// `element` repeated to fill about `size` bytes: as field 1 (protobuf, `element` a whole
    /// field) or in the array of `field` (JSON, `element` with its comma).
    static func repeated(_ element: [UInt8], toFill size: Int, format: WireFormat, field: String) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(size + 64)
        if format == .json { body += Array("{\"\(field)\": [".utf8) }
        while body.count + element.count < size - 8 { body += element }
        if format == .json { body += Array("{}]}".utf8) }
        return body
    }

    static func lengthDelimited(_ field: Int, _ contents: [UInt8]) -> [UInt8] {
        varint(UInt64(field << 3 | 2)) + varint(UInt64(contents.count)) + contents
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    /// What SwiftProtobuf builds from a body: its shape, and how many map entries it holds.
    struct Built: CustomStringConvertible {
        var items = 0
        var elements = 0
        var depth = 0
        var mapEntries = 0
        var maps = 0
        var description: String {
            "\(items) items, \(elements) elements (\(maps) maps, \(mapEntries) entries), \(depth) deep"
        }
    }

    /// What SwiftProtobuf builds from `body`, counted by ``ElementCounter``.
    static func built(_ body: [UInt8], _ operation: WireOperation) throws -> Built {
        func count<M: SwiftProtobuf.Message>(_: M.Type) throws -> Built {
            var counter = ElementCounter(itemFields: Set(operation.itemFields))
            try counter.visit(try M(serializedBytes: body), depth: 1, names: M.self)
            return Built(
                items: counter.shape.items, elements: counter.shape.elements, depth: counter.shape.depth,
                mapEntries: counter.mapEntries, maps: counter.maps)
        }
        switch operation {
        case .modifyZones: return try count(Logsync_Wire_ModifyZonesRequest.self)
        case .fetchZones: return try count(Logsync_Wire_FetchZonesRequest.self)
        case .modifyRecords: return try count(Logsync_Wire_ModifyRecordsRequest.self)
        case .fetchDatabaseChanges: return try count(Logsync_Wire_FetchDatabaseChangesRequest.self)
        case .fetchZoneChanges: return try count(Logsync_Wire_FetchZoneChangesRequest.self)
        case .modifySubscriptions: return try count(Logsync_Wire_ModifySubscriptionsRequest.self)
        case .fetchShareMetadata: return try count(Logsync_Wire_FetchShareMetadataRequest.self)
        case .acceptShares: return try count(Logsync_Wire_AcceptSharesRequest.self)
        case .fetchShareParticipants: return try count(Logsync_Wire_FetchShareParticipantsRequest.self)
        case .registerDeviceKey: return try count(Logsync_Wire_RegisterDeviceKeyRequest.self)
        case .fetchZoneKeys: return try count(Logsync_Wire_FetchZoneKeysRequest.self)
        case .saveZoneKeys: return try count(Logsync_Wire_SaveZoneKeysRequest.self)
        case .allSubscriptions, .currentUserRecordID: return Built()
        }
    }
}

/// Counts the messages, map entries and repeated elements of a decoded message through
/// SwiftProtobuf's own traversal, which knows the generated code's fields: the oracle of the
/// binary measure.
struct ElementCounter: SwiftProtobuf.Visitor {
    let itemFields: Set<String>
    var shape = BodyShape(elements: 1, depth: 1)
    var mapEntries = 0
    var maps = 0
    private var depth = 1
    private var topLevel: [Int: String] = [:]

    init(itemFields: Set<String>) {
        self.itemFields = itemFields
    }

    mutating func visit<M: SwiftProtobuf.Message>(_ message: M, depth: Int, names: M.Type) throws {
        if depth == 1 {
            // The field numbers of the request's item lists, from its JSON names.
            let schema = WireSchema.wire.message(named: M.protoMessageName)!
            for name in itemFields { topLevel[schema.field(named: name)!.number] = name }
        }
        self.depth = depth
        shape.depth = max(shape.depth, depth)
        try message.traverse(visitor: &self)
        self.depth = depth
    }

    private mutating func nested<M: SwiftProtobuf.Message>(_ message: M) throws {
        let outer = depth
        try visit(message, depth: outer + 1, names: M.self)
        depth = outer
    }

    private mutating func counted(_ count: Int, fieldNumber: Int) {
        shape.elements += count
        if depth == 1, topLevel[fieldNumber] != nil { shape.items += count }
    }

    mutating func visitSingularMessageField<M: SwiftProtobuf.Message>(value: M, fieldNumber: Int) throws {
        counted(1, fieldNumber: fieldNumber)
        try nested(value)
    }

    mutating func visitRepeatedMessageField<M: SwiftProtobuf.Message>(value: [M], fieldNumber: Int) throws {
        for element in value {
            counted(1, fieldNumber: fieldNumber)
            try nested(element)
        }
    }

    mutating func visitRepeatedStringField(value: [String], fieldNumber: Int) throws {
        counted(value.count, fieldNumber: fieldNumber)
    }
    mutating func visitRepeatedBytesField(value: [Data], fieldNumber: Int) throws {
        counted(value.count, fieldNumber: fieldNumber)
    }

    mutating func visitMapField<K, V>(
        fieldType: _ProtobufMessageMap<K, V>.Type, value: _ProtobufMessageMap<K, V>.BaseType, fieldNumber: Int
    ) throws {
        maps += 1
        for (_, element) in value {
            // The entry, one level down, and its value message, one more.
            mapEntries += 1
            counted(1, fieldNumber: fieldNumber)
            shape.depth = max(shape.depth, depth + 1)
            counted(1, fieldNumber: -1)
            let outer = depth
            try visit(element, depth: outer + 2, names: V.self)
            depth = outer
        }
    }

    mutating func visitMapField<K, V: MapValueType>(
        fieldType: _ProtobufMap<K, V>.Type, value: _ProtobufMap<K, V>.BaseType, fieldNumber: Int
    ) throws {
        counted(value.count, fieldNumber: fieldNumber)
    }

    mutating func visitMapField<K, V>(
        fieldType: _ProtobufEnumMap<K, V>.Type, value: _ProtobufEnumMap<K, V>.BaseType, fieldNumber: Int
    ) throws
    where V.RawValue == Int {
        counted(value.count, fieldNumber: fieldNumber)
    }

    mutating func visitSingularDoubleField(value: Double, fieldNumber: Int) throws {}
    mutating func visitSingularInt64Field(value: Int64, fieldNumber: Int) throws {}
    mutating func visitSingularUInt64Field(value: UInt64, fieldNumber: Int) throws {}
    mutating func visitSingularBoolField(value: Bool, fieldNumber: Int) throws {}
    mutating func visitSingularStringField(value: String, fieldNumber: Int) throws {}
    mutating func visitSingularBytesField(value: Data, fieldNumber: Int) throws {}
    mutating func visitSingularEnumField<E: SwiftProtobuf.Enum>(value: E, fieldNumber: Int) throws {}
    mutating func visitUnknown(bytes: Data) throws {}
    mutating func visitExtensionFields(fields: ExtensionFieldValueSet, start: Int, end: Int) throws {}
    mutating func visitExtensionFieldsAsMessageSet(fields: ExtensionFieldValueSet, start: Int, end: Int) throws {}
}
