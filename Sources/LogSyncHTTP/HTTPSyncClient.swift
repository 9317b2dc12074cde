import AsyncHTTPClient
import Foundation
import LogSyncWire
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import SyncModel
import Tracing

/// A connection to a LogSync server over HTTP, for one user (a bearer token, or a session) on one
/// device.
///
/// ```swift
/// let client = HTTPSyncClient(.init(serverURL: URL(string: "http://127.0.0.1:8080")!,
///                                   credentials: .token(token), device: "laptop"))
/// let engine = try SyncEngine(.init(database: client.database(.private), logDirectory: dir, delegate: app))
/// ```
///
/// Its databases (``HTTPCloudDatabase``) implement `CloudDatabase` with the same values and the
/// same errors as a server in process. Failures of the network itself become the codes the
/// engine retries (F89): `networkFailure` when the server cannot be reached or the answer to a
/// read is lost, `serviceUnavailable` for a server or proxy that answers 502–504 without an
/// error body, and `serverResponseLost` when the answer to a `modifyRecords` is lost after the
/// request may have been applied (F103: the engine resends it with the same request ID).
///
/// An `https://` server URL is checked against the system's trust store, or against
/// ``Configuration/tlsConfiguration`` when set (a private CA, say). A certificate that is not
/// trusted is a `networkFailure` naming the certificate problem: nothing was sent, and the engine
/// keeps the changes and retries, as for a server it cannot reach (Docs/Protocol.md, "TLS").
///
/// Requests share one process-wide HTTP client, so nothing needs shutting down; call ``close()``
/// to end the push streams of this client's databases.
public final class HTTPSyncClient: Sendable {
    /// Where the server is and who is asking.
    public struct Configuration: Sendable {
        /// The server's base URL, such as `http://127.0.0.1:8080` or `https://sync.example.com`.
        public var serverURL: URL
        /// Who is asking: a bearer token standing for the user (`logsync-server user add`), a
        /// session that refreshes itself (``SessionCredentials``), or the app's own provider.
        public var credentials: Credentials
        /// This device, so its own commits are not pushed back to it (F114). Without one, the
        /// client makes one up (``HTTPSyncClient/device``); give one that outlives the client
        /// (kept with the app's data) so that the server knows the device again after a relaunch.
        public var device: DeviceID?
        /// The body format; JSON is for debugging.
        public var format: WireFormat
        /// The longest a request may take, from sending to the last byte of the answer.
        public var requestTimeout: Duration
        /// The largest answer read.
        public var maxResponseBytes: Int
        /// How a dropped push channel reconnects, and how long a dropped asset transfer waits
        /// before it resumes.
        public var reconnect: ReconnectPolicy
        /// Whether push streams also hint this device's own commits.
        public var receivesOwnChanges: Bool
        /// The clock of reconnection waits and of ``assetStallTimeout``.
        public var clock: any Clock<Duration>
        /// Where requests (`.trace`) and push channel events (`.debug`) are logged; silent by default.
        public var logger: Logger
        /// The TLS settings of an `https://` server URL, for requests and push channels alike;
        /// `nil` (the default) verifies the server against the system's trust store. To trust a
        /// private CA:
        ///
        /// ```swift
        /// var tls = TLSConfiguration.makeClientConfiguration()
        /// tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile("ca.pem"))
        /// let client = HTTPSyncClient(.init(serverURL: url, credentials: .token(token), tlsConfiguration: tls))
        /// ```
        ///
        /// Ignored for `http://` URLs. Push channels (swift-websocket) send the URL's host as
        /// the TLS server name, which NIOSSL refuses for an IP address: give an `https://` URL
        /// a host name, not an address, if its push channels are to connect.
        public var tlsConfiguration: TLSConfiguration?
        /// How long an asset upload or download may go without a byte moving (none sent, none
        /// received, no answer) before its connection is given up as stalled. Asset transfers
        /// have no overall deadline (``requestTimeout`` does not apply to them: 250 MB takes its
        /// time on a slow network); this catches a server or a network that stopped. It is
        /// measured on ``clock``. The default is 60 seconds.
        public var assetStallTimeout: Duration
        /// How many times one `uploadAsset` or `downloadAsset` call resumes after its connection
        /// drops or stalls, each time from where the server's (or the partial file's) bytes end,
        /// before it throws `networkFailure`; a later call resumes again. The waits between
        /// attempts follow ``reconnect``. The default is 3.
        public var assetResumeAttempts: Int
        /// Where each operation's request is traced: an `http.client <operation>` client span,
        /// a child of the caller's current span (the engine's `sync.send.batch`, say), whose
        /// context the tracer injects into the request's headers (W3C `traceparent` and
        /// `tracestate` with an OpenTelemetry tracer), so that the server's spans join the
        /// trace (Docs/Protocol.md, "Tracing"). The tracer bootstrapped in
        /// `InstrumentationSystem` by default: with none, nothing is recorded or sent.
        public var tracer: any Tracer

