import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import LogSyncServer
import LogSyncWire
import NIOCore
import ServiceLifecycle
import Synchronization
import SyncModel

/// A `SyncServer` over HTTP: every `CloudDatabase` operation as a route, bearer tokens, body
/// limits, and push hints over WebSocket (Docs/Protocol.md, "HTTP").
///
/// ```swift
/// let http = HTTPSyncServer(server: syncServer, tokens: try TokenStore(file: tokensFile))
/// try await http.application().runService()          // until SIGINT or SIGTERM
/// ```
///
/// The user of a request is the one its bearer token stands for, and only that user's databases
/// are reachable: paths name a scope, never a user. Bodies are read in chunks and refused with
/// 413 as soon as they pass ``Configuration/maxRequestBodyBytes``, and at once when the declared
/// `Content-Length` does. Errors are `SyncError`s in the body, with a status from
/// ``LogSyncWire/WireStatus``.
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

        public init(
            host: String = "127.0.0.1", port: Int = 8080, maxRequestBodyBytes: Int = 8 << 20,
            pushCloseTimeout: Duration = .seconds(2)
        ) {
            self.host = host
            self.port = port
            self.maxRequestBodyBytes = maxRequestBodyBytes
            self.pushCloseTimeout = pushCloseTimeout
        }
    }

    /// The server whose databases are served.
    public let server: SyncServer
    /// The tokens accepted.
    public let tokens: TokenStore
    public let configuration: Configuration
    public let logger: Logger

    /// Creates the HTTP face of `server`.
    ///
    /// - Parameters:
    ///   - server: The server whose databases are served.
    ///   - tokens: The bearer tokens accepted, each standing for a user.
    ///   - configuration: Address, port and limits.
    ///   - logger: Where requests and lifecycle events are logged (requests at `.debug`).
    public init(
        server: SyncServer, tokens: TokenStore, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "logsync.http")
    ) {
        self.server = server
        self.tokens = tokens
        self.configuration = configuration
        self.logger = logger
    }

    /// The Hummingbird application serving the routes; `onListening` is called with the bound
    /// port once the server accepts connections.
    public func application(
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: ServerRequestContext.self)
        router.add(middleware: UnknownRouteMiddleware())
        let routes = OperationRoutes(http: self)
        router.post("/:version/databases/:scope/:operation") { request, context in
            await routes.respond(to: request, context: context)
        }
        router.get("/:version/databases/:scope/push") { request, context in
            // Reached only when the request was not upgraded to a WebSocket.
            await routes.refusePush(request, context: context)
        }
        let push = PushRoute(http: self)
        var wsConfiguration = WebSocketServerConfiguration()
        wsConfiguration.closeTimeout = configuration.pushCloseTimeout
        let logger = self.logger
        let shutdownHook = PushShutdownService(server: server)
        return Application(
            router: router,
            server: .http1WebSocketUpgrade(configuration: .init(ws: wsConfiguration)) { head, _, _ in
                push.shouldUpgrade(head)
            },
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "logsync-server"),
            services: [shutdownHook],
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("listening", metadata: ["host": "\(configuration.host)", "port": "\(port)"])
                await onListening(port)
            },
            logger: logger)
    }
}

extension HTTPSyncServer {
    /// Serves until the process gets SIGINT or SIGTERM, then shuts down gracefully: no new
    /// connections, requests in flight finish, push channels close.
    ///
    /// - Throws: The server's error, such as a port already in use.
    public func runUntilSignalled() async throws {
        try await application().runService(gracefulShutdownSignals: [.sigterm, .sigint])
    }
}

/// Ends every push stream when the application begins its graceful shutdown, so that push
/// channels close and the server's wait for open connections ends.
struct PushShutdownService: Service {
    let server: SyncServer

    func run() async throws {
        try? await gracefulShutdown()
        server.shutdown()
    }
}

/// Turns Hummingbird's bare 404 for a path no route matches into an error body naming the
/// routes there are.
struct UnknownRouteMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let format = WireFormat.forResponse(accept: request.headers[.accept])
            return OperationRoutes.errorResponse(
                SyncError(
                    .serverRejectedRequest,
                    "no route \(request.method) \(request.uri.path); the routes are POST /\(WireProtocol.versionPath)/databases/{scope}/{operation} and GET /\(WireProtocol.versionPath)/databases/{scope}/push"),
                status: 404, format: format)
        }
    }
}

/// The request context of the routes: Hummingbird's basics and the connection, which a route
/// closes for reading when it refuses a body it will not read.
struct ServerRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
