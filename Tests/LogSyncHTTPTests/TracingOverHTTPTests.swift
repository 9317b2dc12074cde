import Foundation
import InMemoryTracing
import LogStore
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncTesting
import TemporaryDirectory
import Testing
import Tracing

/// One in-memory tracer given to the engine, its HTTP client and a server on loopback: the
/// spans of a send and of a fetch form one trace from the engine's step through the HTTP
/// request (its trace context carried in the request's headers, over the real connection) to
/// the server's commit and log write, and each span names the offsets it wrote, which the test
/// reads back from the device's log and the server's.
@Suite("Traces: engine → HTTP → server", .timeLimit(.minutes(2)))
struct TracingOverHTTPTests {
    static let notes = RecordZone.ID(zoneName: "Notes")
    static func note(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: notes) }

    /// A server with `tracer` on loopback, and a manual-sync phone of alice's whose engine and
    /// HTTP client trace with `tracer` too.
    static func withTracedPhone(
        _ tracer: InMemoryTracer, _ body: (TestDevice, SyncServer) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let server = try SyncServer(
                .init(directory: directory.appendingPathComponent("server"), durability: .fast, tracer: tracer))
            let tokens = TokenStore()
            try tokens.add(token: LiveServer.aliceToken, for: "alice")
            try await serving(
                HTTPSyncServer(server: server, tokens: tokens, configuration: .init(port: 0), tracer: tracer)
            ) { running in
                let client = HTTPSyncClient(
                    .init(
                        serverURL: URL(string: "http://127.0.0.1:\(running.port)")!,
                        credentials: .token(LiveServer.aliceToken), device: "phone", tracer: tracer))
                defer { client.close() }
                let phone = try TestDevice(
                    "phone", database: client.database(),
                    directory: directory.appendingPathComponent("phone", isDirectory: true)
                ) { configuration in
                    configuration.automaticallySync = false
                    configuration.clock = TestClock()
                    configuration.tracer = tracer
                }
                try await body(phone, server)
            }
        }
    }

    /// The one finished span named `name` whose parent is `parent` (any parent when `nil`).
    static func span(
        _ name: String, under parent: FinishedInMemorySpan?, in spans: [FinishedInMemorySpan]
    ) throws -> FinishedInMemorySpan {
        let matching = spans.filter { $0.operationName == name && (parent == nil || $0.parentSpanID == parent?.spanID) }
        guard matching.count == 1, let span = matching.first else {
            throw TestFailure(
                "expected one span \(name) under \(parent?.operationName ?? "anything"), found \(matching.count) among "
                    + spans.map { "\($0.operationName) \($0.spanID)←\($0.parentSpanID ?? "-")" }.joined(separator: ", ")
            )
        }
        if let parent { #expect(span.traceID == parent.traceID, "\(name) is in its parent's trace") }
        return span
    }

    /// A span's integer attribute.
    static func integer(_ span: FinishedInMemorySpan, _ key: String) -> UInt64? {
        guard case .int64(let value)? = span.attributes[key]?.toSpanAttribute() else { return nil }
        return UInt64(value)
    }

    /// A span's string attribute.
    static func string(_ span: FinishedInMemorySpan, _ key: String) -> String? {
        guard case .string(let value)? = span.attributes[key]?.toSpanAttribute() else { return nil }
        return value
    }

    /// The device-log entries of `phone` whose kind is `kind`, from `offset` on.
    static func entries(_ phone: TestDevice, kind: EntryKind, from offset: LogOffset) throws -> [LogEntry] {
        var found: [LogEntry] = []
        try phone.engine.deviceLog.log.forEachEntry(from: offset) { if $0.kind == kind { found.append($0) } }
        return found
    }

    @Test(
        "a send's spans run from sync.send through the HTTP request to the commit and the log write, with both offsets")
    func sendTraced() async throws {
        let tracer = InMemoryTracer()
        try await Self.withTracedPhone(tracer) { phone, server in
            try phone.createZone(Self.notes)
            try await phone.engine.sendChanges()
            let before = try phone.engine.deviceLog.log.lastOffset.next
            tracer.clearAll()

            try phone.write(Self.note("n1"), "first")
            try await phone.engine.sendChanges()

            let spans = tracer.finishedSpans
            let send = try Self.span("sync.send", under: nil, in: spans)
            let batch = try Self.span("sync.send.batch", under: send, in: spans)
            let request = try Self.span("http.client modifyRecords", under: batch, in: spans)
            let served = try Self.span("POST modifyRecords", under: request, in: spans)
            let commit = try Self.span("server.commit", under: served, in: spans)
            let append = try Self.span("server.store.append", under: commit, in: spans)
            #expect(send.parentSpanID == nil, "the send starts the trace")
            #expect(request.kind == .client)
            #expect(served.kind == .server)

            // The device side: the batch span names its batchPrepared, which names the request
            // and recorded the trace context it was sent under; the send names its first entry.
            let prepared = try #require(
                try Self.entries(phone, kind: DeviceEntry.Kind.batchPrepared, from: before).first)
            #expect(Self.integer(batch, "logsync.device_log.offset") == prepared.offset.rawValue)
            guard case .batchPrepared(_, _, _, let requestID?) = try DeviceEntry(prepared) else {
                throw TestFailure("no request ID in the batchPrepared at \(prepared.offset.rawValue)")
            }
            #expect(Self.string(batch, "logsync.request_id") == requestID.rawValue)
            let recorded = try DeviceEntry.traceHeaders(of: prepared)
            #expect(recorded[InMemoryTracer.traceIDKey] == batch.traceID)
            #expect(recorded[InMemoryTracer.spanIDKey] == batch.spanID)
            #expect(DeviceEntry.traceID(in: recorded) == batch.traceID)
            let started = try #require(
                try Self.entries(phone, kind: DeviceEntry.Kind.sendStarted, from: before).first)
            #expect(Self.integer(send, "logsync.device_log.offset") == started.offset.rawValue)
            let result = try #require(
                try Self.entries(phone, kind: DeviceEntry.Kind.batchSaved, from: before).first)
            #expect(Self.integer(batch, "logsync.device_log.end_offset") == result.offset.rawValue)

            // The server side: the commit and its write name alice's private database and the
            // offsets written, where the server's log holds the saved note and the request's
            // outcome under the device's request ID.
            for span in [commit, append] {
                #expect(Self.string(span, "logsync.user") == "alice")
                #expect(Self.string(span, "logsync.database") == "private")
            }
            #expect(Self.string(commit, "logsync.request_id") == requestID.rawValue)
            let first = try #require(Self.integer(append, "logsync.server_log.offset"))
            let last = try #require(Self.integer(append, "logsync.server_log.end_offset"))
            #expect(Self.integer(commit, "logsync.server_log.offset") == first)
            #expect(Self.integer(commit, "logsync.server_log.end_offset") == last)
            let log = try server.admin.log(of: "alice")
            #expect(try log.lastOffset.rawValue == last, "the commit wrote the log's last entries")
            var written: [ServerEntry] = []
            for offset in first...last {
                written.append(try ServerEntry(try #require(try log.entry(at: LogOffset(rawValue: offset)))))
            }
            #expect(
                written.contains {
                    if case .recordSaved(let record) = $0 { record.recordID == Self.note("n1") } else { false }
                })
            #expect(
                written.contains { if case .requestOutcome(let id, _, _, _) = $0 { id == requestID } else { false } })
        }
    }

    @Test("a fetch's page spans name their fetched entries and reach the server through HTTP")
    func fetchTraced() async throws {
        let tracer = InMemoryTracer()
        try await Self.withTracedPhone(tracer) { phone, _ in
            try phone.createZone(Self.notes)
            try phone.write(Self.note("n1"), "first")
            try await phone.engine.sendChanges()
            let before = try phone.engine.deviceLog.log.lastOffset.next
            tracer.clearAll()

            try await phone.engine.fetchChanges()

            let spans = tracer.finishedSpans
            let fetch = try Self.span("sync.fetch", under: nil, in: spans)
            let pages = spans.filter { $0.operationName == "sync.fetch.page" && $0.parentSpanID == fetch.spanID }
            let fetchedKinds = [DeviceEntry.Kind.databaseChangesFetched, DeviceEntry.Kind.zoneChangesFetched]
            var fetched: [LogEntry] = []
            try phone.engine.deviceLog.log.forEachEntry(from: before) {
                if fetchedKinds.contains($0.kind) { fetched.append($0) }
            }
            #expect(!fetched.isEmpty)
            #expect(pages.count == fetched.count, "one page span per fetched page")
            for entry in fetched {
                let page = try #require(
                    pages.first { Self.integer($0, "logsync.device_log.offset") == entry.offset.rawValue },
                    "a page span names the entry at \(entry.offset.rawValue)")
                #expect(DeviceEntry.traceID(in: try DeviceEntry.traceHeaders(of: entry)) == page.traceID)
                let operation =
                    entry.kind == DeviceEntry.Kind.databaseChangesFetched ? "fetchDatabaseChanges" : "fetchZoneChanges"
                let request = try Self.span("http.client \(operation)", under: page, in: spans)
                _ = try Self.span("POST \(operation)", under: request, in: spans)
            }
        }
    }
}
