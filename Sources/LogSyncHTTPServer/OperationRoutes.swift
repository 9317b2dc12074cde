import Foundation
import HTTPTypes
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import SyncModel

/// A failed request: the status and the error its body carries.
struct HTTPFailure: Error {
    var status: Int
    var error: SyncError
    /// Whether the connection must close after the answer (a body left unread).
    var closeConnection = false

    init(_ status: Int, _ error: SyncError, closeConnection: Bool = false) {
        self.status = status
        self.error = error
        self.closeConnection = closeConnection
    }

    /// A whole-request error, with the status its code maps to.
    init(_ error: SyncError) {
        self.init(WireStatus.status(for: error.code), error)
    }
}

/// `POST /v1/databases/{scope}/{operation}`: authenticate, read the body within the limit,
/// decode, run the operation on the user's database, encode the answer.
struct OperationRoutes: Sendable {
    let http: HTTPSyncServer

    func respond(to request: Request, context: ServerRequestContext) async -> Response {
        var footprint = Footprint()
        let response = await handle(request, context: context, footprint: &footprint)
        // The body and everything decoded from it are freed by now (they were `handle`'s).
        http.memoryReturn.ended(began: footprint.large, large: footprint.largeAnswer)
        return response
    }

    /// What a request weighed on the server's memory (``MemoryReturn``).
    struct Footprint {
        /// Its body was large, and ``MemoryReturn/began()`` was called.
        var large = false
        /// Its answer was large.
        var largeAnswer = false
    }

    private func handle(_ request: Request, context: ServerRequestContext, footprint: inout Footprint) async -> Response
    {
        let format = WireFormat.forResponse(accept: request.headers[.accept])
        let started = ContinuousClock.now
        var logger = context.logger
        // Every step throws HTTPFailure, the answer it chose (status and error).
        do throws(HTTPFailure) {
            let (scope, operation) = try route(context)
            logger[metadataKey: "operation"] = "\(operation)"
            logger[metadataKey: "scope"] = "\(scope)"
            let (user, device) = try authenticatedDevice(request)
            return try await run(
                operation, on: http.server.database(for: user, scope: scope, device: device), request: request,
                answerFormat: format, logger: logger, since: started, footprint: &footprint)
        } catch {
            return Self.refusal(
                error, closing: error.closeConnection, logger: logger, since: started, context: context, format: format)
        }
    }

