import LogStore
import LogSync
import LogSyncServer
import SyncModel

/// The provenance of one record on one device, from its log (and the server's, and other
/// devices', when given): what `logtool blame` prints.
///
/// ```swift
/// let blame = try RecordBlame.build(
///     record: "groceries", zone: nil, device: .init(name: "phone", log: phoneLog),
///     otherDevices: [.init(name: "laptop", log: laptopLog)], server: .init(name: "server", log: serverLog))
/// blame.origin?.device   // "laptop": whose edit produced the value the phone holds
/// ```
///
/// **Events**, in the device log's order: every local edit the app queued (a save or a
/// deletion), every removal of one, each batch that sent the record (with its content and
/// request ID), the server's answer (saved with its change tag, deleted, refused with a code),
/// each conflict with the server's version and how the delegate resolved it (queued the record
/// again, or kept the server's version), every fetched version with the server offset it came
/// from (its change tag: a tag is the offset of the server entry that saved it), fetched
/// deletions, and what forgot the record (its zone deleted, an account change).
///
/// **Value held now**: the device's last known server record for it at the end of the log.
/// With the server's log, ``origin`` names the request that saved that version (the
/// `requestOutcome`, or `requestCompleted` in older logs, committed with its `recordSaved`), the device whose `batchPrepared` sent
/// it (this one or another whose log is given), and for each field the save that last changed
/// its value.
public struct RecordBlame: Sendable {
    /// One thing that happened to the record on the device.
    public struct Event: Sendable, Hashable {
        public enum Kind: String, Sendable, Hashable {
            /// The app queued a save.
            case edited
            /// The app queued a deletion.
            case deleteQueued
            /// The app removed a pending change.
            case removed
            /// A batch sent the record (a save or a deletion).
            case sent
            /// The server saved it.
            case saved
            /// The server deleted it.
            case deleted
            /// The server refused it with another error than a conflict.
            case refused
            /// The server refused the save with `serverRecordChanged`, sending its own version.
            case conflict
            /// A fetched page brought a version.
            case fetched
            /// A fetched page brought its deletion.
            case fetchedDeletion
            /// The device forgot it: its zone was deleted, or the account changed.
            case forgotten
        }

        public var offset: LogOffset
        public var time: EntryTime
        public var kind: Kind
        /// What happened, on one line.
        public var summary: String
        /// The server offset concerned: a version's change tag (the offset that saved it).
        public var serverOffset: LogOffset?
        /// The request ID of a batch and its answer.
        public var request: String?
        /// For a conflict: how the delegate resolved it.
        public var resolution: String?
    }

    /// Where the value the device holds now came from.
    public struct Origin: Sendable, Hashable {
        /// The server offset that saved this version (its change tag).
        public var serverOffset: LogOffset
        /// The request that saved it, if the server's log records one.
        public var request: String?
        /// The device whose batch sent that request (a lane name), if its log was given.
        public var device: String?
        /// The offset of that `batchPrepared` in the device's log.
        public var batchOffset: LogOffset?
        /// Each field of the value held, with the save that last changed it.
        public var fields: [FieldOrigin]
    }

    /// Where one field's value came from.
    public struct FieldOrigin: Sendable, Hashable {
        public var key: String
        /// The value, shortened as `replay` shows it.
        public var value: String
        public var serverOffset: LogOffset
        public var request: String?
        public var device: String?
    }

    /// The device's lane name and its log's directory.
    public var device: String
    public var path: String
    /// The record.
    public var recordID: Record.ID?
    public var events: [Event]
    /// The last known server record at the end of the log, if any.
    public var current: Record?
    /// The change pending for the record at the end of the log, if any (`save` or `delete`).
    public var pending: String?
    /// With the server's log: where ``current`` came from.
    public var origin: Origin?
    /// Why there is no ``origin`` though a value is held (no server log given, the version
    /// is not in it…), or `nil`.
    public var originNote: String?

