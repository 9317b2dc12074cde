import Foundation
import HTTPTypes
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import SyncModel

/// What the JSON routes (sessions, devices, admin) share: the protocol version check, bodies
/// read within a limit and decoded, blocking store work, and answers in JSON or refusals in
/// the wire's error body.
struct JSONRoutes: Sendable {
    let http: HTTPSyncServer

    /// What a route answers: JSON, or nothing (204).
    enum Answer {
        case json(any Encodable)
        case noContent
    }

    /// Runs a route's `body`, answering its result or the failure it threw.
    func answer(
        _ request: Request, context: ServerRequestContext, route: String,
        _ body: (Logger) async throws(HTTPFailure) -> Answer
    ) async -> Response {
        let started = ContinuousClock.now
        var logger = context.logger
        logger[metadataKey: "route"] = "\(route)"
        do throws(HTTPFailure) {
            try OperationRoutes.checkVersion(context)
            switch try await body(logger) {
            case .json(let value):
                return Self.response(.ok, value)
            case .noContent:
                return Response(status: .noContent)
            }
        } catch {
            return OperationRoutes.refusal(
                error, closing: error.closeConnection, logger: logger, since: started, context: context, format: .json)
        }
    }

    /// `value` in JSON, with `status`, never cached.
    static func response(_ status: HTTPResponse.Status, _ value: any Encodable) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = WireFormat.json.mediaType
        headers[.cacheControl] = "no-store"
        return Response(
            status: status, headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: WireSessions.encode(value))))
    }

    /// The request's JSON body, read up to `limit` bytes.
    ///
    /// - Throws: ``HTTPFailure`` 413 for a larger body, 400 naming what does not decode.
    func decodedBody<T: Decodable>(
        _ request: Request, limit: Int = WireSessions.maxBodyBytes
    ) async throws(HTTPFailure) -> T {
        let tooLarge = HTTPFailure(
            413, SyncError(.limitExceeded, "the request body is larger than this route's limit of \(limit) bytes"),
            closeConnection: true)
        let body = try await OperationRoutes.readBody(request, limit: limit) { _ in tooLarge }
        do {
            return try WireSessions.decode(T.self, from: body)
        } catch {
            throw HTTPFailure(
                400, SyncError(.invalidArguments, "the request body is not the JSON this route takes: \(error)"))
        }
    }

    /// Runs the blocking `body` where the storage allows blocking; `what` names the store in
    /// the 503 of an unexpected failure.
    func run<R: Sendable>(
        _ what: String, _ body: @escaping @Sendable () throws -> R
    ) async throws(HTTPFailure) -> R {
        do {
            return try await http.server.storage.perform(body)
        } catch let error as SyncError {
            throw HTTPFailure(error)
        } catch {
            throw HTTPFailure(
                503, SyncError(.serviceUnavailable, "the \(what) failed: \(error)", retryAfter: .seconds(1)))
        }
    }
}
