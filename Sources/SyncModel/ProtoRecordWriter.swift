import Foundation

// A record's protobuf bytes written directly from the model, without building the generated
// `Logsync_Model_Record` message first. SwiftProtobuf's encoder computes the size of every nested
// message again at each level of nesting and sorts each record's field map twice (once to size
// it, once to write it); for a server saving hundreds of records a request that was most of its
// encoding time (Docs/Performance.md, "Server").
//
// The bytes are exactly those of `ProtoWire.serialize(record.proto)` (deterministic ordering):
// fields in field-number order, proto3 defaults left out where SwiftProtobuf leaves them out,
// map entries sorted by key with Swift's `<` and always holding key and value, oneof members
// and explicit-presence fields always written. `ProtoRecordWriterTests` compares the two on
// every kind of value.

/// Appends protobuf wire-format fields to a byte array.
package struct ProtoWriter {
    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    package mutating func key(_ field: Int, _ wireType: UInt8) { varint(UInt64(field) << 3 | UInt64(wireType)) }

    package mutating func int64(_ field: Int, _ value: Int64) {
        key(field, 0)
        varint(UInt64(bitPattern: value))
    }

    package mutating func bool(_ field: Int, _ value: Bool) {
        key(field, 0)
        bytes.append(value ? 1 : 0)
    }

    package mutating func double(_ field: Int, _ value: Double) {
        key(field, 1)
        var bits = value.bitPattern
        for _ in 0..<8 {
            bytes.append(UInt8(truncatingIfNeeded: bits))
            bits >>= 8
        }
    }

    package mutating func string(_ field: Int, _ value: String) {
        key(field, 2)
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    package mutating func data(_ field: Int, _ value: Data) {
        key(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A length-delimited field holding `value` as it is: bytes, or an embedded message already
    /// encoded (such as a record's stored `serializedProto()` bytes).
    package mutating func lengthDelimited(_ field: Int, _ value: some Collection<UInt8>) {
        key(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// Bytes already in the wire format (whole fields), as they are.
    package mutating func raw(_ value: some Collection<UInt8>) {
        bytes.append(contentsOf: value)
    }

    /// A length-delimited field whose content `body` writes: written in place, then its length
    /// put in front of it.
    package mutating func message(_ field: Int, _ body: (inout ProtoWriter) -> Void) {
        key(field, 2)
        let start = bytes.count
        body(&self)
        let length = bytes.count - start
        if length < 0x80 {
            bytes.insert(UInt8(length), at: start)
        } else {
            var prefix = ProtoWriter()
            prefix.varint(UInt64(length))
            bytes.insert(contentsOf: prefix.bytes, at: start)
        }
    }
}

extension RecordZone.ID {
    package func write(to writer: inout ProtoWriter) {
        if !zoneName.isEmpty { writer.string(1, zoneName) }
        if !ownerName.isEmpty { writer.string(2, ownerName) }
    }
}

extension Record.ID {
    package func write(to writer: inout ProtoWriter) {
        if !recordName.isEmpty { writer.string(1, recordName) }
        writer.message(2) { zoneID.write(to: &$0) }
    }
}

extension Record.Reference {
    func write(to writer: inout ProtoWriter) {
        writer.message(1) { recordID.write(to: &$0) }
        let action = action.proto.rawValue
        if action != 0 { writer.int64(2, Int64(action)) }
    }
}

extension RecordValue {
    func write(to writer: inout ProtoWriter) {
        switch self {
        case .string(let text): writer.string(1, text)
        case .int64(let value): writer.int64(2, value)
        case .double(let value): writer.double(3, value)
        case .bool(let value): writer.bool(4, value)
        case .bytes(let data): writer.data(5, data)
        case .date(let date): writer.int64(6, ProtoTime.microseconds(date))
        case .reference(let reference): writer.message(7) { reference.write(to: &$0) }
        case .location(let location):
            writer.message(11) { message in
                let numbers = [
                    location.latitude, location.longitude, location.altitude, location.horizontalAccuracy,
                    location.verticalAccuracy, location.course, location.speed,
                ]
                // proto3 leaves zeros out, as the generated encoder does.
                for (index, number) in numbers.enumerated() where number.bitPattern != 0 {
                    message.double(index + 1, number)
                }
                let microseconds = ProtoTime.microseconds(location.timestamp)
                if microseconds != 0 { message.int64(8, microseconds) }
            }
        case .asset(let asset):
            writer.message(10) { message in
                if let digest = asset.digest { message.lengthDelimited(1, digest.bytes) }
                if let size = asset.size { message.int64(2, size) }
                if let fileURL = asset.fileURL { message.string(3, fileURL.path) }
            }
        case .encrypted(.opened(let plaintext)):
            writer.message(12) { message in message.message(1) { plaintext.write(to: &$0) } }
        case .encrypted(.sealed(let sealed)):
            writer.message(12) { message in
                message.message(2) { box in
                    if sealed.keyVersion != 0 { box.int64(1, Int64(sealed.keyVersion)) }
                    if !sealed.box.isEmpty { box.data(2, sealed.box) }
                }
            }
        case .list(let values):
            writer.message(9) { list in
                for value in values { list.message(1) { value.write(to: &$0) } }
            }
        }
    }
}

extension Record.SystemFields {
    func write(to writer: inout ProtoWriter) {
        if let recordChangeTag { writer.string(1, recordChangeTag) }
        if let creationDate { writer.int64(2, ProtoTime.microseconds(creationDate)) }
        if let modificationDate { writer.int64(3, ProtoTime.microseconds(modificationDate)) }
        if let creatorUserRecordID { writer.message(4) { creatorUserRecordID.write(to: &$0) } }
        if let lastModifiedUserRecordID { writer.message(5) { lastModifiedUserRecordID.write(to: &$0) } }
        if let share { writer.message(6) { share.write(to: &$0) } }
    }
}

extension Record {
    /// The record's protobuf bytes: exactly `protoBytes()` (`ProtoWire.serialize(proto)`),
    /// written directly from the record.
    package func serializedProto() -> [UInt8] {
        var writer = ProtoWriter(capacity: 64 + estimatedSize * 5 / 4)
        write(to: &writer)
        return writer.bytes
    }

    /// Writes the fields of the record's message (`Logsync_Model_Record`), as `serializedProto()`.
    package func write(to writer: inout ProtoWriter) {
        if !recordType.isEmpty { writer.string(1, recordType) }
        writer.message(2) { recordID.write(to: &$0) }
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) {
            writer.message(3) { entry in
                entry.string(1, key)
                entry.message(2) { value.write(to: &$0) }
            }
        }
        for key in changedKeys() { writer.string(4, key) }
        if let parent { writer.message(5) { parent.write(to: &$0) } }
        if isParentChanged { writer.bool(6, true) }
        if systemFields != SystemFields() { writer.message(7) { systemFields.write(to: &$0) } }
    }
}

extension RecordValue {
    /// The elements the value counts in a request body (``Limits/maxElementsPerRequest``): its
    /// `RecordValue` message and every message and list element within, as the measure of a
    /// Protocol Buffers body counts them in what ``write(to:)`` writes.
    var requestElements: Int {
        switch self {
        case .string, .int64, .double, .bool, .bytes, .date: 1
        case .reference: 4  // the value, its Reference, RecordID and RecordZoneID
        case .location, .asset: 2
        case .encrypted(.opened(let plaintext)): 2 + plaintext.requestElements
        case .encrypted(.sealed): 3
        case .list(let values): values.reduce(2) { $0 + $1.requestElements }
        }
    }
}

extension Record {
    /// The elements the record counts in a request body (``Limits/maxElementsPerRequest``):
    /// its message, its ID's, each field's map entry and value, each changed key, its parent and
    /// its system fields (their share too), as the measure of a Protocol Buffers body counts what
    /// ``write(to:)`` writes. A JSON body counts no more.
    package var requestElements: Int {
        var count = 3 + changedKeys().count
        for value in fields.values { count += 1 + value.requestElements }
        if parent != nil { count += 3 }
        if systemFields != SystemFields() {
            count +=
                1 + (systemFields.creatorUserRecordID == nil ? 0 : 2)
                + (systemFields.lastModifiedUserRecordID == nil ? 0 : 2) + (systemFields.share == nil ? 0 : 3)
        }
        return count
    }
}

extension ModifyRecordsResponse {
    /// The response's protobuf bytes: exactly `ProtoWire.serialize(proto)`, written directly, its
    /// saved records by `Record.write(to:)` (a send's answer holds every record it saved, and
    /// building and encoding the generated messages was most of its cost, Docs/Performance.md).
    /// Errors, rare, are encoded by SwiftProtobuf and copied in.
    package func serializedProto() -> [UInt8] {
        let recordBytes = saveResults.values.reduce(0) { size, result in
            if case .success(let record) = result { size + 96 + record.estimatedSize * 5 / 4 } else { size + 160 }
        }
        var writer = ProtoWriter(capacity: 16 + recordBytes + deleteResults.count * 96)
        for (id, result) in ProtoOrder.sorted(saveResults) {
            writer.message(1) { entry in
                entry.message(1) { id.write(to: &$0) }
                switch result {
                case .success(let record): entry.message(2) { record.write(to: &$0) }
                case .failure(let error): entry.lengthDelimited(3, ProtoWire.serialize(error.proto))
                }
            }
        }
        for (id, result) in ProtoOrder.sorted(deleteResults) {
            writer.message(2) { entry in
                entry.message(1) { id.write(to: &$0) }
                switch result {
                case .success: entry.bool(2, true)
                case .failure(let error): entry.lengthDelimited(3, ProtoWire.serialize(error.proto))
                }
            }
        }
        return writer.bytes
    }
}
