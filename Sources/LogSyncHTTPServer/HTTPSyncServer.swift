import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import LogSyncPlatform
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import SyncModel
import Synchronization
import Tracing

/// A `SyncServer` over HTTP: every `CloudDatabase` operation as a route, bearer tokens, body
/// limits, and push hints over WebSocket (Docs/Protocol.md, "HTTP").
///
/// ```swift
/// let http = HTTPSyncServer(server: syncServer, tokens: try TokenStore(file: tokensFile))
/// try await http.application().runService()          // until SIGINT or SIGTERM
/// ```
///
/// With ``Configuration/tlsConfiguration`` set, it serves HTTPS, and push channels are `wss`:
///
/// ```swift
/// let tls = try HTTPSyncServer.tlsConfiguration(certificateChainFile: chainPEM, privateKeyFile: keyPEM)
/// let http = HTTPSyncServer(server: syncServer, tokens: tokens, configuration: .init(port: 8443, tlsConfiguration: tls))
/// ```
///
/// The user of a request is the one its bearer token stands for, and only that user's databases
/// are reachable: paths name a scope, never a user. Bodies are read in chunks and refused with
/// 413 as soon as they pass ``Configuration/maxRequestBodyBytes``, and at once when the declared
/// `Content-Length` does; asset contents are not held to that limit, but streamed a piece at a
/// time into and out of the asset store, each upload bounded by the size it announces. A body is
/// measured before it is decoded and refused with 413 past the limits of
/// `LogSyncWire/RequestBudget`; requests are decoded and handled within
/// ``Configuration/requestMemoryBudget`` at once. Each user and each address is held to
/// ``Configuration/userLimits`` and ``Configuration/addressLimits`` (429 past them). Errors are
/// `SyncError`s in the body, with a status from `LogSyncWire/WireStatus`.
public struct HTTPSyncServer: Sendable {
    /// Where the server listens and what it accepts.
    public struct Configuration: Sendable {
        /// The address to bind; loopback unless told otherwise.
        public var host: String
        /// The port; 0 picks a free one (see ``RunningHTTPSyncServer/port``).
        public var port: Int
        /// The largest request body read, in bytes. The default, 8 MiB, is well above the
        /// encoding of a modify request at the 2 MB field-data limit (F151), which the server
        /// then judges itself, as in process.
        public var maxRequestBodyBytes: Int
        /// How long a closing push channel waits for the client's close frame.
        public var pushCloseTimeout: Duration
        /// How long a graceful shutdown (``RunningHTTPSyncServer/stop()``, SIGTERM or SIGINT
        /// in ``HTTPSyncServer/runUntilSignalled()``) lets requests in flight finish before it
        /// closes the connections still open. The default, 10 seconds, is ample for every
        /// operation of a client that is still sending and reading; a connection it cuts short
        /// is one whose client stalled, and a client sees it as a lost answer, which the engine
        /// retries (F89, F103). `.zero` closes every busy connection at once.
        ///
        /// Idle connections do not wait for it: a shutdown closes a keep-alive connection
        /// between requests, or one on which the client has sent nothing yet, at once, and push
        /// channels get a close frame (``pushCloseTimeout``).
        public var shutdownGracePeriod: Duration
        /// The server side of TLS (NIOSSL's, as Hummingbird takes it): with one, every
        /// connection is TLS, requests are HTTPS and push channels `wss`; without one (the
        /// default), plain HTTP, for loopback or behind a proxy that terminates TLS.
        /// ``HTTPSyncServer/tlsConfiguration(certificateChainFile:privateKeyFile:)`` makes one from
        /// PEM files.
        public var tlsConfiguration: TLSConfiguration?
        /// How long a connection with no request in progress stays open: a new connection that
        /// has sent nothing yet, or a keep-alive connection between requests. The default, 75
        /// seconds, is above the 60 seconds for which clients' pools (AsyncHTTPClient's, so
        /// `HTTPSyncClient`'s) keep an idle connection, so an honest client closes it first and
        /// never sends a request on a connection the server is closing.
        public var idleTimeout: Duration
        /// How long a request head (request line and headers) may take to arrive, from its first
        /// byte: a client sending it a byte at a time is cut off then. The default is 10 seconds.
        public var requestHeadTimeout: Duration
        /// The longest pause in a request body while the server waits for it; the connection is
        /// closed after it. Time the server itself takes (answering, or not reading because it is
        /// busy) does not count. The default is 30 seconds.
        public var requestBodyTimeout: Duration
        /// The slowest a request body may come, in bytes per second: within each
        /// ``requestBodyTimeout`` that the server waits for a body, at least this many bytes per
        /// second of it must arrive, or the connection is closed as if the body had stopped. An
        /// asset upload may be long (up to `Limits/maxAssetBytes`), so a client trickling it
        /// a byte at a time must not hold a connection for days. The default, 1,024 (30 KiB per
        /// 30 seconds), is far below any network an upload is made on; 0 turns the rule off
        /// (any byte is progress).
        public var requestBodyMinimumRate: Int
        /// The longest the server waits for a client to take more of an answer it is writing
        /// (the client's receive window and the server's send buffer full); the connection is
        /// closed after it. A download goes as fast as its client reads, so only a client that
        /// stopped reading is cut off. The default is 60 seconds.
        public var responseWriteTimeout: Duration
        /// How many connections are open at most. Beyond it the server stops accepting: new
        /// connections wait in the listen backlog (``listenBacklog``), holding no descriptor of
        /// the server's, until open ones close. Push channels count. The default is half the
        /// process's descriptor limit (`ulimit -n`) when the server is configured, at most
        /// 10,000: the other half is for the data files, two per user database open.
        public var maxConnections: Int
        /// How many connections the system queues for the server to accept (`listen`'s
        /// backlog, capped by the system: `net.core.somaxconn` on Linux). Beyond it new
        /// connections are refused or their SYNs dropped. The default is 256.
        public var listenBacklog: Int
        /// How often a push channel is pinged. A client that has not answered the previous ping
        /// when the next is due is gone, and its channel is closed. The default is 30 seconds.
        public var pushPingInterval: Duration
        /// About how much memory the requests being decoded and handled may take together, in
        /// bytes. Each request is estimated from its body, measured before anything is decoded
        /// (`LogSyncWire/RequestBudget`): three times its bytes plus 320 bytes per element, at
        /// least 64 KiB. One that would take the total past this waits until others have
        /// finished, first come first served; one estimated above it runs alone. The default,
        /// 64 MiB, lets the costliest requests the limits allow (a record with a list of 100,000
        /// elements, about 33 MB by the estimate, 31 MiB measured) run one beside another, or
        /// eight at the 2 MB field-data limit, or 1,024 small ones. Asset transfers, streamed a piece at a time, do not count.
        public var requestMemoryBudget: Int
        /// How many requests may wait for ``requestMemoryBudget``; one more is refused with
        /// 503 `serviceUnavailable` and a retry-after of 1 second. The default is 1,024.
        public var maxRequestsWaiting: Int
        /// The limits on each user: requests per second, bursts and requests in progress at
        /// once (``HTTPSyncServer/ClientLimits/perUser`` by default). A request past one is
        /// answered 429 `requestRateLimited` with a retry-after.
        public var userLimits: ClientLimits
        /// The limits on each address (an IPv4 address, or an IPv6 address's first 64 bits),
        /// whoever its users are (``HTTPSyncServer/ClientLimits/perAddress`` by default). Behind
        /// a reverse proxy every request comes from the proxy's address: make these
        /// ``HTTPSyncServer/ClientLimits/unlimited`` and limit addresses in the proxy.
        public var addressLimits: ClientLimits
        /// The time of the per-client rate limits: a monotonic reading, as a duration since any
        /// fixed origin. The default reads the continuous clock; tests give a clock they move.
        public var clientLimitClock: @Sendable () -> Duration

