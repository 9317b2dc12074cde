import Foundation
import SwiftProtobuf

// A record read directly from its protobuf bytes, without building the generated
// `Logsync_Model_Record` message first: SwiftProtobuf's decoder builds a map of `RecordValue`
// messages, each with its own storage, and the conversion then builds the model's values from
// them, so a record of five fields cost a dozen allocations before it existed
// (Docs/Performance.md, "Decoding records").
//
// The reader takes only the form the encoders write (`Record.write(to:)`, which is byte for byte
// SwiftProtobuf's): each field of a message at most once (repeated ones aside), the wire type its
// declaration gives, no field this build does not know, no map key twice, a value's oneof set
// once, valid UTF-8, and the value kinds a record mostly holds. On anything else it gives up
// (`ProtoReader.Irregular`), and the caller decodes the same bytes with the generated decoder,
// whose answer (a value or a typed error naming the fault) is therefore the answer, exactly as
// before: the direct reader is a fast path, never a second opinion. `ProtoRecordReaderTests`
// compares the two on random records and on every mutation of their bytes.

/// Reads protobuf wire-format fields from contiguous bytes.
package struct ProtoReader {
    /// The bytes hold something the direct reader leaves to the generated decoder.
    package struct Irregular: Error {
        package init() {}
    }

    private let bytes: UnsafeRawBufferPointer
    private var position: Int
    private let end: Int

    /// A reader of `bytes[range]`.
    package init(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>? = nil) {
        self.bytes = bytes
        position = range?.lowerBound ?? 0
        end = range?.upperBound ?? bytes.count
    }

    package var isAtEnd: Bool { position >= end }

    package mutating func varint() throws(Irregular) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while position < end {
            let byte = bytes[position]
            position += 1
            if shift == 63, byte > 1 { throw Irregular() }
            result |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { return result }
            shift += 7
            if shift > 63 { throw Irregular() }
        }
        throw Irregular()
    }

    /// The next field's number and wire type.
    package mutating func key() throws(Irregular) -> (field: Int, wireType: UInt8) {
        let key = try varint()
        let field = key >> 3
        guard field > 0, field < 1 << 29 else { throw Irregular() }
        return (Int(field), UInt8(key & 7))
    }

    /// The range of a length-delimited field's content, skipped over.
    package mutating func lengthDelimited() throws(Irregular) -> Range<Int> {
        let length = try varint()
        guard length <= UInt64(end - position) else { throw Irregular() }
        let start = position
        position += Int(length)
        return start..<position
    }

    /// Skips the content of a field of `wireType` (varint, 64-bit, length-delimited, 32-bit).
    package mutating func skip(_ wireType: UInt8) throws(Irregular) {
        switch wireType {
        case 0: _ = try varint()
        case 1: _ = try fixed64()
        case 2: _ = try lengthDelimited()
        case 5:
            guard end - position >= 4 else { throw Irregular() }
            position += 4
        default: throw Irregular()
        }
    }

    /// How many fields numbered `field` of `wireType` the rest of the message holds; the reader
    /// is not moved.
    package func count(field: Int, _ wireType: UInt8) throws(Irregular) -> Int {
        var scan = self
        var count = 0
        while !scan.isAtEnd {
            let key = try scan.key()
            if key == (field, wireType) { count += 1 }
            try scan.skip(key.wireType)
        }
        return count
    }

    package mutating func fixed64() throws(Irregular) -> UInt64 {
        guard end - position >= 8 else { throw Irregular() }
        let value = bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self)
        position += 8
        return UInt64(littleEndian: value)
    }

    package mutating func string() throws(Irregular) -> String {
        let range = try lengthDelimited()
        if range.isEmpty { return "" }
        let utf8 = UnsafeBufferPointer(rebasing: bytes.assumingMemoryBound(to: UInt8.self)[range])
        // ASCII needs no validation; `String(validating:as:)`, generic, costs a metadata look-up
        // per call, which showed in the profile of the initial sync.
        if Self.isASCII(UnsafeRawBufferPointer(utf8)) { return String(decoding: utf8, as: UTF8.self) }
        guard let text = String(validating: utf8, as: UTF8.self) else { throw Irregular() }
        return text
    }

    private static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        var bits: UInt64 = 0
        while index + 8 <= bytes.count {
            bits |= bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            bits |= UInt64(bytes[index])
            index += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }

    package mutating func data() throws(Irregular) -> Data {
        let range = try lengthDelimited()
        return Data(UnsafeRawBufferPointer(rebasing: bytes[range]))
    }

    /// Reads an embedded message with `body`, which must read it to its end.
    package mutating func message<T>(_ body: (inout ProtoReader) throws(Irregular) -> T) throws(Irregular) -> T {
        let range = try lengthDelimited()
        var inner = ProtoReader(bytes, range)
        let value = try body(&inner)
        guard inner.isAtEnd else { throw Irregular() }
        return value
    }

    /// Decodes an embedded message with SwiftProtobuf (a kind the reader leaves to it), then
    /// converts it; any failure is left to the generated decoder of the whole.
    package mutating func generated<Message: SwiftProtobuf.Message, T>(
        _: Message.Type, _ convert: (Message) throws(SyncError) -> T
    ) throws(Irregular) -> T {
        let range = try lengthDelimited()
        do {
            return try convert(try Message(serializedBytes: Array(UnsafeRawBufferPointer(rebasing: bytes[range]))))
        } catch {
            throw Irregular()
        }
    }
}

