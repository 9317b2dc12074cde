import LogStore
import LogSync
import LogSyncServer
import SyncModel

/// The server's side of a device's story, which a replay against a fresh server is seeded from
/// (`logtool replay BUNDLE --against-fresh-server --server SERVERSIDE`): the server's log of the
/// database the device synced with (a server user's log `private` or `shared`, or the same log
/// in a server extract).
///
/// **The walk.** Before each request of the device that the replay re-issues, the server side's
/// entries that precede it and that the device's own requests did not write are appended to the
/// fresh server as they are (kind, payload, time), at the offsets they have in the server's
/// side, so the fresh server's log holds the same entries at the same offsets and its change
/// tags and change tokens (offsets) line up with the recorded ones. Then the device's request is
/// re-issued and its answer compared with the recorded one, as in an unseeded replay.
/// - A record batch is the device's own when the server side holds a `requestOutcome` (or
///   `requestCompleted`) with the request ID of its `batchPrepared`: that entry and the record
///   saves, deletions and client change tokens just before it are the request's commit, which
///   the re-issued request (sent with the same request ID) writes again. Before it, the server
///   side is seeded up to the commit's first entry.
/// - A fetched page is re-issued once the server side is seeded through the recorded page's
///   change token (an offset of the server's log): the page reads what the original read.
/// - Zone changes and subscriptions carry no request ID, so the device's cannot be told from
///   the others': the server side's entries stand for them (seeded in log order) and the
///   device's `databaseChangesSent` is not re-issued (not comparable). Operation groups' entries
///   are seeded too; the replay sends no operation groups.
///
/// **What is compared** besides the answers: the entries a re-issued batch appended must end
/// where the original commit ends, and each must equal the server side's at the same offset:
/// the same kind; a saved record with the same ID, type, fields, parent and change tag; a
/// deletion of the same record and type; a request outcome with the same request ID, saved
/// records (by offset) and other results. A request outcome's fingerprint (a hash of the
/// request's bytes, which the replay rebuilds) and the entries' times are not compared.
/// Differences are ``ServerSideEntryMismatch``es in the report (``ServerReplayReport/entryMismatches``).
///
/// A server side that does not fit the device's log (another user's, offsets that do not line
/// up) stops the replay with ``DiagnosticsError/Code/serverSideMismatch`` naming the offset.
public struct ServerSide: Sendable {
    /// The server's log of the device's database.
    public let log: Log
    /// The offset of the log's entry 1 in the server's log, minus one (an extract of a range
    /// from N holds N−1 here); a replay can be seeded only from a log that starts at 1.
    public let baseOffset: UInt64

    /// A server side read from `log`.
    public init(log: Log, baseOffset: UInt64 = 0) {
        self.log = log
        self.baseOffset = baseOffset
    }
}

/// An entry a re-issued request appended to the seeded fresh server that differs from the server
/// side's entry at the same offset (see ``ServerSide``).
public struct ServerSideEntryMismatch: Sendable, Hashable, CustomStringConvertible {
    /// The device log's entry whose request was re-issued.
    public var deviceOffset: LogOffset
    /// The offset in the server's log.
    public var serverOffset: LogOffset
    /// What differs.
    public var reason: String

    /// `server entry 12 (for the request at offset 8): …`.
    public var description: String {
        "server entry \(serverOffset) (for the request at offset \(deviceOffset)): \(reason)"
    }
}

/// Seeds a fresh server from a ``ServerSide`` as a replay walks a device log.
final class ServerSideSeeder: @unchecked Sendable {
    let side: ServerSide
    let server: SyncServer
    let user: UserID
    let scope: DatabaseScope
    /// The commit of each of the device's requests in the server side: request ID → its first
    /// and last offsets.
    private(set) var commits: [RequestID: ClosedRange<LogOffset>] = [:]
    /// The device's commits, in log order.
    private var own: [ClosedRange<LogOffset>] = []
    /// The next offset of the server side not in the fresh server yet.
    private(set) var next = LogOffset.first
    /// The server side's last offset.
    let end: LogOffset
    /// How many entries were seeded.
    private(set) var seeded = 0
    private(set) var mismatches: [ServerSideEntryMismatch] = []

