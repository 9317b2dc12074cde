/// Measures a Protocol Buffers body against the limits, walking its wire format with
/// ``WireSchema`` to know which fields hold messages: every message met (map entries included)
/// and every element of a repeated field counts one element, every element of a request's item
/// list one item (``WireOperation/itemFields``). A singular message field sent more than once
/// counts each time. Unknown fields are skipped: the decoder keeps them as bytes.
enum ProtoBodyScan {
    static func scan(_ body: [UInt8], message name: String, meter: inout BodyMeter) throws(BodyScanStop) {
        let schema = WireSchema.wire
        guard let index = schema.index(of: name) else {
            preconditionFailure("the wire schema has no message \(name)")
        }
        let request = schema.messages[index]
        let items = Set(meter.operation.itemFields.compactMap { request.field(named: $0)?.number })
        // The request itself is the first element, at level 1.
        try meter.element()
        try meter.enter(depth: 1)
        let walk = ProtoBodyScan.Walk(schema: schema, itemFields: items)
        try BodyScanStop.scanning(body) { bytes throws(BodyScanStop) in
            try walk.message(bytes, from: 0, to: bytes.count, schema: index, depth: 1, meter: &meter)
        }
    }

    struct Walk {
        let schema: WireSchema
        /// The numbers of the request's item fields (top level only).
        let itemFields: Set<Int>

        /// Walks the fields of a message of type `schema.messages[type]` in `bytes[start..<end]`.
        func message(
            _ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int, schema type: Int, depth: Int,
            meter: inout BodyMeter
        ) throws(BodyScanStop) {
            let message = schema.messages[type]
            var position = start
            while position < end {
                let tag = try varint(bytes, &position, end)
                let number = tag >> 3
                guard number > 0, number <= 536_870_911 else { throw .malformed }
                let field = message.field(Int(number))
                switch tag & 7 {
                case 0:
                    _ = try varint(bytes, &position, end)
                    if field?.isRepeated == true { try meter.element() }
                case 1:
                    try skip(8, &position, end)
                    if field?.isRepeated == true { try meter.element() }
                case 5:
                    try skip(4, &position, end)
                    if field?.isRepeated == true { try meter.element() }
                case 2:
                    let length = try varint(bytes, &position, end)
                    guard length <= UInt64(end - position) else { throw .malformed }
                    let contents = position..<(position + Int(length))
                    position = contents.upperBound
                    guard let field else { continue }
                    switch field.kind {
                    case .message(let nested):
                        try meter.element()
                        if depth == 1, itemFields.contains(Int(number)) { try meter.item() }
                        try meter.enter(depth: depth + 1)
                        try self.message(
                            bytes, from: contents.lowerBound, to: contents.upperBound, schema: nested, depth: depth + 1,
                            meter: &meter)
                    case .lengthDelimited:
                        if field.isRepeated {
                            try meter.element()
                            if depth == 1, itemFields.contains(Int(number)) { try meter.item() }
                        }
                    case .varint:
                        // A packed list: one element per varint (a byte without its high bit ends one).
                        for index in contents where bytes[index] & 0x80 == 0 { try meter.element() }
                    case .fixed32:
                        for _ in 0..<(contents.count / 4) { try meter.element() }
                    case .fixed64:
                        for _ in 0..<(contents.count / 8) { try meter.element() }
                    }
                case 3:
                    try skipGroup(bytes, &position, end, number: number, depth: depth, meter: &meter)
                default:
                    // An end of group with no start, or a wire type that does not exist.
                    throw .malformed
                }
            }
        }

        /// Skips the rest of a group (an unknown field of an old encoding), whose start tag was
        /// just read; each group within counts one level.
        private func skipGroup(
            _ bytes: UnsafeRawBufferPointer, _ position: inout Int, _ end: Int, number: UInt64, depth: Int,
            meter: inout BodyMeter
        ) throws(BodyScanStop) {
            var open: [UInt64] = [number]
            try meter.enter(depth: depth + 1)
            while let innermost = open.last {
                guard position < end else { throw .malformed }
                let tag = try varint(bytes, &position, end)
                switch tag & 7 {
                case 0: _ = try varint(bytes, &position, end)
                case 1: try skip(8, &position, end)
                case 5: try skip(4, &position, end)
                case 2:
                    let length = try varint(bytes, &position, end)
                    guard length <= UInt64(end - position) else { throw .malformed }
                    position += Int(length)
                case 3:
                    open.append(tag >> 3)
                    try meter.enter(depth: depth + open.count)
                case 4:
                    guard tag >> 3 == innermost else { throw .malformed }
                    open.removeLast()
                default:
                    throw .malformed
                }
            }
        }

        private func skip(_ count: Int, _ position: inout Int, _ end: Int) throws(BodyScanStop) {
            guard end - position >= count else { throw .malformed }
            position += count
        }

        private func varint(
            _ bytes: UnsafeRawBufferPointer, _ position: inout Int, _ end: Int
        ) throws(BodyScanStop) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while position < end, shift < 64 {
                let byte = bytes[position]
                position += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            throw .malformed
        }
    }
}
