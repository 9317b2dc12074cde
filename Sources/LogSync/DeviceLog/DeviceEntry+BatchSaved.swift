import LogStore
import ModelEntries
import SwiftProtobuf
import SyncModel

// Kind 15, `batchSaved`: a `batchResult` written against the batch's own `batchPrepared` entry.
// The prepared entry already holds every record as sent (F103 resends from it), so each saved
// record is stored as what the server changed in it: its system fields (most of them as bits
// saying "as prepared" or "as another member"), the fields whose value differs, the fields it
// lacks, its changed keys. A saved record that cannot be rebuilt that way (its ID was not
// prepared, its type or parent differ) is stored whole. Read back, the entry is the same
// `DeviceEntry.batchResult` as kind 12 holding the records whole; reading it needs the log (the
// prepared entry), so `DeviceEntry(_:reading:)` takes a lookup. See Docs/Protobuf.md.

extension DeviceEntry {
    /// The entry to append for this `batchResult`, written against the batch's `batchPrepared`
    /// at `preparedOffset`, whose records to save are `prepared` (kind 15, `batchSaved`), with
    /// the entry itself as its decoded form. Any other case, and a result that saved nothing, is
    /// `decodedNewEntry` (kind 12 for a result).
    func decodedNewEntry(preparedAt preparedOffset: LogOffset, preparing prepared: [Record]) -> NewEntry {
        guard case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes) = self, !saved.isEmpty,
            preparedOffset.rawValue > 0
        else { return decodedNewEntry }
        var positions: [Record.ID: Int] = Dictionary(minimumCapacity: prepared.count)
        for (index, record) in prepared.enumerated() where positions[record.recordID] == nil {
            positions[record.recordID] = index
        }
        var message = Logsync_Device_BatchSaved()
        message.preparedOffset = preparedOffset.rawValue
        // The server's time and user of the request, once: the first saved record's.
        let shared = saved[0].systemFields
        let sharedFields = Record.SystemFields(
            creationDate: shared.creationDate, modificationDate: shared.modificationDate,
            creatorUserRecordID: shared.creatorUserRecordID, lastModifiedUserRecordID: shared.lastModifiedUserRecordID)
        if sharedFields != Record.SystemFields() { message.shared = sharedFields.proto }
        message.saved = saved.map { record in
            let index = positions[record.recordID]
            return SavedRecordDelta.change(
                record, from: index.map { prepared[$0] }, at: index ?? 0, shared: sharedFields)
        }
        message.deleted = deleted.map(\.proto)
        message.failedSaves = Self.failures(failedSaves)
        message.failedDeletes = Self.failures(failedDeletes)
        var entry = NewEntry(kind: Kind.batchSaved, payload: ProtoWire.serialize(message))
        entry.decoded = self
        return entry
    }

    /// Decodes an entry read from a device log, reading a `batchSaved` entry's `batchPrepared`
    /// through `lookup` (the entry at an offset, `nil` when the log holds none).
    ///
    /// - Throws: what `init(_:)` throws, and `LogStoreError` `.corruptEntry` naming the
    ///   `batchSaved` entry's offset for a reference that leads nowhere: a prepared offset that
    ///   is 0, not before the entry, or not in the log, an entry there that is not a
    ///   `batchPrepared`, a record position beyond its records.
    package init(
        _ entry: LogEntry, reading lookup: (LogOffset) throws(LogStoreError) -> LogEntry?
    ) throws(LogStoreError) {
        guard entry.kind == Kind.batchSaved else {
            self = try DeviceEntry(entry)
            return
        }
        let message = try ProtoWire.decode(Logsync_Device_BatchSaved.self, payloadOf: entry, "batchSaved")
        let preparedOffset = try Self.preparedOffset(of: message, in: entry)
        let preparedEntry = try Self.preparedEntry(at: preparedOffset, lookup) { Self.corruptReference(entry, $0) }
        let prepared = try ProtoWire.decode(
            Logsync_Device_BatchPrepared.self, payloadOf: preparedEntry, "batchPrepared")
        let records = try ProtoWire.converting(preparedEntry, "batchPrepared") { () throws(SyncError) in
            try Self.records(prepared.recordsToSave, "BatchPrepared.records_to_save")
        }
        self = try ProtoWire.converting(entry, "batchSaved") { () throws(SyncError) in
            let shared = try SavedRecordDelta.shared(of: message)
            return .batchResult(
                saved: try message.saved.enumerated().map { (index, change) throws(SyncError) in
                    try Self.within("BatchSaved.saved[\(index)]") { () throws(SyncError) in
                        try SavedRecordDelta.record(change, preparedIn: records, at: preparedOffset, shared: shared)
                    }
                },
                deleted: try Self.recordIDs(message.deleted, "BatchSaved.deleted"),
                failedSaves: try Self.failures(message.failedSaves, "BatchSaved.failed_saves"),
                failedDeletes: try Self.failures(message.failedDeletes, "BatchSaved.failed_deletes"))
        }
    }

    /// Decodes an entry read from `log`, reading a `batchSaved` entry's `batchPrepared` from it.
    package init(_ entry: LogEntry, in log: Log) throws(LogStoreError) {
        try self.init(entry) { (offset: LogOffset) throws(LogStoreError) in try log.entry(at: offset) }
    }

    /// Decodes an entry read in `reader`'s snapshot, reading a `batchSaved` entry's
    /// `batchPrepared` in the same snapshot.
    package init(_ entry: LogEntry, in reader: LogReader) throws(LogStoreError) {
        try self.init(entry) { (offset: LogOffset) throws(LogStoreError) in try reader.entry(at: offset) }
    }

    /// The prepared offset of a `batchSaved` message: not 0, and before the entry.
    static func preparedOffset(
        of message: Logsync_Device_BatchSaved, in entry: LogEntry
    ) throws(LogStoreError) -> LogOffset {
        try preparedOffset(message.preparedOffset, in: entry)
    }

    /// `offset`, read as the prepared offset of the `batchSaved` entry `entry`: not 0, and
    /// before the entry.
    static func preparedOffset(_ offset: UInt64, in entry: LogEntry) throws(LogStoreError) -> LogOffset {
        guard offset > 0, offset < entry.offset.rawValue else {
            throw corruptReference(
                entry, "refers to the batchPrepared at offset \(offset), which is not an offset before it")
        }
        return LogOffset(rawValue: offset)
    }

    /// The `batchPrepared` entry at `offset` that a `batchSaved` entry refers to, read through
    /// `lookup`; a reference to no entry or to another kind is what `corrupt` makes of it.
    static func preparedEntry(
        at offset: LogOffset, _ lookup: (LogOffset) throws(LogStoreError) -> LogEntry?,
        corrupt: (String) -> LogStoreError
    ) throws(LogStoreError) -> LogEntry {
        guard let prepared = try lookup(offset) else {
            throw corrupt("refers to the batchPrepared at offset \(offset.rawValue), which the log does not hold")
        }
        guard prepared.kind == Kind.batchPrepared else {
            throw corrupt("refers to the batchPrepared at offset \(offset.rawValue), an entry of kind \(prepared.kind)")
        }
        return prepared
    }

    static func corruptReference(_ entry: LogEntry, _ what: String) -> LogStoreError {
        LogStoreError(.corruptEntry, "batchSaved (kind \(entry.kind)) \(what)", offset: entry.offset)
    }

    /// What the device index needs of a `batchSaved` entry without the log: the prepared offset,
    /// for each saved record the position of its prepared record or its own ID (a record stored
    /// whole), and the rest of the outcome.
    package struct BatchSavedOutline: Sendable {
        package enum Saved: Sendable {
            case prepared(index: Int)
            case whole(Record.ID)
        }
        package var preparedOffset: LogOffset
        package var saved: [Saved]
        package var deleted: [Record.ID]
        package var failedSaves: [Record.ID: SyncError]
        package var failedDeletes: [Record.ID: SyncError]

        package init(_ entry: LogEntry) throws(LogStoreError) {
            let message = try ProtoWire.decode(Logsync_Device_BatchSaved.self, payloadOf: entry, "batchSaved")
            preparedOffset = try DeviceEntry.preparedOffset(of: message, in: entry)
            (saved, deleted, failedSaves, failedDeletes) = try ProtoWire.converting(entry, "batchSaved") {
                () throws(SyncError) in
                (
                    try message.saved.enumerated().map { (index, change) throws(SyncError) -> Saved in
                        guard change.hasRecord else { return .prepared(index: Int(change.preparedIndex)) }
                        return try DeviceEntry.within("BatchSaved.saved[\(index)].record") { () throws(SyncError) in
                            guard change.record.hasRecordID else { throw DeviceEntry.missing("Record.record_id") }
                            return .whole(try Record.ID(proto: change.record.recordID))
                        }
                    },
                    try DeviceEntry.recordIDs(message.deleted, "BatchSaved.deleted"),
                    try DeviceEntry.failures(message.failedSaves, "BatchSaved.failed_saves"),
                    try DeviceEntry.failures(message.failedDeletes, "BatchSaved.failed_deletes")
                )
            }
        }
    }
}