        public init(
            host: String = "127.0.0.1", port: Int = 8080, maxRequestBodyBytes: Int = 8 << 20,
            pushCloseTimeout: Duration = .seconds(2), shutdownGracePeriod: Duration = .seconds(10),
            tlsConfiguration: TLSConfiguration? = nil, idleTimeout: Duration = .seconds(75),
            requestHeadTimeout: Duration = .seconds(10), requestBodyTimeout: Duration = .seconds(30),
            maxConnections: Int = Configuration.defaultMaxConnections(), listenBacklog: Int = 256,
            pushPingInterval: Duration = .seconds(30), requestBodyMinimumRate: Int = 1024,
            responseWriteTimeout: Duration = .seconds(60), requestMemoryBudget: Int = 64 << 20,
            maxRequestsWaiting: Int = 1_024, userLimits: ClientLimits = .perUser,
            addressLimits: ClientLimits = .perAddress,
            clientLimitClock: @escaping @Sendable () -> Duration = Configuration.continuousClock
        ) {
            self.host = host
            self.port = port
            self.maxRequestBodyBytes = maxRequestBodyBytes
            self.pushCloseTimeout = pushCloseTimeout
            self.shutdownGracePeriod = shutdownGracePeriod
            self.tlsConfiguration = tlsConfiguration
            self.idleTimeout = idleTimeout
            self.requestHeadTimeout = requestHeadTimeout
            self.requestBodyTimeout = requestBodyTimeout
            self.requestBodyMinimumRate = requestBodyMinimumRate
            self.responseWriteTimeout = responseWriteTimeout
            self.maxConnections = maxConnections
            self.listenBacklog = listenBacklog
            self.pushPingInterval = pushPingInterval
            self.requestMemoryBudget = requestMemoryBudget
            self.maxRequestsWaiting = maxRequestsWaiting
            self.userLimits = userLimits
            self.addressLimits = addressLimits
            self.clientLimitClock = clientLimitClock
        }

