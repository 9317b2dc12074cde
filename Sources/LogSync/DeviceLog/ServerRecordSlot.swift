import LogStore
import ModelEntries
import SyncModel

/// A value of the device index's `serverRecords` table: where the last known server record of
/// one record ID is.
///
/// A record fetched or saved is already in the log, encoded inside the `zoneChangesFetched` or
/// `batchResult` entry that brought it; the index points at it there instead of storing it a
/// second time (`.entry`: about 8 bytes, and no encoding when the entry is applied). In a
/// `batchSaved` entry (kind 15) the ordinal counts its saved records, each rebuilt from the
/// record of its `batchPrepared` and the server's changes. A conflict's
/// server record, which sits inside an error, is stored whole (`.inline`).
///
/// | first byte | then |
/// |---|---|
/// | 0 | the record's Protocol Buffers bytes |
/// | 1 | the entry's offset, then the record's ordinal among the entry's records, each an `OrderedNumber` |
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
            return [1] + OrderedNumber.bytes(offset) + OrderedNumber.bytes(UInt64(ordinal))
        }
    }

    init(decoding bytes: [UInt8], for what: @autoclosure () -> String) throws {
        switch bytes.first {
        case 0?:
            self = .inline(Array(bytes.dropFirst()))
        case 1?:
            var rest = bytes.dropFirst()
            if let offset = OrderedNumber.read(&rest), let ordinal = OrderedNumber.read(&rest), ordinal <= UInt32.max,
                rest.isEmpty
            {
                self = .entry(offset: offset, ordinal: UInt32(ordinal))
                return
            }
            fallthrough
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
/// entry read with the places of its records (`Kept`), so that reading many records of one entry
/// (a zone's records, all of them) reads, checks and scans the entry once. A `batchSaved`
/// entry's record is rebuilt from the record of its `batchPrepared` (kept the same way) and the
/// server's changes; only the records read are decoded.
struct ServerRecordReader {
    let reader: LogReader
    private(set) var kept: Kept

    /// The entries last read, with the places of their records. An entry never changes once
    /// written (the log is append-only and never compacted), so what is kept from one snapshot
    /// holds for any later one of the same log: `DeviceLog` keeps it between calls, and one
    /// record after another of a page or batch costs its own bytes, not the entry's.
    struct Kept: Sendable {
        fileprivate var entry: (offset: UInt64, payload: [UInt8], records: [Range<Int>])?
        /// The last `batchSaved` entry read: its prepared offset, its shared system fields, and
        /// the places of its saved records' changes.
        fileprivate var saved:
            (offset: UInt64, payload: [UInt8], prepared: LogOffset, shared: Record.SystemFields, changes: [Range<Int>])?
        /// The last `batchPrepared` a `batchSaved` entry referred to, with the places of its
        /// records.
        fileprivate var prepared: (offset: LogOffset, payload: [UInt8], records: [Range<Int>])?
    }

    init(reader: LogReader, kept: Kept = Kept()) {
        self.reader = reader
        self.kept = kept
    }

    /// The record `slot` names, for `id`'s error messages.
    mutating func record(_ slot: ServerRecordSlot, for what: @autoclosure () -> String) throws -> Record {
        let bytes: ArraySlice<UInt8>
        switch slot {
        case .inline(let record):
            bytes = record[...]
        case .entry(let offset, let ordinal):
            if let saved = kept.saved, saved.offset == offset {
                return try savedRecord(ordinal, for: what())
            }
            if kept.entry?.offset != offset {
                guard let entry = try reader.entry(at: LogOffset(offset)) else {
                    throw malformed("a server record of \(what()) at offset \(offset), which the log does not hold")
                }
                if entry.kind == DeviceEntry.Kind.batchSaved {
                    kept.saved = try Self.savedOutline(entry)
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
                kept.entry = (offset, entry.payload, records)
            }
            let (_, payload, records) = kept.entry!
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
        let preparedOffset = try DeviceEntry.preparedOffset(
            try ProtoFields.varint(field: 1, in: payload, error: corrupt) ?? 0, in: entry)
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
        return (entry.offset.rawValue, payload, preparedOffset, shared, changes)
    }

    /// Saved record `ordinal` of the `batchSaved` entry in `kept.saved`, rebuilt from its
    /// prepared record.
    private mutating func savedRecord(_ ordinal: UInt32, for what: @autoclosure () -> String) throws -> Record {
        let (offset, payload, preparedOffset, shared, changes) = kept.saved!
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
            if kept.prepared?.offset != preparedOffset {
                let prepared = try DeviceEntry.preparedEntry(
                    at: preparedOffset, { (offset) throws(LogStoreError) in try reader.entry(at: offset) },
                    corrupt: corrupt)
                let records = try ProtoFields.lengthDelimited(field: 1, in: prepared.payload) {
                    LogStoreError(
                        .corruptEntry, "batchPrepared (kind \(prepared.kind)) payload: \($0)", offset: preparedOffset)
                }
                kept.prepared = (preparedOffset, prepared.payload, records)
            }
            let (_, preparedPayload, records) = kept.prepared!
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
