import HTTPTypes
import Hummingbird
import LogSyncWire
import Tracing

/// A server span per request (``HTTPSyncServer``'s `tracer`), named `<METHOD> <route>` with the
/// route's name as metrics label it (`POST modifyRecords`, `PUT asset upload`, `GET health live`), a child of the trace context the request's
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
            "\(request.method.rawValue) \(RouteName.of(request, context: context))", context: parent, ofKind: .server)
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
}

/// Reads the trace context's headers from a request.
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from headers: HTTPFields) -> String? {
        guard let name = HTTPField.Name(key) else { return nil }
        return headers[name]
    }
}