extension RecordZone.ID {
    package static func read(from reader: inout ProtoReader) throws(ProtoReader.Irregular) -> RecordZone.ID {
        var zoneName: String?
        var ownerName: String?
        while !reader.isAtEnd {
            switch try reader.key() {
            case (1, 2) where zoneName == nil: zoneName = try reader.string()
            case (2, 2) where ownerName == nil: ownerName = try reader.string()
            default: throw ProtoReader.Irregular()
            }
        }
        return RecordZone.ID(zoneName: zoneName ?? "", ownerName: ownerName ?? "")
    }
}

extension Record.ID {
    package static func read(from reader: inout ProtoReader) throws(ProtoReader.Irregular) -> Record.ID {
        var recordName: String?
        var zoneID: RecordZone.ID?
        while !reader.isAtEnd {
            switch try reader.key() {
            case (1, 2) where recordName == nil: recordName = try reader.string()
            case (2, 2) where zoneID == nil: zoneID = try reader.message(RecordZone.ID.read(from:))
            default: throw ProtoReader.Irregular()
            }
        }
        guard let zoneID else { throw ProtoReader.Irregular() }
        return Record.ID(recordName: recordName ?? "", zoneID: zoneID)
    }
}

extension Record.Reference {
    package static func read(from reader: inout ProtoReader) throws(ProtoReader.Irregular) -> Record.Reference {
        var recordID: Record.ID?
        var action: Action?
        while !reader.isAtEnd {
            switch try reader.key() {
            case (1, 2) where recordID == nil: recordID = try reader.message(Record.ID.read(from:))
            case (2, 0) where action == nil:
                switch try reader.varint() {
                case 0: action = Action.none
                case 1: action = .deleteSelf
                default: throw ProtoReader.Irregular()
                }
            default: throw ProtoReader.Irregular()
            }
        }
        guard let recordID else { throw ProtoReader.Irregular() }
        return Record.Reference(recordID: recordID, action: action ?? .none)
    }
}

extension RecordValue {
    /// A value of the kinds records mostly hold; lists and encrypted values (which nest values
    /// in values) are left to the generated decoder.
    package static func read(from reader: inout ProtoReader) throws(ProtoReader.Irregular) -> RecordValue {
        var value: RecordValue?
        while !reader.isAtEnd {
            let key = try reader.key()
            guard value == nil else { throw ProtoReader.Irregular() }
            switch key {
            case (1, 2): value = .string(try reader.string())
            case (2, 0): value = .int64(Int64(bitPattern: try reader.varint()))
            case (3, 1): value = .double(Double(bitPattern: try reader.fixed64()))
            case (4, 0): value = .bool(try reader.varint() != 0)
            case (5, 2): value = .bytes(try reader.data())
            case (6, 0): value = .date(ProtoTime.date(microseconds: Int64(bitPattern: try reader.varint())))
            case (7, 2): value = .reference(try reader.message(Record.Reference.read(from:)))
            case (10, 2):
                value = .asset(
                    try reader.generated(Logsync_Model_Asset.self) { message throws(SyncError) in
                        try Asset(proto: message)
                    })
            case (11, 2): value = .location(try reader.generated(Logsync_Model_Location.self, Location.init(proto:)))
            default: throw ProtoReader.Irregular()
            }
        }
        guard let value else { throw ProtoReader.Irregular() }
        return value
    }
}

