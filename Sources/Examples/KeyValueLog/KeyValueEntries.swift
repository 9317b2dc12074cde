import LogStore

/// The entries of a tiny key–value history: LogStore used on its own, without sync. `logtool
/// demo` writes one, and the LogStore tests, the crash child and the benchmark write them. Payload of `set`: key length (u8), key, value. Of `remove`:
/// key length (u8), key. `note` payloads are opaque and ignored by the projection.
public enum KeyValueEntry: Sendable, Hashable {
    case set(key: String, value: [UInt8])
    case remove(key: String)
    case note([UInt8])

    public static let setKind: EntryKind = 1
    public static let removeKind: EntryKind = 2
    public static let noteKind: EntryKind = 3

    public var newEntry: NewEntry {
        switch self {
        case .set(let key, let value):
            NewEntry(kind: Self.setKind, payload: Self.keyPrefix(key) + value)
        case .remove(let key):
            NewEntry(kind: Self.removeKind, payload: Self.keyPrefix(key))
        case .note(let bytes):
            NewEntry(kind: Self.noteKind, payload: bytes)
        }
    }

    static func keyPrefix(_ key: String) -> [UInt8] {
        let bytes = Array(key.utf8)
        precondition(!bytes.isEmpty && bytes.count < 256, "fixture keys hold 1–255 bytes")
        return [UInt8(bytes.count)] + bytes
    }

    /// Decodes an entry written by `newEntry`; `nil` for payloads that do not parse.
    public init?(_ entry: LogEntry) {
        let payload = entry.payload
        switch entry.kind {
        case Self.noteKind:
            self = .note(payload)
        case Self.setKind, Self.removeKind:
            guard let length = payload.first, length > 0, payload.count >= 1 + Int(length) else { return nil }
            let key = String(decoding: payload[1..<(1 + Int(length))], as: UTF8.self)
            self =
                entry.kind == Self.setKind
                ? .set(key: key, value: Array(payload[(1 + Int(length))...])) : .remove(key: key)
        default:
            return nil
        }
    }
}

/// A per-key latest-value index plus a count of entries per kind: the reference projection.
///
/// Table `values`: key → offset of the last `set` (u64, big-endian) followed by the value.
/// Table `counts`: kind (u16, big-endian) → number of entries of that kind (u64, big-endian).
public struct LatestValueProjection: Projection {
    public let name = "latest"
    public let tableNames = ["values", "counts"]

    public init() {}

    public func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
        let kindKey = withUnsafeBytes(of: entry.kind.rawValue.bigEndian) { Array($0) }
        let count = try tables.value(forKey: kindKey, in: "counts").map(Self.decodeUInt64) ?? 0
        try tables.put(Self.encodeUInt64(count + 1), forKey: kindKey, in: "counts")

        switch KeyValueEntry(entry) {
        case .set(let key, let value):
            try tables.put(Self.encodeUInt64(entry.offset.rawValue) + value, forKey: Array(key.utf8), in: "values")
        case .remove(let key):
            try tables.removeValue(forKey: Array(key.utf8), in: "values")
        case .note, nil:
            break
        }
    }

    /// The latest value of `key` and the offset that set it, read from a snapshot.
    public static func latest(_ key: String, in reader: LogReader) throws -> (offset: LogOffset, value: [UInt8])? {
        let table = try reader.table("values", of: "latest")
        guard let stored = try reader.transaction.value(forKey: Array(key.utf8), in: table) else { return nil }
        return (LogOffset(decodeUInt64(Array(stored.prefix(8)))), Array(stored.dropFirst(8)))
    }

    /// Every key's latest value, in key order.
    public static func allValues(in reader: LogReader) throws -> [String: [UInt8]] {
        let table = try reader.table("values", of: "latest")
        var values: [String: [UInt8]] = [:]
        try reader.transaction.forEach(in: table) { key, value in
            values[String(decoding: key, as: UTF8.self)] = Array(value.dropFirst(8))
            return true
        }
        return values
    }

    public static func encodeUInt64(_ value: UInt64) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    public static func decodeUInt64(_ bytes: [UInt8]) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
