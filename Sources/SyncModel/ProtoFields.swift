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
            case 0: _ = try varint()
            case 1: try skip(8)
            case 5: try skip(4)
            case 2:
                let length = try varint()
                let start = position
                try skip(length)
                if number == field { found.append(start..<position) }
            default:
                throw error("wire type \(tag & 7) of field \(number) at byte \(position)")
            }
        }
        return found
    }
}