        /// The default ``clientLimitClock``: the continuous clock's time since this process
        /// first read it.
        public static func continuousClock() -> Duration {
            clockOrigin.duration(to: .now)
        }

        private static let clockOrigin = ContinuousClock.now

        /// The descriptors a server keeps free of connections, whatever ``maxConnections``
        /// says: an eighth of the process's limit, at least 64 (its event loops, listening
        /// socket, logs, store files and database connections).
        ///
        /// A process must never run out of descriptors: beside the connections and files that
        /// would fail, Swift's thread pool on Linux (libdispatch) opens `/proc/<thread>/stat`
        /// every second while work waits, and traps (SIGILL) when it cannot. So the server
        /// stops accepting before then, as at ``maxConnections``.
        public static func descriptorReserve(limit: Int) -> Int { max(64, limit / 8) }

        /// Half the process's soft descriptor limit (`RLIMIT_NOFILE`), at least 16 and at most
        /// 10,000: the default of ``maxConnections``.
        public static func defaultMaxConnections() -> Int {
            guard let limit = Platform.openFileLimit() else { return 512 }
            return min(10_000, max(16, limit / 2))
        }
    }

    /// `configured`, lowered to the process's descriptor limit less
    /// ``Configuration/descriptorReserve(limit:)`` (at least 1), with a notice when lowered.
    static func connectionLimit(_ configured: Int, logger: Logger) -> Int {
        guard let limit = Platform.openFileLimit() else { return configured }
        let allowed = max(1, limit - Configuration.descriptorReserve(limit: limit))
        guard configured > allowed else { return configured }
        logger.notice(
            "the connection limit is lowered to what the descriptor limit allows; raise `ulimit -n` for more",
            metadata: [
                "max-connections": "\(configured)", "connections": "\(allowed)", "ulimit-n": "\(limit)",
                "reserved": "\(Configuration.descriptorReserve(limit: limit))",
            ])
        return allowed
    }

    /// The server whose databases are served.
    public let server: SyncServer
    /// The tokens accepted.
    public let tokens: TokenStore
    /// What checks the identity tokens of devices signing in (`POST /v1/sessions`), which
    /// become sessions of `tokens`' ``TokenStore/sessions``. Without one, or without sessions,
    /// there is no sign-in route.
    public let identityVerifier: (any IdentityVerifier)?
    /// What the app's backend presents on the admin routes (Docs/Protocol.md, "Admin API").
    /// Without one there are no admin routes.
    public let adminCredential: AdminCredential?
    public let configuration: Configuration
    public let logger: Logger
    /// Where each request is traced: a server span `<METHOD> <route>` joined to the trace the
    /// request's headers carry (`traceparent`), above the server's commit spans.
    public let tracer: any Tracer
    /// The metrics of requests and push channels, and the registry of `GET /metrics`.
    public let metrics: ServerMetrics
    /// The requests being decoded and handled (``Configuration/requestMemoryBudget``).
    let requestGate: RequestGate
    /// Returns the memory of large requests once they are done.
    let memoryReturn = MemoryReturn()
    /// The per-client limits (``Configuration/userLimits``, ``Configuration/addressLimits``).
    package let clientLimiter: ClientLimiter
    /// Routes added by other modules (the operations console of `LogSyncConsole`), each given
    /// the router after the server's own routes: a route of the server's own is never replaced.
    public var routeExtensions: [@Sendable (Router<ServerRequestContext>) -> Void] = []

