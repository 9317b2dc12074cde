import Foundation
import LogStore
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync
@testable import LogSyncDiagnostics
@testable import LogSyncServer

/// A replay against a fresh server seeded from the server's side of the story (``ServerSide``,
/// `logtool replay --against-fresh-server --server`): the other devices' writes are put into the
/// fresh server before the device's requests, so its conflicts come again.
@Suite("Server replay seeded from the server's side")
struct SeededServerReplayTests: NoteIDs {
    /// Device A writes n1; B writes n1 before fetching (refused, serverRecordChanged, F92),
    /// then fetches A's note. `body` gets the server, both devices and alice's server log.
    static func withConflict(
        _ body: (_ directory: URL, _ server: SyncServer, _ a: TestDevice, _ b: TestDevice, _ side: Log) async throws
            -> Void
    ) async throws {
        try await withServer { directory, server in
            let a = try TestDevice("A", server: server, directory: directory)
            let b = try TestDevice("B", server: server, directory: directory)
            let n1 = Self.note("n1")
            try a.createZone(Self.notes)
            try a.write(n1, "from A")
            try await a.engine.sendChanges()
            try b.createZone(Self.notes)
            try b.write(n1, "from B")
            await #expect(throws: SyncError.self) { try await b.engine.sendChanges() }
            try await b.engine.fetchChanges()
            #expect(b.title(n1) == "from A")
            try await body(directory, server, a, b, try server.admin.log(of: "alice"))
        }
    }

    /// A copy of `log`'s entries (kind, payload, time) in a new environment's log `private`, each
    /// passed through `change` (`nil` drops it).
    static func copy(_ log: Log, to directory: URL, _ change: (LogEntry) throws -> [NewEntry]) throws -> Log {
        let copy = try Log.open(at: directory, named: "private")
        var entries: [NewEntry] = []
        try log.forEachEntry { entry in entries += try change(entry) }
        _ = try copy.append(entries)
        return copy
    }

    static func asIs(_ entry: LogEntry) -> NewEntry {
        NewEntry(kind: entry.kind, payload: entry.payload, time: entry.time)
    }

    /// The same entry with the saved record's title replaced by `title`.
    static func retitled(_ entry: LogEntry, _ title: String) throws -> NewEntry {
        guard case .recordSaved(var record) = try ServerEntry(entry) else { return asIs(entry) }
        record["title"] = .string(title)
        var new = ServerEntry.recordSaved(record).newEntry
        new.time = entry.time
        return new
    }

    /// The request IDs of a device's batches.
    static func requestIDs(_ device: TestDevice) throws -> Set<RequestID> {
        try ServerReplay(device.engine.deviceLog).requestIDs(through: nil)
    }

    // MARK: The walk

    @Test("Seeded from the server's side, the device that lost a conflict replays it: every answer matches (F92)")
    func theConflictComesAgain() async throws {
        try await Self.withConflict { _, _, _, b, side in
            let report = try await ServerReplay(b.engine.deviceLog).runAgainstFreshServer(
                seededFrom: ServerSide(log: side))
            #expect(report.matches, "\(report)")
            let batches = report.requests.filter { $0.kind == .modifyRecords }
            #expect(!batches.isEmpty && batches.allSatisfy { $0.verdict == .matched && $0.reissued }, "\(report)")
            // The zone changes are the server side's entries, not re-issued.
            #expect(report.requests.filter { $0.kind == .modifyZones }.allSatisfy { !$0.reissued })
            // B ends holding A's note, as it did.
            #expect(report.heldRecords.map(\.recordID) == [Self.note("n1")])
            #expect(report.heldRecords.first?["title"] == .string("from A"))
            #expect(report.description.contains("seeded from the server's side"), "\(report)")
            #expect(report.description.contains("the device holds at the end: Notes/n1"), "\(report)")
        }
    }

