import Foundation
import LogStore
import LogSync
import SyncModel

/// Replays a recorded device log against a server: re-issues, in order, the sends and fetches
/// its entries show the engine made, and compares the server's answers with the recorded ones.
///
/// Run it against a fresh server to ask "would the server's rules give the same answers to this
/// device's requests, had nothing else happened?": on a single device's timeline every answer
/// matches and the fresh server ends with the same records; in a timeline where other devices
/// wrote too, the first mismatch is where the others' writes made the difference (a conflict the
/// fresh server does not see, say). Run it against a server built from another version to find
/// where a change of rules shows.
///
/// ```swift
/// let fresh = try SyncServer(.init(directory: scratch))
/// let report = try await deviceLog.replay(against: fresh.database(for: "alice", device: "replay"))
/// #expect(report.matches, "\(report)")
/// ```
///
/// **What is re-issued.** Each request is rebuilt from the entries:
/// - `batchPrepared` holds a record batch (records with their changed keys and change tags,
///   deletions, `atomicByZone`); it is sent when its `batchResult` is met, with the engine's save
///   policy (`ifServerRecordUnchanged`, the only one it uses; the policy is not recorded) and a
///   request ID of its own (`replay-<offset of batchPrepared>`).
/// - `databaseChangesSent` holds zone saves and deletions with their outcomes; the zones are
///   sent by ID (the server sets their capabilities).
/// - `databaseChangesFetched` and `zoneChangesFetched` are pages: each is fetched again from the
///   token the device held before it, as the fresh server issued it, with a results limit equal
///   to the recorded page's size when more was coming (so pages split at the same places; the
///   engine's own limit is not recorded), else the server's choice. The page the engine appends
///   itself after listing a zone from scratch (the records it knows that the listing left out)
///   is no server answer and is skipped.
/// - A fetch that failed is re-issued from the same token: a `zoneFetchFinished` or
///   `fetchFinished` with an error, and a `changeTokenReset` (a fetch refused with
///   `changeTokenExpired`).
///
/// **Translation.** Server-assigned values differ on another server. Change tags are
/// translated: each recorded record version the replay also gets (saved↔saved, fetched↔fetched,
/// a conflict's server record↔a conflict's server record, matched by record ID) maps the
/// recorded tag to the replayed one, and a later save carrying the recorded tag is sent with the
/// replayed one. A tag with no counterpart is sent as `unmapped-<tag>`, a tag no server holds,
/// and noted on the request. Change tokens are never compared: the replay keeps the device's
/// tokens as the fresh server issued them, following the recorded entries' effects (a page
/// stores its token, a deleted zone or a reset drops one, an account change wipes them).
///
/// **What is compared**, item by item (one ``ServerReplayMismatch`` per differing item):
/// - saves and deletions: success against error code; a saved record's type, fields and parent;
///   a zone's capabilities; a conflict's server record by content;
/// - pages: the records modified (type, fields, parent) and deleted (type) by ID, the zones
///   modified and deleted (with the reason) by ID, and `moreComing`;
/// - failed fetches: the error code, or that the replay got a page instead.
///
/// **What is not compared.** System fields (change tags, dates, creator and modifier) and
/// tokens, which are the server's own; the order of items within an answer. Some recorded
/// outcomes cannot be reproduced, and make a request (or an item) *not comparable* rather than a
/// mismatch, with the reason in the report:
/// - a transport failure, a transient code (F89: network, throttling, `zoneBusy`…), a
///   cancellation or `serverResponseLost`. The original request most likely never reached the
///   server (injected faults do not), so a request whose every item failed so is not re-issued;
///   an item failing so in a request that is re-issued is left out of the comparison.
/// - a `changeTokenExpired` the fresh server does not give: it depends on the original server's
///   tombstone compaction, which the device log does not record.
/// - a batch whose answer was never recorded (the engine stopped before it): the original server
///   may or may not have applied it, so it is not re-issued. Later answers may differ then.
/// - requests recorded while another account than the first one the log records was signed in:
///   the replay stands for one database.
///
/// A replayed request that fails as a whole for a reason that says nothing about the server's
/// rules (a transient code, a cancellation) stops the replay with ``ServerReplayError``.
///
/// Complexity: one pass over the entries, O(entries) reads plus one request per recorded request.
public struct ServerReplay: Sendable {
    /// The log replayed: a device log's entries (kinds 1–99).
    public let log: Log

    /// A replay of `deviceLog`.
    public init(_ deviceLog: DeviceLog) {
        self.log = deviceLog.log
    }

    /// A replay of any log holding device entries, such as one opened without projections by a
    /// tool. An entry that is not a device entry stops the replay as a corrupt entry.
    public init(log: Log) {
        self.log = log
    }