        public init(
            serverURL: URL, credentials: Credentials, device: DeviceID? = nil, format: WireFormat = .protobuf,
            requestTimeout: Duration = .seconds(60), maxResponseBytes: Int = 64 << 20,
            reconnect: ReconnectPolicy = ReconnectPolicy(), receivesOwnChanges: Bool = false,
            clock: any Clock<Duration> = ContinuousClock(),
            logger: Logger = Logger(label: "logsync.http.client", factory: { _ in SwiftLogNoOpLogHandler() }),
            tlsConfiguration: TLSConfiguration? = nil, assetStallTimeout: Duration = .seconds(60),
            assetResumeAttempts: Int = 3, tracer: any Tracer = InstrumentationSystem.tracer
        ) {
            self.serverURL = serverURL
            self.credentials = credentials
            self.device = device
            self.format = format
            self.requestTimeout = requestTimeout
            self.maxResponseBytes = maxResponseBytes
            self.reconnect = reconnect
            self.receivesOwnChanges = receivesOwnChanges
            self.clock = clock
            self.logger = logger
            self.tlsConfiguration = tlsConfiguration
            self.assetStallTimeout = assetStallTimeout
            self.assetResumeAttempts = assetResumeAttempts
            self.tracer = tracer
        }
    }

    public let configuration: Configuration
    /// The device every request and push channel of this client names (`LogSync-Device`):
    /// ``Configuration/device``, or, without one, `client-` and 22 random base64url characters
    /// (128 bits) made when the client is created. A push channel needs a device, so that the
    /// server skips the commits this client makes (F114); one made up lasts as long as the client.
    public let device: DeviceID
    let pushChannels = PushChannels()
    /// The token presented now (``Configuration/credentials``).
    let currentToken: CurrentToken

    /// Creates a client; nothing connects until a request or a push stream needs it.
    public init(_ configuration: Configuration) {
        self.configuration = configuration
        device = configuration.device ?? Self.randomDevice()
        currentToken = CurrentToken(configuration.credentials)
    }

    /// `client-` and 128 random bits in base64url.
    static func randomDevice() -> DeviceID {
        DeviceID("client-" + randomBase64URL(bytes: 16))
    }

    /// The user's database of `scope` on the server.
    public func database(_ scope: DatabaseScope = .private) -> HTTPCloudDatabase {
        HTTPCloudDatabase(client: self, databaseScope: scope)
    }

    /// Returns once every open push stream of this client is connected and registered with its
    /// database, so that every later commit is hinted to it. For tests and diagnostics.
    public func waitForPushChannels() async {
        await pushChannels.waitUntilAllConnected()
    }

    /// How many times this client's push channels have (re)connected since it was made.
    public var pushConnectionCount: Int { pushChannels.connectionCount }

    /// Why the latest failed connection of this client's push channels failed, mapped as a
    /// request's failure is (a `networkFailure` when the server could not be reached or this
    /// process has no file descriptor left, say), or `nil` if none failed. The channels retry
    /// on their own (``Configuration/reconnect``); this is for diagnostics and load tools.
    public var lastPushFailure: SyncError? { pushChannels.lastFailure }

    /// Ends every push stream of this client's databases and stops reconnecting: no push
    /// channel connects afterwards (one whose WebSocket handshake is under way closes as soon as
    /// it completes), and a push stream opened afterwards is ended from the start. Requests are
    /// not affected.
    public func close() {
        pushChannels.closeAll()
    }

    // MARK: Requests

