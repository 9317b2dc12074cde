import Foundation
import InMemoryTracing
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import SyncTestKit
import TemporaryDirectory
import Testing
import Tracing

/// The engine's spans with a server in process: the context of a request's span reaches the
/// database call, so the server's commit spans are its children in the same trace; an engine
/// with no tracer records nothing in its log.
@Suite("Engine traces")
struct EngineTracingTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func integer(_ span: FinishedInMemorySpan, _ key: String) -> UInt64? {
        guard case .int64(let value)? = span.attributes[key]?.toSpanAttribute() else { return nil }
        return UInt64(value)
    }

    static func only(_ name: String, in spans: [FinishedInMemorySpan]) throws -> FinishedInMemorySpan {
        try #require(spans.count { $0.operationName == name } == 1, "one \(name) span")
        return try #require(spans.first { $0.operationName == name })
    }

    @Test("a send's batch span is the parent of the in-process server's commit, and names its batchPrepared")
    func sendInProcess() async throws {
        try await withTemporaryDirectory { directory in
            let tracer = InMemoryTracer()
            let server = try SyncServer(
                .init(directory: directory.appendingPathComponent("server"), durability: .fast, tracer: tracer))
            let phone = try TestDevice(
                "phone", database: server.database(for: "alice", device: "phone"),
                directory: directory.appendingPathComponent("phone", isDirectory: true)
            ) { $0.tracer = tracer }
            try phone.createZone(Self.notes)
            try phone.write(Record.ID(recordName: "n1", zoneID: Self.notes), "first")
            let before = try phone.engine.deviceLog.log.lastOffset.next
            try await phone.engine.sendChanges()

            let spans = tracer.finishedSpans
            let send = try Self.only("sync.send", in: spans)
            let zones = try Self.only("sync.send.zones", in: spans)
            let batch = try Self.only("sync.send.batch", in: spans)
            #expect(zones.parentSpanID == send.spanID)
            #expect(batch.parentSpanID == send.spanID)
            let commits = spans.filter { $0.operationName == "server.commit" }
            #expect(commits.count == 2, "the zone's and the batch's")
            let batchCommit = try #require(commits.first { $0.parentSpanID == batch.spanID })
            #expect(batchCommit.traceID == send.traceID)
            #expect(
                spans.contains { $0.operationName == "server.store.append" && $0.parentSpanID == batchCommit.spanID })

            var offsets: [String: LogOffset] = [:]
            try phone.engine.deviceLog.log.forEachEntry(from: before) { entry in
                if let name = DeviceEntry.Kind.name(of: entry.kind) { offsets[name] = entry.offset }
            }
            #expect(Self.integer(send, "logsync.device_log.offset") == offsets["sendStarted"]?.rawValue)
            #expect(Self.integer(send, "logsync.device_log.end_offset") == offsets["sendFinished"]?.rawValue)
            #expect(Self.integer(zones, "logsync.device_log.offset") == offsets["databaseChangesSent"]?.rawValue)
            #expect(Self.integer(batch, "logsync.device_log.offset") == offsets["batchPrepared"]?.rawValue)
            // The batch saved its record: its result is written against its batchPrepared (kind 15).
            #expect(Self.integer(batch, "logsync.device_log.end_offset") == offsets["batchSaved"]?.rawValue)
        }
    }

    @Test("an engine with no tracer (nothing bootstrapped) records no trace context")
    func untraced() async throws {
        try await withDevice("phone") { _, phone in
            try phone.createZone(Self.notes)
            try phone.write(Record.ID(recordName: "n1", zoneID: Self.notes), "first")
            try await phone.engine.sendChanges()
            try await phone.engine.fetchChanges()
            var traced: [LogOffset] = []
            try phone.engine.deviceLog.log.forEachEntry { entry in
                if try !DeviceEntry.traceHeaders(of: entry).isEmpty { traced.append(entry.offset) }
            }
            #expect(traced.isEmpty)
        }
    }
}
