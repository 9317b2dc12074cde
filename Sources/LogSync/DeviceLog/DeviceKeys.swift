import LogStore
import SyncModel

/// Keys and values of the `DeviceIndex` tables.
///
/// LMDB keys hold at most 511 bytes, and a record ID's three names may each be 255 bytes long.
/// So zones are numbered (`zones` table, in order of first appearance in the log) and a record's
/// key is its zone's number followed by its name. Every ID has a key, valid or not: a name too
/// long for its key, or holding a NUL byte (neither passes the server's checks), is keyed by a
/// 128-bit digest in a form no plain name can take.
///
/// Numbers in keys and slots (zone numbers, offsets, ordinals) are `OrderedNumber`s: as short as
/// their values, and sorting as them. Every row of the index has some, and the record tables have
/// a row per record, so their size is much of the index's.
enum DeviceKey {
    /// The longest record name kept as is in a record key.
    static let maxPlainRecordName = 400  // 9 + 400 + 1 type byte < 511

    /// A zone: its name, a NUL, its owner's name; or, for names that do not fit or hold a NUL,
    /// two NULs and a digest of both names (a plain key never starts with two NULs).
    static func zone(_ zoneID: RecordZone.ID) -> [UInt8] {
        let zone = Array(zoneID.zoneName.utf8)
        let owner = Array(zoneID.ownerName.utf8)
        if zone.count + 1 + owner.count <= ReadTransaction.maxKeySize, !zone.contains(0), !owner.contains(0) {
            return zone + [0] + owner
        }
        return [0, 0] + Digest.of([zone, owner])
    }

    /// A record of the zone numbered `zoneNumber`: the number, then the record's name; or, for a
    /// name that is too long or holds a NUL, the number, a NUL and a digest of the name.
    static func record(zoneNumber: UInt64, name: String) -> [UInt8] {
        let bytes = Array(name.utf8)
        if bytes.count <= maxPlainRecordName, !bytes.contains(0) {
            return OrderedNumber.bytes(zoneNumber) + bytes
        }
        return OrderedNumber.bytes(zoneNumber) + [0] + Digest.of([bytes])
    }

    /// The prefix of every record key of a zone, and of no other zone's keys.
    static func recordPrefix(zoneNumber: UInt64) -> [UInt8] { OrderedNumber.bytes(zoneNumber) }

    static let untracked = Array("untracked".utf8)
    static let zoneCounter = Array("zoneCounter".utf8)
    static let databaseToken = Array("databaseToken".utf8)
    static let delivered = Array("delivered".utf8)
    static let fetched = Array("fetched".utf8)
    static let account = Array("account".utf8)
    static let subscription = Array("subscription".utf8)
    static let unanswered = Array("unanswered".utf8)
    static let prepared = Array("prepared".utf8)
}

/// A place in a pending list: the offset of the entry that added the change, then the change's
/// index in that entry, each an `OrderedNumber`. Positions sort in log order.
struct Position: Hashable, Comparable {
    var offset: UInt64
    var index: UInt32

    var bytes: [UInt8] { OrderedNumber.bytes(offset) + OrderedNumber.bytes(UInt64(index)) }

    init(offset: UInt64, index: UInt32) {
        self.offset = offset
        self.index = index
    }

    /// Reads a position from its bytes, and nothing after them: a table's key in place, or a
    /// slice of a value.
    init<Bytes: Collection<UInt8>>(decoding bytes: Bytes) throws(LogStoreError) {
        var rest = bytes[...]
        guard let offset = OrderedNumber.read(&rest), let index = OrderedNumber.read(&rest),
            index <= UInt32.max, rest.isEmpty
        else { throw malformed("a position of \(bytes.count) bytes") }
        self.offset = offset
        self.index = UInt32(index)
    }

    static func < (lhs: Position, rhs: Position) -> Bool { (lhs.offset, lhs.index) < (rhs.offset, rhs.index) }
}

