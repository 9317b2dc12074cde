import Foundation
import LogStore
import SyncModel

/// What replaying a device log against a server found: every recorded request, whether it was
/// re-issued, and where the server's answers differ from the recorded ones.
///
/// Made by `DeviceLog/replay(against:through:)` (or `ServerReplay/run(against:through:)`).
/// ``description`` is a readable summary, one line per mismatch and per request that could not
/// be compared.
///
/// ```swift
/// let report = try await deviceLog.replay(against: freshServer.database(for: "alice"))
/// if let first = report.firstMismatch {
///     print(first)   // offset 14 (batchResult), modifyRecords [record "n1" in zone "Notes"], …
/// }
/// ```
public struct ServerReplayReport: Sendable, Hashable, CustomStringConvertible {
    /// The last entry replayed: the `through` offset asked for, else the log's last entry
    /// (`.zero` for an empty log).
    public var through: LogOffset
    /// Every request the recorded entries show the engine made, in log order, with its verdict:
    /// re-issued and compared, or not comparable and why.
    public var requests: [ServerReplayRequest]
    /// Every difference between a recorded answer and the replayed one, in log order (several
    /// per request when several items differ).
    public var mismatches: [ServerReplayMismatch]

    /// What the device would hold at the end of the replay: the last version of each record
    /// the replayed server gave it (in a save's answer, a conflict's server record or a fetched
    /// page), deleted ones left out, in ID order.
    public var heldRecords: [Record]

    /// In a replay seeded from a server's side (``ServerSide``): how many of its entries were
    /// put into the fresh server (the others' writes, not re-issued); `nil` when not seeded.
    public var seededEntries: Int?
    /// In a replay seeded from a server's side: the entries a re-issued request appended that
    /// differ from the server side's at the same offset, in log order.
    public var entryMismatches: [ServerSideEntryMismatch] = []

    /// Creates a report; only a replay does.
    init(
        through: LogOffset, requests: [ServerReplayRequest], mismatches: [ServerReplayMismatch],
        heldRecords: [Record] = []
    ) {
        self.through = through
        self.requests = requests
        self.mismatches = mismatches
        self.heldRecords = heldRecords
    }

    /// The earliest difference: where the fresh server's history first departs from the
    /// recorded one, or `nil` when every compared answer matched.
    public var firstMismatch: ServerReplayMismatch? { mismatches.first }

    /// Whether every compared answer matched (requests that are not comparable aside).
    public var matches: Bool { mismatches.isEmpty && entryMismatches.isEmpty }

    /// The requests sent to the server during the replay.
    public var reissued: [ServerReplayRequest] { requests.filter(\.reissued) }

    /// The requests whose recorded answer could not be compared, each with its reason.
    public var notComparable: [ServerReplayRequest] {
        requests.filter { if case .notComparable = $0.verdict { true } else { false } }
    }

    /// A summary line, then one line per mismatch and per request that is not comparable, such as
    ///
    /// ```
    /// replayed entries 1...42: 12 requests, 11 re-issued: 10 matched, 1 mismatched, 1 not comparable
    ///   mismatch at offset 14 (batchResult), modifyRecords [record "n1" in zone "Notes"], record "n1" …
    ///   not comparable at offset 20 (batchResult), modifyRecords […]: every item failed with networkFailure (4), …
    /// ```
    public var description: String {
        let matched = requests.filter { $0.verdict == .matched }.count
        let mismatched = requests.filter { $0.verdict == .mismatched }.count
        var lines = [
            "replayed entries 1...\(through): \(requests.count) request\(requests.count == 1 ? "" : "s"), "
                + "\(reissued.count) re-issued: \(matched) matched, \(mismatched) mismatched, \(notComparable.count) not comparable"
        ]
        if let seededEntries {
            lines.append(
                "  seeded from the server's side: \(seededEntries) entr\(seededEntries == 1 ? "y" : "ies") of other writers; "
                    + (entryMismatches.isEmpty
                        ? "the re-issued requests' entries equal the server side's"
                        : "\(entryMismatches.count) entr\(entryMismatches.count == 1 ? "y differs" : "ies differ") from the server side's")
            )
            for mismatch in entryMismatches { lines.append("  entry mismatch: \(mismatch)") }
            for request in requests where request.kind == .modifyRecords && request.reissued {
                lines.append("  re-issued at \(request)")
            }
            for record in heldRecords {
                lines.append(
                    "  the device holds at the end: \(DeviceStateReport.record(record.recordID))  \(DeviceStateReport.recordSummary(record))"
                )
            }
        }
        var notComparableIndex = notComparable.makeIterator()
        var mismatchIndex = mismatches.makeIterator()
        var nextNotComparable = notComparableIndex.next()
        var nextMismatch = mismatchIndex.next()
        // Both lists are in log order: merge them so the lines read as a timeline.
        while nextNotComparable != nil || nextMismatch != nil {
            if let mismatch = nextMismatch, nextNotComparable.map({ mismatch.offset <= $0.offset }) ?? true {
                lines.append("  mismatch at \(mismatch)")
                nextMismatch = mismatchIndex.next()
            } else if let request = nextNotComparable {
                lines.append("  not comparable at \(request)")
                nextNotComparable = notComparableIndex.next()
            }
        }
        return lines.joined(separator: "\n")
    }
}