    /// The HTTP client of every `HTTPSyncClient` in the process: no redirects, no retries of
    /// failed connections (the engine schedules its own), a 10-second connect timeout. A
    /// client's ``Configuration/tlsConfiguration`` travels with each request; the connection
    /// pool keeps connections of different TLS settings apart.
    static let httpClient: HTTPClient = {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10)), decompression: .disabled)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = .http1Only
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Sends one operation and returns the answer's body. A request the server refuses with 401
    /// is sent once more if the credentials have a new token (a session refreshed, say): a
    /// refused request was not applied.
    ///
    /// - Throws: ``SyncError`` only: the server's error, or a transport failure mapped as the
    ///   type's documentation says; `notAuthenticated` when nobody is signed in.
    func send(_ operation: WireOperation, scope: DatabaseScope, body: [UInt8]) async throws(SyncError) -> [UInt8] {
        try await authorized { token throws(SyncError) in
            try await send(operation, scope: scope, body: body, token: token)
        }
    }

    /// Runs `attempt` with the current token, and once more with a new one if the server
    /// refused the first (`notAuthenticated`) and the credentials replace it.
    func authorized<T>(_ attempt: (String) async throws(SyncError) -> T) async throws(SyncError) -> T {
        let token = try await currentToken.token()
        do {
            return try await attempt(token)
        } catch  where error.code == .notAuthenticated {
            guard let replacement = try await currentToken.replacement(forRejected: token) else { throw error }
            configuration.logger.debug("the server refused the token; sending again with a new one")
            return try await attempt(replacement)
        }
    }

    private func send(
        _ operation: WireOperation, scope: DatabaseScope, body: [UInt8], token: String
    ) async throws(SyncError) -> [UInt8] {
        if Task.isCancelled {
            throw SyncError(.operationCancelled, "\(operation) was cancelled before it was sent")
        }
        let format = configuration.format
        let tracer = configuration.tracer
        let span = tracer.startSpan(
            "http.client \(operation.rawValue)", context: InstrumentationContext.current ?? .topLevel, ofKind: .client)
        defer { span.end() }
        var request = HTTPClientRequest(url: url(WireProtocol.path(operation, scope: scope)))
        request.method = .POST
        tracer.inject(span.context, into: &request.headers, using: HTTPHeadersInjector())
        span.updateAttributes { attributes in
            attributes["http.request.method"] = "POST"
            attributes["url.full"] = request.url
            attributes["http.request.body.size"] = body.count
        }
        request.headers.add(name: WireProtocol.authorizationHeader, value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: format.mediaType)
        request.headers.add(name: "Accept", value: format.mediaType)
        request.headers.add(name: WireProtocol.deviceHeader, value: device.rawValue)
        request.body = .bytes(ByteBuffer(bytes: body))
        request.tlsConfiguration = configuration.tlsConfiguration

        let status: Int
        let headers: HTTPHeaders
        let answer: [UInt8]
        do {
            let response = try await Self.httpClient.execute(
                request, timeout: .nanoseconds(configuration.requestTimeout.nanoseconds))
            status = Int(response.status.code)
            headers = response.headers
            var buffer = try await response.body.collect(upTo: configuration.maxResponseBytes)
            answer = buffer.readBytes(length: buffer.readableBytes) ?? []
        } catch {
            let failure = TransportFailure.map(error, operation: operation, server: configuration.serverURL)
            span.recordError(failure)
            span.setStatus(SpanStatus(code: .error))
            throw failure
        }
        span.attributes["http.response.status_code"] = status
        configuration.logger.trace(
            "answered",
            metadata: [
                "operation": "\(operation)", "status": "\(status)", "bytes.out": "\(body.count)",
                "bytes.in": "\(answer.count)",
            ])
        guard status == 200 else {
            let failure = Self.error(status: status, headers: headers, body: answer, operation: operation)
            span.recordError(failure)
            span.setStatus(SpanStatus(code: .error))
            throw failure
        }
        return answer
    }

    /// The error of a response that is not 200: the `SyncError` of its body, or one made from
    /// its status when it has none (a proxy's page, an unknown route).
    static func error(status: Int, headers: HTTPHeaders, body: [UInt8], operation: WireOperation) -> SyncError {
        error(status: status, headers: headers, body: body, doing: operation.rawValue)
    }

    /// The error of a response that is not 200 to `operation` (a name for messages).
    static func error(status: Int, headers: HTTPHeaders, body: [UInt8], doing operation: String) -> SyncError {
        if let contentType = headers.first(name: "Content-Type"), let format = WireFormat(contentType: contentType),
            let error = try? Wire.decode(SyncError.self, from: body, as: format)
        {
            return error
        }
        let excerpt = String(decoding: body.prefix(200), as: UTF8.self)
        return SyncError(
            WireStatus.code(forStatus: status), "\(operation) got HTTP \(status) without an error body",
            retryAfter: WireStatus.retryAfter(header: headers.first(name: "Retry-After")),
            cause: excerpt.isEmpty ? nil : excerpt)
    }

    func url(_ path: String) -> String {
        configuration.serverURL.route(path)
    }
}

extension URL {
    /// The absolute URL of the server route `path` (`/v1/…`) under this base URL, whatever
    /// slashes the base ends with.
    func route(_ path: String) -> String {
        var base = absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        return base + path
    }
}

/// Puts a tracer's injected values into a request's headers (`traceparent`, `tracestate`).
struct HTTPHeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: key, value: value)
    }
}
