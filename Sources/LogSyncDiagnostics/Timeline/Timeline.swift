import LogStore
import LogSync
import LogSyncServer
import ModelEntries
import SyncModel

/// Several devices' logs and their server's log on one timeline, each device step placed
/// against the server offsets it saw or caused: what `logtool timeline` draws.
///
/// ```swift
/// let timeline = try Timeline.build(
///     devices: [.init(name: "phone", log: phoneLog), .init(name: "laptop", log: laptopLog)],
///     server: .init(name: "server", log: serverLog))
/// let conflict = timeline.steps.first { $0.marks.contains(.conflict) }
/// try timeline.html().write(to: url, atomically: true, encoding: .utf8)
/// ```
///
/// **Lanes.** The server's lane first (when a server log is given), then one per device, in
/// the order given.
///
/// **Links to the server.** Change tokens are offsets in the server's log, and a batch's request
/// ID is in both logs (`batchPrepared request=` and the server's `requestOutcome request=`, or
/// `requestCompleted request=` in logs written before `requestOutcome`):
/// - a `batchPrepared` and its `batchResult` point to the server entries of the request: the
///   `requestOutcome` (or `requestCompleted`) and the record entries committed with it (they
///   share its time);
/// - a fetched page (`databaseChangesFetched`, `zoneChangesFetched`) spans the server offsets
///   it read: after the token the device held for that feed, through the page's token.
///
/// **Order.** Steps are merged into one order (``Step/column``): each log's own order, a
/// request's server entries after its `batchPrepared`, a `batchResult` after its request's
/// `requestOutcome` (or `requestCompleted`), a page after the server entry its token names; otherwise by time (the
/// logs of one process share a clock; logs from different machines are only as comparable as
/// their clocks, and the links still hold).
///
/// **Marks.** `conflict` (a save refused with `serverRecordChanged`, on the device and on the
/// server), `retry` (a scheduled retry, a send or fetch that ended with an error), `push` (a
/// push hint received) and `account` (an account change).
public struct Timeline: Sendable {
    /// A log to draw, and the name of its lane.
    public struct Source: Sendable {
        public var name: String
        public var log: Log
        public init(name: String, log: Log) {
            self.name = name
            self.log = log
        }
    }

    /// One lane of the picture.
    public struct Lane: Sendable, Hashable {
        /// Whose log it is.
        public enum Role: String, Sendable, Hashable {
            case server, device
        }
        public var name: String
        public var role: Role
        /// The log's environment directory and its name in it.
        public var path: String
        public var logName: String
        /// The log's last offset when it was read.
        public var lastOffset: LogOffset
    }

    /// What a step is about, for its colour and shape.
    public enum Category: String, Sendable, Hashable, CaseIterable {
        /// The app's edits of the engine's state.
        case edit
        /// A send: its start, batch, answer and end.
        case send
        /// A fetch: its start, pages and end.
        case fetch
        /// A push hint received.
        case push
        /// An account change or the subscription.
        case account
        /// A scheduling decision.
        case schedule
        /// How far the app has handled events.
        case delivery
        /// A server change: a zone or record saved or deleted, a subscription, a token.
        case change
        /// A server's record of a completed request.
        case request
        /// Anything else.
        case other
    }

    /// What a step has that the picture marks.
    public enum Mark: String, Sendable, Hashable, CaseIterable {
        case conflict, retry, push, account
    }

    /// How a device step relates to the server offsets it links to.
    public enum ServerRelation: String, Sendable, Hashable {
        /// The step sent a request that created these entries (`batchPrepared`).
        case sent
        /// The step holds the server's answer recorded in these entries (`batchResult`).
        case answered
        /// The step read these offsets (a fetched page).
        case read
    }

    /// One entry of one log, placed on the timeline.
    public struct Step: Sendable, Hashable {
        /// The step's place in the merged order, from 0, dense across lanes.
        public var column: Int
        /// The index of its lane in ``Timeline/lanes``.
        public var lane: Int
        /// The entry's offset in its own log.
        public var offset: LogOffset
        public var time: EntryTime
        /// The entry's kind name and fields, as `logtool dump` shows them.
        public var kindName: String
        public var fields: [EntryDescription.Field]
        public var category: Category
        public var marks: [Mark]
        /// The request ID, for a `batchPrepared`, a `batchResult` (its batch's) and a
        /// `requestOutcome` or `requestCompleted`.
        public var request: String?
        /// For a device step: the server offsets it sent, answered or read, and how.
        public var serverOffsets: ClosedRange<LogOffset>?
        public var serverRelation: ServerRelation?
        /// The last server offset placed before this step (`.zero` if none): where it stands
        /// against the server's log.
        public var serverPosition: LogOffset
        /// Records (names) the entry is about, for `--record`.
        var recordNames: Set<String>