extension Record.SystemFields {
    package static func read(from reader: inout ProtoReader) throws(ProtoReader.Irregular) -> Record.SystemFields {
        var tag: String?
        var created: Int64?
        var modified: Int64?
        var creator: Record.ID?
        var modifier: Record.ID?
        var share: Record.Reference?
        while !reader.isAtEnd {
            switch try reader.key() {
            case (1, 2) where tag == nil: tag = try reader.string()
            case (2, 0) where created == nil: created = Int64(bitPattern: try reader.varint())
            case (3, 0) where modified == nil: modified = Int64(bitPattern: try reader.varint())
            case (4, 2) where creator == nil: creator = try reader.message(Record.ID.read(from:))
            case (5, 2) where modifier == nil: modifier = try reader.message(Record.ID.read(from:))
            case (6, 2) where share == nil: share = try reader.message(Record.Reference.read(from:))
            default: throw ProtoReader.Irregular()
            }
        }
        return Record.SystemFields(
            recordChangeTag: tag, creationDate: created.map { ProtoTime.date(microseconds: $0) },
            modificationDate: modified.map { ProtoTime.date(microseconds: $0) }, creatorUserRecordID: creator,
            lastModifiedUserRecordID: modifier, share: share)
    }
}

extension Record {
    /// Reads a `Logsync_Model_Record` message to the reader's end.
    package static func read(from reader: inout ProtoReader) throws(ProtoReader.Irregular) -> Record {
        var recordType: String?
        var recordID: ID?
        // Sized as the generated decoder's conversion sized it: a dictionary reserved larger
        // takes twice the buckets, and the app keeps every record it fetched.
        var values = [String: RecordValue](minimumCapacity: try reader.count(field: 3, 2))
        var changed: Set<String> = []
        var parent: Reference?
        var parentChanged: Bool?
        var systemFields: SystemFields?
        while !reader.isAtEnd {
            switch try reader.key() {
            case (1, 2) where recordType == nil: recordType = try reader.string()
            case (2, 2) where recordID == nil: recordID = try reader.message(ID.read(from:))
            case (3, 2):
                let (key, value) = try reader.message { entry throws(ProtoReader.Irregular) in
                    guard case (1, 2) = try entry.key() else { throw ProtoReader.Irregular() }
                    let key = try entry.string()
                    guard case (2, 2) = try entry.key() else { throw ProtoReader.Irregular() }
                    return (key, try entry.message(RecordValue.read(from:)))
                }
                guard values.updateValue(value, forKey: key) == nil else { throw ProtoReader.Irregular() }
            case (4, 2): changed.insert(try reader.string())
            case (5, 2) where parent == nil: parent = try reader.message(Reference.read(from:))
            case (6, 0) where parentChanged == nil: parentChanged = try reader.varint() != 0
            case (7, 2) where systemFields == nil: systemFields = try reader.message(SystemFields.read(from:))
            default: throw ProtoReader.Irregular()
            }
        }
        guard let recordID else { throw ProtoReader.Irregular() }
        return Record(
            recordType: recordType ?? "", recordID: recordID, values: values, changed: changed, parent: parent,
            parentChanged: parentChanged ?? false, systemFields: systemFields ?? SystemFields())
    }

    /// Decodes a record from the bytes of its message (`Logsync_Model_Record`): read directly
    /// when they are in the form the encoders write, else by the generated decoder, whose
    /// answer and errors are the same as ever.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming what is wrong, as
    ///   ``ProtoConvertible/init(generatedProtoBytes:)``.
    package init(protoBytes bytes: [UInt8]) throws(SyncError) {
        if let record = bytes.withUnsafeBytes(Self.readDirectly) {
            self = record
        } else {
            try self.init(generatedProtoBytes: bytes)
        }
    }

    /// Decodes a record from the bytes of its message, as ``init(protoBytes:)-([UInt8])``.
    package init(protoBytes bytes: ArraySlice<UInt8>) throws(SyncError) {
        if let record = bytes.withUnsafeBytes(Self.readDirectly) {
            self = record
        } else {
            try self.init(generatedProtoBytes: Array(bytes))
        }
    }

    /// The record `bytes` hold, or `nil` when they are not in the form the encoders write.
    package static func readDirectly(_ bytes: UnsafeRawBufferPointer) -> Record? {
        var reader = ProtoReader(bytes)
        return try? read(from: &reader)
    }
}