    /// Reads the server side, finding the commits of `requestIDs` (the device's).
    init(
        side: ServerSide, requestIDs: Set<RequestID>, server: SyncServer, user: UserID, scope: DatabaseScope
    ) throws(DiagnosticsError) {
        self.side = side
        self.server = server
        self.user = user
        self.scope = scope
        let log = side.log
        guard side.baseOffset == 0 else {
            throw DiagnosticsError.serverReplay(
                .serverSideMismatch,
                "the server's side starts at offset \(side.baseOffset + 1) of the server's log; a fresh server can be seeded only from a side that starts at 1",
                offset: LogOffset(side.baseOffset + 1))
        }
        var kinds: [EntryKind] = []
        var end = LogOffset.zero
        var commits: [RequestID: ClosedRange<LogOffset>] = [:]
        var own: [ClosedRange<LogOffset>] = []
        do {
            try log.forEachEntry { entry in
                guard entry.offset == end.next else {
                    throw DiagnosticsError.serverReplay(
                        .serverSideMismatch,
                        "the server's side skips from offset \(end) to \(entry.offset)", offset: entry.offset)
                }
                end = entry.offset
                kinds.append(entry.kind)
                guard ServerEntry.Kind.completesRequest(entry.kind) else { return }
                let requestID: RequestID
                switch try ServerEntry(entry) {
                case .requestCompleted(let id, _, _, _), .requestOutcome(let id, _, _, _): requestID = id
                default: return
                }
                guard requestIDs.contains(requestID) else { return }
                // The commit: the record entries and client tokens just before its outcome.
                var first = entry.offset
                while first.rawValue > 1, Self.inCommit(kinds[Int(first.rawValue) - 2]) {
                    first = LogOffset(first.rawValue - 1)
                }
                commits[requestID] = first...entry.offset
                own.append(first...entry.offset)
            }
        } catch let error as DiagnosticsError {
            throw error
        } catch let error as LogStoreError {
            throw DiagnosticsError.reading(error, at: nil, of: log)
        } catch {
            throw DiagnosticsError.serverReplay(
                .unreadableLog, "reading the server's side in \(log.environment.path) failed: \(error)")
        }
        self.end = end
        self.commits = commits
        self.own = own
        if !requestIDs.isEmpty, commits.isEmpty {
            throw DiagnosticsError.serverReplay(
                .serverSideMismatch,
                "the server's side in \(log.environment.path) (log \"\(log.name)\", offsets 1...\(end)) holds none of the device's \(requestIDs.count) record requests: another user's or another database's log"
            )
        }
    }

    /// The kinds a modify request's commit holds before its outcome.
    static func inCommit(_ kind: EntryKind) -> Bool {
        kind == ServerEntry.Kind.recordSaved || kind == ServerEntry.Kind.recordDeleted
            || kind == ServerEntry.Kind.clientChangeTokenUpdated
    }

    /// Seeds the server side's entries from ``next`` through `limit` (or its end), stopping before
    /// the device's own commits, which its re-issued requests write.
    func seed(through limit: LogOffset, at deviceOffset: LogOffset) throws(DiagnosticsError) {
        let last = min(limit, end)
        guard next <= last else { return }
        var stop = last
        if let commit = own.first(where: { $0.upperBound >= next }), commit.lowerBound <= last {
            stop = LogOffset(commit.lowerBound.rawValue - 1)
        }
        guard next <= stop else { return }
        var entries: [LogEntry] = []
        do {
            entries = try read(next...stop)
        } catch let error as LogStoreError {
            throw DiagnosticsError.reading(error, at: next, of: side.log)
        } catch {
            throw DiagnosticsError.serverReplay(
                .unreadableLog, "reading the server's side failed: \(error)", offset: next)
        }
        try append(entries, at: deviceOffset)
        next = stop.next
    }

