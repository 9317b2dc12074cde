import LogStore
import SyncModel

/// A value of the device index's `serverRecords` table: where the last known server record of
/// one record ID is.
///
/// A record fetched or saved is already in the log, encoded inside the `zoneChangesFetched` or
/// `batchResult` entry that brought it; the index points at it there instead of storing it a
/// second time (`.entry`: 13 bytes, and no encoding when the entry is applied). A conflict's
/// server record, which sits inside an error, is stored whole (`.inline`).
///
/// | first byte | then |
/// |---|---|
/// | 0 | the record's Protocol Buffers bytes |
/// | 1 | the entry's offset (8 bytes, big-endian), the record's ordinal among the entry's records (4 bytes, big-endian) |
///
/// Since the log is append-only and never compacted, an entry pointed at stays. A compaction
/// would have to rewrite these slots.
enum ServerRecordSlot: Equatable {
    case inline([UInt8])
    case entry(offset: UInt64, ordinal: UInt32)

    var bytes: [UInt8] {
        switch self {
        case .inline(let record): return [0] + record
        case .entry(let offset, let ordinal):
            return [1] + bigEndian(offset) + withUnsafeBytes(of: ordinal.bigEndian) { Array($0) }
        }
    }

    init(decoding bytes: [UInt8], for what: @autoclosure () -> String) throws {
        switch bytes.first {
        case 0?:
            self = .inline(Array(bytes.dropFirst()))
        case 1? where bytes.count == 13:
            self = .entry(
                offset: readBigEndian(bytes[1..<9]), ordinal: UInt32(truncatingIfNeeded: readBigEndian(bytes[9..<13])))
        default:
            throw malformed(
                "a server record slot for \(what()) of \(bytes.count) bytes starting with \(bytes.first.map(String.init) ?? "nothing")"
            )
        }
    }

    /// The field of each entry kind whose repeated records the ordinal counts, or `nil` for a
    /// kind that holds no records a slot can point at.
    static func recordField(of kind: EntryKind) -> Int? {
        switch kind {
        case DeviceEntry.Kind.zoneChangesFetched: return 2  // ZoneChangesFetched.modifications
        case DeviceEntry.Kind.batchResult: return 1  // BatchResult.saved
        default: return nil
        }
    }
}

/// Reads records out of the entries that `ServerRecordSlot.entry` points at, keeping the last
/// entry read with the places of its records, so that reading many records of one entry (a
/// zone's records, all of them) reads and scans the entry once.
struct ServerRecordReader {
    let reader: LogReader
    private var cached: (offset: UInt64, payload: [UInt8], records: [Range<Int>])?

    init(reader: LogReader) { self.reader = reader }

    /// The record `slot` names, for `id`'s error messages.
    mutating func record(_ slot: ServerRecordSlot, for what: @autoclosure () -> String) throws -> Record {
        let bytes: ArraySlice<UInt8>
        switch slot {
        case .inline(let record):
            bytes = record[...]
        case .entry(let offset, let ordinal):
            if cached?.offset != offset {
                guard let entry = try reader.entry(at: LogOffset(offset)) else {
                    throw malformed("a server record of \(what()) at offset \(offset), which the log does not hold")
                }
                guard let field = ServerRecordSlot.recordField(of: entry.kind) else {
                    throw malformed(
                        "a server record of \(what()) at offset \(offset), an entry of kind \(entry.kind) that holds none"
                    )
                }
                let records = try ProtoFields.lengthDelimited(field: field, in: entry.payload) {
                    malformed(
                        "a server record of \(what()) in the entry at offset \(offset), which does not decode: \($0)")
                }
                cached = (offset, entry.payload, records)
            }
            let (_, payload, records) = cached!
            guard Int(ordinal) < records.count else {
                throw malformed(
                    "server record \(ordinal) of \(what()) in the entry at offset \(offset), which holds \(records.count)"
                )
            }
            bytes = payload[records[Int(ordinal)]]
        }
        do {
            return try Record(protoBytes: Array(bytes))
        } catch {
            throw malformed("an undecodable server record for \(what()): \(error.message)")
        }
    }
}
