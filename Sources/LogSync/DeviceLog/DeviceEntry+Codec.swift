import Foundation
import LogStore
import ModelEntries
import SwiftProtobuf
import SyncModel

// The byte form of device log entries: the entry kind says which case it is (DeviceEntry.Kind),
// the payload is that kind's Protocol Buffers message (Proto/device_log.proto), whose model parts
// are converted by SyncModel's ProtoConversions. Encoding is deterministic (dictionaries are
// written sorted by ID), so equal entries have equal payloads. See Docs/Engine.md.

extension DeviceEntry {
    /// `newEntry` carrying this entry as its decoded form, so the device index applies it without
    /// decoding the bytes just encoded (`NewEntry.decoded`).
    var decodedNewEntry: NewEntry {
        var entry = newEntry
        entry.decoded = self
        return entry
    }

    /// The entry to append: the case's kind and its message's bytes. The time is left to the log.
    var newEntry: NewEntry {
        switch self {
        case .pendingRecordZoneChangesAdded(let changes):
            return Self.entry(Kind.pendingRecordZoneChangesAdded, Self.message(changes))
        case .pendingRecordZoneChangesRemoved(let changes):
            return Self.entry(Kind.pendingRecordZoneChangesRemoved, Self.message(changes))
        case .pendingDatabaseChangesAdded(let changes):
            return Self.entry(Kind.pendingDatabaseChangesAdded, Self.message(changes))
        case .pendingDatabaseChangesRemoved(let changes):
            return Self.entry(Kind.pendingDatabaseChangesRemoved, Self.message(changes))
        case .untrackedChangesFlagged(let flag):
            var message = Logsync_Device_UntrackedChangesFlagged()
            message.value = flag
            return Self.entry(Kind.untrackedChangesFlagged, message)
        case .batchPrepared(let records, let deletions, let atomic, let requestID):
            // Field 1, the records, written directly; then the other fields.
            var message = Logsync_Device_BatchPrepared()
            message.recordIdsToDelete = deletions.map(\.proto)
            message.atomicByZone = atomic
            message.requestID = requestID?.rawValue ?? ""
            return NewEntry(
                kind: Kind.batchPrepared, payload: Self.records(records, field: 1) + ProtoWire.serialize(message))
        case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
            var message = Logsync_Device_BatchResult()
            message.deleted = deleted.map(\.proto)
            message.failedSaves = Self.failures(failedSaves)
            message.failedDeletes = Self.failures(failedDeletes)
            return NewEntry(
                kind: Kind.batchResult, payload: Self.records(saved, field: 1) + ProtoWire.serialize(message))
        case .databaseChangesSent(let savedZones, let deletedZoneIDs, let failedZoneSaves, let failedZoneDeletes):
            var message = Logsync_Device_DatabaseChangesSent()
            message.savedZones = savedZones.map(\.proto)
            message.deletedZoneIds = deletedZoneIDs.map(\.proto)
            message.failedZoneSaves = Self.failures(failedZoneSaves)
            message.failedZoneDeletes = Self.failures(failedZoneDeletes)
            return Self.entry(Kind.databaseChangesSent, message)
        default:
            return syncStepEntry
        }
    }