    /// Creates the HTTP face of `server`.
    ///
    /// - Parameters:
    ///   - server: The server whose databases are served.
    ///   - tokens: The bearer tokens accepted, each standing for a user.
    ///   - configuration: Address, port and limits.
    ///   - identityVerifier: What checks the identity tokens of devices signing in; sign-in
    ///     needs it and `tokens` made with sessions.
    ///   - adminCredential: The admin tokens of the admin routes; without one, there are none.
    ///   - logger: Where requests and lifecycle events are logged (requests at `.debug`).
    ///   - tracer: Where requests are traced (the one bootstrapped in `InstrumentationSystem` by
    ///     default; with none, nothing is recorded). Give `server`'s tracer too
    ///     (`SyncServer.Configuration.tracer`), so that its commits join the requests' traces.
    ///   - metrics: The requests' metrics, and the registry `GET /metrics` shows.
    public init(
        server: SyncServer, tokens: TokenStore, configuration: Configuration = Configuration(),
        identityVerifier: (any IdentityVerifier)? = nil, adminCredential: AdminCredential? = nil,
        logger: Logger = Logger(label: "logsync.http"), tracer: any Tracer = InstrumentationSystem.tracer,
        metrics: ServerMetrics = ServerMetrics()
    ) {
        self.server = server
        self.tokens = tokens
        self.identityVerifier = identityVerifier
        self.adminCredential = adminCredential
        self.configuration = configuration
        self.logger = logger
        self.tracer = tracer
        self.metrics = metrics
        requestGate = RequestGate(
            capacity: configuration.requestMemoryBudget, maxWaiting: configuration.maxRequestsWaiting)
        clientLimiter = ClientLimiter(
            userLimits: configuration.userLimits, addressLimits: configuration.addressLimits,
            now: configuration.clientLimitClock)
        // A user deleted on another node sharing the store (`AdminOperations.deleteUser(_:)`,
        // which revokes their tokens before and after): this node forgets their number and open
        // databases when it hears it.
        tokens.stored?.observeRevocations { [server] event in
            if case .revoked(.user(let user)) = event { server.forgetUser(user) }
        }
    }