    /// Re-issues the recorded requests of the entries `1...through` against `database`, in log
    /// order, and compares the answers with the recorded ones.
    ///
    /// The log is only read. `database` is written to: give it a fresh server's database (or
    /// one whose history you mean to extend).
    ///
    /// - Parameters:
    ///   - database: The server database to replay against, typically a fresh `SyncServer`'s.
    ///   - through: The last entry to replay; `nil` for the log's last entry. Requests whose
    ///     answer lies past it are not re-issued.
    ///   - policy: How the device resolves the conflicts the replayed server answers:
    ///     ``ServerReplayPolicy/asRecorded`` (the default) sends what the log recorded; another
    ///     policy asks "what if the delegate had merged differently?" (see ``ServerReplayPolicy``).
    /// - Returns: Every recorded request with its verdict, and every mismatch.
    /// - Throws: ``ServerReplayError``: `corruptEntry` naming the offset of an entry that cannot
    ///   be read or decoded (requests before it were already re-issued), `offsetPastEnd`,
    ///   `unreadableLog`, or `requestFailed` when a replayed request fails with a transport
    ///   failure, a transient code or a cancellation.
    public func run(
        against database: some CloudDatabase, through: LogOffset? = nil, policy: ServerReplayPolicy = .asRecorded
    ) async throws(ServerReplayError) -> ServerReplayReport {
        try await run(against: database, through: through, policy: policy, seeder: nil)
    }

    /// ``run(against:through:policy:)``, seeding `database`'s server from a server's side as the
    /// walk goes when `seeder` is given.
    func run(
        against database: some CloudDatabase, through: LogOffset?, policy: ServerReplayPolicy,
        seeder: ServerSideSeeder?
    ) async throws(ServerReplayError) -> ServerReplayReport {
        var cursor: EntryCursor
        do {
            let (end, _) = try log.range(through: through, operation: DiagnosticsError.serverReplayOperation) {
                asked, logEnd in
                "the log \"\(log.name)\" in \(log.environment.path) ends at offset \(logEnd), before \(asked)"
            }
            cursor = try log.entries(from: .first, through: end)
        } catch let error as ServerReplayError {
            throw error
        } catch let error as LogStoreError {
            throw ServerReplayError.reading(error, at: nil, of: log)
        } catch {
            throw ServerReplayError.serverReplay(
                .unreadableLog, "reading the log \"\(log.name)\" in \(log.environment.path) failed: \(error)")
        }

        var walk = ServerReplayWalk(database: database, policy: policy)
        walk.seeder = seeder
        var expected = LogOffset.first
        while true {
            let entry: LogEntry?
            do throws(LogStoreError) {
                entry = try cursor.next()
            } catch {
                throw ServerReplayError.reading(error, at: expected, of: log)
            }
            guard let entry else { break }
            let decoded: DeviceEntry
            do throws(LogStoreError) {
                decoded = try DeviceEntry(entry, in: log)
            } catch {
                throw ServerReplayError.reading(error, at: entry.offset, of: log)
            }
            try await walk.apply(decoded, at: entry.offset)
            expected = entry.offset.next
        }
        try walk.finish()
        try await walk.sendRemainingMerges(at: cursor.end)
        var report = ServerReplayReport(
            through: cursor.end, requests: walk.requests, mismatches: walk.mismatches,
            heldRecords: walk.held.values.sorted { DeviceStateReplay.precedes($0.recordID, $1.recordID) })
        if let seeder {
            report.seededEntries = seeder.seeded
            report.entryMismatches = seeder.mismatches
        }
        return report
    }
}

extension ServerReplay {
    /// The request IDs of the log's record batches (its `batchPrepared` entries), through
    /// `through`: the requests whose commits a server's side holds as the device's own.
    func requestIDs(through: LogOffset?) throws(ServerReplayError) -> Set<RequestID> {
        var ids: Set<RequestID> = []
        do {
            try log.forEachEntry { entry in
                if let through, entry.offset > through { return }
                guard entry.kind == DeviceEntry.Kind.batchPrepared else { return }
                if case .batchPrepared(_, _, _, let id?) = try DeviceEntry(entry) { ids.insert(id) }
            }
        } catch let error as LogStoreError {
            throw ServerReplayError.reading(error, at: nil, of: log)
        } catch {
            throw ServerReplayError.serverReplay(
                .unreadableLog, "reading the log \"\(log.name)\" in \(log.environment.path) failed: \(error)")
        }
        return ids
    }
}

extension DeviceLog {
    /// Replays this log's recorded sends and fetches against `database` and compares the
    /// server's answers with the recorded ones; see ``ServerReplay`` for what is re-issued,
    /// translated and compared.
    ///
    /// ```swift
    /// let report = try await phone.deviceLog.replay(against: fresh.database(for: "alice"))
    /// if let first = report.firstMismatch { print(first) }
    /// ```
    ///
    /// - Parameters:
    ///   - database: The server database to replay against, typically a fresh `SyncServer`'s.
    ///   - through: The last entry to replay; `nil` for the log's last entry.
    ///   - policy: How the device resolves conflicts (``ServerReplayPolicy``); by default as the
    ///     log recorded.
    /// - Throws: ``ServerReplayError`` naming the offset concerned.
    public func replay(
        against database: some CloudDatabase, through: LogOffset? = nil, policy: ServerReplayPolicy = .asRecorded
    ) async throws(ServerReplayError) -> ServerReplayReport {
        try await ServerReplay(self).run(against: database, through: through, policy: policy)
    }
}