/// A saved record as what the server changed in the record as prepared (`SavedRecordChange`).
enum SavedRecordDelta {
    // The bits of `SavedRecordChange.kept`.
    static let tagAsPrepared: UInt32 = 1
    static let creationAsPrepared: UInt32 = 2
    static let modificationAsPrepared: UInt32 = 4
    static let creatorAsPrepared: UInt32 = 8
    static let lastModifiedAsPrepared: UInt32 = 16
    static let shareAsPrepared: UInt32 = 32
    static let modificationAsCreation: UInt32 = 64
    static let lastModifiedAsCreator: UInt32 = 128
    static let creationShared: UInt32 = 256
    static let modificationShared: UInt32 = 512
    static let creatorShared: UInt32 = 1024
    static let lastModifiedShared: UInt32 = 2048
    static let knownBits: UInt32 = 4095

    /// `BatchSaved.shared`: the system fields the saved records share.
    static func shared(of message: Logsync_Device_BatchSaved) throws(SyncError) -> Record.SystemFields {
        guard message.hasShared else { return Record.SystemFields() }
        return try DeviceEntry.within("BatchSaved.shared") { () throws(SyncError) in
            try Record.SystemFields(proto: message.shared)
        }
    }

    /// `saved` as changes to `prepared` (at `index` in its batch), or whole when it cannot be
    /// rebuilt from it: `record(_:preparedIn:at:)` of the result is `saved`.
    static func change(
        _ saved: Record, from prepared: Record?, at index: Int, shared: Record.SystemFields = Record.SystemFields()
    ) -> Logsync_Device_SavedRecordChange {
        var change = Logsync_Device_SavedRecordChange()
        guard let prepared, prepared.recordID == saved.recordID, prepared.recordType == saved.recordType,
            prepared.parent == saved.parent, index <= Int(UInt32.max)
        else {
            change.record = saved.proto
            return change
        }
        change.preparedIndex = UInt32(index)
        let (written, kept) = systemFields(saved.systemFields, as: prepared.systemFields, shared: shared)
        if written != Record.SystemFields() { change.systemFields = written.proto }
        change.kept = kept
        let before = prepared.fields
        let after = saved.fields
        for (key, value) in after where before[key] != value { change.fields[key] = value.proto }
        change.removedKeys = before.keys.filter { after[$0] == nil }.sorted()
        change.changedKeys = saved.changedKeys()
        change.parentChanged = saved.isParentChanged
        return change
    }

