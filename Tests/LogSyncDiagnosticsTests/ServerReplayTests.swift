import Foundation
import LogStore
import LogSyncDiagnostics
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// Replaying a recorded device log against a fresh server (Docs/Testing.md, Time travel in
/// tests): the requests are re-issued in order, server-assigned values translated, and the
/// answers compared.
@Suite("Server replay")
struct ServerReplayTests: NoteIDs {
    /// A server of its own under `directory/name`, never touched by the recorded timeline.
    static func freshServer(_ directory: URL, _ name: String = "fresh") throws -> SyncServer {
        try makeServer(directory.appendingPathComponent(name, isDirectory: true))
    }

    /// Alice's phone, on a server of its own, after it sent the zone Notes with note n1, "one",
    /// in it; and a fresh server (``freshServer(_:_:)``) to replay its log against.
    static func withPhoneThatSentN1(
        _ body: (_ phone: TestDevice, _ fresh: SyncServer) async throws -> Void
    ) async throws {
        try await withServer { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(notes)
            try phone.write(note("n1"), "one")
            try await phone.engine.sendChanges()
            try await body(phone, try freshServer(directory))
        }
    }

    /// Every entry of a device's log with its offset, decoded.
    static func entries(_ device: TestDevice) throws -> [(offset: LogOffset, entry: DeviceEntry)] {
        var entries: [(offset: LogOffset, entry: DeviceEntry)] = []
        try device.engine.deviceLog.log.forEachEntry {
            entries.append(($0.offset, try DeviceEntry($0, in: device.engine.deviceLog.log)))
        }
        return entries
    }

    /// The offsets of the device's entries named `name` (`batchResult`, …), in order.
    static func offsets(_ device: TestDevice, of name: String) throws -> [LogOffset] {
        try entries(device).filter { $0.entry.name == name }.map(\.offset)
    }

    /// Every live record of a database, by ID: what a fetch of each zone from scratch returns.
    static func records(of database: some CloudDatabase) async throws -> [Record.ID: Record] {
        var records: [Record.ID: Record] = [:]
        for zone in try await database.fetchAllZones() {
            var token: ZoneChangeToken?
            var moreComing = true
            while moreComing {
                let page = try await database.fetchZoneChanges(zoneID: zone.zoneID, since: token)
                for modification in page.modifications { records[modification.record.recordID] = modification.record }
                for deletion in page.deletions { records[deletion.recordID] = nil }
                token = page.changeToken
                moreComing = page.moreComing
            }
        }
        return records
    }

    /// Every live record's fields, by ID.
    static func contents(of database: some CloudDatabase) async throws -> [Record.ID: [String: RecordValue]] {
        try await records(of: database).mapValues(\.fields)
    }

    // MARK: One device

    @Test("A single device's timeline replays against a fresh server without a mismatch, and leaves the same records")
    func singleDeviceReplaysFaithfully() async throws {
        try await withServer { directory, server in
            // Another device's draft, written and deleted before the phone starts: the phone never
            // sees it, but it moves the original server's offsets, so its change tags and tokens
            // differ from the fresh server's and must be translated.
            let tablet = try TestDevice("tablet", server: server, directory: directory)
            try tablet.createZone(Self.notes)
            try tablet.write(Self.note("draft"), "draft")
            try await tablet.engine.sendChanges()
            try tablet.delete(Self.note("draft"))
            try await tablet.engine.sendChanges()

            let phone = try TestDevice("phone", server: server, directory: directory, fetchResultsLimit: 2)
            try phone.createZone(Self.notes)
            try phone.createZone(Self.photos)
            try phone.write([
                (Self.note("n1"), "one"), (Self.note("n2"), "two"), (Self.note("n3"), "three"),
                (Self.note("n4"), "four"),
                (Self.note("n5"), "five"), (Self.note("p1", Self.photos), "sunset"),
            ])
            try await phone.sync()
            // Edits go with the change tags of the last known server records.
            try phone.write(Self.note("n1"), "one, edited")
            try phone.write(Self.note("n2"), "two, edited")
            try phone.delete(Self.note("n3"))
            try await phone.sync()
            try phone.write(Self.note("n1"), "one, edited again")
            try phone.deleteZone(Self.photos)
            try await phone.sync()

            // The timeline has what the replay must handle: tagged saves, deletions, pages.
            let entries = try Self.entries(phone)
            let taggedSaves = entries.filter {
                if case .batchPrepared(let records, _, _, _) = $0.entry {
                    records.contains { $0.recordChangeTag != nil }
                } else {
                    false
                }
            }
            let continuedPages = entries.filter {
                if case .zoneChangesFetched(_, _, _, _, true) = $0.entry { true } else { false }
            }
            #expect(taggedSaves.count >= 2)
            #expect(continuedPages.count >= 2)

            let fresh = try Self.freshServer(directory)
            let report = try await phone.engine.deviceLog.replay(
                against: fresh.database(for: "alice", device: "replay"))

            #expect(report.matches, "\(report)")
            #expect(report.firstMismatch == nil)
            #expect(report.notComparable.isEmpty, "\(report)")
            #expect(
                report.requests.allSatisfy { $0.reissued && $0.verdict == .matched && $0.notes.isEmpty }, "\(report)")
            #expect(report.through == (try phone.engine.deviceLog.log.lastOffset))
            let kinds = report.requests.map(\.kind)
            #expect(kinds.filter { $0 == .modifyZones }.count == 2)
            #expect(kinds.filter { $0 == .modifyRecords }.count == 3)
            #expect(kinds.filter { $0 == .fetchZoneChanges }.count >= 4)
            #expect(kinds.contains(.fetchDatabaseChanges))
            // Each modifyRecords names its batchPrepared and the records it carried.
            let batches = report.requests.filter { $0.kind == .modifyRecords }
            #expect(
                batches.allSatisfy { request in
                    request.preparedOffset.map { $0 < request.offset } == true && request.entry == "batchResult"
                })
            #expect(batches[1].items.contains(.record(Self.note("n3"))))

