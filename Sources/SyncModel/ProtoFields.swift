// Reading Protocol Buffers bytes without decoding the message: the counterpart of
// `ProtoWriter` for readers that need one field's bytes as stored (a record inside a log
// entry), not the whole message.

/// Finds fields in Protocol Buffers bytes without decoding the message.
package enum ProtoFields {
    /// The byte ranges of every occurrence of the length-delimited field `field` at the top
    /// level of `bytes`, in order; other fields are skipped. Malformed bytes throw what
    /// `error(description)` makes.
    package static func lengthDelimited(
        field: Int, in bytes: [UInt8], error: (String) -> any Error
    ) throws -> [Range<Int>] {
        var found: [Range<Int>] = []
        try walk(
            bytes, error: error,
            lengthDelimited: { number, range in
                if number == UInt64(field) { found.append(range) }
            })
        return found
    }

    /// The value of the last occurrence of the varint field `field` at the top level of
    /// `bytes` (as a decoder reads a repeated scalar field set twice), or `nil` when it is not
    /// there; other fields are skipped. Malformed bytes throw what `error(description)` makes.
    package static func varint(field: Int, in bytes: [UInt8], error: (String) -> any Error) throws -> UInt64? {
        var found: UInt64?
        try walk(
            bytes, error: error, lengthDelimited: { _, _ in },
            varint: { number, value in
                if number == UInt64(field) { found = value }
            })
        return found
    }

    /// Visits the top-level fields of `bytes`: each length-delimited one with its number and
    /// its bytes' range, each varint with its number and value.
    private static func walk(
        _ bytes: [UInt8], error: (String) -> any Error,
        lengthDelimited: (_ field: UInt64, _ range: Range<Int>) -> Void,
        varint visitVarint: (_ field: UInt64, _ value: UInt64) -> Void = { _, _ in }
    ) throws {
        var position = 0
        func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard position < bytes.count else { throw error("a varint cut off at byte \(position)") }
                let byte = bytes[position]
                position += 1
                guard shift < 64 else { throw error("a varint longer than 10 bytes at byte \(position)") }
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }
        func skip(_ count: UInt64) throws {
            guard count <= UInt64(bytes.count - position) else {
                throw error("a field of \(count) bytes at byte \(position), past the end (\(bytes.count))")
            }
            position += Int(count)
        }
        while position < bytes.count {
            let tag = try varint()
            let number = tag >> 3
            switch tag & 7 {
            case 0: visitVarint(number, try varint())
            case 1: try skip(8)
            case 5: try skip(4)
            case 2:
                let length = try varint()
                let start = position
                try skip(length)
                lengthDelimited(number, start..<position)
            default:
                throw error("wire type \(tag & 7) of field \(number) at byte \(position)")
            }
        }
    }
}