    /// The members of `saved` to write, and the `kept` bits of the others: each taken, when it
    /// can be, from the prepared record's, then from another member of `saved`, then from
    /// `shared`.
    static func systemFields(
        _ saved: Record.SystemFields, as prepared: Record.SystemFields,
        shared: Record.SystemFields = Record.SystemFields()
    ) -> (Record.SystemFields, UInt32) {
        var kept: UInt32 = 0
        func member<T: Equatable>(_ value: T?, _ candidates: (T?, UInt32)...) -> T? {
            guard let value else { return nil }
            for (candidate, bit) in candidates where candidate == value {
                kept |= bit
                return nil
            }
            return value
        }
        return (
            Record.SystemFields(
                recordChangeTag: member(saved.recordChangeTag, (prepared.recordChangeTag, tagAsPrepared)),
                creationDate: member(
                    saved.creationDate, (prepared.creationDate, creationAsPrepared),
                    (shared.creationDate, creationShared)),
                modificationDate: member(
                    saved.modificationDate, (prepared.modificationDate, modificationAsPrepared),
                    (saved.creationDate, modificationAsCreation), (shared.modificationDate, modificationShared)),
                creatorUserRecordID: member(
                    saved.creatorUserRecordID, (prepared.creatorUserRecordID, creatorAsPrepared),
                    (shared.creatorUserRecordID, creatorShared)),
                lastModifiedUserRecordID: member(
                    saved.lastModifiedUserRecordID, (prepared.lastModifiedUserRecordID, lastModifiedAsPrepared),
                    (saved.creatorUserRecordID, lastModifiedAsCreator),
                    (shared.lastModifiedUserRecordID, lastModifiedShared)),
                share: member(saved.share, (prepared.share, shareAsPrepared))),
            kept
        )
    }