    /// Reads the logs and builds the blame of the record named `record` (in the zone named
    /// `zone`, if given).
    ///
    /// - Throws: ``DiagnosticsError``: `ambiguousRecord` when the name is in several zones and
    ///   no zone was given (the message lists them); `corruptEntry` or `unreadableLog` naming
    ///   the log and offset of an entry that cannot be read.
    public static func build(
        record: String, zone: String? = nil, device: Timeline.Source, otherDevices: [Timeline.Source] = [],
        server: Timeline.Source? = nil, progress: (ProgressEvent) -> Void = { _ in }
    ) throws(DiagnosticsError) -> RecordBlame {
        var walk = BlameWalk(name: record, zone: zone)
        var requests: [String: (device: String, offset: LogOffset)] = [:]
        let total: UInt64
        do { total = try device.log.lastOffset.rawValue } catch {
            throw DeviceLogBisect.failure(error, at: nil, of: device.log)
        }
        try device.log.walkDeviceEntries { logEntry, entry in
            walk.apply(entry, at: logEntry.offset, time: logEntry.time)
            if case .batchPrepared(_, _, _, let id?) = entry { requests[id.rawValue] = (device.name, logEntry.offset) }
            progress(.entries(done: logEntry.offset.rawValue, total: total))
        }
        walk.finish()
        let ids = walk.matchedIDs
        if ids.count > 1 {
            throw DiagnosticsError(
                .ambiguousRecord,
                "the record name \(record) is in several zones of \(device.log.environment.path): "
                    + ids.sorted(by: DeviceStateReplay.precedes).map(DeviceStateReport.record).joined(separator: ", ")
                    + "; name one with --zone")
        }
        for other in otherDevices {
            try other.log.walkDeviceEntries { logEntry, entry in
                if case .batchPrepared(_, _, _, let id?) = entry, requests[id.rawValue] == nil {
                    requests[id.rawValue] = (other.name, logEntry.offset)
                }
            }
        }
        var blame = RecordBlame(
            device: device.name, path: device.log.environment.path, recordID: ids.first, events: walk.events,
            current: walk.current, pending: walk.pending, origin: nil, originNote: nil)
        guard let current = walk.current, let id = ids.first else { return blame }
        guard let server else {
            blame.originNote = "give the server's log to know which device's edit produced it"
            return blame
        }
        guard let tag = current.recordChangeTag, let tagOffset = UInt64(tag), tagOffset > 0 else {
            blame.originNote =
                "its change tag \(current.recordChangeTag ?? "none") is not an offset of the server's log"
            return blame
        }
        let history = try ServerHistoryOfRecord.read(server.log, id: id, through: LogOffset(tagOffset))
        guard let version = history.versions.last, version.offset == LogOffset(tagOffset) else {
            blame.originNote =
                "the server's log \(server.log.environment.path) holds no save of it at offset \(tagOffset)"
            return blame
        }
        func who(_ request: String?) -> String? { request.flatMap { requests[$0]?.device } }
        var fields: [FieldOrigin] = []
        for key in current.allKeys() {
            // The latest version through the tag whose value of the key differs from the one before.
            var changedAt = version
            var previous: RecordValue?? = nil
            for each in history.versions {
                let value = each.record[key]
                if previous == nil || previous! != value { changedAt = each }
                previous = .some(value)
            }
            fields.append(
                FieldOrigin(
                    key: key, value: current[key].map(DeviceStateReport.shortValue) ?? "none",
                    serverOffset: changedAt.offset,
                    request: changedAt.request, device: who(changedAt.request)))
        }
        blame.origin = Origin(
            serverOffset: version.offset, request: version.request, device: who(version.request),
            batchOffset: version.request.flatMap { requests[$0]?.offset }, fields: fields)
        return blame
    }
}

/// The versions of one record in a server database's log, each with the request that saved it.
struct ServerHistoryOfRecord {
    struct Version {
        var offset: LogOffset
        var record: Record
        var request: String?
    }
    var versions: [Version] = []

