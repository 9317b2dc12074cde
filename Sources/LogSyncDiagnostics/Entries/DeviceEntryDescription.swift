import LogStore
import LogSync
import SyncModel

/// How a device log entry is described for people and tools (an ``EntryDescription``): the name of its kind and its salient
/// fields, in a fixed order. It is what `logtool dump` prints for the device's kinds (1–99,
/// ``DeviceEntry``) in an engine's device log (the log named `device`).
///
/// ```swift
/// if let description = try DeviceEntryDescription.describe(entry) {
///     print(description.kindName, description.fields.map { "\($0.name)=\($0.value)" })
///     // batchResult ["saved=1", "deleted=0", "failed=1", "records=[Notes/n2]", "errors=[n1:serverRecordChanged]"]
/// }
/// ```
///
/// Lines stay short: a list shows at most four items, or the first three and `…+N` for the `N`
/// others; the counts beside it are complete. In lists a zone is its name (`Notes`, or
/// `Notes@owner` when the owner is not the current user, `__defaultOwner__`) and a record is
/// `zone/name` (`Notes/n1`), or its name alone where the entry is about one zone.
/// ``recordNames`` and ``zoneNames`` hold every record and zone the entry names, listed or not,
/// for filters.
///
/// Fields appear in this order, each only where its kind has it; names are stable, for scripts.
/// Booleans are the text `true` or `false`.
///
/// | field | kinds | value |
/// |---|---|---|
/// | `reason` | sendStarted, fetchStarted; syncDeferred | `manual` or `scheduled`; why the scheduler waits (text) |
/// | `scope`, `scopeIDs` | sendStarted, fetchStarted | `all`, `zoneIDs`, `allExcluding` or `recordIDs`; the scope's zones or records, only when not `all` |
/// | `prioritized` | fetchStarted | zones to fetch first, only if any |
/// | `zone`, `owner` | zoneChangesFetched, zoneFetchFinished, changeTokenReset, pushReceived | zone name (changeTokenReset without `zone`: the database's token; pushReceived: only if the hint names one); owner, only when not the current user |
/// | `count`, `changes` | pending…Added, pending…Removed, batchPrepared | how many changes; the changes as `save:Notes/n1`, `delete:Notes/n2` (zone changes: `save:Notes`, `delete:Trash`) |
/// | `atomic` | batchPrepared | whether the batch is atomic by zone |
/// | `request` | batchPrepared | the request ID the batch is sent under, only if the entry records it (older logs do not) |
/// | `modified` | databaseChangesFetched, zoneChangesFetched | how many zones or records were modified |
/// | `saved`, `deleted`, `failed` | batchResult, databaseChangesSent (`deleted` also: databaseChangesFetched, zoneChangesFetched) | item counts |
/// | `records` | batchResult, zoneChangesFetched | records saved (`Notes/n1`); records modified (names) |
/// | `zones` | databaseChangesSent, databaseChangesFetched | zones saved; zones modified |
/// | `deletions` | batchResult, databaseChangesSent, databaseChangesFetched, zoneChangesFetched | records or zones deleted (databaseChangesFetched: `zone:reason`) |
/// | `assets` | batchPrepared, batchResult, zoneChangesFetched | every asset of the records: `record.field:digest/sizeB/state`, the state `cached` (the local file is there), `missing` (named but gone) or `not-cached` (content not fetched); never the content |
/// | `prepared` | batchSaved (described as batchResult) | the offset of the batch's `batchPrepared`, whose records the saved ones are rebuilt from |
/// | `errors` | batchResult, databaseChangesSent | `record:code` (record name) or `zone:code` per failed item, sorted, only if any |
/// | `error` | sendFinished, zoneFetchFinished, fetchFinished | the error code that stopped it, only if one did |
/// | `token`, `moreComing` | databaseChangesFetched, zoneChangesFetched | the new change token's offset in the server's log; whether more pages follow |
/// | `through` | eventsDelivered | the last offset whose events the delegate handled |
/// | `user`, `previous` | accountChanged | the current user's record name, absent when signed out; the previous one, absent when there was none |
/// | `subscription` | subscriptionEnsured | subscription ID |
/// | `pending` | untrackedChangesFlagged | the flag's new value |
/// | `work`, `after`, `cause`, `failures`, `serverRetryAfter` | syncScheduled | `send` or `fetch`; the wait (`500ms`, `2s`); `localChanges`, `pushHint`, `catchUp` or `retry`; for a retry: failures so far, and whether the server set the wait |
/// | `trace` | batchPrepared, databaseChangesFetched, zoneChangesFetched | the trace ID of the request's span (the trace-id of its W3C `traceparent`), only if the engine traced it (`SyncEngine.Configuration.tracer`) |
enum DeviceEntryDescription: EntryKindCatalog {
    /// Every kind a device log holds, with its name, in kind order.
    static var kinds: [(kind: EntryKind, name: String)] { DeviceEntry.Kind.named }

