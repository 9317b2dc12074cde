import LogStore
import ModelEntries
import SwiftProtobuf
import SyncModel

// The trace context of a request, kept with the entry that describes the request: a
// `batchPrepared` (the record batch sent), a `databaseChangesFetched` or `zoneChangesFetched`
// (the page fetched). It is what the engine's tracer injected for the request's span (W3C:
// `traceparent`, `tracestate`), so that `logtool dump` shows a request's trace ID and a trace
// leads back to the device log. It is not part of `DeviceEntry`: nothing the engine decides
// depends on it. Its field is the last of the message and written after the others, so a
// traced entry's payload is the untraced payload followed by the field's bytes (still in field
// order, so still canonical). Logs written before it, and entries of an engine with no tracer
// bootstrapped, have none.

extension DeviceEntry {

    /// The bytes of the `trace_headers` field of an entry of `kind`, holding `headers` sorted by
    /// name; empty when there are none or the kind has no such field.
    static func traceHeadersField(_ headers: [String: String], kind: EntryKind) -> [UInt8] {
        guard !headers.isEmpty else { return [] }
        let sorted = headers.sorted { $0.key < $1.key }.map { name, value in
            var header = Logsync_Device_TraceHeader()
            header.name = name
            header.value = value
            return header
        }
        switch kind {
        case Kind.batchPrepared:
            var message = Logsync_Device_BatchPrepared()
            message.traceHeaders = sorted
            return ProtoWire.serialize(message)
        case Kind.databaseChangesFetched:
            var message = Logsync_Device_DatabaseChangesFetched()
            message.traceHeaders = sorted
            return ProtoWire.serialize(message)
        case Kind.zoneChangesFetched:
            var message = Logsync_Device_ZoneChangesFetched()
            message.traceHeaders = sorted
            return ProtoWire.serialize(message)
        default:
            return []
        }
    }

    /// The trace context recorded with the request `entry` describes (a `batchPrepared`,
    /// `databaseChangesFetched` or `zoneChangesFetched`), as the tracer injected it: header
    /// names and values. Empty for other kinds, for a request sent with no tracer, and in logs
    /// written before trace contexts were recorded.
    ///
    /// - Throws: `LogStoreError.corruptEntry` if the payload is not the kind's message.
    package static func traceHeaders(of entry: LogEntry) throws(LogStoreError) -> [String: String] {
        let headers: [Logsync_Device_TraceHeader]
        switch entry.kind {
        case Kind.batchPrepared:
            headers = try ProtoWire.decode(Logsync_Device_BatchPrepared.self, payloadOf: entry, "batchPrepared")
                .traceHeaders
        case Kind.databaseChangesFetched:
            headers = try ProtoWire.decode(
                Logsync_Device_DatabaseChangesFetched.self, payloadOf: entry, "databaseChangesFetched"
            ).traceHeaders
        case Kind.zoneChangesFetched:
            headers = try ProtoWire.decode(
                Logsync_Device_ZoneChangesFetched.self, payloadOf: entry, "zoneChangesFetched"
            ).traceHeaders
        default:
            return [:]
        }
        return Dictionary(headers.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// The trace ID in a request's trace context: the trace-id of a W3C `traceparent`
    /// (`00-<32 hex digits>-<16 hex digits>-<flags>`), else the value of a header whose name
    /// ends in `trace-id` or `traceid` (as other propagators and test tracers name it), else
    /// `nil`.
    package static func traceID(in headers: [String: String]) -> String? {
        if let parent = headers["traceparent"] {
            let parts = parent.split(separator: "-", omittingEmptySubsequences: false)
            if parts.count >= 4, parts[1].count == 32 { return String(parts[1]) }
        }
        let named = headers.keys.sorted().first {
            let name = $0.lowercased()
            return name.hasSuffix("trace-id") || name.hasSuffix("traceid")
        }
        return named.flatMap { headers[$0] }
    }
}

extension NewEntry {
    /// This entry with the trace context of the request it describes appended (see
    /// `DeviceEntry.traceHeaders(of:)`); unchanged when `headers` is empty or the kind records
    /// none.
    func tracing(_ headers: [String: String]) -> NewEntry {
        var entry = self
        entry.payload += DeviceEntry.traceHeadersField(headers, kind: kind)
        return entry
    }
}