    private func append(_ entries: [LogEntry], at deviceOffset: LogOffset) throws(DiagnosticsError) {
        do {
            try server.appendRecordedEntries(entries, of: user, scope: scope)
        } catch {
            throw DiagnosticsError.serverReplay(
                .serverSideMismatch,
                "seeding the fresh server with the server side's entries \(entries.first?.offset ?? .zero)...\(entries.last?.offset ?? .zero) failed: \(error)",
                offset: deviceOffset)
        }
        seeded += entries.count
    }

    /// Before the device's request `requestID` (its `batchPrepared` at `deviceOffset`) is
    /// re-issued: seeds what precedes its commit and returns the commit, or `nil` when the
    /// server side holds no such request.
    func prepare(
        _ requestID: RequestID?, at deviceOffset: LogOffset
    ) throws(DiagnosticsError) -> ClosedRange<
        LogOffset
    >? {
        guard let requestID, let commit = commits[requestID] else { return nil }
        // A retry of a request whose commit is in already: the fresh server answers it from
        // its outcome (F160), appending nothing.
        if next > commit.upperBound { return nil }
        try seed(through: LogOffset(commit.lowerBound.rawValue - 1), at: deviceOffset)
        guard next == commit.lowerBound else {
            throw DiagnosticsError.serverReplay(
                .serverSideMismatch,
                "the server's side holds \(requestID) at offsets \(commit.lowerBound)...\(commit.upperBound), but the fresh server's log is seeded only through \(next.rawValue - 1): the device's requests reached the server in another order",
                offset: deviceOffset)
        }
        return commit
    }

    /// A request of the device that the replay does not re-issue (a transport failure, an
    /// answer never recorded): its commit, if the server side holds one, is seeded as it is.
    func seedCommit(of requestID: RequestID?, at deviceOffset: LogOffset) throws(DiagnosticsError) {
        guard let commit = try prepare(requestID, at: deviceOffset) else { return }
        let entries: [LogEntry]
        do {
            entries = try read(commit)
        } catch {
            throw DiagnosticsError.serverReplay(
                .unreadableLog, "reading the server's side failed: \(error)", offset: commit.lowerBound)
        }
        try append(entries, at: deviceOffset)
        next = commit.upperBound.next
    }

    /// The server side's entries at `offsets`.
    private func read(_ offsets: ClosedRange<LogOffset>) throws -> [LogEntry] {
        var cursor = try side.log.entries(from: offsets.lowerBound, through: offsets.upperBound)
        var entries: [LogEntry] = []
        while let entry = try cursor.next() { entries.append(entry) }
        return entries
    }

    /// After the device's request was re-issued: checks that it appended its commit's entries at
    /// the same offsets, and compares them with the server side's.
    func check(_ commit: ClosedRange<LogOffset>, at deviceOffset: LogOffset) throws(DiagnosticsError) {
        let freshEnd: LogOffset
        let fresh: [LogEntry]
        let recorded: [LogEntry]
        do {
            freshEnd = try server.lastOffset(of: user, scope: scope)
            fresh = try server.recordedEntries(of: user, scope: scope, at: commit)
            var cursor = try side.log.entries(from: commit.lowerBound, through: commit.upperBound)
            var entries: [LogEntry] = []
            while let entry = try cursor.next() { entries.append(entry) }
            recorded = entries
        } catch {
            throw DiagnosticsError.serverReplay(
                .unreadableLog, "reading the entries \(commit.lowerBound)...\(commit.upperBound) failed: \(error)",
                offset: deviceOffset)
        }
        guard freshEnd == commit.upperBound else {
            throw DiagnosticsError.serverReplay(
                .serverSideMismatch,
                "the re-issued request appended the fresh server's entries \(commit.lowerBound)...\(freshEnd), but its commit in the server's side is \(commit.lowerBound)...\(commit.upperBound): the offsets do not line up from offset \(min(freshEnd, commit.upperBound).next)",
                offset: deviceOffset)
        }
        for (a, b) in zip(recorded, fresh) {
            if let reason = Self.difference(a, b) {
                mismatches.append(
                    ServerSideEntryMismatch(deviceOffset: deviceOffset, serverOffset: a.offset, reason: reason))
            }
        }
        next = commit.upperBound.next
    }