    /// Decodes an entry read from a device log. A `batchSaved` entry (kind 15) needs the log:
    /// see `init(_:reading:)`.
    ///
    /// - Throws: `LogStoreError` `.corruptEntry` naming the entry's offset, its kind and what
    ///   failed: a kind that is not a device kind, a payload that is not the kind's message, or
    ///   a message that does not describe a value (a missing required field, an empty oneof, an
    ///   ID named twice in a failure list).
    package init(_ entry: LogEntry) throws(LogStoreError) {
        switch entry.kind {
        case Kind.pendingRecordZoneChangesAdded, Kind.pendingRecordZoneChangesRemoved:
            let added = entry.kind == Kind.pendingRecordZoneChangesAdded
            let name = added ? "pendingRecordZoneChangesAdded" : "pendingRecordZoneChangesRemoved"
            let message = try ProtoWire.decode(Logsync_Device_PendingRecordZoneChanges.self, payloadOf: entry, name)
            let changes = try ProtoWire.converting(entry, name) { () throws(SyncError) in
                try message.changes.enumerated().map { (index, change) throws(SyncError) in
                    try Self.recordChange(change, "PendingRecordZoneChanges.changes[\(index)]")
                }
            }
            self = added ? .pendingRecordZoneChangesAdded(changes) : .pendingRecordZoneChangesRemoved(changes)
        case Kind.pendingDatabaseChangesAdded, Kind.pendingDatabaseChangesRemoved:
            let added = entry.kind == Kind.pendingDatabaseChangesAdded
            let name = added ? "pendingDatabaseChangesAdded" : "pendingDatabaseChangesRemoved"
            let message = try ProtoWire.decode(Logsync_Device_PendingDatabaseChanges.self, payloadOf: entry, name)
            let changes = try ProtoWire.converting(entry, name) { () throws(SyncError) in
                try message.changes.enumerated().map { (index, change) throws(SyncError) in
                    try Self.databaseChange(change, "PendingDatabaseChanges.changes[\(index)]")
                }
            }
            self = added ? .pendingDatabaseChangesAdded(changes) : .pendingDatabaseChangesRemoved(changes)
        case Kind.untrackedChangesFlagged:
            let message = try ProtoWire.decode(
                Logsync_Device_UntrackedChangesFlagged.self, payloadOf: entry, "untrackedChangesFlagged")
            self = .untrackedChangesFlagged(message.value)
        case Kind.batchPrepared:
            let message = try ProtoWire.decode(Logsync_Device_BatchPrepared.self, payloadOf: entry, "batchPrepared")
            self = try ProtoWire.converting(entry, "batchPrepared") { () throws(SyncError) in
                .batchPrepared(
                    recordsToSave: try Self.records(message.recordsToSave, "BatchPrepared.records_to_save"),
                    recordIDsToDelete: try Self.recordIDs(
                        message.recordIdsToDelete, "BatchPrepared.record_ids_to_delete"),
                    atomicByZone: message.atomicByZone,
                    // proto3's default, the empty string, is how a log without the field reads.
                    requestID: message.requestID.isEmpty ? nil : RequestID(message.requestID))
            }
        case Kind.batchResult:
            let message = try ProtoWire.decode(Logsync_Device_BatchResult.self, payloadOf: entry, "batchResult")
            self = try ProtoWire.converting(entry, "batchResult") { () throws(SyncError) in
                .batchResult(
                    saved: try Self.records(message.saved, "BatchResult.saved"),
                    deleted: try Self.recordIDs(message.deleted, "BatchResult.deleted"),
                    failedSaves: try Self.failures(message.failedSaves, "BatchResult.failed_saves"),
                    failedDeletes: try Self.failures(message.failedDeletes, "BatchResult.failed_deletes"))
            }
        case Kind.batchSaved:
            // Its saved records are changes to the records of its batchPrepared entry. A payload
            // that is not a BatchSaved is corrupt all the same.
            _ = try ProtoWire.decode(Logsync_Device_BatchSaved.self, payloadOf: entry, "batchSaved")
            throw LogStoreError(
                .invalidArgument,
                "batchSaved (kind \(entry.kind)) is read with its log, which holds the batchPrepared it refers to "
                    + "(DeviceEntry(_:in:))",
                offset: entry.offset)
        case Kind.databaseChangesSent:
            let message = try ProtoWire.decode(
                Logsync_Device_DatabaseChangesSent.self, payloadOf: entry, "databaseChangesSent")
            self = try ProtoWire.converting(entry, "databaseChangesSent") { () throws(SyncError) in
                .databaseChangesSent(
                    savedZones: try message.savedZones.enumerated().map { (index, zone) throws(SyncError) in
                        try Self.within("DatabaseChangesSent.saved_zones[\(index)]") { () throws(SyncError) in
                            try RecordZone(proto: zone)
                        }
                    },
                    deletedZoneIDs: message.deletedZoneIds.map { RecordZone.ID(proto: $0) },
                    failedZoneSaves: try Self.failures(
                        message.failedZoneSaves, "DatabaseChangesSent.failed_zone_saves"),
                    failedZoneDeletes: try Self.failures(
                        message.failedZoneDeletes, "DatabaseChangesSent.failed_zone_deletes"))
            }
        case Kind.sendStarted, Kind.sendFinished, Kind.fetchStarted, Kind.databaseChangesFetched,
            Kind.zoneChangesFetched, Kind.zoneFetchFinished, Kind.fetchFinished, Kind.changeTokenReset,
            Kind.eventsDelivered, Kind.accountChanged, Kind.subscriptionEnsured, Kind.pushReceived,
            Kind.syncScheduled, Kind.syncDeferred:
            self = try Self.syncStep(entry)
        default:
            throw LogStoreError(
                .corruptEntry,
                "entry kind \(entry.kind) is not a device entry kind "
                    + "(\(Kind.inUse.map(\.description).joined(separator: ", ")))",
                offset: entry.offset)
        }
    }