    /// At most this many items of a list are shown; a longer list shows one fewer and `…+N`.
    static let listLimit = 4

    /// Describes `entry`, or returns `nil` when its kind is not a device kind in use (the entry
    /// then belongs to some other layer, and a tool shows its bytes instead).
    ///
    /// Pure: the description depends only on the entry's kind and payload.
    ///
    /// - Throws: `LogStoreError` `.corruptEntry` naming the entry's offset when the payload is
    ///   not a valid entry of its kind (as `DeviceEntry.init(_:)` reports it).
    /// A `batchSaved` entry (kind 15) holds its saved records as changes to those of its
    /// `batchPrepared`: with `log` it is described as a `batchResult` (read with its prepared
    /// entry) plus `prepared`; without, from itself alone (`records` then lists a record rebuilt
    /// from the prepared entry as `prepared:i`, its position there, and no assets).
    static func describe(_ entry: LogEntry, in log: Log? = nil) throws(LogStoreError) -> EntryDescription? {
        guard let name = Self.kindName(of: entry.kind) else { return nil }
        var builder = Builder()
        if entry.kind == DeviceEntry.Kind.batchSaved {
            if let log {
                builder.add(try DeviceEntry(entry, in: log))
            } else {
                builder.add(try DeviceEntry.BatchSavedOutline(entry))
            }
            builder.add("prepared", .integer(try DeviceEntry.BatchSavedOutline(entry).preparedOffset.rawValue))
        } else {
            builder.add(try DeviceEntry(entry))
        }
        if let traceID = DeviceEntry.traceID(in: try DeviceEntry.traceHeaders(of: entry)) {
            builder.add("trace", .text(traceID))
        }
        return EntryDescription(
            kindName: name, fields: builder.fields, recordNames: builder.recordNames, zoneNames: builder.zoneNames)
    }

    // MARK: Fields of each kind

    private struct Builder {
        var fields: [Field] = []
        var recordNames: Set<String> = []
        var zoneNames: Set<String> = []

        mutating func add(_ name: String, _ value: Value) { fields.append(Field(name, value)) }
        mutating func add(_ name: String, _ flag: Bool) { add(name, .text(flag ? "true" : "false")) }
        mutating func add(_ name: String, count: Int) { add(name, .integer(UInt64(count))) }
        mutating func addList(_ name: String, _ items: [String]) {
            add(name, .list(DeviceEntryDescription.shortened(items)))
        }

        /// `zone` and, when not the current user, `owner`.
        mutating func addZone(_ zoneID: RecordZone.ID) {
            note(zoneID)
            add("zone", .text(zoneID.zoneName))
            if zoneID.ownerName != RecordZone.ID.defaultOwnerName { add("owner", .text(zoneID.ownerName)) }
        }

        /// Remembers a zone for the filters; returns its list form.
        @discardableResult
        mutating func note(_ zoneID: RecordZone.ID) -> String {
            zoneNames.insert(zoneID.zoneName)
            return zoneID.ownerName == RecordZone.ID.defaultOwnerName
                ? zoneID.zoneName : zoneID.zoneName + "@" + zoneID.ownerName
        }

        /// Remembers a record and its zone for the filters; returns its list form `zone/name`.
        @discardableResult
        mutating func note(_ recordID: Record.ID) -> String {
            recordNames.insert(recordID.recordName)
            return note(recordID.zoneID) + "/" + recordID.recordName
        }

        /// `assets` of records, each as `n1.photo:sha256:1f2e3d4c5b6a…/48213B/cached`, only if any.
        mutating func addAssets(of records: [Record]) {
            let listed = records.flatMap { $0.listedAssets(withCacheState: true) }
            if !listed.isEmpty { addList("assets", listed) }
        }

