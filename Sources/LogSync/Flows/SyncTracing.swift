import LogStore
import SyncModel
import Tracing

/// The names of the engine's spans and of their attributes (Docs/Engine.md, "Traces").
///
/// A send is a `sync.send` span, a fetch a `sync.fetch` span, both tagged with the offset of
/// their first device-log entry (`sendStarted`, `fetchStarted`) and of their last. Below them,
/// each request is a span of its own, tagged with the offset of the entry that describes it:
/// `sync.send.batch` (its `batchPrepared`, with the request ID), `sync.send.zones` (its
/// `databaseChangesSent`), `sync.fetch.page` (its `databaseChangesFetched` or
/// `zoneChangesFetched`). The request runs inside its span, so the database's client (the HTTP
/// client's `http.client <operation>`) makes its span a child of it and carries the trace to the
/// server. The trace context injected for the request is recorded in the entry that describes
/// it, so `logtool dump` shows the request's trace ID.
///
/// The tracer is the configuration's (``SyncEngine/Configuration/tracer``): with none
/// bootstrapped it is swift-distributed-tracing's no-op tracer, and nothing is recorded.
enum SyncTracing {
    static let sendSpan = "sync.send"
    static let fetchSpan = "sync.fetch"
    static let batchSpan = "sync.send.batch"
    static let zonesSpan = "sync.send.zones"
    static let pageSpan = "sync.fetch.page"

    /// The device-log offset of the entry the span's step wrote (for a send or fetch, its first).
    static let deviceLogOffset = "logsync.device_log.offset"
    /// The device-log offset of a send's or fetch's last entry, or of a batch's `batchResult`.
    static let deviceLogEndOffset = "logsync.device_log.end_offset"
    /// The request ID a record batch is sent under (F103).
    static let requestID = "logsync.request_id"
    /// The zone a page was fetched from.
    static let zone = "logsync.zone"

    /// The trace context of the current span (or of `context`) as `tracer` injects it into a request's headers;
    /// empty with no current context or a tracer that injects nothing (the no-op tracer).
    static func injectedHeaders(
        _ tracer: any Tracer, context: InstrumentationContext? = InstrumentationContext.current
    ) -> [String: String] {
        guard let context else { return [:] }
        var headers: [String: String] = [:]
        tracer.inject(context, into: &headers, using: DictionaryInjector())
        return headers
    }

    /// An offset as a span attribute.
    static func attribute(_ offset: LogOffset) -> Int64 { Int64(truncatingIfNeeded: offset.rawValue) }
}

/// Puts injected values into a dictionary.
struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}
