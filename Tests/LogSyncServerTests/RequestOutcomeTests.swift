import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

/// How the log keeps a completed request (F160): `requestOutcome` names the saved records by the
/// offsets of their `recordSaved` entries instead of storing them again; logs written before it
/// hold `requestCompleted` with the whole response. A replay answers the same from either.
@Suite("Request outcomes in the log (F160)")
struct RequestOutcomeTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func record(_ name: String, _ value: Int64, tag: String? = nil) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
        record["title"] = .string("note \(name)")
        record["value"] = .int64(value)
        if let tag { record.applySystemFields(Record.SystemFields(recordChangeTag: tag)) }
        return record
    }

    /// A request with every kind of result: two new records, a save with a stale tag (a
    /// conflict), a deletion, and a deletion of a record that is not there (not atomic, so the
    /// conflict fails alone).
    static let request = ModifyRecordsRequest(
        recordsToSave: [record("n1", 1), record("n2", 2), record("kept", 9, tag: "1")],
        recordIDsToDelete: [
            Record.ID(recordName: "doomed", zoneID: notes), Record.ID(recordName: "never", zoneID: notes),
        ],
        atomically: false, requestID: "phone-1")

    /// Writes the history the request runs against (a zone, two records, one edited since), then
    /// the request. Returns its first response.
    static func writeHistory(_ server: SyncServer) async throws -> ModifyRecordsResponse {
        let database = server.database(for: "alice", device: "phone")
        _ = try await database.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: notes)]))
        let saved = try await database.modifyRecords(
            ModifyRecordsRequest(recordsToSave: [record("kept", 0), record("doomed", 0)]))
        let kept = try #require(try saved.saveResults[Record.ID(recordName: "kept", zoneID: notes)]?.get())
        var edited = kept
        edited["value"] = .int64(5)
        _ = try await database.modifyRecords(ModifyRecordsRequest(recordsToSave: [edited]))
        return try await database.modifyRecords(request)
    }

    @Test func aReplayReadsTheSavedRecordsBackFromTheirEntries() async throws {
        try await withServer { server, _ in
            let first = try await Self.writeHistory(server)
            try #require(first.saveResults.values.filter { (try? $0.get()) != nil }.count == 2)
            let log = try server.admin.log(of: "alice")
            let last = try #require(try log.entry(at: try log.lastOffset))
            #expect(last.kind == ServerEntry.Kind.requestOutcome)
            guard case .requestOutcome(_, _, let outcome, _) = try ServerEntry(last) else {
                Issue.record("the request ends with \(last.kind)")
                return
            }
            // The saved records are named, not stored: each points at the entry that saved it.
            try #require(outcome.saved.map(\.recordID.recordName) == ["n1", "n2"])
            for saved in outcome.saved {
                let entry = try #require(try log.entry(at: saved.offset))
                #expect(
                    try ServerEntry(entry) == .recordSaved(try #require(try first.saveResults[saved.recordID]?.get())))
            }

            let replay = try await server.database(for: "alice", device: "phone").modifyRecords(Self.request)
            #expect(replay == first)
            #expect(try log.lastOffset == last.offset, "a replay writes nothing")
            #expect(try log.verifyProjections() == nil)
        }
    }

    /// An older log: the same history, its request completed by a `requestCompleted` holding
    /// the whole response, as the server wrote it before `requestOutcome`.
    @Test func anOlderLogsRequestCompletedIsAnsweredTheSame() async throws {
        try await withServer { server, _ in
            let first = try await Self.writeHistory(server)
            try await withServer { older, _ in
                try Self.copyLog(of: server, into: older) { entry in
                    guard case .requestOutcome(let requestID, let fingerprint, _, let actor) = entry else { return nil }
                    return .requestCompleted(requestID, fingerprint: fingerprint, response: first, actor: actor)
                }
                let log = try older.admin.log(of: "alice")
                #expect(try log.entry(at: try log.lastOffset)?.kind == ServerEntry.Kind.requestCompleted)
                let replay = try await older.database(for: "alice", device: "phone").modifyRecords(Self.request)
                #expect(replay == first)
                #expect(
                    try log.entry(at: try log.lastOffset)?.kind == ServerEntry.Kind.requestCompleted,
                    "a replay writes nothing")
                #expect(try log.verifyProjections() == nil)

                // The request ID still refuses other content.
                var other = Self.request
                other.recordsToSave[0]["value"] = .int64(100)
                await #expect(throws: SyncError.self) {
                    try await older.database(for: "alice", device: "phone").modifyRecords(other)
                }
            }
        }
    }

    /// A `requestOutcome` whose saved record's offset holds another entry is never answered
    /// with that entry: the replay fails with a corrupt entry naming the outcome's offset.
    @Test func anOutcomeNamingTheWrongEntryIsACorruptEntry() async throws {
        try await withServer { server, _ in
            _ = try await Self.writeHistory(server)
            try await withServer { damaged, _ in
                let entries = try Self.copyLog(of: server, into: damaged) { entry in
                    guard case .requestOutcome(let requestID, let fingerprint, var outcome, let actor) = entry,
                        outcome.saved.count == 2
                    else { return nil }
                    // n1 named at the entry of n2.
                    outcome.saved[0].offset = outcome.saved[1].offset
                    return .requestOutcome(requestID, fingerprint: fingerprint, outcome: outcome, actor: actor)
                }
                // The database itself, whose errors InProcessDatabase would wrap as internalError.
                let error = #expect(throws: LogStoreError.self) {
                    try damaged.store("alice", .private).modifyRecords(Self.request, from: "phone")
                }
                #expect(error?.code == .corruptEntry)
                #expect(error?.offset == entries.last?.offset)
                #expect(
                    error?.message.contains(#"names record "n1" in zone "Notes" as saved by the entry at offset"#)
                        == true, "\(String(describing: error))")
            }
        }
    }

    /// Copies alice's log on `server` into her empty log on `other`, entry by entry with their
    /// times, each `requestOutcome` replaced by what `rewrite` makes of it (`nil`: kept as it
    /// is). Returns the entries of `server`'s log.
    @discardableResult
    static func copyLog(
        of server: SyncServer, into other: SyncServer, rewritingOutcomes rewrite: (ServerEntry) -> ServerEntry?
    ) throws -> [LogEntry] {
        let entries = try entries(of: try server.admin.log(of: "alice"))
        let log = try other.admin.log(of: "alice")
        try #require(try log.lastOffset == .zero)
        _ = try log.append(
            entries.map { entry in
                guard let decoded = try? ServerEntry(entry), case .requestOutcome = decoded,
                    let new = rewrite(decoded)?.newEntry
                else {
                    return NewEntry(kind: entry.kind, payload: entry.payload, time: entry.time)
                }
                return NewEntry(kind: new.kind, payload: new.payload, time: entry.time)
            })
        return entries
    }

    /// Every entry of `log`, in order.
    static func entries(of log: Log) throws -> [LogEntry] {
        var cursor = try log.entries()
        var entries: [LogEntry] = []
        while let entry = try cursor.next() { entries.append(entry) }
        return entries
    }
}