        /// `kindName  fields` as `logtool dump` writes them after the size.
        public var summary: String {
            fields.isEmpty ? kindName : kindName + "  " + EntryFormatter.fieldsText(fields)
        }
    }

    public var lanes: [Lane]
    /// Every step kept, in column order.
    public var steps: [Step]
    /// The server offsets shown (`--from`/`--to`), when bounded.
    public var serverRange: ClosedRange<LogOffset>?
    /// The record the timeline was narrowed to, if any.
    public var record: String?

    /// What to keep.
    public struct Options: Sendable {
        /// Keep only steps about the record with this name (in any zone): entries that name it,
        /// and the server's entries of requests that saved or deleted it.
        public var record: String?
        /// Keep only server entries with offsets in this range, and device steps placed after
        /// the server entry before `lowerBound` and before the one after `upperBound`.
        public var serverOffsets: ClosedRange<LogOffset>?

        public init(record: String? = nil, serverOffsets: ClosedRange<LogOffset>? = nil) {
            self.record = record
            self.serverOffsets = serverOffsets
        }
    }

    /// Reads every entry of the logs and builds the timeline.
    ///
    /// - Parameters:
    ///   - devices: The device logs (each a log named `device`, opened read-only by a tool).
    ///   - server: The server database's log these devices synced with, if any.
    ///   - options: What to keep.
    ///   - progress: Told of the entries read.
    /// - Throws: ``DiagnosticsError`` `corruptEntry` naming the log and offset of an entry that
    ///   does not decode, `unreadableLog` for a log that cannot be read.
    public static func build(
        devices: [Source], server: Source?, options: Options = Options(), progress: (ProgressEvent) -> Void = { _ in }
    ) throws(DiagnosticsError) -> Timeline {
        var builder = TimelineBuilder()
        var sources: [(Source, Lane.Role)] = []
        if let server { sources.append((server, .server)) }
        sources += devices.map { ($0, .device) }
        var total: UInt64 = 0
        for (source, _) in sources {
            do { total += try source.log.lastOffset.rawValue } catch {
                throw DeviceLogBisect.failure(error, at: nil, of: source.log)
            }
        }
        var done: UInt64 = 0
        // A server log drawn alone within a range of offsets is read in that range only, so the
        // picture of a long log's end costs what its end holds (the operations console's
        // timeline); with devices, the whole log is read, for the links of their steps.
        let range = devices.isEmpty ? options.serverOffsets : nil
        for (source, role) in sources {
            try builder.read(source, role: role, range: role == .server ? range : nil) {
                done += 1
                progress(.entries(done: done, total: total))
            }
        }
        return builder.merge(options: options)
    }
}

/// Reads the logs into raw steps, then merges them (see ``Timeline``).
struct TimelineBuilder {
    struct Raw {
        var lane: Int
        var offset: LogOffset
        var time: EntryTime
        var description: EntryDescription
        var category: Timeline.Category
        var marks: [Timeline.Mark]
        var request: String?
        var serverOffsets: ClosedRange<LogOffset>?
        var relation: Timeline.ServerRelation?
        /// Must come after the server entry at this offset.
        var afterServer: LogOffset?
    }

    var lanes: [Timeline.Lane] = []
    var raws: [[Raw]] = []
    var serverLane: Int?
    /// The server offsets of each request's commit, by request ID.
    var requestOffsets: [String: ClosedRange<LogOffset>] = [:]
    /// The server offsets that saved or deleted a record, by record name.
    var serverRecordOffsets: [String: Set<UInt64>] = [:]