        /// `errors` of per-item failures, sorted by ID, only if any.
        mutating func addErrors(_ items: [(name: String, code: SyncError.Code)]) {
            guard !items.isEmpty else { return }
            let sorted = items.sorted { ($0.name, $0.code.name) < ($1.name, $1.code.name) }
            addList("errors", sorted.map { "\($0.name):\($0.code.name)" })
        }

        /// What a send's result says: the `saved`, `deleted` and `failed` counts, then the saved
        /// items (as the field `savedField`), the `deletions` and the `errors`, each list only if
        /// any.
        mutating func addOutcome(
            saved: [String], as savedField: String, deleted: [String], errors: [(name: String, code: SyncError.Code)]
        ) {
            add("saved", count: saved.count)
            add("deleted", count: deleted.count)
            add("failed", count: errors.count)
            if !saved.isEmpty { addList(savedField, saved) }
            if !deleted.isEmpty { addList("deletions", deleted) }
            addErrors(errors)
        }

        /// A `batchSaved` entry described without its log.
        mutating func add(_ outline: DeviceEntry.BatchSavedOutline) {
            let failures = Array(outline.failedSaves) + Array(outline.failedDeletes)
            for id in failures.map(\.key) { note(id) }
            addOutcome(
                saved: outline.saved.map { saved in
                    switch saved {
                    case .prepared(let index): "prepared:\(index)"
                    case .whole(let id): note(id)
                    }
                },
                as: "records", deleted: outline.deleted.map { note($0) },
                errors: failures.map { (name: $0.key.recordName, code: $0.value.code) })
        }

