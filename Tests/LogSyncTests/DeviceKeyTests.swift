import LogStore
import Testing

@testable import LogSync

/// The numbers in the device index's keys and slots (`OrderedNumber`), and what is built of them.
@Suite("Device index keys")
struct DeviceKeyTests {
    /// Numbers around every length boundary, and the extremes.
    static let numbers: [UInt64] = {
        var numbers: [UInt64] = [0, 1, 2, 127, 128, 255, 256, 257, UInt64.max - 1, UInt64.max]
        for bytes in 2...7 {
            let edge = UInt64(1) << (8 * UInt64(bytes))
            numbers += [edge - 1, edge, edge + 1]
        }
        return numbers.sorted()
    }()

    @Test("A number reads back as itself, in as many bytes as it needs and one more")
    func roundTrip() throws {
        for number in Self.numbers {
            let bytes = OrderedNumber.bytes(number)
            #expect(bytes.count == 1 + (64 - number.leadingZeroBitCount + 7) / 8)
            var rest = (bytes + [42])[...]
            #expect(OrderedNumber.read(&rest) == number)
            #expect(Array(rest) == [42])
        }
        #expect(OrderedNumber.bytes(0) == [0])
        #expect(OrderedNumber.bytes(7) == [1, 7])
        #expect(OrderedNumber.bytes(0x1234) == [2, 0x12, 0x34])
    }

    @Test("Bytes sort as the numbers do, and no number's bytes begin another's")
    func orderAndPrefixes() {
        let encoded = Self.numbers.map(OrderedNumber.bytes)
        for (i, a) in encoded.enumerated() {
            for (j, b) in encoded.enumerated() where i != j {
                #expect(a.lexicographicallyPrecedes(b) == (i < j), "\(Self.numbers[i]) against \(Self.numbers[j])")
                #expect(!b.starts(with: a))
            }
        }
        // So a zone's record keys sort together, after every key of a smaller zone number.
        let keys = [(1, "z"), (2, "a"), (255, "b"), (256, "a"), (256, "b")].map {
            DeviceKey.record(zoneNumber: UInt64($0.0), name: $0.1)
        }
        #expect(keys == keys.sorted { $0.lexicographicallyPrecedes($1) })
        #expect(keys.filter { $0.starts(with: DeviceKey.recordPrefix(zoneNumber: 256)) }.count == 2)
        #expect(!keys.contains { $0.starts(with: DeviceKey.recordPrefix(zoneNumber: 25)) })
    }

    @Test("Bytes that are no number are refused: too few, a length over 8, a leading zero")
    func malformed() {
        for bytes: [UInt8] in [[], [2, 1], [9, 1, 2, 3, 4, 5, 6, 7, 8, 9], [2, 0, 1], [1, 0]] {
            var rest = bytes[...]
            #expect(OrderedNumber.read(&rest) == nil, "\(bytes)")
            #expect(rest == bytes[...])
        }
    }

    @Test("Positions, pending slots and server record slots read back, and refuse anything else naming its size")
    func slots() throws {
        let positions = [
            Position(offset: 1, index: 0), Position(offset: 1, index: 300), Position(offset: 70_000, index: 2),
        ]
        for position in positions {
            #expect(try Position(decoding: position.bytes) == position)
            let slot = PendingSlot(type: PendingSlot.delete, position: position)
            #expect(try PendingSlot(decoding: slot.bytes) == slot)
        }
        // Key order is log order.
        let keys = positions.map(\.bytes)
        #expect(keys == keys.sorted { $0.lexicographicallyPrecedes($1) })

        let slot = ServerRecordSlot.entry(offset: 1 << 33, ordinal: 399)
        #expect(slot.bytes.count == 1 + 6 + 3)  // the kind, 2^33 in 5 bytes, 399 in 2
        #expect(try ServerRecordSlot(decoding: slot.bytes, for: "a") == slot)

        #expect(throws: LogStoreError.self) { try Position(decoding: positions[0].bytes + [0]) }
        #expect(throws: LogStoreError.self) { try PendingSlot(decoding: [2] + positions[0].bytes) }
        #expect(throws: LogStoreError.self) { try PendingSlot(decoding: [0]) }
        // An ordinal beyond 32 bits, and a slot cut short.
        let wide = [1] + OrderedNumber.bytes(5) + OrderedNumber.bytes(1 << 32)
        #expect(throws: LogStoreError.self) { try ServerRecordSlot(decoding: wide, for: "a") }
        do {
            _ = try ServerRecordSlot(decoding: Array(slot.bytes.dropLast()), for: "record a")
            Issue.record("a slot cut short was read")
        } catch let error as LogStoreError {
            #expect("\(error)".contains("record a") && "\(error)".contains("9 bytes"))
        }
    }
}