    @Test("The device's own commits are re-issued, not seeded; every other entry is seeded at its own offset")
    func ownRequestsAreNotSeeded() async throws {
        try await Self.withConflict { directory, _, a, b, side in
            let total = Int(try side.lastOffset.rawValue)
            for device in [a, b] {
                let ids = try Self.requestIDs(device)
                // The entries of the device's commits: each outcome and the record entries before it.
                var own = 0
                var kinds: [EntryKind] = []
                try side.forEachEntry { entry in
                    kinds.append(entry.kind)
                    guard case .requestOutcome(let id, _, _, _) = try ServerEntry(entry), ids.contains(id) else {
                        return
                    }
                    own += 1
                    var index = kinds.count - 2
                    while index >= 0, ServerSideSeeder.inCommit(kinds[index]) {
                        own += 1
                        index -= 1
                    }
                }
                #expect(own > 0)
                let report = try await ServerReplay(device.engine.deviceLog).runAgainstFreshServer(
                    seededFrom: ServerSide(log: side))
                #expect(report.matches, "\(device.name): \(report)")
                #expect(report.seededEntries == total - own, "\(device.name): \(report)")
            }
            // Without seeding, B's conflict does not come: the fresh server accepts its save.
            let alone = try await ServerReplay(b.engine.deviceLog).runAgainstFreshServer()
            #expect(!alone.matches)
            #expect(alone.seededEntries == nil)
            _ = directory
        }
    }

