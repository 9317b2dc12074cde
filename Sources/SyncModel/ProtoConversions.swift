import Foundation
import SwiftProtobuf

// Conversions between the model types and their Protocol Buffers messages
// (Proto/model.proto, generated into Proto/Generated/model.pb.swift). See Docs/Protobuf.md.
//
// Rules:
// - Encoding (`proto`) is total and lossless for every value the model types can hold, except
//   that times and durations keep whole microseconds (the log's resolution).
// - Decoding (`init(proto:)`) is its inverse, and rejects with `SyncError` `invalidArguments`
//   only what no encoder writes: a missing required message, an empty oneof, an unknown enum
//   value, an item named twice. It never checks naming rules or limits: that is `validate()`'s
//   job, so that a record the server must refuse reaches the server and is refused per item.
// - Neither ever traps, whatever the bytes.

/// A model type with a Protocol Buffers form, converted without loss both ways.
///
/// ```swift
/// let bytes = record.protoBytes()
/// let copy = try Record(protoBytes: bytes)      // copy == record
/// ```
package protocol ProtoConvertible {
    /// The generated message type of the model type.
    associatedtype ProtoMessage: SwiftProtobuf.Message

    /// Creates a value from its message.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` whose message names the field that is missing,
    ///   unknown or duplicated, such as `Record.parent: Reference.record_id is missing`.
    init(proto: ProtoMessage) throws(SyncError)

    /// The value's message.
    var proto: ProtoMessage { get }
}

extension ProtoConvertible {
    /// Decodes a value from the binary encoding of its message.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the message type and what was wrong:
    ///   bytes that are not a valid encoding, or a message that does not describe a value.
    package init(protoBytes bytes: [UInt8]) throws(SyncError) {
        try self.init(generatedProtoBytes: bytes)
    }

    /// Decodes a value from the binary encoding of its message with the generated decoder, as
    /// ``init(protoBytes:)`` does for every type but ``Record``, which reads its usual form
    /// directly (ProtoRecordReader.swift) and leaves the rest to this.
    ///
    /// - Throws: ``SyncError`` `invalidArguments`, as ``init(protoBytes:)``.
    package init(generatedProtoBytes bytes: [UInt8]) throws(SyncError) {
        let message = try ProtoWire.decode(ProtoMessage.self, from: bytes)
        do {
            try self.init(proto: message)
        } catch {
            throw error.prefixed("cannot decode \(ProtoMessage.protoMessageName)")
        }
    }

    /// The binary encoding of the value's message, with map entries in a deterministic order.
    package func protoBytes() -> [UInt8] {
        ProtoWire.serialize(proto)
    }
}

/// Binary encoding and decoding of any generated message, with typed errors.
package enum ProtoWire {
    /// Serializes a message with deterministic ordering of map entries.
    ///
    /// Serializing a proto3 message fails only if it is larger than 2 GiB, which no model value
    /// within the limits of ``Limits`` comes near; that failure is a programming error.
    package static func serialize(_ message: some SwiftProtobuf.Message) -> [UInt8] {
        var options = BinaryEncodingOptions()
        options.useDeterministicOrdering = true
        return infallibly(message, "serialize") { try message.serializedBytes(options: options) }
    }

    /// Encodes a message in the Protocol Buffers JSON mapping, map entries in a deterministic order.
    ///
    /// Only a message holding a value JSON cannot express (a NaN in a field of a well-known
    /// type) fails; no LogSync message has such a field, so that failure is a programming error.
    package static func serializeJSON(_ message: some SwiftProtobuf.Message) -> [UInt8] {
        var options = JSONEncodingOptions()
        options.useDeterministicOrdering = true
        return infallibly(message, "encode as JSON") { try message.jsonUTF8Bytes(options: options) }
    }

    private static func infallibly(
        _ message: some SwiftProtobuf.Message, _ what: String, _ encode: () throws -> [UInt8]
    ) -> [UInt8] {
        do {
            return try encode()
        } catch {
            preconditionFailure("cannot \(what) \(type(of: message).protoMessageName): \(error)")
        }
    }

    /// Parses the binary encoding of a message.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the message type and SwiftProtobuf's
    ///   reason (truncated, malformed, invalid UTF-8, nested too deeply …).
    package static func decode<Message: SwiftProtobuf.Message>(
        _ type: Message.Type, from bytes: [UInt8]
    ) throws(SyncError) -> Message {
        do {
            return try Message(serializedBytes: bytes)
        } catch {
            throw SyncError(
                .invalidArguments,
                "cannot decode \(Message.protoMessageName) from \(bytes.count) bytes: \(error)")
        }
    }
}

