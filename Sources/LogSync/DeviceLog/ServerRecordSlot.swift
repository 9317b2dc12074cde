import LogStore
import ModelEntries
import SyncModel

/// A value of the device index's `serverRecords` table: where the last known server record of
/// one record ID is.
///
/// A record fetched or saved is already in the log, encoded inside the `zoneChangesFetched` or
/// `batchResult` entry that brought it; the index points at it there instead of storing it a
/// second time (`.entry`: 13 bytes, and no encoding when the entry is applied). In a
/// `batchSaved` entry (kind 15) the ordinal counts its saved records, each rebuilt from the
/// record of its `batchPrepared` and the server's changes. A conflict's
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
            var bytes = [UInt8](repeating: 1, count: 13)
            for index in 0..<8 { bytes[1 + index] = UInt8(truncatingIfNeeded: offset >> (56 - 8 * index)) }
            for index in 0..<4 { bytes[9 + index] = UInt8(truncatingIfNeeded: ordinal >> (24 - 8 * index)) }
            return bytes
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
/// zone's records, all of them) reads and scans the entry once. A `batchSaved` entry's record is
/// rebuilt from the record of its `batchPrepared` (kept the same way) and the server's changes;
/// only the records read are decoded.
struct ServerRecordReader {
    let reader: LogReader
    private var cached: (offset: UInt64, payload: [UInt8], records: [Range<Int>])?
    /// The last `batchSaved` entry read: its prepared offset, its shared system fields, and the
    /// places of its saved records' changes.
    private var cachedSaved:
        (offset: UInt64, payload: [UInt8], prepared: LogOffset, shared: Record.SystemFields, changes: [Range<Int>])?
    /// The last `batchPrepared` a `batchSaved` entry referred to, with the places of its records.
    private var cachedPrepared: (offset: LogOffset, payload: [UInt8], records: [Range<Int>])?

    init(reader: LogReader) { self.reader = reader }

    /// The record `slot` names, for `id`'s error messages.
    mutating func record(_ slot: ServerRecordSlot, for what: @autoclosure () -> String) throws -> Record {
        let bytes: ArraySlice<UInt8>
        switch slot {
        case .inline(let record):
            bytes = record[...]
        case .entry(let offset, let ordinal):
            if let saved = cachedSaved, saved.offset == offset {
                return try savedRecord(ordinal, for: what())
            }
            if cached?.offset != offset {
                guard let entry = try reader.entry(at: LogOffset(offset)) else {
                    throw malformed("a server record of \(what()) at offset \(offset), which the log does not hold")
                }
                if entry.kind == DeviceEntry.Kind.batchSaved {
                    cachedSaved = try Self.savedOutline(entry)
                    return try savedRecord(ordinal, for: what())
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
            return try Record(protoBytes: bytes)
        } catch {
            throw malformed("an undecodable server record for \(what()): \(error.message)")
        }
    }

    /// A `batchSaved` entry's prepared offset, shared system fields and changes' places, read
    /// without decoding its changes.
    private static func savedOutline(
        _ entry: LogEntry
    ) throws -> (
        offset: UInt64, payload: [UInt8], prepared: LogOffset, shared: Record.SystemFields, changes: [Range<Int>]
    ) {
        func corrupt(_ what: String) -> LogStoreError {
            LogStoreError(.corruptEntry, "batchSaved (kind \(entry.kind)) payload: \(what)", offset: entry.offset)
        }
        let payload = entry.payload
        let preparedOffset = try ProtoFields.varint(field: 1, in: payload, error: corrupt) ?? 0
        guard preparedOffset > 0, preparedOffset < entry.offset.rawValue else {
            throw DeviceEntry.corruptReference(
                entry, "refers to the batchPrepared at offset \(preparedOffset), which is not an offset before it")
        }
        var shared = Record.SystemFields()
        if let range = try ProtoFields.lengthDelimited(field: 6, in: payload, error: corrupt).last {
            shared = try ProtoWire.converting(entry, "batchSaved") { () throws(SyncError) in
                try DeviceEntry.within("BatchSaved.shared") { () throws(SyncError) in
                    try Record.SystemFields(
                        proto: try ProtoWire.decode(Logsync_Model_SystemFields.self, from: Array(payload[range])))
                }
            }
        }
        let changes = try ProtoFields.lengthDelimited(field: 2, in: payload, error: corrupt)
        return (entry.offset.rawValue, payload, LogOffset(rawValue: preparedOffset), shared, changes)
    }

    /// Saved record `ordinal` of the `batchSaved` entry in `cachedSaved`, rebuilt from its
    /// prepared record.
    private mutating func savedRecord(_ ordinal: UInt32, for what: @autoclosure () -> String) throws -> Record {
        let (offset, payload, preparedOffset, shared, changes) = cachedSaved!
        guard Int(ordinal) < changes.count else {
            throw malformed(
                "server record \(ordinal) of \(what()) in the entry at offset \(offset), which holds \(changes.count)")
        }
        func corrupt(_ what: String) -> LogStoreError {
            LogStoreError(
                .corruptEntry,
                "batchSaved (kind \(DeviceEntry.Kind.batchSaved)) payload: BatchSaved.saved[\(ordinal)]: \(what)",
                offset: LogOffset(offset))
        }
        do {
            let change = try ProtoWire.decode(
                Logsync_Device_SavedRecordChange.self, from: Array(payload[changes[Int(ordinal)]]))
            if change.hasRecord {
                return try SavedRecordDelta.record(change, preparedIn: [], at: preparedOffset)
            }
            if cachedPrepared?.offset != preparedOffset {
                guard let prepared = try reader.entry(at: preparedOffset) else {
                    throw corrupt(
                        "refers to the batchPrepared at offset \(preparedOffset.rawValue), which the log does not hold")
                }
                guard prepared.kind == DeviceEntry.Kind.batchPrepared else {
                    throw corrupt(
                        "refers to the batchPrepared at offset \(preparedOffset.rawValue), an entry of kind \(prepared.kind)"
                    )
                }
                let records = try ProtoFields.lengthDelimited(field: 1, in: prepared.payload) {
                    LogStoreError(
                        .corruptEntry, "batchPrepared (kind \(prepared.kind)) payload: \($0)", offset: preparedOffset)
                }
                cachedPrepared = (preparedOffset, prepared.payload, records)
            }
            let (_, preparedPayload, records) = cachedPrepared!
            let index = Int(change.preparedIndex)
            guard index < records.count else {
                throw corrupt(
                    "prepared_index \(index) is beyond the \(records.count) records of the batchPrepared at offset \(preparedOffset.rawValue)"
                )
            }
            let prepared = try Record(protoBytes: preparedPayload[records[index]])
            return try SavedRecordDelta.rebuild(change, from: prepared, shared: shared)
        } catch let error as SyncError {
            throw corrupt("\(what()): \(error.message)")
        }
    }
}