    mutating func read(
        _ source: Timeline.Source, role: Timeline.Lane.Role, range: ClosedRange<LogOffset>? = nil,
        entryRead: () -> Void
    ) throws(DiagnosticsError) {
        let log = source.log
        let lane = lanes.count
        var steps: [Raw] = []
        do {
            lanes.append(
                Timeline.Lane(
                    name: source.name, role: role, path: log.environment.path, logName: log.name,
                    lastOffset: try log.lastOffset))
        } catch {
            throw DeviceLogBisect.failure(error, at: nil, of: log)
        }
        var device = DeviceSide()
        // Entries of one server commit share a time: the records a request saved precede its
        // requestOutcome (requestCompleted in older logs).
        var commitStart: (time: EntryTime, offset: LogOffset)?
        try log.walkEntries(from: range?.lowerBound ?? .first, through: range?.upperBound) {
            (entry) throws(DiagnosticsError) in
            entryRead()
            do throws(LogStoreError) {
                switch role {
                case .device:
                    guard let description = try DeviceEntryDescription.describe(entry, in: log) else {
                        throw LogStoreError(.corruptEntry, "kind \(entry.kind) is not a device entry kind")
                    }
                    steps.append(device.step(try DeviceEntry(entry, in: log), entry, description, lane: lane))
                case .server:
                    guard let description = try ServerEntryDescription.describe(entry) else {
                        throw LogStoreError(.corruptEntry, "kind \(entry.kind) is not a server entry kind")
                    }
                    if commitStart?.time != entry.time { commitStart = (entry.time, entry.offset) }
                    var raw = Raw(
                        lane: lane, offset: entry.offset, time: entry.time, description: description,
                        category: ServerEntry.Kind.completesRequest(entry.kind) ? .request : .change, marks: [])
                    if case .text(let record)? = description["record"] {
                        serverRecordOffsets[record, default: []].insert(entry.offset.rawValue)
                    }
                    if case .text(let request)? = description["request"] {
                        raw.request = request
                        let first = commitStart?.offset ?? entry.offset
                        requestOffsets[request] = first...entry.offset
                        if case .list(let errors)? = description["errors"],
                            errors.contains(where: { $0.hasSuffix(":serverRecordChanged") })
                        {
                            raw.marks.append(.conflict)
                        }
                        if case .list(let errors)? = description["errors"] {
                            for error in errors {
                                let record = String(error.split(separator: ":").first ?? "")
                                serverRecordOffsets[record, default: []].insert(entry.offset.rawValue)
                            }
                        }
                    }
                    steps.append(raw)
                }
            } catch {
                throw DeviceLogBisect.failure(error, at: entry.offset, of: log)
            }
            return true
        }
        if role == .server { serverLane = lane }
        raws.append(steps)
    }

    /// What a device lane tracks while its entries are read: the tokens it holds (to know what
    /// a page read) and its batch's request ID.
    struct DeviceSide {
        var databaseToken: LogOffset?
        var zoneTokens: [RecordZone.ID: LogOffset] = [:]
        var request: String?
        var accountSeen = false

        mutating func step(
            _ entry: DeviceEntry, _ logEntry: LogEntry, _ description: EntryDescription, lane: Int
        ) -> Raw {
            var raw = Raw(
                lane: lane, offset: logEntry.offset, time: logEntry.time, description: description, category: .other,
                marks: [])
            switch entry {
            case .pendingRecordZoneChangesAdded, .pendingRecordZoneChangesRemoved, .pendingDatabaseChangesAdded,
                .pendingDatabaseChangesRemoved, .untrackedChangesFlagged:
                raw.category = .edit
            case .sendStarted, .databaseChangesSent:
                raw.category = .send
            case .sendFinished(let error):
                raw.category = .send
                if error != nil { raw.marks.append(.retry) }
            case .batchPrepared(_, _, _, let requestID):
                raw.category = .send
                request = requestID?.rawValue
                raw.request = request
                raw.relation = .sent
            case .batchResult(_, _, let failedSaves, let failedDeletes):
                raw.category = .send
                raw.request = request
                raw.relation = .answered
                if failedSaves.values.contains(where: { $0.code == .serverRecordChanged }) {
                    raw.marks.append(.conflict)
                }
                if (Array(failedSaves.values) + Array(failedDeletes.values)).contains(where: \.isTransient) {
                    raw.marks.append(.retry)
                }
                request = nil
            case .fetchStarted:
                raw.category = .fetch
            case .fetchFinished(let error), .zoneFetchFinished(_, let error):
                raw.category = .fetch
                if error != nil { raw.marks.append(.retry) }
            case .databaseChangesFetched(_, let deletions, let token, _):
                raw.category = .fetch
                let through = LogOffset(token.offset)
                raw.serverOffsets = Self.read(after: databaseToken, through: through)
                raw.relation = .read
                raw.afterServer = through
                databaseToken = through
                for deletion in deletions { zoneTokens[deletion.zoneID] = nil }
            case .zoneChangesFetched(let zoneID, _, _, let token, _):
                raw.category = .fetch
                let through = LogOffset(token.offset)
                raw.serverOffsets = Self.read(after: zoneTokens[zoneID], through: through)
                raw.relation = .read
                raw.afterServer = through
                zoneTokens[zoneID] = through
            case .changeTokenReset(let zoneID):
                raw.category = .fetch
                raw.marks.append(.retry)
                if let zoneID { zoneTokens[zoneID] = nil } else { databaseToken = nil }
            case .eventsDelivered:
                raw.category = .delivery
            case .accountChanged:
                raw.category = .account
                raw.marks.append(.account)
                if accountSeen {
                    databaseToken = nil
                    zoneTokens = [:]
                }
                accountSeen = true
            case .subscriptionEnsured:
                raw.category = .account
            case .pushReceived:
                raw.category = .push
                raw.marks.append(.push)
            case .syncScheduled(_, let cause, _):
                raw.category = .schedule
                if case .retry = cause { raw.marks.append(.retry) }
            case .syncDeferred:
                raw.category = .schedule
            }
            return raw
        }

