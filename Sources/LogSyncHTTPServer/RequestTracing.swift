import HTTPTypes
import Hummingbird
import LogSyncWire
import Tracing

/// A server span per request (``HTTPSyncServer``'s `tracer`), named `<METHOD> <route>` (`POST
/// modifyRecords`, `PUT asset upload`, `GET health`), a child of the trace context the request's
/// headers carry (W3C `traceparent` and `tracestate` with an OpenTelemetry tracer, as
/// `HTTPSyncClient` sends them) as the tracer extracts it. The request is handled inside it, so
/// the server's own spans (`server.commit`, `server.store.append`) are its children.
///
/// Hummingbird's `TracingMiddleware` does the same with the tracer bootstrapped in
/// `InstrumentationSystem` only; this one takes the server's, so that a test gives its own
/// without bootstrapping. The span ends when the handler returns its response (before a streamed
/// body, such as an asset download, is written).
struct RequestTracingMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let tracer: any Tracer

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var parent = InstrumentationContext.current ?? .topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let span = tracer.startSpan(
            "\(request.method.rawValue) \(Self.route(of: request))", context: parent, ofKind: .server)
        defer { span.end() }
        span.updateAttributes { attributes in
            attributes["http.request.method"] = request.method.rawValue
            attributes["url.path"] = request.uri.path
        }
        do {
            let response = try await InstrumentationContext.$current.withValue(span.context) {
                try await next(request, context)
            }
            span.attributes["http.response.status_code"] = Int(response.status.code)
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return response
        } catch {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    /// The route a request's path names, as a span names it: the operation of a device route
    /// (`modifyRecords`), `push`, `asset upload` / `asset download` / `asset upload status`,
    /// `health`, `sessions`, `devices`, `admin <what>`; else its first segments.
    static func route(of request: Request) -> String {
        let segments = request.uri.path.split(separator: "/").map(String.init)
        guard let first = segments.first else { return "/" }
        if first == "health" { return "health" }
        let rest = segments.dropFirst()  // after the version
        guard let area = rest.first else { return first }
        switch area {
        case "databases":
            let tail = Array(rest.dropFirst(2))  // after the scope
            if tail.count == 1, let operation = tail.first {
                return WireOperation(rawValue: operation)?.rawValue ?? (operation == "push" ? "push" : "databases")
            }
            if tail.first == "assets" {
                if tail.last == "upload" { return "asset upload status" }
                return request.method == .put ? "asset upload" : "asset download"
            }
            return "databases"
        case "admin":
            return rest.dropFirst().first.map { "admin \($0)" } ?? "admin"
        default:
            return area
        }
    }
}

/// Reads the trace context's headers from a request.
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from headers: HTTPFields) -> String? {
        guard let name = HTTPField.Name(key) else { return nil }
        return headers[name]
    }
}