    @Test("A fetched page reads the server's side as the original did: the others' later writes are seeded after it")
    func pagesReadWhatTheOriginalRead() async throws {
        try await withServer { directory, server in
            let a = try TestDevice("A", server: server, directory: directory)
            let b = try TestDevice("B", server: server, directory: directory)
            try a.createZone(Self.notes)
            try a.write(Self.note("n1"), "one")
            try await a.engine.sendChanges()
            try await b.engine.fetchChanges()  // B reads n1 only
            try a.write(Self.note("n2"), "two")
            try await a.engine.sendChanges()  // written after B's fetch, before B's send
            try b.write(Self.note("n3"), "three")
            try await b.engine.sendChanges()
            try await b.engine.fetchChanges()  // now n2
            let report = try await ServerReplay(b.engine.deviceLog).runAgainstFreshServer(
                seededFrom: ServerSide(log: try server.admin.log(of: "alice")))
            #expect(report.matches, "\(report)")
            let fetches = report.requests.filter { $0.kind == .fetchZoneChanges }
            #expect(fetches.count >= 2 && fetches.allSatisfy { $0.verdict == .matched && $0.reissued }, "\(report)")
            #expect(
                report.heldRecords.map(\.recordID) == [Self.note("n1"), Self.note("n2"), Self.note("n3")], "\(report)")
        }
    }

    @Test("A server's side whose other device's write was altered shows as a mismatch of the device's conflict")
    func alteredOthersWriteIsAMismatch() async throws {
        try await Self.withConflict { directory, _, a, b, side in
            let ids = try Self.requestIDs(a)
            // A's save of n1, retitled: the server record B's conflict returns is not the recorded one.
            var outcomes: [LogOffset] = []
            try side.forEachEntry { entry in
                if case .requestOutcome(let id, _, _, _) = try ServerEntry(entry), ids.contains(id) {
                    outcomes.append(entry.offset)
                }
            }
            let saved = LogOffset(try #require(outcomes.first).rawValue - 1)
            let altered = try Self.copy(side, to: directory.appending(path: "altered")) { entry in
                [entry.offset == saved ? try Self.retitled(entry, "altered") : Self.asIs(entry)]
            }
            let report = try await ServerReplay(b.engine.deviceLog).runAgainstFreshServer(
                seededFrom: ServerSide(log: altered))
            let first = try #require(report.firstMismatch, "\(report)")
            #expect(first.entry == "batchResult")
            #expect(first.recorded.errorCode == .serverRecordChanged)
            #expect(report.heldRecords.first?["title"] == .string("altered"))

            // A's own commit altered: A's re-issued save differs from the entry at the same offset.
            let mine = try await ServerReplay(a.engine.deviceLog).runAgainstFreshServer(
                seededFrom: ServerSide(log: altered))
            let entry = try #require(mine.entryMismatches.first, "\(mine)")
            #expect(entry.serverOffset == saved)
            #expect(!mine.matches)
            #expect(mine.description.contains("entry mismatch: server entry \(saved)"), "\(mine)")
        }
    }

    // MARK: Bad input

    @Test(
        "Offsets that do not line up (the device's commit longer in the server's side) are an error naming the offset")
    func offsetsThatDoNotLineUpThrow() async throws {
        try await Self.withConflict { directory, _, a, _, side in
            let ids = try Self.requestIDs(a)
            var outcome: LogOffset?
            try side.forEachEntry { entry in
                if outcome == nil, case .requestOutcome(let id, _, _, _) = try ServerEntry(entry), ids.contains(id) {
                    outcome = entry.offset
                }
            }
            // A's save of n1 twice in its commit: the re-issued request appends one entry less.
            let doubled = LogOffset(try #require(outcome).rawValue - 1)
            let long = try Self.copy(side, to: directory.appending(path: "long")) { entry in
                entry.offset == doubled ? [Self.asIs(entry), Self.asIs(entry)] : [Self.asIs(entry)]
            }
            let error = await #expect(throws: DiagnosticsError.self) {
                _ = try await ServerReplay(a.engine.deviceLog).runAgainstFreshServer(
                    seededFrom: ServerSide(log: long))
            }
            #expect(error?.code == .serverSideMismatch)
            #expect(error?.offset != nil)
            #expect(error?.description.contains("do not line up") == true, "\(String(describing: error))")
        }
    }

    @Test("Another user's server log holds none of the device's requests: serverSideMismatch")
    func anotherUsersLogIsRefused() async throws {
        try await Self.withConflict { directory, server, a, _, _ in
            let bob = try TestDevice("bob", server: server, user: "bob", directory: directory)
            try bob.createZone(Self.notes)
            try bob.write(Self.note("n9"), "bob's")
            try await bob.engine.sendChanges()
            let error = await #expect(throws: DiagnosticsError.self) {
                _ = try await ServerReplay(a.engine.deviceLog).runAgainstFreshServer(
                    seededFrom: ServerSide(log: try server.admin.log(of: "bob")))
            }
            #expect(error?.code == .serverSideMismatch)
            #expect(error?.description.contains("another user's") == true, "\(String(describing: error))")
        }
    }

    @Test(
        "A server extract made with another key, a device bundle as the server's side, or a redacted bundle against a log in clear is refused"
    )
    func extractWithAnotherKeyIsRefused() throws {
        try withTemporaryDirectory { directory in
            let extract = directory.appending(path: "server.lsb")
            do {
                let environment = try LogEnvironment.open(at: extract)
                let manifest =
                    #"{"formatVersion":1,"kind":"serverExtract","user":"alice","created":"2026-11-28T12:00:00Z","#
                    + #""scopes":{"private":{"firstOffset":1,"lastOffset":0,"baseOffset":0}},"#
                    + #""redactValues":true,"keepInClear":[],"hashNames":true,"keyID":"00112233"}"#
                _ = try environment.openLog(named: "bundle").append(NewEntry(kind: 2, payload: Array(manifest.utf8)))
                _ = try environment.openLog(named: "private")
            }
            let error = #expect(throws: DiagnosticsError.self) {
                _ = try ServerSide.open(at: extract.path, scope: .private, keyID: "ffeeddcc")
            }
            #expect(error?.code == .serverSideMismatch)
            #expect(error?.description.contains("00112233") == true)
            // The same key opens; a log the extract does not hold is named.
            #expect(try ServerSide.open(at: extract.path, scope: .private, keyID: "00112233").baseOffset == 0)
            let shared = #expect(throws: DiagnosticsError.self) {
                _ = try ServerSide.open(at: extract.path, scope: .shared, keyID: "00112233")
            }
            #expect(shared?.description.contains("no log \"shared\"") == true)

            let device = directory.appending(path: "phone.lsb")
            do {
                let bundle = try LogEnvironment.open(at: device)
                _ = try bundle.openLog(named: "bundle").append(NewEntry(kind: 1, payload: Array("{}".utf8)))
            }
            let notServer = #expect(throws: DiagnosticsError.self) {
                _ = try ServerSide.open(at: device.path, scope: .private)
            }
            #expect(notServer?.description.contains("a device's support bundle") == true)

            // A server user's own log is in clear: a redacted bundle's records would never equal it.
            let user = directory.appending(path: "u1")
            do { _ = try LogEnvironment.open(at: user).openLog(named: "private") }
            #expect(try ServerSide.open(at: user.path, scope: .private).baseOffset == 0)
            let clear = #expect(throws: DiagnosticsError.self) {
                _ = try ServerSide.open(at: user.path, scope: .private, redacted: true)
            }
            #expect(clear?.code == .serverSideMismatch)
            #expect(clear?.description.contains("in clear") == true)
        }
    }
}