    /// The Hummingbird application serving the routes; `onListening` is called with the bound
    /// port once the server accepts connections.
    ///
    /// - Throws: NIOSSL's error if ``Configuration/tlsConfiguration`` is unusable (a private key
    ///   that does not match the certificate, say).
    public func application(
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> some ApplicationProtocol {
        MemoryReturn.configureAllocator()
        let router = Router(context: ServerRequestContext.self)
        // Metrics outermost, so that every request is counted (429s and unknown routes too), then
        // its span.
        MetricsRoutes.register(on: router, http: self)
        router.add(middleware: RequestTracingMiddleware(tracer: tracer))
        router.add(middleware: ClientLimitMiddleware(http: self))
        router.add(middleware: UnknownRouteMiddleware())
        let health = HealthRoutes(http: self)
        router.get("/health/live") { request, context in health.live(request, context: context) }
        router.get("/health/ready") { request, context in await health.ready(request, context: context) }
        let routes = OperationRoutes(http: self)
        router.post("/:version/databases/:scope/:operation") { request, context in
            await routes.respond(to: request, context: context)
        }
        router.get("/:version/databases/:scope/push") { request, context in
            // Reached only when the request was not upgraded to a WebSocket.
            await routes.refusePush(request, context: context)
        }
        // Assets: streamed, never whole in memory, outside the body limit of operations.
        let assets = AssetRoutes(http: self)
        router.get("/:version/databases/:scope/assets/:digest/upload") { request, context in
            await assets.uploadStatus(request, context: context)
        }
        router.put("/:version/databases/:scope/assets/:digest") { request, context in
            await assets.upload(request, context: context)
        }
        router.get("/:version/databases/:scope/assets/:digest") { request, context in
            await assets.download(request, context: context)
        }
        // Support bundles: uploaded by their user as assets are, read by the operator only.
        let bundles = BundleRoutes(http: self)
        router.get("/:version/bundles/:id/upload") { request, context in
            await bundles.uploadStatus(request, context: context)
        }
        router.put("/:version/bundles/:id") { request, context in
            await bundles.upload(request, context: context)
        }
        if let sessions = tokens.sessions {
            // Under `:version`, as the other routes: the router does not fall back from a
            // literal segment to a parameter.
            let routes = SessionRoutes(http: self, sessions: sessions)
            if identityVerifier != nil {
                router.post("/:version/sessions") { request, context in
                    await routes.signIn(request, context: context)
                }
            }
            router.post("/:version/sessions/refresh") { request, context in
                await routes.refresh(request, context: context)
            }
            router.get("/:version/devices") { request, context in
                await routes.devices(request, context: context)
            }
            router.delete("/:version/devices/:device") { request, context in
                await routes.revoke(request, context: context)
            }
        }
        if let adminCredential {
            AdminRoutes.register(on: router, http: self, credential: adminCredential)
        }
        for extend in routeExtensions { extend(router) }
        let push = PushRoute(http: self)
        var wsConfiguration = WebSocketServerConfiguration()
        wsConfiguration.closeTimeout = configuration.pushCloseTimeout
        wsConfiguration.autoPing = .enabled(timePeriod: configuration.pushPingInterval)
        let logger = self.logger
        let shutdownHook = PushShutdownService(server: server)
        let tokenFileWatch = TokenFileWatch(tokens: tokens)
        let upgradeConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(ws: wsConfiguration)
        let shouldUpgrade:
            @Sendable (HTTPRequest, any Channel, Logger) async throws
                -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> = { head, _, _ in
                    push.shouldUpgrade(head)
                }
        if let tls = configuration.tlsConfiguration {
            // Checked now, so that a key not matching its certificate fails here, not per connection.
            _ = try NIOSSLContext(configuration: tls)
        }
        let scheme = configuration.tlsConfiguration == nil ? "http" : "https"
        // Every connection closes when a graceful shutdown begins or soon after (see
        // ShutdownAwareChannel), and when its client stalls or sends what the parser refuses
        // (see GuardedChannel). Behind TLS, so that their handlers see request bytes only.
        let gracePeriod = configuration.shutdownGracePeriod
        let timeouts = ConnectionTimeouts(
            idle: configuration.idleTimeout, requestHead: configuration.requestHeadTimeout,
            requestBody: configuration.requestBodyTimeout, requestBodyMinimumRate: configuration.requestBodyMinimumRate,
            responseWrite: configuration.responseWriteTimeout)
        let connections = HTTPServerBuilder { responder in
            GuardedChannel(
                base: ShutdownAwareChannel(
                    base: PushUpgradeGateChannel(
                        base: HTTP1WebSocketUpgradeChannel(
                            responder: responder, configuration: upgradeConfiguration, shouldUpgrade: shouldUpgrade),
                        push: push),
                    gracePeriod: gracePeriod, logger: logger),
                timeouts: timeouts, logger: logger)
        }
        return Application(
            router: router,
            server: try configuration.tlsConfiguration.map { tls in try .tls(connections, tlsConfiguration: tls) }
                ?? connections,
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "logsync-server",
                backlog: configuration.listenBacklog,
                availableConnectionsDelegate: ConnectionLimit(
                    maximum: Self.connectionLimit(configuration.maxConnections, logger: logger), logger: logger)),
            services: [shutdownHook, tokenFileWatch],
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info(
                    "listening", metadata: ["host": "\(configuration.host)", "port": "\(port)", "scheme": "\(scheme)"])
                await onListening(port)
            },
            logger: logger)
    }
}

extension HTTPSyncServer {
    /// Serves until the process gets SIGINT or SIGTERM, then shuts down gracefully: no new
    /// connections, idle connections close, requests in flight finish (within
    /// ``Configuration/shutdownGracePeriod``), push channels close.
    ///
    /// - Throws: The server's error, such as a port already in use.
    public func runUntilSignalled() async throws {
        try await application().runService(gracefulShutdownSignals: [.sigterm, .sigint])
    }

    /// A file of ``tlsConfiguration(certificateChainFile:privateKeyFile:)`` that cannot be used.
    public struct TLSFileError: Error, CustomStringConvertible, Sendable {
        /// The file.
        public let path: String
        /// What is wrong.
        public let problem: String

