import AsyncHTTPClient
import Foundation
import LogSyncWire
import NIOCore
import NIOHTTP1
import NIOSSL
import SyncModel

/// The JSON requests of ``SessionClient`` and ``AdminClient``: one server, bodies in JSON, a
/// bearer token when there is one, and the server's errors as `SyncError`s.
struct JSONRequests: Sendable {
    var serverURL: URL
    var requestTimeout: Duration
    var tlsConfiguration: TLSConfiguration?
    /// The largest answer read.
    var maxResponseBytes = 1 << 20

    /// `body` decoded as the JSON of `T`; an answer that does not decode is the server's fault.
    func decoded<T: Decodable>(_ body: [UInt8]) throws(SyncError) -> T {
        do {
            return try WireSessions.decode(T.self, from: body)
        } catch {
            throw SyncError(.internalError, "the server's answer is not the JSON expected", cause: "\(error)")
        }
    }

    /// Sends one request and returns the body of its 2xx answer.
    ///
    /// - Throws: `SyncError`: the server's, or a transport failure (`TransportFailure`).
    ///
    /// - Parameters:
    ///   - format: The body's and the answer's format: JSON, or for the database operations'
    ///     bodies, Protocol Buffers.
    ///   - mayHaveApplied: Whether a request whose answer is lost may have changed something
    ///   (`serverResponseLost`); by default, any but a GET.
    func send(
        _ method: HTTPMethod, _ path: String, token: String?, body: [UInt8]?, doing operation: String,
        format: WireFormat = .json, mayHaveApplied: Bool? = nil
    ) async throws(SyncError) -> [UInt8] {
        var request = HTTPClientRequest(url: serverURL.route(path))
        request.method = method
        if let token { request.headers.add(name: WireProtocol.authorizationHeader, value: "Bearer \(token)") }
        request.headers.add(name: "Accept", value: format.mediaType)
        if let body {
            request.headers.add(name: "Content-Type", value: format.mediaType)
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        request.tlsConfiguration = tlsConfiguration
        let status: Int
        let headers: HTTPHeaders
        let answer: [UInt8]
        do {
            let response = try await HTTPSyncClient.httpClient.execute(
                request, timeout: .nanoseconds(requestTimeout.nanoseconds))
            status = Int(response.status.code)
            headers = response.headers
            var buffer = try await response.body.collect(upTo: maxResponseBytes)
            answer = buffer.readBytes(length: buffer.readableBytes) ?? []
        } catch {
            throw TransportFailure.map(
                error, doing: operation, mayHaveApplied: mayHaveApplied ?? (method != .GET), server: serverURL)
        }
        guard (200..<300).contains(status) else {
            throw HTTPSyncClient.error(status: status, headers: headers, body: answer, doing: operation)
        }
        return answer
    }
}