    /// Seeds the rest of the server side: after the walk, so the fresh server ends as the
    /// original did.
    /// Nothing is seeded when the fresh server's log no longer lines up (a policy sent what the
    /// server's side does not hold).
    func finish(at deviceOffset: LogOffset) throws(DiagnosticsError) {
        guard (try? server.lastOffset(of: user, scope: scope)) == LogOffset(next.rawValue - 1) else { return }
        while next <= end {
            let before = next
            try seed(through: end, at: deviceOffset)
            if next == before, let commit = own.first(where: { $0.lowerBound == next }) {
                // A commit of the device's that the replay did not re-issue: its entries as they are.
                do {
                    var cursor = try side.log.entries(from: commit.lowerBound, through: commit.upperBound)
                    var entries: [LogEntry] = []
                    while let entry = try cursor.next() { entries.append(entry) }
                    try append(entries, at: deviceOffset)
                } catch let error as DiagnosticsError {
                    throw error
                } catch {
                    throw DiagnosticsError.serverReplay(
                        .unreadableLog, "reading the server's side failed: \(error)", offset: commit.lowerBound)
                }
                next = commit.upperBound.next
            } else if next == before {
                break
            }
        }
    }

    /// Why two entries at the same offset differ, or `nil` (see ``ServerSide``).
    static func difference(_ recorded: LogEntry, _ replayed: LogEntry) -> String? {
        guard recorded.kind == replayed.kind else {
            return "recorded \(kindName(recorded.kind)), replayed \(kindName(replayed.kind))"
        }
        let a: ServerEntry
        let b: ServerEntry
        do {
            a = try ServerEntry(recorded)
            b = try ServerEntry(replayed)
        } catch {
            return "cannot decode: \(error)"
        }
        switch (a, b) {
        case (.recordSaved(let x), .recordSaved(let y)):
            if !ServerReplayWalk<InProcessDatabase>.sameContent(x, y) {
                return "recorded \(DeviceStateReport.record(x.recordID)) \(x.fields), replayed \(y.fields)"
            }
            if x.recordChangeTag != y.recordChangeTag {
                return "change tag recorded \(x.recordChangeTag ?? "none"), replayed \(y.recordChangeTag ?? "none")"
            }
            return nil
        case (.requestOutcome(let idA, _, let outA, let actorA), .requestOutcome(let idB, _, let outB, let actorB)):
            if idA != idB { return "request ID recorded \(idA), replayed \(idB)" }
            if outA.saved != outB.saved { return "the saved records differ" }
            if outA.others.deleteResults.keys.sorted(by: { $0.description < $1.description })
                != outB.others.deleteResults.keys.sorted(by: { $0.description < $1.description })
                || Set(outA.others.saveResults.keys) != Set(outB.others.saveResults.keys)
            {
                return "the failed saves or deletions differ"
            }
            if actorA != actorB { return "actor recorded \(actorA), replayed \(actorB)" }
            return nil
        case (.requestCompleted(let idA, _, _, _), .requestCompleted(let idB, _, _, _)):
            return idA == idB ? nil : "request ID recorded \(idA), replayed \(idB)"
        default:
            return a == b ? nil : "recorded \(a), replayed \(b)"
        }
    }

    static func kindName(_ kind: EntryKind) -> String {
        ServerEntry.Kind.named.first { $0.kind == kind }?.name ?? "kind \(kind.rawValue)"
    }
}