    /// Reads `log` through `end` (and the rest of the commit at `end`, for its request).
    static func read(
        _ log: Log, id: Record.ID, through end: LogOffset
    ) throws(DiagnosticsError) -> ServerHistoryOfRecord {
        var history = ServerHistoryOfRecord()
        var commit: (time: EntryTime, versions: [Int])?
        try log.walkEntries { (entry) throws(DiagnosticsError) in
            if commit?.time != entry.time {
                if entry.offset > end { return false }  // the commit holding `end` is over
                commit = (entry.time, [])
            }
            guard
                entry.kind == ServerEntry.Kind.recordSaved || entry.kind == ServerEntry.Kind.recordDeleted
                    || ServerEntry.Kind.completesRequest(entry.kind)
            else { return true }
            let decoded: ServerEntry
            do throws(LogStoreError) { decoded = try ServerEntry(entry) } catch {
                throw DeviceLogBisect.failure(error, at: entry.offset, of: log)
            }
            switch decoded {
            case .recordSaved(let record) where record.recordID == id && entry.offset <= end:
                history.versions.append(Version(offset: entry.offset, record: record))
                commit?.versions.append(history.versions.count - 1)
            case .recordDeleted(let deleted, _) where deleted == id && entry.offset <= end:
                history.versions = []  // a deletion starts the record's history again
                commit?.versions = []
            case .requestCompleted(let request, _, _, _), .requestOutcome(let request, _, _, _):
                for index in commit?.versions ?? [] { history.versions[index].request = request.rawValue }
            default:
                break
            }
            return true
        }
        return history
    }
}

/// The walk of a device log for one record name.
struct BlameWalk {
    let name: String
    let zone: String?
    var events: [RecordBlame.Event] = []
    var matchedIDs: Set<Record.ID> = []
    var current: Record?
    var pending: String?
    /// The request of the batch in flight, if it holds the record.
    var request: String?
    /// The event index of a conflict whose resolution is not known yet.
    var unresolved: Int?
    var accountSeen = false

    init(name: String, zone: String?) {
        self.name = name
        self.zone = zone
    }

    func matches(_ id: Record.ID) -> Bool {
        id.recordName == name && (zone == nil || id.zoneID.zoneName == zone)
    }

    mutating func add(
        _ offset: LogOffset, _ time: EntryTime, _ kind: RecordBlame.Event.Kind, _ summary: String,
        server: LogOffset? = nil, request: String? = nil
    ) {
        events.append(
            RecordBlame.Event(
                offset: offset, time: time, kind: kind, summary: summary, serverOffset: server, request: request))
    }

    /// A conflict not resolved by queuing the record again is resolved in the server's favour
    /// as soon as anything else happens to the record.
    mutating func settleConflict(requeuedAt offset: LogOffset?) {
        guard let index = unresolved else { return }
        unresolved = nil
        events[index].resolution =
            offset.map { "the delegate queued the record again at offset \($0) (its merge)" }
            ?? "not queued again: the server's version was kept"
    }

    static func tag(_ record: Record) -> LogOffset? {
        record.recordChangeTag.flatMap(UInt64.init).map { LogOffset($0) }
    }