            let originalRecords = try await Self.records(of: server.database(for: "alice"))
            let replayedRecords = try await Self.records(of: fresh.database(for: "alice"))
            let original = originalRecords.mapValues(\.fields)
            let replayed = replayedRecords.mapValues(\.fields)
            #expect(replayed == original)
            #expect(replayed[Self.note("n1")]?["title"] == .string("one, edited again"))
            // The tags differ between the servers: the edits matched through translation.
            let n1Tags = (
                originalRecords[Self.note("n1")]?.recordChangeTag, replayedRecords[Self.note("n1")]?.recordChangeTag
            )
            #expect(n1Tags.0 != nil && n1Tags.1 != nil && n1Tags.0 != n1Tags.1)
            #expect(replayed[Self.note("n3")] == nil)
            #expect(replayed[Self.note("p1", Self.photos)] == nil)
            #expect(
                report.description.hasPrefix(
                    "replayed entries 1...\(report.through): \(report.requests.count) requests"))
        }
    }

    // MARK: Two devices

    @Test("Replaying one device of a conflict against a fresh server names the conflicting batchResult and the record")
    func conflictIsTheFirstMismatch() async throws {
        try await withServer { directory, server in
            let deviceA = try TestDevice("A", server: server, directory: directory)
            let deviceB = try TestDevice("B", server: server, directory: directory)
            let n1 = Self.note("n1")
            try deviceA.createZone(Self.notes)
            try deviceA.write(n1, "from A")
            try await deviceA.engine.sendChanges()
            // B writes the same note before fetching A's: the server refuses it (F92).
            try deviceB.createZone(Self.notes)
            try deviceB.write(n1, "from B")
            await #expect(throws: SyncError.self) { try await deviceB.engine.sendChanges() }
            try await deviceB.engine.fetchChanges()
            #expect(deviceB.title(n1) == "from A")

            let conflict = try #require(
                try Self.entries(deviceB).first {
                    if case .batchResult(_, _, let failedSaves, _) = $0.entry {
                        failedSaves[n1]?.code == .serverRecordChanged
                    } else {
                        false
                    }
                })

            let fresh = try Self.freshServer(directory)
            let report = try await deviceB.engine.deviceLog.replay(
                against: fresh.database(for: "alice", device: "replay"))

            let first = try #require(report.firstMismatch, "\(report)")
            #expect(first.offset == conflict.offset)
            #expect(first.entry == "batchResult")
            #expect(first.kind == .modifyRecords)
            #expect(first.requestItems == [.record(n1)])
            #expect(first.item == .record(n1))
            #expect(first.recorded.errorCode == .serverRecordChanged)
            guard case .saved(let accepted) = first.replayed else {
                Issue.record("the fresh server should accept B's save, got \(first.replayed)")
                return
            }
            #expect(accepted["title"] == .string("from B"))
            #expect(first.description.contains("offset \(conflict.offset) (batchResult), modifyRecords"))
            #expect(first.description.contains("recorded failed serverRecordChanged (14)"))
            #expect(first.description.contains("replayed saved Note {title: \"from B\"}"))
            // The zone save before it matched; what B fetched afterwards (A's note) differs too.
            #expect(report.requests.first?.kind == .modifyZones)
            #expect(report.requests.first?.verdict == .matched)
            #expect(report.requests.first { $0.offset == conflict.offset }?.verdict == .mismatched)
            #expect(report.mismatches.allSatisfy { $0.offset >= conflict.offset })
            #expect(report.mismatches.contains { $0.kind == .fetchZoneChanges && $0.item == .record(n1) })
            #expect(report.description.contains("mismatch at offset \(conflict.offset) (batchResult)"))
        }
    }

    // MARK: Faults

    @Test("A recorded transport failure is not comparable and not re-issued; the retry that followed matches")
    func transportFailureIsNotComparable() async throws {
        try await withServer { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(Self.notes)
            try await phone.engine.sendChanges()
            try phone.write(Self.note("n1"), "one")
            server.admin.failNextRequests(of: "alice", with: SyncError(.networkFailure, "injected"))
            await #expect(throws: SyncError.self) { try await phone.engine.sendChanges() }
            try await phone.engine.sendChanges()

            let fresh = try Self.freshServer(directory)
            let report = try await phone.engine.deviceLog.replay(against: fresh.database(for: "alice"))

            #expect(report.matches, "\(report)")
            let skipped = try #require(report.notComparable.first, "\(report)")
            #expect(report.notComparable.count == 1)
            #expect(skipped.kind == .modifyRecords)
            #expect(skipped.items == [.record(Self.note("n1"))])
            #expect(!skipped.reissued)
            guard case .notComparable(let reason) = skipped.verdict else {
                Issue.record("expected a not comparable verdict, got \(skipped.verdict)")
                return
            }
            #expect(reason.contains("networkFailure (4)"))
            #expect(report.requests.last?.kind == .modifyRecords)
            #expect(report.requests.last?.verdict == .matched)
            #expect(report.description.contains("not comparable at offset \(skipped.offset) (batchResult)"))
            let replayed = try await Self.contents(of: fresh.database(for: "alice"))
            #expect(replayed[Self.note("n1")]?["title"] == .string("one"))
        }
    }

    @Test("A token the original server expired is not comparable on a fresh server; the refetch from scratch matches")
    func expiredTokenIsNotComparable() async throws {
        try await withServer { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(Self.notes)
            try phone.write([(Self.note("n1"), "one"), (Self.note("n2"), "two"), (Self.note("n3"), "three")])
            try await phone.sync()
            try phone.delete(Self.note("n1"))
            try await phone.engine.sendChanges()
            // The original server drops its tombstones: the phone's tokens expire (F100, F144).
            try server.admin.compactTombstones(of: "alice", before: try server.admin.currentToken(of: "alice"))
            try await phone.engine.fetchChanges()
            let resets = try Self.offsets(phone, of: "changeTokenReset")
            #expect(!resets.isEmpty)

            let fresh = try Self.freshServer(directory)
            let report = try await phone.engine.deviceLog.replay(against: fresh.database(for: "alice"))

            #expect(report.matches, "\(report)")
            #expect(report.notComparable.map(\.offset) == resets)
            #expect(report.notComparable.allSatisfy { $0.entry == "changeTokenReset" && $0.reissued })
            #expect(report.notComparable.allSatisfy { "\($0.verdict)".contains("tombstones") })
            // The pages after each reset, fetched from scratch, matched.
            #expect(
                report.requests.contains {
                    $0.offset > resets.last! && $0.verdict == .matched && $0.kind == .fetchZoneChanges
                })
            #expect(
                try await Self.contents(of: fresh.database(for: "alice"))
                    == (try await Self.contents(of: server.database(for: "alice"))))
        }
    }

    @Test("A replayed request that fails in transport stops the replay with requestFailed naming the offset")
    func replayedTransportFailureThrows() async throws {
        try await Self.withPhoneThatSentN1 { phone, fresh in
            let zonesSent = try #require(try Self.offsets(phone, of: "databaseChangesSent").first)

            fresh.admin.failNextRequests(of: "alice", with: SyncError(.serviceUnavailable, "injected"))
            let error = await #expect(throws: ServerReplayError.self) {
                try await phone.engine.deviceLog.replay(against: fresh.database(for: "alice"))
            }
            #expect(error?.code == .requestFailed)
            #expect(error?.offset == zonesSent)
            #expect(error?.requestError?.code == .serviceUnavailable)
            #expect(
                error?.description.hasPrefix(
                    "server replay: request failed at offset \(zonesSent): the replayed modifyZones") == true)
        }
    }

    /// Undecodable entries: a payload that is not its kind's message, and a kind no device writes.
    static let corruptions: [NewEntry] = [
        NewEntry(kind: DeviceEntry.Kind.batchResult, payload: [0x0A, 0x05, 0x01]),
        NewEntry(kind: 99, payload: []),
    ]

    @Test("An undecodable entry stops the replay with a corruptEntry error naming its offset", arguments: corruptions)
    func corruptEntryThrows(_ corruption: NewEntry) async throws {
        try await withTemporaryDirectory { directory in
            // A log without the device index accepts what a device log refuses at append.
            let log = try Log.open(
                at: directory.appendingPathComponent("device"), named: DeviceLog.logName,
                options: LogEnvironment.Options(durability: .fast, initialMapSize: 1 << 20))
            try log.append(
                DeviceEntry.databaseChangesSent(
                    savedZones: [RecordZone(zoneID: Self.notes)], deletedZoneIDs: [], failedZoneSaves: [:],
                    failedZoneDeletes: [:]
                ).newEntry)
            try log.append(corruption)
            try log.append(DeviceEntry.untrackedChangesFlagged(true).newEntry)

            let fresh = try Self.freshServer(directory)
            let error = await #expect(throws: ServerReplayError.self) {
                try await ServerReplay(log: log).run(against: fresh.database(for: "alice"))
            }
            #expect(error?.code == .corruptEntry)
            #expect(error?.offset == LogOffset(2))
            #expect(error?.logError?.code == .corruptEntry)
            #expect(
                error?.description.hasPrefix("server replay: corrupt entry at offset 2 of log \"device\"") == true,
                "\(error.map { "\($0)" } ?? "")")
            // The request before it was re-issued.
            #expect(try await fresh.database(for: "alice").fetchAllZones().map(\.zoneID).contains(Self.notes))
        }
    }

    // MARK: Ranges

    @Test("Replay through an offset stops there: later requests are not re-issued")
    func replayThroughStops() async throws {
        try await Self.withPhoneThatSentN1 { phone, fresh in
            try phone.write(Self.note("n2"), "two")
            try await phone.engine.sendChanges()

            let results = try Self.offsets(phone, of: "batchResult")
            #expect(results.count == 2)
            let firstResult = try #require(results.first)

            let report = try await phone.engine.deviceLog.replay(
                against: fresh.database(for: "alice"), through: firstResult)

            #expect(report.through == firstResult)
            #expect(report.matches, "\(report)")
            #expect(report.requests.map(\.kind) == [.modifyZones, .modifyRecords])
            #expect(report.requests.allSatisfy { $0.offset <= firstResult })
            #expect(report.requests.last?.offset == firstResult)
            let replayed = try await Self.contents(of: fresh.database(for: "alice"))
            #expect(replayed[Self.note("n1")]?["title"] == .string("one"))
            #expect(replayed[Self.note("n2")] == nil)
        }
    }

    @Test("A batch whose answer lies past `through` is not comparable and not sent")
    func batchCutByThroughIsNotSent() async throws {
        try await Self.withPhoneThatSentN1 { phone, fresh in
            let prepared = try #require(try Self.offsets(phone, of: "batchPrepared").first)

            let report = try await phone.engine.deviceLog.replay(
                against: fresh.database(for: "alice"), through: prepared)

            let cut = try #require(report.requests.last)
            #expect(cut.offset == prepared)
            #expect(cut.entry == "batchPrepared")
            #expect(cut.preparedOffset == prepared)
            #expect(!cut.reissued)
            #expect(report.notComparable == [cut])
            #expect(report.matches)
            let replayed = try await Self.contents(of: fresh.database(for: "alice"))
            #expect(replayed[Self.note("n1")] == nil)
        }
    }

    @Test("Replay through an offset past the log's end throws offsetPastEnd")
    func replayPastTheEndThrows() async throws {
        try await withServer { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(Self.notes)
            try await phone.engine.sendChanges()
            let last = try phone.engine.deviceLog.log.lastOffset

            let fresh = try Self.freshServer(directory)
            let error = await #expect(throws: ServerReplayError.self) {
                try await phone.engine.deviceLog.replay(against: fresh.database(for: "alice"), through: last.next)
            }
            #expect(error?.code == .offsetPastEnd)
            #expect(error?.offset == last.next)
            #expect(error?.description.contains("ends at offset \(last)") == true)
            #expect(try await fresh.database(for: "alice").fetchAllZones().map(\.zoneID).contains(Self.notes) == false)
        }
    }
}
