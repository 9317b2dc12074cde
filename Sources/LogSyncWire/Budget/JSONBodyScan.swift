import Foundation

/// Measures a JSON body against the limits with a structural pass that needs no schema, counting
/// what the binary measure counts: every object (a message, or a map's entries) and every
/// element of an array that is not an object (a repeated string, say) counts one element; every
/// object or array is one level deeper than the one holding it; every element of a top-level
/// member named after one of the request's item lists (by its JSON or its `.proto` name,
/// ``WireOperation/itemFields``) counts one item. Strings, numbers and literals that are members
/// of an object count nothing of their own, as a message's singular fields do not.
enum JSONBodyScan {
    static func scan(_ body: [UInt8], message name: String, meter: inout BodyMeter) throws(BodyScanStop) {
        guard let request = WireSchema.wire.message(named: name) else {
            preconditionFailure("the wire schema has no message \(name)")
        }
        var itemNames: Set<[UInt8]> = []
        for field in meter.operation.itemFields {
            guard let (_, found) = request.field(named: field) else { continue }
            itemNames.insert(Array(found.name.utf8))
            itemNames.insert(Array(found.jsonName.utf8))
        }
        try BodyScanStop.scanning(body) { bytes throws(BodyScanStop) in
            var walk = Walk(bytes: bytes, itemNames: itemNames)
            walk.skipWhitespace()
            // Anything after the value is the decoder's to refuse.
            try walk.value(depth: 1, inArray: false, isItem: false, meter: &meter)
        }
    }

    struct Walk {
        let bytes: UnsafeRawBufferPointer
        let itemNames: Set<[UInt8]>
        var position = 0

        init(bytes: UnsafeRawBufferPointer, itemNames: Set<[UInt8]>) {
            self.bytes = bytes
            self.itemNames = itemNames
        }

        /// One value at `depth` (the body's own value is 1): `inArray` if it is an element of an
        /// array, `isItem` if of an item list.
        mutating func value(depth: Int, inArray: Bool, isItem: Bool, meter: inout BodyMeter) throws(BodyScanStop) {
            guard position < bytes.count else { throw .malformed }
            if inArray || bytes[position] == UInt8(ascii: "{") { try meter.element() }
            if isItem { try meter.item() }
            switch bytes[position] {
            case UInt8(ascii: "{"):
                try meter.enter(depth: depth)
                position += 1
                try members(depth: depth, meter: &meter)
            case UInt8(ascii: "["):
                try meter.enter(depth: depth)
                position += 1
                try elements(depth: depth, areItems: false, meter: &meter)
            case UInt8(ascii: "\""):
                _ = try string()
            default:
                // A number, true, false or null: what the decoder accepts of it is its business.
                let start = position
                while position < bytes.count, !Self.endsScalar(bytes[position]) { position += 1 }
                guard position > start else { throw .malformed }
            }
        }

        /// The members of an object whose `{` was just read, through its `}`.
        private mutating func members(depth: Int, meter: inout BodyMeter) throws(BodyScanStop) {
            skipWhitespace()
            if try consume(UInt8(ascii: "}")) { return }
            while true {
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw .malformed }
                let key = try string()
                skipWhitespace()
                guard try consume(UInt8(ascii: ":")) else { throw .malformed }
                skipWhitespace()
                if depth == 1, position < bytes.count, bytes[position] == UInt8(ascii: "["),
                    itemNames.contains(try name(key))
                {
                    // An item list: each of its elements is an item.
                    try meter.enter(depth: depth + 1)
                    position += 1
                    try elements(depth: depth + 1, areItems: true, meter: &meter)
                } else {
                    try value(depth: depth + 1, inArray: false, isItem: false, meter: &meter)
                }
                skipWhitespace()
                if try consume(UInt8(ascii: "}")) { return }
                guard try consume(UInt8(ascii: ",")) else { throw .malformed }
            }
        }

        /// The elements of an array whose `[` was just read, through its `]`.
        private mutating func elements(depth: Int, areItems: Bool, meter: inout BodyMeter) throws(BodyScanStop) {
            skipWhitespace()
            if try consume(UInt8(ascii: "]")) { return }
            while true {
                skipWhitespace()
                try value(depth: depth + 1, inArray: true, isItem: areItems, meter: &meter)
                skipWhitespace()
                if try consume(UInt8(ascii: "]")) { return }
                guard try consume(UInt8(ascii: ",")) else { throw .malformed }
            }
        }

        /// A string whose `"` is at the position, through its closing `"`: the range of its
        /// contents, escapes left as they are.
        private mutating func string() throws(BodyScanStop) -> Range<Int> {
            position += 1
            let start = position
            while position < bytes.count {
                switch bytes[position] {
                case UInt8(ascii: "\""):
                    position += 1
                    return start..<(position - 1)
                case UInt8(ascii: "\\"):
                    position += 2
                default:
                    position += 1
                }
            }
            throw .malformed
        }

        /// A member's name: its bytes, with escapes resolved when it has any.
        private func name(_ range: Range<Int>) throws(BodyScanStop) -> [UInt8] {
            let raw = Array(bytes[range])
            guard raw.contains(UInt8(ascii: "\\")) else { return raw }
            guard
                let name = try? JSONDecoder().decode(
                    String.self, from: Data([UInt8(ascii: "\"")] + raw + [UInt8(ascii: "\"")]))
            else {
                throw .malformed
            }
            return Array(name.utf8)
        }

        private mutating func consume(_ byte: UInt8) throws(BodyScanStop) -> Bool {
            guard position < bytes.count else { throw .malformed }
            guard bytes[position] == byte else { return false }
            position += 1
            return true
        }

        mutating func skipWhitespace() {
            while position < bytes.count, Self.isWhitespace(bytes[position]) { position += 1 }
        }

        private static func isWhitespace(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
        }

        private static func endsScalar(_ byte: UInt8) -> Bool {
            isWhitespace(byte) || byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]")
        }
    }
}