/// One request a device log shows the engine made, as a replay handled it.
///
/// A request is named by the entry holding its recorded answer (``offset``): the `batchResult`
/// of a record batch (its `batchPrepared` is ``preparedOffset``), the `databaseChangesSent` of
/// zone changes, the `databaseChangesFetched` or `zoneChangesFetched` of a fetched page, and for
/// a fetch that failed, the `zoneFetchFinished`, `fetchFinished` or `changeTokenReset` that
/// recorded its error.
public struct ServerReplayRequest: Sendable, Hashable, CustomStringConvertible {
    /// The server operation, named as the `CloudDatabase` method that performs it.
    public enum Kind: String, Sendable, Hashable, CustomStringConvertible {
        /// Saves and deletions of records (`batchPrepared` + `batchResult`).
        case modifyRecords
        /// Saves and deletions of zones (`databaseChangesSent`).
        case modifyZones
        /// One page of the database's change feed.
        case fetchDatabaseChanges
        /// One page of a zone's change feed.
        case fetchZoneChanges

        /// The operation's name, such as `modifyRecords`.
        public var description: String { rawValue }
    }

    /// How the recorded answer compared with the replayed one.
    public enum Verdict: Sendable, Hashable, CustomStringConvertible {
        /// Every compared item matched.
        case matched
        /// At least one item differs; the report's ``ServerReplayReport/mismatches`` at this
        /// request's offset say which.
        case mismatched
        /// The recorded answer says nothing about the server's rules (a transport failure, a
        /// cancellation, a request whose answer was never recorded…), or the replay cannot
        /// reproduce the conditions it was given in; `reason` says which.
        case notComparable(reason: String)

        /// `matched`, `mismatched` or `not comparable: <reason>`.
        public var description: String {
            switch self {
            case .matched: "matched"
            case .mismatched: "mismatched"
            case .notComparable(let reason): "not comparable: \(reason)"
            }
        }
    }

    /// The offset of the entry holding the recorded answer.
    public var offset: LogOffset
    /// The kind of that entry, such as `batchResult`.
    public var entry: String
    /// For a record batch, the offset of its `batchPrepared` entry (which holds the request).
    public var preparedOffset: LogOffset?
    /// The operation.
    public var kind: Kind
    /// The records or zones the request named: saves then deletions for a modify request, the
    /// zone for a zone fetch, nothing for a database fetch.
    public var items: [SyncError.ItemID]
    /// Whether the replay sent the request to the server.
    public var reissued: Bool
    /// How the answers compared.
    public var verdict: Verdict
    /// Remarks on items left out of the comparison (a recorded transport failure) or on change
    /// tags the replay could not translate, and in a replay seeded from a server's side each
    /// record the request sent (`sent Notes/n1  Note  tag 12  title=…`); empty when there are none.
    public var notes: [String]

    /// `offset 14 (batchResult), modifyRecords [record "n1" in zone "Notes"]`: where and what.
    public var subject: String {
        Self.subject(offset: offset, entry: entry, kind: kind, items: items)
    }

    /// The subject line of a request: the offset, the entry's kind, the operation and the items
    /// (the first four, then how many more).
    static func subject(offset: LogOffset, entry: String, kind: Kind, items: [SyncError.ItemID]) -> String {
        var text = "offset \(offset) (\(entry)), \(kind)"
        if !items.isEmpty {
            let shown = items.prefix(4).map(\.description).joined(separator: ", ")
            text += " [\(shown)" + (items.count > 4 ? " and \(items.count - 4) more]" : "]")
        }
        return text
    }

    /// The subject, the verdict and the notes on one line.
    public var description: String {
        var text = "\(subject): \(verdict)"
        if !notes.isEmpty { text += " (\(notes.joined(separator: "; ")))" }
        return text
    }
}

/// A difference between a recorded answer and the server's answer to the same request replayed.
///
/// ```swift
/// let mismatch = try #require(report.firstMismatch)
/// mismatch.offset     // the recorded batchResult
/// mismatch.item       // .record(n1)
/// mismatch.recorded   // .failed(serverRecordChanged …)
/// mismatch.replayed   // .saved(Note …)
/// ```
public struct ServerReplayMismatch: Sendable, Hashable, CustomStringConvertible {
    /// The offset of the entry holding the recorded answer.
    public var offset: LogOffset
    /// The kind of that entry, such as `batchResult`.
    public var entry: String
    /// The operation.
    public var kind: ServerReplayRequest.Kind
    /// The records or zones the request named (see ``ServerReplayRequest/items``).
    public var requestItems: [SyncError.ItemID]
    /// The record or zone whose outcome differs, or `nil` for the answer as a whole (a
    /// whole-request failure on one side, or `moreComing`).
    public var item: SyncError.ItemID?
    /// What the recorded answer said about ``item``.
    public var recorded: ServerReplayOutcome
    /// What the replayed answer said about it.
    public var replayed: ServerReplayOutcome