    /// Reads the body of an authenticated request within the limits, runs `operation` on
    /// `database` and answers in `answerFormat`: the device routes' work, and the admin
    /// routes' reads of a user's database (``AdminChangeRoutes``).
    func run(
        _ operation: WireOperation, on database: InProcessDatabase, request: Request, answerFormat format: WireFormat,
        logger: Logger, since started: ContinuousClock.Instant, footprint: inout Footprint
    ) async throws(HTTPFailure) -> Response {
        let bodyFormat = try bodyFormat(of: request)
        let body = try await readBody(request)
        func large() {
            guard !footprint.large else { return }
            http.memoryReturn.began()
            footprint.large = true
        }
        if body.count >= MemoryReturn.largeBytes { large() }
        // Measured before anything is decoded: a body past a limit is refused here (413).
        let shape = try measure(body, bodyFormat, operation)
        if shape.elements >= MemoryReturn.largeElements { large() }
        let ticket = try await admitted(weight: RequestGate.weight(bodyBytes: body.count, elements: shape.elements))
        defer { http.requestGate.leave(ticket) }
        let answer = try await perform(
            operation, body: body, bodyFormat: bodyFormat, answerFormat: format, on: database)
        footprint.largeAnswer = answer.count >= MemoryReturn.largeBytes
        logger.debug(
            "answered",
            metadata: [
                "status": "200", "bytes.in": "\(body.count)", "bytes.out": "\(answer.count)",
                "elements": "\(shape.elements)",
                "ms": "\((ContinuousClock.now - started).milliseconds)",
            ])
        var headers = HTTPFields()
        headers[.contentType] = format.mediaType
        headers[HTTPField.Name(WireProtocol.versionHeader)!] = "\(WireProtocol.version)"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer)))
    }

    /// The answer to a refused request, logged (`refused`, at error level for a 5xx). With
    /// `closing`, the rest of the body is not wanted: the server stops reading it, the answer
    /// still goes out, then the connection closes, instead of the server draining the body.
    static func refusal(
        _ failure: HTTPFailure, closing: Bool, logger: Logger, since started: ContinuousClock.Instant,
        context: ServerRequestContext, format: WireFormat
    ) -> Response {
        let level: Logger.Level = failure.status >= 500 ? .error : .debug
        logger.log(
            level: level, "refused",
            metadata: [
                "status": "\(failure.status)", "error": "\(failure.error)",
                "ms": "\((ContinuousClock.now - started).milliseconds)",
            ])
        if closing { context.channel.close(mode: .input, promise: nil) }
        return errorResponse(failure.error, status: failure.status, format: format, closeConnection: closing)
    }

    /// Answers a `GET …/push` that was not upgraded: 404 for an unknown scope or version, 401
    /// without a valid token, 400 otherwise (no or a bad device name, or no `Upgrade: websocket`).
    func refusePush(_ request: Request, context: ServerRequestContext) async -> Response {
        let format = WireFormat.forResponse(accept: request.headers[.accept])
        do {
            _ = try scope(context)
            let authentication = try Self.authentication(
                authorization: request.headers[.authorization], tokens: http.tokens)
            _ = try Self.device(
                header: try Self.pushDevice(header: request.headers[HTTPField.Name(WireProtocol.deviceHeader)!])
                    .rawValue,
                of: authentication)
            if request.headers[HTTPField.Name(PushRoute.deferredHeader)!] != nil {
                // The gate had to look the token up in the storage; it is known now.
                throw HTTPFailure(
                    SyncError(
                        .serviceUnavailable,
                        "the server was looking up the push channel's token; open the channel again",
                        retryAfter: .seconds(1)))
            }
            throw HTTPFailure(
                400,
                SyncError(.invalidArguments, "the push channel is a WebSocket: send GET with \"Upgrade: websocket\""))
        } catch let failure as HTTPFailure {
            return Self.errorResponse(failure.error, status: failure.status, format: format)
        } catch {
            return Self.errorResponse(SyncError(.internalError, cause: "\(error)"), status: 500, format: format)
        }
    }

    // MARK: Steps

    /// Checks the protocol version a path names: 404 (`incompatibleVersion`) for another one.
    static func checkVersion(_ context: ServerRequestContext) throws(HTTPFailure) {
        let version = context.parameters.get("version") ?? ""
        guard version == WireProtocol.versionPath else {
            throw HTTPFailure(
                404,
                SyncError(
                    .incompatibleVersion,
                    "this server speaks protocol \(WireProtocol.versionPath), not \"\(version)\""))
        }
    }

    /// The scope a path names, after checking its protocol version.
    func scope(_ context: ServerRequestContext) throws(HTTPFailure) -> DatabaseScope {
        try Self.checkVersion(context)
        do {
            return try WireProtocol.scope(named: context.parameters.get("scope") ?? "")
        } catch {
            throw HTTPFailure(404, error)
        }
    }

    /// The scope and operation a path names.
    func route(_ context: ServerRequestContext) throws(HTTPFailure) -> (DatabaseScope, WireOperation) {
        let scope = try scope(context)
        do {
            return (scope, try WireOperation.named(context.parameters.get("operation") ?? ""))
        } catch {
            throw HTTPFailure(404, error)
        }
    }

    /// The user of the request's bearer token.
    func authenticate(_ request: Request) throws(HTTPFailure) -> UserID {
        try Self.authenticate(authorization: request.headers[.authorization], tokens: http.tokens)
    }

    static func authenticate(authorization: String?, tokens: TokenStore) throws(HTTPFailure) -> UserID {
        switch try authentication(authorization: authorization, tokens: tokens) {
        case .bearer(let user): return user
        case .session(let grant): return grant.user
        case .expired, .unknown: preconditionFailure("refused by authentication(authorization:tokens:)")
        }
    }

    /// What the request's bearer token stands for: a bearer token's user or a session's grant.
    ///
    /// - Throws: ``HTTPFailure`` 401 for no token, an unknown one, or a session's expired access
    ///   token (its message says so, so that the device refreshes); 503 when the store cannot
    ///   be asked.
    static func authentication(
        authorization: String?, tokens: TokenStore
    ) throws(HTTPFailure) -> TokenStore.Authentication {
        let token = try bearerToken(authorization)
        let found: TokenStore.Authentication
        do {
            found = try tokens.authenticate(token)
        } catch {
            throw HTTPFailure(error)
        }
        switch found {
        case .bearer, .session: return found
        case .expired:
            throw HTTPFailure(401, SyncError(.notAuthenticated, Self.expiredMessage))
        case .unknown:
            throw HTTPFailure(401, SyncError(.notAuthenticated, "the bearer token is not valid"))
        }
    }

    /// The message of the 401 for a session's expired access token.
    static let expiredMessage = "the access token expired; refresh the session (POST /v1/sessions/refresh)"

    /// The token of an `Authorization: Bearer <token>` header.
    static func bearerToken(_ authorization: String?) throws(HTTPFailure) -> String {
        guard let authorization else {
            throw HTTPFailure(
                401, SyncError(.notAuthenticated, "the request has no Authorization header; send \"Bearer <token>\""))
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw HTTPFailure(401, SyncError(.notAuthenticated, "the Authorization header is not \"Bearer <token>\""))
        }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }

    /// The path parameter `name`, percent-decoded (Hummingbird hands it over as it came).
    ///
    /// - Throws: ``HTTPFailure`` 400 naming `what` when it is not percent-encoded UTF-8.
    static func pathParameter(
        _ name: String, of context: ServerRequestContext, naming what: String
    ) throws(HTTPFailure) -> String {
        guard let decoded = (context.parameters.get(name) ?? "").removingPercentEncoding else {
            throw HTTPFailure(
                400,
                SyncError(
                    .invalidArguments,
                    "\(what) in the path is not percent-encoded UTF-8 (each % followed by two hexadecimal digits)"))
        }
        return decoded
    }

    /// The user of the request's bearer token, and its device: the one its `LogSync-Device`
    /// header names, or for a session, the session's.
    func authenticatedDevice(_ request: Request) throws(HTTPFailure) -> (UserID, DeviceID?) {
        let authentication = try Self.authentication(
            authorization: request.headers[.authorization], tokens: http.tokens)
        let device = try Self.device(
            header: request.headers[HTTPField.Name(WireProtocol.deviceHeader)!], of: authentication)
        switch authentication {
        case .bearer(let user): return (user, device)
        case .session(let grant): return (grant.user, device)
        case .expired, .unknown: preconditionFailure("refused by authentication(authorization:tokens:)")
        }
    }

    /// The device of a request whose `LogSync-Device` header is `header` and whose token is
    /// `authentication`'s. A session is bound to its device: a header naming another is
    /// refused (400), and without one the request is the session's device's.
    static func device(header: String?, of authentication: TokenStore.Authentication) throws(HTTPFailure) -> DeviceID? {
        let named = try device(header: header)
        guard case .session(let grant) = authentication else { return named }
        guard let named else { return grant.device }
        guard named == grant.device else { throw sessionDeviceMismatch(named: named, session: grant.device) }
        return named
    }

    /// The refusal of a request whose device header names another device than its session's.
    static func sessionDeviceMismatch(named: DeviceID, session: DeviceID) -> HTTPFailure {
        HTTPFailure(
            400,
            SyncError(
                .invalidArguments,
                "the \(WireProtocol.deviceHeader) header names device \"\(named.rawValue)\", but the access token is the session of device \"\(session.rawValue)\""
            ))
    }

    /// The device a `LogSync-Device` header names, checked by `DeviceID.validate()` (bytes that
    /// were not UTF-8 arrive as U+FFFD, which it refuses).
    static func device(header: String?) throws(HTTPFailure) -> DeviceID? {
        guard let header else { return nil }
        let device = DeviceID(header)
        do {
            try device.validate()
        } catch {
            var error = error
            error.message = "the \(WireProtocol.deviceHeader) header holds an \(error.message)"
            throw HTTPFailure(400, error)
        }
        return device
    }

    /// The device a push upgrade's `LogSync-Device` header names: required, since the channel
    /// skips that device's own commits (F114).
    static func pushDevice(header: String?) throws(HTTPFailure) -> DeviceID {
        guard let device = try device(header: header) else {
            throw HTTPFailure(
                400,
                SyncError(
                    .invalidArguments,
                    "the push channel needs a \(WireProtocol.deviceHeader) header naming this device (1 to 255 bytes of UTF-8), so that its own commits are not pushed back to it"
                ))
        }
        return device
    }

    /// The format of the body, from `Content-Type` (Protocol Buffers when absent).
    func bodyFormat(of request: Request) throws(HTTPFailure) -> WireFormat {
        guard let contentType = request.headers[.contentType] else { return .protobuf }
        guard let format = WireFormat(contentType: contentType) else {
            throw HTTPFailure(
                415,
                SyncError(
                    .invalidArguments,
                    "Content-Type \"\(contentType)\" is not supported; send \(WireFormat.protobuf.mediaType) or \(WireFormat.json.mediaType)"
                ))
        }
        return format
    }

    /// The whole body, refused as soon as it passes the limit: at once when `Content-Length`
    /// says so, otherwise when the bytes read pass it. The rest of the body is never read.
    func readBody(_ request: Request) async throws(HTTPFailure) -> [UInt8] {
        let limit = http.configuration.maxRequestBodyBytes
        return try await Self.readBody(request, limit: limit) { size in
            HTTPFailure(
                413,
                SyncError(
                    .limitExceeded, "the request body of \(size) is larger than this server's limit of \(limit) bytes"),
                closeConnection: true)
        }
    }

    /// The whole body of `request`, at most `limit` bytes: past it, `tooLarge` (given the size
    /// as far as known) is thrown, at once when `Content-Length` says so.
    static func readBody(
        _ request: Request, limit: Int, tooLarge: (_ size: String) -> HTTPFailure
    ) async throws(HTTPFailure) -> [UInt8] {
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw tooLarge("\(declared) bytes")
        }
        var body: [UInt8] = []
        // One allocation for a body of announced length, rather than doublings and copies.
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > 0 {
            body.reserveCapacity(declared)
        }
        do {
            for try await chunk in request.body {
                guard body.count + chunk.readableBytes <= limit else { throw tooLarge("more than \(limit) bytes") }
                body.append(contentsOf: chunk.readableBytesView)
            }
        } catch let failure as HTTPFailure {
            throw failure
        } catch {
            throw HTTPFailure(
                400, SyncError(.invalidArguments, "the request body could not be read", cause: "\(error)"))
        }
        return body
    }

    /// The shape of a request body, measured against the limits before it is decoded
    /// (``RequestBudget``).
    ///
    /// - Throws: ``HTTPFailure`` 413 `limitExceeded` naming the operation and the limit.
    func measure(_ body: [UInt8], _ format: WireFormat, _ operation: WireOperation) throws(HTTPFailure) -> BodyShape {
        do {
            return try RequestBudget.check(body, as: format, for: operation)
        } catch {
            throw HTTPFailure(error)
        }
    }

    /// Waits for the request's place in ``HTTPSyncServer/requestGate``.
    ///
    /// - Throws: ``HTTPFailure`` 503 `serviceUnavailable` when too many requests wait already.
    func admitted(weight: Int) async throws(HTTPFailure) -> RequestGate.Ticket {
        do {
            return try await http.requestGate.enter(weight: weight)
        } catch {
            throw HTTPFailure(error)
        }
    }

    /// Decodes the request, runs the operation, encodes the answer.
    func perform(
        _ operation: WireOperation, body: [UInt8], bodyFormat: WireFormat, answerFormat: WireFormat,
        on database: InProcessDatabase
    ) async throws(HTTPFailure) -> [UInt8] {
        func decoded<T>(_ decode: () throws(SyncError) -> T) throws(HTTPFailure) -> T {
            do {
                return try decode()
            } catch {
                throw HTTPFailure(400, error)
            }
        }
        /// Decodes the request with `decode`, runs it, encodes the answer with `encode` (`Wire`'s).
        func answer<Request, Answer>(
            _ decode: (Request.Type, [UInt8], WireFormat) throws(SyncError) -> Request,
            _ run: (Request) async throws -> Answer, _ encode: (Answer, WireFormat) -> [UInt8]
        ) async throws -> [UInt8] {
            let request = try decoded { () throws(SyncError) in try decode(Request.self, body, bodyFormat) }
            return encode(try await run(request), answerFormat)
        }
        func emptyBody() throws(HTTPFailure) {
            guard
                body.isEmpty
                    || (bodyFormat == .json && body.allSatisfy { [0x20, 0x0A, 0x0D, 0x09, 0x7B, 0x7D].contains($0) })
            else {
                throw HTTPFailure(
                    400, SyncError(.invalidArguments, "\(operation) takes no request body, but got \(body.count) bytes")
                )
            }
        }
        do {
            switch operation {
            case .modifyZones: return try await answer(Wire.decode, database.modifyZones, Wire.encode)
            case .fetchZones: return try await answer(Wire.decode, database.fetchZones, Wire.encode)
            case .modifyRecords: return try await answer(Wire.decode, database.modifyRecords, Wire.encode)
            case .fetchDatabaseChanges: return try await answer(Wire.decode, database.fetchDatabaseChanges, Wire.encode)
            case .fetchZoneChanges:
                guard answerFormat == .protobuf else {
                    return try await answer(Wire.decode, database.fetchZoneChanges, Wire.encode)
                }
                // The records as the log stores them, copied into the answer where they are
                // returned unchanged, instead of decoded and encoded again (Docs/Performance.md).
                return try await answer(Wire.decode, database.fetchZoneChangesPage) { page, _ in
                    Wire.encode(page.response, storedRecords: page.storedRecords)
                }
            case .modifySubscriptions: return try await answer(Wire.decode, database.modifySubscriptions, Wire.encode)
            case .allSubscriptions:
                try emptyBody()
                return Wire.encode(try await database.allSubscriptions(), as: answerFormat)
            case .currentUserRecordID:
                try emptyBody()
                return Wire.encode(try await database.currentUserRecordID(), as: answerFormat)
            case .fetchShareMetadata:
                let url = try decoded { () throws(SyncError) in
                    try Wire.decode(shareMetadataRequest: body, as: bodyFormat)
                }
                return Wire.encode(try await database.fetchShareMetadata(url: url), as: answerFormat)
            case .acceptShares: return try await answer(Wire.decode, database.acceptShares, Wire.encode)
            case .fetchShareParticipants:
                return try await answer(Wire.decode, database.fetchShareParticipants, Wire.encode)
            case .registerDeviceKey:
                return try await answer(Wire.decode, database.registerDeviceKey) { _, format in
                    Wire.encodeRegisterDeviceKeyResponse(as: format)
                }
            case .fetchZoneKeys: return try await answer(Wire.decode, database.fetchZoneKeys, Wire.encode)
            case .saveZoneKeys: return try await answer(Wire.decode, database.saveZoneKeys, Wire.encode)
            }
        } catch let failure as HTTPFailure {
            throw failure
        } catch let error as SyncError {
            throw HTTPFailure(error)
        } catch {
            // InProcessDatabase throws SyncError only; anything else is a server bug.
            throw HTTPFailure(500, SyncError(.internalError, "\(operation) failed on the server", cause: "\(error)"))
        }
    }

    // MARK: Answers

    /// A response carrying `error` in `format`, with `Retry-After` when the error has a wait and
    /// `WWW-Authenticate` for 401.
    static func errorResponse(
        _ error: SyncError, status: Int, format: WireFormat, closeConnection: Bool = false
    ) -> Response {
        RequestOutcome.current?.code = error.code
        var headers = HTTPFields()
        headers[.contentType] = format.mediaType
        headers[HTTPField.Name(WireProtocol.versionHeader)!] = "\(WireProtocol.version)"
        if let retryAfter = WireStatus.retryAfterHeader(for: error) { headers[.retryAfter] = retryAfter }
        if status == 401 { headers[.wwwAuthenticate] = "Bearer realm=\"logsync\"" }
        if closeConnection { headers[.connection] = "close" }
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: Wire.encode(error, as: format))))
    }
}

extension Duration {
    /// Whole milliseconds, for logs.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