// MARK: - Decoding helpers

/// Helpers that build the `invalidArguments` errors of decoding, naming the field concerned.
package enum ProtoDecoding {
    /// The error for a required field that is absent, e.g. `Record.record_id is missing`.
    package static func missing(_ field: String) -> SyncError {
        SyncError(.invalidArguments, "\(field) is missing")
    }

    /// The error for any other problem with a field.
    package static func invalid(_ field: String, _ problem: String) -> SyncError {
        SyncError(.invalidArguments, "\(field) \(problem)")
    }

    /// Runs `body`, prefixing the message of any error it throws with `context`, the field being
    /// decoded, so that errors of nested messages name their path.
    package static func within<T>(
        _ context: @autoclosure () -> String, _ body: () throws(SyncError) -> T
    ) throws(SyncError) -> T {
        do {
            return try body()
        } catch {
            throw error.prefixed(context())  // the context is built only when decoding fails
        }
    }

    /// Converts each element of a repeated field, an error naming the element, e.g.
    /// `records_to_save[3]: Record.record_id is missing`.
    package static func each<Message, Value>(
        _ messages: [Message], _ field: String, _ convert: (Message) throws(SyncError) -> Value
    ) throws(SyncError) -> [Value] {
        var values: [Value] = []
        values.reserveCapacity(messages.count)
        for (index, message) in messages.enumerated() {
            values.append(try within("\(field)[\(index)]") { () throws(SyncError) in try convert(message) })
        }
        return values
    }

    /// Converts a repeated field of per-item entries to a dictionary, an error naming the entry;
    /// an item named twice is invalid (`field[2] names <item> a second time`).
    package static func keyed<Entry, Key: Hashable, Value>(
        _ entries: [Entry], _ field: String, naming name: (Key) -> String = { "\($0)" },
        _ convert: (Entry) throws(SyncError) -> (Key, Value)
    ) throws(SyncError) -> [Key: Value] {
        var values: [Key: Value] = [:]
        for (index, entry) in entries.enumerated() {
            let (key, value) = try within("\(field)[\(index)]") { () throws(SyncError) in try convert(entry) }
            guard values.updateValue(value, forKey: key) == nil else {
                throw invalid("\(field)[\(index)]", "names \(name(key)) a second time")
            }
        }
        return values
    }
}

extension SyncError {
    /// The same error with `context: ` before its message.
    func prefixed(_ context: String) -> SyncError {
        var copy = self
        copy.message = message.isEmpty ? context : "\(context): \(message)"
        return copy
    }
}