    /// The saved record `change` describes, rebuilt from the records of the `batchPrepared` at
    /// `preparedOffset` (named in errors).
    static func record(
        _ change: Logsync_Device_SavedRecordChange, preparedIn records: [Record], at preparedOffset: LogOffset,
        shared: Record.SystemFields = Record.SystemFields()
    ) throws(SyncError) -> Record {
        if change.hasRecord {
            return try DeviceEntry.within("record") { () throws(SyncError) in try Record(proto: change.record) }
        }
        let index = Int(change.preparedIndex)
        guard index < records.count else {
            throw SyncError(
                .invalidArguments,
                "prepared_index \(index) is beyond the \(records.count) records of the batchPrepared at offset \(preparedOffset.rawValue)"
            )
        }
        return try rebuild(change, from: records[index], shared: shared)
    }

    /// `prepared` with the server's changes `change` holds.
    static func rebuild(
        _ change: Logsync_Device_SavedRecordChange, from prepared: Record,
        shared: Record.SystemFields = Record.SystemFields()
    ) throws(SyncError) -> Record {
        let kept = change.kept
        guard kept & ~knownBits == 0 else {
            throw SyncError(.invalidArguments, "kept has bits \(kept & ~knownBits) that mean nothing")
        }
        let written =
            change.hasSystemFields
            ? try DeviceEntry.within("system_fields") { () throws(SyncError) in
                try Record.SystemFields(proto: change.systemFields)
            }
            : Record.SystemFields()
        let before = prepared.systemFields
        /// The member `written` holds, or the first candidate whose bit is set.
        func member<T>(_ value: T?, _ candidates: (T?, UInt32)...) -> T? {
            candidates.first { kept & $0.1 != 0 }.map { $0.0 } ?? value
        }
        let creation = member(
            written.creationDate, (before.creationDate, creationAsPrepared), (shared.creationDate, creationShared))
        let creator = member(
            written.creatorUserRecordID, (before.creatorUserRecordID, creatorAsPrepared),
            (shared.creatorUserRecordID, creatorShared))
        let modification = member(
            written.modificationDate, (before.modificationDate, modificationAsPrepared),
            (creation, modificationAsCreation), (shared.modificationDate, modificationShared))
        let lastModified = member(
            written.lastModifiedUserRecordID, (before.lastModifiedUserRecordID, lastModifiedAsPrepared),
            (creator, lastModifiedAsCreator), (shared.lastModifiedUserRecordID, lastModifiedShared))
        let systemFields = Record.SystemFields(
            recordChangeTag: member(written.recordChangeTag, (before.recordChangeTag, tagAsPrepared)),
            creationDate: creation, modificationDate: modification, creatorUserRecordID: creator,
            lastModifiedUserRecordID: lastModified, share: member(written.share, (before.share, shareAsPrepared)))
        var values = prepared.fields
        for key in change.removedKeys { values[key] = nil }
        for (key, value) in change.fields {
            values[key] = try DeviceEntry.within("fields[\"\(key)\"]") { () throws(SyncError) in
                try RecordValue(proto: value)
            }
        }
        return Record(
            recordType: prepared.recordType, recordID: prepared.recordID, values: values,
            changed: Set(change.changedKeys), parent: prepared.parent, parentChanged: change.parentChanged,
            systemFields: systemFields)
    }
}