    // MARK: Encoding helpers

    /// `records` as the repeated record field `field` of an entry's message: the bytes
    /// SwiftProtobuf writes for them, written directly from the records (`Record.write(to:)`,
    /// byte for byte the same; SwiftProtobuf's encoder sizes nested messages again at each level).
    /// A message's bytes are its fields in number order, so an entry's payload is the fields
    /// before `field`, these, and the fields after, each serialized alone.
    static func records(_ records: [Record], field: Int) -> [UInt8] {
        var writer = ProtoWriter(capacity: records.reduce(0) { $0 + 80 + $1.estimatedSize * 5 / 4 })
        for record in records { writer.message(field) { record.write(to: &$0) } }
        return writer.bytes
    }

    static func entry(_ kind: EntryKind, _ message: some SwiftProtobuf.Message) -> NewEntry {
        NewEntry(kind: kind, payload: ProtoWire.serialize(message))
    }

    private static func message(
        _ changes: [SyncEngine.PendingRecordZoneChange]
    ) -> Logsync_Device_PendingRecordZoneChanges {
        var message = Logsync_Device_PendingRecordZoneChanges()
        message.changes = changes.map(\.proto)
        return message
    }

    private static func message(_ changes: [SyncEngine.PendingDatabaseChange]) -> Logsync_Device_PendingDatabaseChanges
    {
        var message = Logsync_Device_PendingDatabaseChanges()
        message.changes = changes.map(\.proto)
        return message
    }

    /// The failure messages of a failure list, sorted by ID so that equal lists encode alike.
    static func failures<Message: ItemFailureMessage>(_ failures: [Message.ItemID: SyncError]) -> [Message] {
        failures.sorted { Message.precedes($0.key, $1.key) }.map { id, error in
            var failure = Message()
            failure.setItemID(id)
            failure.error = error.proto
            return failure
        }
    }

    // MARK: Decoding helpers

    /// Runs `body`, prefixing its error's message with the field being decoded.
    static func within<T>(_ field: String, _ body: () throws(SyncError) -> T) throws(SyncError) -> T {
        do {
            return try body()
        } catch {
            var copy = error
            copy.message = "\(field): \(error.message)"
            throw copy
        }
    }

    static func missing(_ field: String) -> SyncError {
        SyncError(.invalidArguments, "\(field) is missing")
    }

    private static func recordChange(
        _ message: Logsync_Device_PendingRecordZoneChange, _ field: String
    ) throws(SyncError) -> SyncEngine.PendingRecordZoneChange {
        try within(field) { () throws(SyncError) in
            switch message.change {
            case .saveRecord(let id)?: .saveRecord(try Record.ID(proto: id))
            case .deleteRecord(let id)?: .deleteRecord(try Record.ID(proto: id))
            case nil: throw SyncError(.invalidArguments, "has no change set")
            }
        }
    }

    private static func databaseChange(
        _ message: Logsync_Device_PendingDatabaseChange, _ field: String
    ) throws(SyncError) -> SyncEngine.PendingDatabaseChange {
        try within(field) { () throws(SyncError) in
            switch message.change {
            case .saveZone(let zone)?: .saveZone(try RecordZone(proto: zone))
            case .deleteZone(let id)?: .deleteZone(RecordZone.ID(proto: id))
            case nil: throw SyncError(.invalidArguments, "has no change set")
            }
        }
    }

    static func records(_ messages: [Logsync_Model_Record], _ field: String) throws(SyncError) -> [Record] {
        try messages.enumerated().map { (index, message) throws(SyncError) in
            try within("\(field)[\(index)]") { () throws(SyncError) in try Record(proto: message) }
        }
    }

    static func recordIDs(_ messages: [Logsync_Model_RecordID], _ field: String) throws(SyncError) -> [Record.ID] {
        try messages.enumerated().map { (index, message) throws(SyncError) in
            try within("\(field)[\(index)]") { () throws(SyncError) in try Record.ID(proto: message) }
        }
    }