        mutating func add(_ entry: DeviceEntry) {
            switch entry {
            case .pendingRecordZoneChangesAdded(let changes), .pendingRecordZoneChangesRemoved(let changes):
                add("count", count: changes.count)
                addList(
                    "changes",
                    changes.map { change in
                        switch change {
                        case .saveRecord(let id): "save:" + note(id)
                        case .deleteRecord(let id): "delete:" + note(id)
                        }
                    })
            case .pendingDatabaseChangesAdded(let changes), .pendingDatabaseChangesRemoved(let changes):
                add("count", count: changes.count)
                addList(
                    "changes",
                    changes.map { change in
                        switch change {
                        case .saveZone(let zone): "save:" + note(zone.zoneID)
                        case .deleteZone(let id): "delete:" + note(id)
                        }
                    })
            case .untrackedChangesFlagged(let flag):
                add("pending", flag)
            case .batchPrepared(let recordsToSave, let recordIDsToDelete, let atomicByZone, let requestID):
                add("count", count: recordsToSave.count + recordIDsToDelete.count)
                addList(
                    "changes",
                    recordsToSave.map { "save:" + note($0.recordID) } + recordIDsToDelete.map { "delete:" + note($0) })
                add("atomic", atomicByZone)
                if let requestID { add("request", .text(requestID.rawValue)) }
                addAssets(of: recordsToSave)
            case .batchResult(let saved, let deleted, let failedSaves, let failedDeletes):
                let failures = Array(failedSaves) + Array(failedDeletes)
                for id in failures.map(\.key) { note(id) }
                addOutcome(
                    saved: saved.map { note($0.recordID) }, as: "records", deleted: deleted.map { note($0) },
                    errors: failures.map { (name: $0.key.recordName, code: $0.value.code) })
                addAssets(of: saved)
            case .databaseChangesSent(let savedZones, let deletedZoneIDs, let failedZoneSaves, let failedZoneDeletes):
                let failures = Array(failedZoneSaves) + Array(failedZoneDeletes)
                addOutcome(
                    saved: savedZones.map { note($0.zoneID) }, as: "zones", deleted: deletedZoneIDs.map { note($0) },
                    errors: failures.map { (name: note($0.key), code: $0.value.code) })
            case .sendStarted(let context):
                add("reason", .text("\(context.reason)"))
                switch context.options.scope {
                case .all: add("scope", .text("all"))
                case .zoneIDs(let ids): addScope("zoneIDs", ids.map { note($0) })
                case .allExcluding(let ids): addScope("allExcluding", ids.map { note($0) })
                case .recordIDs(let ids): addScope("recordIDs", ids.map { note($0) })
                }
            case .sendFinished(let error), .fetchFinished(let error):
                if let error { add("error", .text(error.code.name)) }
            case .fetchStarted(let context):
                add("reason", .text("\(context.reason)"))
                switch context.options.scope {
                case .all: add("scope", .text("all"))
                case .zoneIDs(let ids): addScope("zoneIDs", ids.map { note($0) })
                case .allExcluding(let ids): addScope("allExcluding", ids.map { note($0) })
                }
                let prioritized = context.options.prioritizedZoneIDs
                if !prioritized.isEmpty { addList("prioritized", prioritized.map { note($0) }) }
                // F72: only what differs from the default configuration.
                let defaultConfiguration = context.options.defaultZoneConfiguration
                if defaultConfiguration != SyncEngine.FetchChangesOptions.ZoneConfiguration() {
                    add("zoneDefault", .text(DeviceEntryDescription.compact(defaultConfiguration)))
                }
                let zones = context.options.zoneConfigurations.sorted { $0.key.description < $1.key.description }
                if !zones.isEmpty {
                    addList("zoneConfigs", zones.map { note($0.key) + ":" + DeviceEntryDescription.compact($0.value) })
                }
            case .databaseChangesFetched(let modifications, let deletions, let changeToken, let moreComing):
                add("modified", count: modifications.count)
                add("deleted", count: deletions.count)
                if !modifications.isEmpty { addList("zones", modifications.map { note($0) }) }
                if !deletions.isEmpty {
                    addList("deletions", deletions.map { "\(note($0.zoneID)):\($0.reason)" })
                }
                add("token", .integer(changeToken.offset.rawValue))
                add("moreComing", moreComing)
            case .zoneChangesFetched(let zoneID, let modifications, let deletions, let changeToken, let moreComing):
                addZone(zoneID)
                add("modified", count: modifications.count)
                add("deleted", count: deletions.count)
                if !modifications.isEmpty {
                    addList(
                        "records",
                        modifications.map { record in
                            note(record.recordID)
                            return record.recordID.recordName
                        })
                }
                if !deletions.isEmpty {
                    addList(
                        "deletions",
                        deletions.map { deletion in
                            note(deletion.recordID)
                            return deletion.recordID.recordName
                        })
                }
                add("token", .integer(changeToken.offset.rawValue))
                add("moreComing", moreComing)
                addAssets(of: modifications)
            case .zoneFetchFinished(let zoneID, let error):
                addZone(zoneID)
                if let error { add("error", .text(error.code.name)) }
            case .changeTokenReset(let zoneID):
                if let zoneID { addZone(zoneID) }
            case .eventsDelivered(let through):
                add("through", .integer(through.rawValue))
            case .accountChanged(let previous, let current):
                if let current { add("user", .text(current.recordName)) }
                if let previous { add("previous", .text(previous.recordName)) }
            case .subscriptionEnsured(let subscriptionID):
                add("subscription", .text(subscriptionID.rawValue))
            case .pushReceived(let zoneID):
                if let zoneID { addZone(zoneID) }
            case .syncScheduled(let work, let cause, let after):
                add("work", .text(work.description))
                add("after", .text(DeviceEntryDescription.duration(after)))
                switch cause {
                case .localChanges: add("cause", .text("localChanges"))
                case .pushHint: add("cause", .text("pushHint"))
                case .catchUp: add("cause", .text("catchUp"))
                case .retry(let failures, _, let serverRetryAfter):
                    add("cause", .text("retry"))
                    add("failures", count: failures)
                    add("serverRetryAfter", serverRetryAfter)
                }
            case .syncDeferred(let reason):
                add("reason", .text(reason))
            }
        }

        mutating func addScope(_ name: String, _ ids: [String]) {
            add("scope", .text(name))
            addList("scopeIDs", ids)
        }
    }

    /// A zone configuration (F72) in one word or two: `noAssets`, `limit10`, `noAssets+limit10`,
    /// or `default`.
    static func compact(_ configuration: SyncEngine.FetchChangesOptions.ZoneConfiguration) -> String {
        var parts: [String] = []
        if !configuration.shouldFetchAssetContents { parts.append("noAssets") }
        if let limit = configuration.resultsLimit { parts.append("limit\(limit)") }
        return parts.isEmpty ? "default" : parts.joined(separator: "+")
    }

    /// `items` unchanged when there are at most `listLimit`, else the first `listLimit - 1`
    /// and `…+N` for the `N` others.
    static func shortened(_ items: [String]) -> [String] {
        guard items.count > listLimit else { return items }
        return Array(items.prefix(listLimit - 1)) + ["…+\(items.count - (listLimit - 1))"]
    }

    /// A wait as whole milliseconds (`500ms`, `1500ms`) or, when it is whole seconds, seconds (`2s`).
    static func duration(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}