    mutating func apply(_ entry: DeviceEntry, at offset: LogOffset, time: EntryTime) {
        switch entry {
        case .pendingRecordZoneChangesAdded(let changes):
            for change in changes where matches(change.recordID) {
                matchedIDs.insert(change.recordID)
                if change.isSave {
                    settleConflict(requeuedAt: offset)
                    add(offset, time, .edited, "the app queued a save")
                    pending = "save"
                } else {
                    settleConflict(requeuedAt: nil)
                    add(offset, time, .deleteQueued, "the app queued a deletion")
                    pending = "delete"
                }
            }
        case .pendingRecordZoneChangesRemoved(let changes):
            for change in changes where matches(change.recordID) {
                add(offset, time, .removed, "the app removed its pending \(change.isSave ? "save" : "deletion")")
                pending = nil
            }
        case .batchPrepared(let records, let deletions, _, let requestID):
            request = nil
            for record in records where matches(record.recordID) {
                settleConflict(requeuedAt: nil)
                matchedIDs.insert(record.recordID)
                request = requestID?.rawValue
                add(
                    offset, time, .sent,
                    "sent\(requestID.map { " as request \($0.rawValue)" } ?? ""): \(Self.content(record))",
                    request: request)
            }
            for id in deletions where matches(id) {
                settleConflict(requeuedAt: nil)
                matchedIDs.insert(id)
                request = requestID?.rawValue
                add(
                    offset, time, .sent, "sent its deletion\(requestID.map { " as request \($0.rawValue)" } ?? "")",
                    request: request)
            }
        case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
            for record in saved where matches(record.recordID) {
                current = record
                if pending == "save" { pending = nil }
                add(
                    offset, time, .saved, "the server saved it: \(Self.content(record))", server: Self.tag(record),
                    request: request)
            }
            for id in deleted where matches(id) {
                current = nil
                if pending == "delete" { pending = nil }
                add(offset, time, .deleted, "the server deleted it", request: request)
            }
            for (id, error) in failedSaves.merging(failedDeletes, uniquingKeysWith: { a, _ in a }) where matches(id) {
                if error.code == .serverRecordChanged {
                    let server = error.serverRecord
                    if let server { current = server }
                    if pending == "save" { pending = nil }
                    add(
                        offset, time, .conflict,
                        "conflict (serverRecordChanged): the server holds \(server.map(Self.content) ?? "a version it did not send")",
                        server: server.flatMap(Self.tag), request: request)
                    unresolved = events.count - 1
                } else {
                    if [.unknownItem, .zoneNotFound, .userDeletedZone].contains(error.code) { current = nil }
                    if !(error.isTransient || error.code == .operationCancelled) { pending = nil }
                    add(offset, time, .refused, "refused: \(error.code)", request: request)
                }
            }
            request = nil
        case .zoneChangesFetched(_, let modifications, let deletions, _, _):
            for record in modifications where matches(record.recordID) {
                settleConflict(requeuedAt: nil)
                matchedIDs.insert(record.recordID)
                current = record
                add(
                    offset, time, .fetched,
                    "fetched the version saved at server offset \(record.recordChangeTag ?? "?"): \(Self.content(record))",
                    server: Self.tag(record))
            }
            for deletion in deletions where matches(deletion.recordID) {
                settleConflict(requeuedAt: nil)
                matchedIDs.insert(deletion.recordID)
                current = nil
                add(offset, time, .fetchedDeletion, "fetched its deletion")
            }
        case .databaseChangesFetched(_, let deletions, _, _):
            for deletion in deletions where current.map({ $0.recordID.zoneID == deletion.zoneID }) ?? false {
                current = nil
                add(offset, time, .forgotten, "its zone was deleted on the server (\(deletion.reason))")
            }
        case .zoneFetchFinished(let zoneID, let error):
            if [.zoneNotFound, .userDeletedZone].contains(error?.code), current?.recordID.zoneID == zoneID {
                current = nil
                add(offset, time, .forgotten, "its zone is gone (\(error!.code))")
            }
        case .databaseChangesSent(_, let deletedZoneIDs, _, _):
            if let zoneID = current?.recordID.zoneID, deletedZoneIDs.contains(zoneID) {
                current = nil
                add(offset, time, .forgotten, "the app deleted its zone")
            }
        case .accountChanged:
            if accountSeen, current != nil || pending != nil {
                current = nil
                pending = nil
                add(offset, time, .forgotten, "the account changed: the device's state was wiped")
            }
            accountSeen = true
        default:
            break
        }
    }

    mutating func finish() {
        settleConflict(requeuedAt: nil)
    }

    /// `Note {body: "milk", title: "Groceries"}` as a replay report writes records.
    static func content(_ record: Record) -> String {
        ServerReplayOutcome.content(record)
    }
}