    /// Decodes a failure list; each message must name its item and its error, and no item twice.
    static func failures<Message: ItemFailureMessage>(
        _ messages: [Message], _ field: String
    ) throws(SyncError) -> [Message.ItemID: SyncError] {
        var failures: [Message.ItemID: SyncError] = [:]
        for (index, message) in messages.enumerated() {
            let context = "\(field)[\(index)]"
            guard message.hasItemID else { throw missing("\(context).\(Message.itemIDField)") }
            guard message.hasError else { throw missing("\(context).error") }
            let id = try within("\(context).\(Message.itemIDField)") { () throws(SyncError) in
                try message.decodedItemID()
            }
            let error = try within("\(context).error") { () throws(SyncError) in try SyncError(proto: message.error) }
            guard failures.updateValue(error, forKey: id) == nil else {
                throw SyncError(.invalidArguments, "\(context) names \(id) a second time")
            }
        }
        return failures
    }
}

/// A message naming one item that failed and its error (`RecordFailure`, `ZoneFailure`), so that
/// both failure lists are written and read by the same code.
protocol ItemFailureMessage: SwiftProtobuf.Message {
    associatedtype ItemID: Hashable & CustomStringConvertible
    /// The name of the ID field in the .proto file, for decoding errors.
    static var itemIDField: String { get }
    /// The order in which failures are written (``IDOrder``).
    static func precedes(_ lhs: ItemID, _ rhs: ItemID) -> Bool
    var hasItemID: Bool { get }
    /// Sets the ID field.
    mutating func setItemID(_ id: ItemID)
    /// Reads the ID field.
    func decodedItemID() throws(SyncError) -> ItemID
    var hasError: Bool { get }
    var error: Logsync_Model_SyncError { get set }
}

extension Logsync_Device_RecordFailure: ItemFailureMessage {
    static var itemIDField: String { "record_id" }
    static func precedes(_ lhs: Record.ID, _ rhs: Record.ID) -> Bool { IDOrder.precedes(lhs, rhs) }
    var hasItemID: Bool { hasRecordID }
    mutating func setItemID(_ id: Record.ID) { recordID = id.proto }
    func decodedItemID() throws(SyncError) -> Record.ID { try Record.ID(proto: recordID) }
}

extension Logsync_Device_ZoneFailure: ItemFailureMessage {
    static var itemIDField: String { "zone_id" }
    static func precedes(_ lhs: RecordZone.ID, _ rhs: RecordZone.ID) -> Bool { IDOrder.precedes(lhs, rhs) }
    var hasItemID: Bool { hasZoneID }
    mutating func setItemID(_ id: RecordZone.ID) { zoneID = id.proto }
    func decodedItemID() throws(SyncError) -> RecordZone.ID { RecordZone.ID(proto: zoneID) }
}

extension SyncEngine.PendingRecordZoneChange {
    var proto: Logsync_Device_PendingRecordZoneChange {
        var message = Logsync_Device_PendingRecordZoneChange()
        switch self {
        case .saveRecord(let id): message.change = .saveRecord(id.proto)
        case .deleteRecord(let id): message.change = .deleteRecord(id.proto)
        }
        return message
    }
}

extension SyncEngine.PendingDatabaseChange {
    var proto: Logsync_Device_PendingDatabaseChange {
        var message = Logsync_Device_PendingDatabaseChange()
        switch self {
        case .saveZone(let zone): message.change = .saveZone(zone.proto)
        case .deleteZone(let id): message.change = .deleteZone(id.proto)
        }
        return message
    }
}

/// The order in which IDs are written: owner name, zone name, record name, compared as UTF-8.
enum IDOrder {
    static func key(_ id: RecordZone.ID) -> [String] { [id.ownerName, id.zoneName] }
    static func key(_ id: Record.ID) -> [String] { key(id.zoneID) + [id.recordName] }

    static func precedes(_ lhs: Record.ID, _ rhs: Record.ID) -> Bool { precedes(key(lhs), key(rhs)) }
    static func precedes(_ lhs: RecordZone.ID, _ rhs: RecordZone.ID) -> Bool { precedes(key(lhs), key(rhs)) }

    private static func precedes(_ lhs: [String], _ rhs: [String]) -> Bool {
        lhs.lexicographicallyPrecedes(rhs) { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