/// The pending record list of the last whole read (`State.pendingRecordZoneChanges`), with the
/// offset it was read at and each change's position, in order.
struct PendingListCache: Sendable {
    var offset: LogOffset?
    var positions: [Position] = []
    var changes: [SyncEngine.PendingRecordZoneChange] = []
}

/// What a pending table holds for an ID: the pending change's case (0 save, 1 delete, as in
/// CloudKit's PendingRecordZoneChangeType and PendingDatabaseChangeType) and its position.
struct PendingSlot: Hashable {
    static let save: UInt8 = 0
    static let delete: UInt8 = 1

    var type: UInt8
    var position: Position

    var bytes: [UInt8] { [type] + position.bytes }

    init(type: UInt8, position: Position) {
        self.type = type
        self.position = position
    }

    init(decoding bytes: [UInt8]) throws(LogStoreError) {
        guard let type = bytes.first, type <= 1 else { throw malformed("a pending slot of \(bytes.count) bytes") }
        self.type = type
        position = try Position(decoding: bytes[1...])
    }
}

extension SyncEngine.PendingRecordZoneChange {
    /// The case as stored: 0 save, 1 delete.
    var typeByte: UInt8 {
        switch self {
        case .saveRecord: PendingSlot.save
        case .deleteRecord: PendingSlot.delete
        }
    }
}

extension SyncEngine.PendingDatabaseChange {
    /// The case as stored: 0 save, 1 delete.
    var typeByte: UInt8 {
        switch self {
        case .saveZone: PendingSlot.save
        case .deleteZone: PendingSlot.delete
        }
    }
}

/// A 128-bit digest (two differently seeded FNV-1a 64 hashes, each finished with a SplitMix64
/// mix) of length-prefixed byte strings. Stable across builds and platforms; not cryptographic.
enum Digest {
    static func of(_ parts: [[UInt8]]) -> [UInt8] {
        var a: UInt64 = 0xCBF2_9CE4_8422_2325
        var b: UInt64 = 0x6C62_272E_07BB_0142
        func feed(_ byte: UInt8) {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            b = b &+ 0x9E37_79B9_7F4A_7C15
        }
        for part in parts {
            for byte in bigEndian(UInt64(part.count)) { feed(byte) }
            for byte in part { feed(byte) }
        }
        return bigEndian(mix(a)) + bigEndian(mix(b ^ 0xD6E8_FEB8_6659_FD93))
    }

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A number as the index keeps it in keys and slots: a byte saying how many bytes follow (0–8),
/// then the number's big-endian bytes without leading zeros. A shorter number is a smaller one,
/// so byte order is the numbers' order, and no number's bytes begin another's, so one number's
/// bytes are a prefix of keys that begin with that number only. Zone numbers and ordinals take
/// 2 bytes, offsets 4 or 5, instead of 8 each.
enum OrderedNumber {
    static func bytes(_ value: UInt64) -> [UInt8] {
        let count = (UInt64.bitWidth - value.leadingZeroBitCount + 7) / 8
        var bytes: [UInt8] = [UInt8(count)]
        bytes.reserveCapacity(count + 1)
        for shift in stride(from: (count - 1) * 8, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> shift))
        }
        return bytes
    }

    /// Reads a number from the start of `bytes` and drops it, or `nil` if `bytes` does not begin
    /// with one (no length byte, a length over 8, too few bytes, or a leading zero: each number
    /// has one form).
    static func read<Bytes: Collection<UInt8>>(_ bytes: inout Bytes) -> UInt64? where Bytes.SubSequence == Bytes {
        guard let first = bytes.first, first <= 8 else { return nil }
        let count = Int(first)
        let digits = bytes.dropFirst().prefix(count)
        guard digits.count == count, digits.first != 0 else { return nil }
        bytes = bytes.dropFirst(count + 1)
        return readBigEndian(digits)
    }
}

func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

func readBigEndian<Bytes: Collection>(_ bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
    bytes.reduce(0) { $0 << 8 | UInt64($1) }
}

/// The error for a table value this build did not write.
func malformed(_ what: String) -> LogStoreError {
    LogStoreError(.projectionInconsistent, "the device index holds \(what)")
}