/// Conversions of times and durations to and from whole microseconds.
package enum ProtoTime {
    /// The date in whole microseconds since 1970, rounded to the nearest; clamped to `Int64`'s
    /// range, and 0 for a date that is not a number.
    package static func microseconds(_ date: Date) -> Int64 {
        clamped((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    /// The date `microseconds` after 1970-01-01T00:00:00Z.
    package static func date(microseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)
    }

    /// The duration in whole microseconds, truncated toward zero and clamped to `Int64`'s range.
    package static func microseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return total
    }

    /// The duration of `microseconds`.
    package static func duration(microseconds: Int64) -> Duration {
        .microseconds(microseconds)
    }

    private static func clamped(_ value: Double) -> Int64 {
        if value.isNaN { return 0 }
        if let exact = Int64(exactly: value) { return exact }
        return value < 0 ? .min : .max
    }
}

/// The order in which encoded results and partial errors are written, so that equal values have
/// equal bytes: record IDs by owner name, zone name, record name.
package enum ProtoOrder {
    static func key(_ id: Record.ID) -> [String] {
        [id.zoneID.ownerName, id.zoneID.zoneName, id.recordName]
    }

    static func key(_ item: SyncError.ItemID) -> [String] {
        switch item {
        case .record(let id): ["0"] + key(id)
        case .zone(let id): ["1", id.ownerName, id.zoneName]
        case .subscription(let id): ["2", id.rawValue]
        }
    }

    static func precedes(_ lhs: [String], _ rhs: [String]) -> Bool {
        lhs.lexicographicallyPrecedes(rhs) { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The dictionary's elements in record-ID order, each sort key computed once.
    static func sorted<Value>(_ results: [Record.ID: Value]) -> [(key: Record.ID, value: Value)] {
        sorted(results, by: key)
    }

    /// The dictionary's elements in the order of `key`, whose strings compare by UTF-8 bytes;
    /// each sort key computed once.
    package static func sorted<Key, Value>(
        _ results: [Key: Value], by key: (Key) -> [String]
    ) -> [(key: Key, value: Value)] {
        results.map { (sortKey: key($0.key), element: $0) }
            .sorted { precedes($0.sortKey, $1.sortKey) }
            .map(\.element)
    }
}

// MARK: - IDs

extension RecordZone.ID: ProtoConvertible {
    package init(proto: Logsync_Model_RecordZoneID) {
        self.init(zoneName: proto.zoneName, ownerName: proto.ownerName)
    }

    package var proto: Logsync_Model_RecordZoneID {
        var message = Logsync_Model_RecordZoneID()
        message.zoneName = zoneName
        message.ownerName = ownerName
        return message
    }
}

extension Record.ID: ProtoConvertible {
    package init(proto: Logsync_Model_RecordID) throws(SyncError) {
        guard proto.hasZoneID else { throw ProtoDecoding.missing("RecordID.zone_id") }
        self.init(recordName: proto.recordName, zoneID: RecordZone.ID(proto: proto.zoneID))
    }

    package var proto: Logsync_Model_RecordID {
        var message = Logsync_Model_RecordID()
        message.recordName = recordName
        message.zoneID = zoneID.proto
        return message
    }
}

// MARK: - References and zones

extension Record.Reference.Action {
    /// Decodes an action; the numbers are the raw values.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` for a value this build does not know.
    package init(proto: Logsync_Model_ReferenceAction) throws(SyncError) {
        switch proto {
        case .none: self = .none
        case .deleteSelf: self = .deleteSelf
        case .UNRECOGNIZED(let value):
            throw ProtoDecoding.invalid("Reference.action", "has unknown value \(value)")
        }
    }

    package var proto: Logsync_Model_ReferenceAction {
        switch self {
        case .none: .none
        case .deleteSelf: .deleteSelf
        }
    }
}

extension Record.Reference: ProtoConvertible {
    package init(proto: Logsync_Model_Reference) throws(SyncError) {
        guard proto.hasRecordID else { throw ProtoDecoding.missing("Reference.record_id") }
        let recordID = try ProtoDecoding.within("Reference.record_id") { () throws(SyncError) in
            try Record.ID(proto: proto.recordID)
        }
        self.init(recordID: recordID, action: try Action(proto: proto.action))
    }

    package var proto: Logsync_Model_Reference {
        var message = Logsync_Model_Reference()
        message.recordID = recordID.proto
        message.action = action.proto
        return message
    }
}

extension RecordZone: ProtoConvertible {
    package init(proto: Logsync_Model_RecordZone) throws(SyncError) {
        guard proto.hasZoneID else { throw ProtoDecoding.missing("RecordZone.zone_id") }
        let share: Record.Reference? =
            proto.hasShare
            ? try ProtoDecoding.within("RecordZone.share") { () throws(SyncError) in
                try Record.Reference(proto: proto.share)
            }
            : nil
        self.init(
            zoneID: RecordZone.ID(proto: proto.zoneID),
            capabilities: Capabilities(rawValue: proto.capabilities), share: share)
    }

    package var proto: Logsync_Model_RecordZone {
        var message = Logsync_Model_RecordZone()
        message.zoneID = zoneID.proto
        message.capabilities = capabilities.rawValue
        if let share { message.share = share.proto }
        return message
    }
}

extension ZoneDeletionReason {
    /// Decodes a reason.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` for `UNSPECIFIED` or an unknown value.
    package init(proto: Logsync_Model_ZoneDeletionReason) throws(SyncError) {
        switch proto {
        case .deleted: self = .deleted
        case .purged: self = .purged
        case .encryptedDataReset: self = .encryptedDataReset
        case .unspecified: throw ProtoDecoding.missing("ZoneDeletionReason")
        case .UNRECOGNIZED(let value):
            throw ProtoDecoding.invalid("ZoneDeletionReason", "has unknown value \(value)")
        }
    }

    /// The reason's message value (the raw value plus one; 0 means absent).
    package var proto: Logsync_Model_ZoneDeletionReason {
        switch self {
        case .deleted: .deleted
        case .purged: .purged
        case .encryptedDataReset: .encryptedDataReset
        }
    }
}

// MARK: - Values and records

extension RecordValue: ProtoConvertible {
    package init(proto: Logsync_Model_RecordValue) throws(SyncError) {
        switch proto.value {
        case .stringValue(let text)?: self = .string(text)
        case .int64Value(let value)?: self = .int64(value)
        case .doubleValue(let value)?: self = .double(value)
        case .boolValue(let value)?: self = .bool(value)
        case .bytesValue(let data)?: self = .bytes(data)
        case .dateMicroseconds(let microseconds)?: self = .date(ProtoTime.date(microseconds: microseconds))
        case .referenceValue(let reference)?:
            self = .reference(
                try ProtoDecoding.within("RecordValue.reference_value") { () throws(SyncError) in
                    try Record.Reference(proto: reference)
                })
        case .locationValue(let location)?: self = .location(Location(proto: location))
        case .encryptedValue(let encrypted)?:
            switch encrypted.state {
            case .plaintext(let plaintext)?:
                self = .encrypted(
                    .opened(
                        try ProtoDecoding.within("RecordValue.encrypted_value.plaintext") { () throws(SyncError) in
                            try RecordValue(proto: plaintext)
                        }))
            case .sealed(let sealed)?:
                self = .encrypted(.sealed(SealedValue(keyVersion: sealed.keyVersion, box: sealed.box)))
            case nil:
                throw ProtoDecoding.invalid("RecordValue.encrypted_value", "is neither opened nor sealed")
            }
        case .assetValue(let asset)?:
            self = .asset(
                try ProtoDecoding.within("RecordValue.asset_value") { () throws(SyncError) in try Asset(proto: asset) })
        case .listValue(let list)?:
            // Nesting and mixed kinds are representable and kept; Record.validate() refuses them.
            self = .list(try ProtoDecoding.each(list.values, "RecordValue.list_value", RecordValue.init(proto:)))
        case nil:
            throw ProtoDecoding.invalid("RecordValue", "has no value set")
        }
    }

    package var proto: Logsync_Model_RecordValue {
        var message = Logsync_Model_RecordValue()
        switch self {
        case .string(let text): message.value = .stringValue(text)
        case .int64(let value): message.value = .int64Value(value)
        case .double(let value): message.value = .doubleValue(value)
        case .bool(let value): message.value = .boolValue(value)
        case .bytes(let data): message.value = .bytesValue(data)
        case .date(let date): message.value = .dateMicroseconds(ProtoTime.microseconds(date))
        case .reference(let reference): message.value = .referenceValue(reference.proto)
        case .asset(let asset): message.value = .assetValue(asset.proto)
        case .location(let location): message.value = .locationValue(location.proto)
        case .encrypted(let encrypted):
            var inner = Logsync_Model_EncryptedValue()
            switch encrypted {
            case .opened(let plaintext): inner.state = .plaintext(plaintext.proto)
            case .sealed(let sealed):
                var box = Logsync_Model_SealedValue()
                box.keyVersion = sealed.keyVersion
                box.box = sealed.box
                inner.state = .sealed(box)
            }
            message.value = .encryptedValue(inner)
        case .list(let values):
            var list = Logsync_Model_RecordValueList()
            list.values = values.map(\.proto)
            message.value = .listValue(list)
        }
        return message
    }
}

extension Location {
    init(proto: Logsync_Model_Location) {
        self.init(
            latitude: proto.latitude, longitude: proto.longitude, altitude: proto.altitude,
            horizontalAccuracy: proto.horizontalAccuracy, verticalAccuracy: proto.verticalAccuracy,
            course: proto.course,
            speed: proto.speed, timestamp: ProtoTime.date(microseconds: proto.timestampMicroseconds))
    }

    var proto: Logsync_Model_Location {
        var message = Logsync_Model_Location()
        message.latitude = latitude
        message.longitude = longitude
        message.altitude = altitude
        message.horizontalAccuracy = horizontalAccuracy
        message.verticalAccuracy = verticalAccuracy
        message.course = course
        message.speed = speed
        message.timestampMicroseconds = ProtoTime.microseconds(timestamp)
        return message
    }
}

extension Asset: ProtoConvertible {
    package init(proto: Logsync_Model_Asset) throws(SyncError) {
        self.init(fileURL: URL(fileURLWithPath: "/"))
        fileURL = proto.filePath.isEmpty ? nil : URL(fileURLWithPath: proto.filePath)
        if !proto.sha256.isEmpty {
            do throws(SyncError) {
                digest = try AssetDigest(bytes: Array(proto.sha256))
            } catch {
                throw ProtoDecoding.invalid("Asset", "sha256 holds \(proto.sha256.count) bytes, not 32")
            }
        }
        size = proto.hasSize ? proto.size : nil
    }

    package var proto: Logsync_Model_Asset {
        var message = Logsync_Model_Asset()
        if let digest { message.sha256 = Data(digest.bytes) }
        if let size { message.size = size }
        if let fileURL { message.filePath = fileURL.path }
        return message
    }
}

extension Record.SystemFields: ProtoConvertible {
    package init(proto: Logsync_Model_SystemFields) throws(SyncError) {
        let creator: Record.ID? =
            proto.hasCreatorUserRecordID
            ? try ProtoDecoding.within("SystemFields.creator_user_record_id") { () throws(SyncError) in
                try Record.ID(proto: proto.creatorUserRecordID)
            }
            : nil
        let lastModifier: Record.ID? =
            proto.hasLastModifiedUserRecordID
            ? try ProtoDecoding.within("SystemFields.last_modified_user_record_id") { () throws(SyncError) in
                try Record.ID(proto: proto.lastModifiedUserRecordID)
            }
            : nil
        let share: Record.Reference? =
            proto.hasShare
            ? try ProtoDecoding.within("SystemFields.share") { () throws(SyncError) in
                try Record.Reference(proto: proto.share)
            }
            : nil
        self.init(
            recordChangeTag: proto.hasRecordChangeTag ? proto.recordChangeTag : nil,
            creationDate: proto.hasCreationDateMicroseconds
                ? ProtoTime.date(microseconds: proto.creationDateMicroseconds) : nil,
            modificationDate: proto.hasModificationDateMicroseconds
                ? ProtoTime.date(microseconds: proto.modificationDateMicroseconds) : nil,
            creatorUserRecordID: creator, lastModifiedUserRecordID: lastModifier, share: share)
    }

    package var proto: Logsync_Model_SystemFields {
        var message = Logsync_Model_SystemFields()
        if let recordChangeTag { message.recordChangeTag = recordChangeTag }
        if let creationDate { message.creationDateMicroseconds = ProtoTime.microseconds(creationDate) }
        if let modificationDate { message.modificationDateMicroseconds = ProtoTime.microseconds(modificationDate) }
        if let creatorUserRecordID { message.creatorUserRecordID = creatorUserRecordID.proto }
        if let lastModifiedUserRecordID { message.lastModifiedUserRecordID = lastModifiedUserRecordID.proto }
        if let share { message.share = share.proto }
        return message
    }
}

extension Record: ProtoConvertible {
    /// Decodes a record with its fields, its changed keys (including keys set to `nil`), its
    /// parent and whether the parent changed, and its system fields.
    package init(proto: Logsync_Model_Record) throws(SyncError) {
        guard proto.hasRecordID else { throw ProtoDecoding.missing("Record.record_id") }
        let recordID = try ProtoDecoding.within("Record.record_id") { () throws(SyncError) in
            try Record.ID(proto: proto.recordID)
        }
        var fields: [String: RecordValue] = [:]
        fields.reserveCapacity(proto.fields.count)
        do throws(SyncError) {
            for (key, value) in proto.fields { fields[key] = try RecordValue(proto: value) }
        } catch {
            // Name the first bad field in key order, whatever order the map came in.
            for (key, value) in proto.fields.sorted(by: { $0.key < $1.key }) {
                _ = try ProtoDecoding.within("Record.fields[\(quoted(key))]") { () throws(SyncError) in
                    try RecordValue(proto: value)
                }
            }
            throw error
        }
        let parent: Reference? =
            proto.hasParent
            ? try ProtoDecoding.within("Record.parent") { () throws(SyncError) in
                try Reference(proto: proto.parent)
            }
            : nil
        let systemFields =
            proto.hasSystemFields
            ? try ProtoDecoding.within("Record.system_fields") { () throws(SyncError) in
                try SystemFields(proto: proto.systemFields)
            }
            : SystemFields()

        // Marked changed: exactly what the message says (a changed key without a value is a field
        // set to nil, which the save removes on the server).
        self.init(
            recordType: proto.recordType, recordID: recordID, values: fields, changed: Set(proto.changedKeys),
            parent: parent,
            parentChanged: proto.parentChanged, systemFields: systemFields)
    }

    package var proto: Logsync_Model_Record {
        var message = Logsync_Model_Record()
        message.recordType = recordType
        message.recordID = recordID.proto
        message.fields = fields.mapValues(\.proto)
        message.changedKeys = changedKeys()
        if let parent { message.parent = parent.proto }
        message.parentChanged = isParentChanged
        if systemFields != SystemFields() { message.systemFields = systemFields.proto }
        return message
    }
}

// MARK: - Operation groups

extension OperationGroup: ProtoConvertible {
    /// Decodes a group.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` for a missing ID or an unknown transfer size.
    package init(proto: Logsync_Model_OperationGroup) throws(SyncError) {
        guard !proto.operationGroupID.isEmpty else { throw ProtoDecoding.missing("OperationGroup.operation_group_id") }
        func size(_ value: Int64, _ field: String) throws(SyncError) -> TransferSize {
            guard let size = Int(exactly: value).flatMap(TransferSize.init(rawValue:)) else {
                throw ProtoDecoding.invalid("OperationGroup.\(field)", "has unknown value \(value)")
            }
            return size
        }
        guard let quantity = Int(exactly: proto.quantity) else {
            throw ProtoDecoding.invalid("OperationGroup.quantity", "is out of range")
        }
        self.init(
            operationGroupID: proto.operationGroupID, name: proto.hasName ? proto.name : nil, quantity: quantity,
            expectedSendSize: try size(proto.expectedSendSize, "expected_send_size"),
            expectedReceiveSize: try size(proto.expectedReceiveSize, "expected_receive_size"))
    }

    package var proto: Logsync_Model_OperationGroup {
        var message = Logsync_Model_OperationGroup()
        message.operationGroupID = operationGroupID
        if let name { message.name = name }
        message.quantity = Int64(quantity)
        message.expectedSendSize = Int64(expectedSendSize.rawValue)
        message.expectedReceiveSize = Int64(expectedReceiveSize.rawValue)
        return message
    }
}