    /// One line: where, which request, which item, the recorded and the replayed outcome, such as
    /// `offset 14 (batchResult), modifyRecords [record "n1" in zone "Notes"], record "n1" in zone
    /// "Notes": recorded failed serverRecordChanged (14) (server has Note {title: "A"}), replayed
    /// saved Note {title: "B"}`; `the answer` stands for ``item`` `nil`.
    public var description: String {
        ServerReplayRequest.subject(offset: offset, entry: entry, kind: kind, items: requestItems)
            + ", \(item.map { "\($0)" } ?? "the answer"): recorded \(recorded), replayed \(replayed)"
    }
}

/// What one answer said about one item (or about the answer as a whole), as a replay compares it.
///
/// The replay compares outcomes by content, not with `==`: records by type, fields and parent
/// (never their system fields: change tags, dates and users are the server's own), errors by
/// code (and a conflict's server record by content), zones by capabilities.
public enum ServerReplayOutcome: Sendable, Hashable, CustomStringConvertible {
    /// The record was saved; the server's copy.
    case saved(Record)
    /// The record or zone was deleted by the request.
    case deleted
    /// The zone was saved; the server's copy.
    case zoneSaved(RecordZone)
    /// The item failed, or the request as a whole did (for ``ServerReplayMismatch/item`` `nil`).
    case failed(SyncError)
    /// A fetched page holds the record as modified, in this state.
    case modified(Record)
    /// A fetched page holds the record as deleted, with its type.
    case recordDeleted(Record.RecordType)
    /// A fetched page of the database's feed lists the zone as modified.
    case zoneModified
    /// A fetched page of the database's feed lists the zone as deleted, for this reason.
    case zoneDeleted(ZoneDeletionReason)
    /// The answer does not mention the item.
    case absent
    /// The page's `moreComing`.
    case moreComing(Bool)
    /// The request was answered with a page (where the other side failed).
    case answered

    /// The error code of ``failed(_:)``, else `nil`.
    public var errorCode: SyncError.Code? {
        if case .failed(let error) = self { error.code } else { nil }
    }

    /// A short rendering: `saved Note {title: "B"}`, `failed serverRecordChanged (14) (server has
    /// Note {title: "A"})`, `absent`, `moreComing true`, …
    public var description: String {
        switch self {
        case .saved(let record): "saved \(ServerReplayOutcome.content(record))"
        case .deleted: "deleted"
        case .zoneSaved(let zone): "saved zone (capabilities 0x\(String(zone.capabilities.rawValue, radix: 16)))"
        case .failed(let error):
            "failed \(error.code)"
                + (error.serverRecord.map { " (server has \(ServerReplayOutcome.content($0)))" } ?? "")
        case .modified(let record): "modified \(ServerReplayOutcome.content(record))"
        case .recordDeleted(let type): "deleted \(type)"
        case .zoneModified: "zone modified"
        case .zoneDeleted(let reason): "zone deleted (\(reason))"
        case .absent: "absent"
        case .moreComing(let more): "moreComing \(more)"
        case .answered: "a page"
        }
    }

    /// A record's compared content on one line: `Note {done: false, title: "Milk"}`, with
    /// `parent …` when it has one.
    static func content(_ record: Record) -> String {
        let fields = record.fields.sorted { $0.key < $1.key }.map { "\($0.key): \(render($0.value))" }
        var text = "\(record.recordType) {\(fields.joined(separator: ", "))}"
        if let parent = record.parent { text += " parent \(parent.recordID)" }
        return text
    }

    private static func render(_ value: RecordValue) -> String {
        switch value {
        case .string(let text): String(reflecting: text)
        case .int64(let number): String(number)
        case .double(let number): String(number)
        case .bool(let flag): String(flag)
        case .bytes(let data): "\(data.count) bytes"
        case .date(let date): "\(date.timeIntervalSince1970)s"
        case .reference(let reference): "\(reference)"
        case .asset(let asset): "asset " + asset.compactDescription(withCacheState: true)
        case .location(let location): "location \(location)"
        case .list(let values): "[\(values.map(render).joined(separator: ", "))]"
        case .encrypted(.opened(let plaintext)): "encrypted \(render(plaintext))"
        case .encrypted(.sealed(let sealed)): "sealed(\(sealed))"
        }
    }
}
