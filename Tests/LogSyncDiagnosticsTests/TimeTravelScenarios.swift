import Foundation
import LogStore
import LogSyncDiagnostics
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Testing

@testable import LogSync

/// The WWDC23 conflict again, looked back on with `state(at:)` and replayed differently on a
/// fork made by `rewind(to:into:)`.
@Suite("Scenario: time travel")
struct TimeTravelScenarios {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static let note = Record.ID(recordName: "note", zoneID: notes)

    /// A and B both hold "first"; A has saved "A"; B has written "B" without fetching.
    /// Returns B's last offset before its conflicting send.
    static func prepareConflict(_ phoneA: TestDevice, _ phoneB: TestDevice) async throws -> LogOffset {
        try await phoneA.seedNote(note, "first", in: notes, syncing: phoneB)
        try phoneA.write(note, "A")
        try await phoneA.engine.sendChanges()
        try phoneB.write(note, "B")
        return try phoneB.engine.deviceLog.log.lastOffset
    }

    /// The offsets of `B`'s entries of one kind after `start`.
    static func offsets(of name: String, in log: DeviceLog, after start: LogOffset) throws -> [LogOffset] {
        var offsets: [LogOffset] = []
        var cursor = try log.log.entries(from: start.next, through: try log.log.lastOffset)
        while let entry = try cursor.next() {
            if try DeviceEntry(entry, in: log.log).name == name { offsets.append(entry.offset) }
        }
        return offsets
    }

    // F16, F21, F32, F91, F92: what B's engine held before, during and after the conflict.
    @Test(
        "Looking back at the conflict: B's save was pending, then in flight, then gone once the merge took the server's record"
    )
    func lookBackAtTheConflict() async throws {
        try await withDevices("A", "B") { server, phoneA, phoneB in
            let beforeSend = try await Self.prepareConflict(phoneA, phoneB)
            _ = try? await phoneB.engine.sendChanges()
            let log = phoneB.engine.deviceLog

            let prepared = try Self.offsets(of: "batchPrepared", in: log, after: beforeSend)
            let results = try Self.offsets(of: "batchResult", in: log, after: beforeSend)
            #expect(prepared.count == 1 && results.count == 1)
            let (batch, result) = (try #require(prepared.first), try #require(results.first))

            let before = try log.state(at: beforeSend)
            #expect(before.pendingRecordZoneChanges == [.saveRecord(Self.note)])
            #expect(before.inFlightRecordZoneChanges == [])
            let during = try log.state(at: batch)
            #expect(during.inFlightRecordZoneChanges == [.saveRecord(Self.note)])
            #expect(during.pendingRecordZoneChanges == [.saveRecord(Self.note)])
            // serverRecordChanged is not transient: the save left the list (F21); the delegate
            // merged server-wins and queued nothing again.
            let after = try log.state(at: result)
            #expect(after.inFlightRecordZoneChanges == [])
            #expect(after.pendingRecordZoneChanges == [])
            #expect(try log.state(at: log.log.lastOffset).pendingRecordZoneChanges == [])
            #expect(phoneB.title(Self.note) == "A")
        }
    }

    // F9, F73, F75: a forked timeline, from the same log, in which B fetches before it sends.
    @Test("Rewinding B to before its send: on the fork B fetches first, edits again, and saves without a conflict")
    func forkBeforeTheConflict() async throws {
        try await withServer { directory, server in
            let phoneA = try TestDevice("A", server: server, directory: directory)
            let phoneB = try TestDevice("B", server: server, directory: directory)
            let beforeSend = try await Self.prepareConflict(phoneA, phoneB)
            _ = try? await phoneB.engine.sendChanges()
            let originalEnd = try phoneB.engine.deviceLog.log.lastOffset

            // The fork holds B's log through `beforeSend`; the app on it is B's again ("B").
            _ = try phoneB.engine.deviceLog.rewind(to: beforeSend, into: directory.appendingPathComponent("B-fork"))
            let fork = try TestDevice("B-fork", server: server, directory: directory)
            #expect(try fork.engine.state.pendingRecordZoneChanges == [.saveRecord(Self.note)])
            try fork.write(Self.note, "B")

            // This time B fetches first: it learns "A", and its user writes "B" on top of it.
            try await fork.engine.fetchChanges()
            #expect(fork.title(Self.note) == "A")
            try fork.write(Self.note, "B")
            try await fork.engine.sendChanges()
            #expect(
                fork.syncEvents.allSatisfy { event in
                    if case .sentRecordZoneChanges(let sent) = event { sent.failedRecordSaves.isEmpty } else { true }
                })
            try await phoneA.sync()
            #expect(phoneA.title(Self.note) == "B")

            // The original timeline is untouched (its engine only noted the fork's push hints);
            // both logs keep their projections.
            #expect(try Self.offsets(of: "sendStarted", in: phoneB.engine.deviceLog, after: originalEnd) == [])
            #expect(try phoneB.engine.deviceLog.state(at: originalEnd).pendingRecordZoneChanges == [])
            #expect(phoneB.title(Self.note) == "A")
            #expect(try fork.engine.deviceLog.log.verifyProjections() == nil)
            #expect(try phoneB.engine.deviceLog.log.verifyProjections() == nil)
        }
    }
}