        public var description: String { "TLS file \(path): \(problem)" }
    }

    /// The server side of TLS from PEM files: the certificate chain (the server's certificate
    /// first, then any intermediates) and its unencrypted private key. Client certificates are
    /// not asked for; NIOSSL's defaults choose the protocol versions (TLS 1.2 and later) and
    /// ciphers.
    ///
    /// ```swift
    /// let tls = try HTTPSyncServer.tlsConfiguration(
    ///     certificateChainFile: URL(fileURLWithPath: "/etc/logsync/fullchain.pem"),
    ///     privateKeyFile: URL(fileURLWithPath: "/etc/logsync/privkey.pem"))
    /// ```
    ///
    /// - Throws: ``TLSFileError`` naming the file that is missing, holds no PEM certificate or
    ///   key, or (for the key) does not match the certificate.
    public static func tlsConfiguration(
        certificateChainFile: URL, privateKeyFile: URL
    ) throws(TLSFileError) -> TLSConfiguration {
        for file in [certificateChainFile, privateKeyFile] where !FileManager.default.isReadableFile(atPath: file.path)
        {
            throw TLSFileError(path: file.path, problem: "no such readable file")
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificateChainFile.path)
        } catch {
            throw TLSFileError(path: certificateChainFile.path, problem: "not a PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else {
            throw TLSFileError(path: certificateChainFile.path, problem: "holds no PEM certificate")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: privateKeyFile.path, format: .pem)
        } catch {
            throw TLSFileError(path: privateKeyFile.path, problem: "not an unencrypted PEM private key (\(error))")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSFileError(
                path: privateKeyFile.path,
                problem:
                    "refused with the certificate of \(certificateChainFile.path); is it that certificate's key? (\(error))"
            )
        }
        return configuration
    }
}

/// Shuts the `SyncServer` down, ending every push stream, at the end of the application's
/// graceful shutdown. Its services stop in reverse order, the HTTP server first, so this runs
/// once every connection has closed: push channels have closed by then, each WebSocket handler
/// sending its close frame when the shutdown begins.
struct PushShutdownService: Service {
    let server: SyncServer

    func run() async throws {
        try? await gracefulShutdown()
        server.shutdown()
    }
}

/// Follows the token file while the server runs (``TokenStore/watchFile()``), so that a token
/// removed from it stops working within the store's check interval, even if no request presents
/// an unknown token, and an LMDB store's sessions (``TokenStore/watchSessions()``), so that a
/// session another process revoked loses its push channels as soon; ends when the graceful
/// shutdown begins.
struct TokenFileWatch: Service {
    let tokens: TokenStore

    func run() async throws {
        // A service that returns early would end the server: one with nothing to follow waits too.
        guard tokens.file != nil || tokens.sessions?.readsLocally == true else {
            try? await gracefulShutdown()
            return
        }
        await cancelWhenGracefulShutdown { [tokens] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await tokens.watchFile() }
                group.addTask { await tokens.watchSessions() }
            }
        }
    }
}

/// Turns Hummingbird's bare 404 for a path no route matches into an error body naming the
/// routes there are.
struct UnknownRouteMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let format = WireFormat.forResponse(accept: request.headers[.accept])
            let v = WireProtocol.versionPath
            return OperationRoutes.errorResponse(
                SyncError(
                    .serverRejectedRequest,
                    "no route \(request.method) \(request.uri.path); the routes are POST /\(v)/databases/{scope}/{operation}, GET /\(v)/databases/{scope}/push, PUT and GET /\(v)/databases/{scope}/assets/{sha256}, GET /\(v)/databases/{scope}/assets/{sha256}/upload, PUT /\(v)/bundles/{sha256} and GET /\(v)/bundles/{sha256}/upload, and, with sessions, POST /\(v)/sessions (with an identity verifier), POST /\(v)/sessions/refresh, GET /\(v)/devices and DELETE /\(v)/devices/{device}; GET /health/live and /health/ready; and, with an admin credential, the admin routes under /\(v)/admin/, GET /metrics and the console under /console"
                ),
                status: 404, format: format)
        }
    }
}

/// The request context of the routes: Hummingbird's basics and the connection, which a route
/// closes for reading when it refuses a body it will not read.
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