        /// The offsets a page read: after the token held (or from the start), through its own.
        static func read(after held: LogOffset?, through token: LogOffset) -> ClosedRange<LogOffset>? {
            guard token > .zero else { return nil }
            let start = held.map { $0 < token ? $0.next : token } ?? .first
            return start...token
        }
    }

    /// Merges the lanes into one order and keeps what `options` asks for.
    mutating func merge(options: Timeline.Options) -> Timeline {
        // Links that need the server: a batch's entries, a result's answer.
        var requestPrepared: [String: (lane: Int, offset: LogOffset)] = [:]
        for lane in raws.indices where lanes[lane].role == .device {
            for index in raws[lane].indices {
                guard let request = raws[lane][index].request, let range = requestOffsets[request] else { continue }
                raws[lane][index].serverOffsets = range
                if raws[lane][index].relation == .answered {
                    raws[lane][index].afterServer = range.upperBound
                } else if requestPrepared[request] == nil {
                    requestPrepared[request] = (lane, raws[lane][index].offset)
                }
            }
        }
        // A server entry of a request comes after the batchPrepared that sent it.
        var serverNeeds: [UInt64: (lane: Int, offset: LogOffset)] = [:]
        for (request, range) in requestOffsets {
            guard let prepared = requestPrepared[request] else { continue }
            for offset in range.lowerBound.rawValue...range.upperBound.rawValue { serverNeeds[offset] = prepared }
        }

        var heads = Array(repeating: 0, count: raws.count)
        var placed: [(lane: Int, index: Int, serverPosition: LogOffset)] = []
        var serverDone = LogOffset.zero
        func isPlaced(_ lane: Int, _ offset: LogOffset) -> Bool {
            heads[lane] > 0 && raws[lane][heads[lane] - 1].offset >= offset
        }
        func ready(_ lane: Int) -> Bool {
            let raw = raws[lane][heads[lane]]
            if let after = raw.afterServer, serverLane != nil, after > serverDone,
                let last = serverLane.map({ lanes[$0].lastOffset }), after <= last
            {
                return false
            }
            if lanes[lane].role == .server, let need = serverNeeds[raw.offset.rawValue],
                !isPlaced(need.lane, need.offset)
            {
                return false
            }
            return true
        }
        while true {
            let open = raws.indices.filter { heads[$0] < raws[$0].count }
            guard !open.isEmpty else { break }
            let candidates = open.filter(ready)
            // Logs that contradict each other (a server log of another database, clocks apart)
            // leave nothing ready: time decides alone then.
            let pool = candidates.isEmpty ? open : candidates
            let lane = pool.min { a, b in
                let ta = raws[a][heads[a]].time
                let tb = raws[b][heads[b]].time
                return ta != tb ? ta < tb : a < b
            }!
            if lanes[lane].role == .server { serverDone = raws[lane][heads[lane]].offset }
            placed.append((lane, heads[lane], serverDone))
            heads[lane] += 1
        }

        var steps: [Timeline.Step] = []
        let recordOffsets = options.record.map { serverRecordOffsets[$0] ?? [] }
        for (lane, index, position) in placed {
            let raw = raws[lane][index]
            let server = lanes[lane].role == .server
            if let range = options.serverOffsets {
                if server {
                    guard range.contains(raw.offset) else { continue }
                } else {
                    guard position.rawValue + 1 >= range.lowerBound.rawValue, position <= range.upperBound else {
                        continue
                    }
                }
            }
            if let record = options.record {
                let about: Bool
                if server {
                    if let offsets = recordOffsets, offsets.contains(raw.offset.rawValue) {
                        about = true
                    } else if let request = raw.request, let range = requestOffsets[request],
                        let offsets = recordOffsets
                    {
                        about = offsets.contains { range.contains(LogOffset($0)) }
                    } else {
                        about = false
                    }
                } else {
                    about = raw.description.mentions(record: record)
                }
                guard about else { continue }
            }
            steps.append(
                Timeline.Step(
                    column: steps.count, lane: lane, offset: raw.offset, time: raw.time,
                    kindName: raw.description.kindName,
                    fields: raw.description.fields, category: raw.category, marks: raw.marks, request: raw.request,
                    serverOffsets: raw.serverOffsets, serverRelation: raw.serverOffsets == nil ? nil : raw.relation,
                    serverPosition: position, recordNames: raw.description.recordNames))
        }
        return Timeline(lanes: lanes, steps: steps, serverRange: options.serverOffsets, record: options.record)
    }
}
