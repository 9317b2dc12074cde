import ArgumentParser
import Foundation
import LogSyncHTTPServer
import LogSyncIdentity
import LogSyncServer
import Logging

/// `logsync-server serve`: runs the server until SIGINT or SIGTERM.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server until SIGINT or SIGTERM (the default subcommand).",
        discussion: """
            Every commit is stored (on disk with fsync, or committed by PostgreSQL) before its \
            request is answered. On SIGINT or SIGTERM \
            the server stops accepting connections, lets requests in flight finish, closes push \
            channels, and exits with status 0; no committed change is lost.

            With --store postgres://… (or LOGSYNC_STORE) every node naming the database serves \
            every device: commits are PostgreSQL transactions, push hints reach other nodes by \
            LISTEN/NOTIFY, tokens are in the database, and the schema is created or migrated at \
            start. Each node opens up to 2 × --connections + 1 connections (Docs/Deployment.md).

            With --tls-certificate and --tls-key the server speaks HTTPS only (and push channels \
            are wss); without them, plain HTTP: keep it on loopback or behind a reverse proxy \
            that terminates TLS.

            Logs go to standard error, one line per event with its fields \
            (`listening host=… port=… scheme=http|https` once the server accepts connections).

            \(TraceExport.help)
            """)

    @OptionGroup var data: DataOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The address to listen on. The default serves this machine only; 0.0.0.0 serves every interface.",
            valueName: "address"))
    var host = "127.0.0.1"

    @Option(name: .long, help: ArgumentHelp("The TCP port; 0 picks a free one (logged).", valueName: "n"))
    var port = 8080

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The largest request body accepted, in bytes; larger ones get 413 before they are read.", valueName: "bytes"
        ))
    var maxBodyBytes = 8 << 20

    @Option(
        name: .long,
        help: ArgumentHelp(
            "On SIGINT or SIGTERM, how long requests in flight may take before their connections are closed; idle connections close at once.",
            valueName: "seconds"))
    var shutdownGracePeriod = 10.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a connection with no request in progress (new, or between requests) stays open.",
            valueName: "seconds"))
    var idleTimeout = 75.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a request's head (request line and headers) may take to arrive, from its first byte.",
            valueName: "seconds"))
    var requestHeadTimeout = 10.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The longest pause in a request body while the server waits for it; the connection is closed after it.",
            valueName: "seconds"))
    var requestBodyTimeout = 30.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The slowest a request body may come: at least this many bytes per second within each --request-body-timeout, or the connection is closed; 0: any byte will do.",
            valueName: "bytes"))
    var requestBodyMinRate = 1024

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The longest the server waits for a client to take more of an answer (a download it stopped reading); the connection is closed after it.",
            valueName: "seconds"))
    var responseWriteTimeout = 60.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many connections are open at most; more wait in the listen backlog. Default: half of `ulimit -n`, at most 10000.",
            valueName: "n"))
    var maxConnections: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many connections the system queues for the server to accept (capped by net.core.somaxconn).",
            valueName: "n"))
    var listenBacklog = 256

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How often push channels are pinged; one whose client missed the last ping is closed.",
            valueName: "seconds"))
    var pushPingInterval = 30.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "About how much memory the requests being decoded and handled may take together, estimated from their bodies; more wait.",
            valueName: "bytes"))
    var requestMemoryBudget = 64 << 20

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many requests may wait for --request-memory-budget; more get 503 with a retry-after.", valueName: "n"))
    var maxRequestsWaiting = 1_024

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The requests per second each user may send in the long run; more get 429 with a retry-after. 0: no limit.",
            valueName: "n"))
    var userRequestRate = HTTPSyncServer.ClientLimits.perUser.requestsPerSecond

    @Option(
        name: .long,
        help: ArgumentHelp("How many requests each user may send at once above --user-request-rate.", valueName: "n"))
    var userRequestBurst = HTTPSyncServer.ClientLimits.perUser.burst

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many requests each user may have in progress at once; more get 429. 0: no limit.", valueName: "n"))
    var userConcurrentRequests = HTTPSyncServer.ClientLimits.perUser.concurrentRequests

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The requests per second each address (IPv4, or an IPv6 /64) may send in the long run, whatever its users; 0: no limit (behind a proxy, which should limit addresses itself).",
            valueName: "n"))
    var addressRequestRate = HTTPSyncServer.ClientLimits.perAddress.requestsPerSecond

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many requests each address may send at once above --address-request-rate.", valueName: "n"))
    var addressRequestBurst = HTTPSyncServer.ClientLimits.perAddress.burst

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many requests each address may have in progress at once; more get 429. 0: no limit.", valueName: "n"))
    var addressConcurrentRequests = HTTPSyncServer.ClientLimits.perAddress.concurrentRequests

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Serve HTTPS with this PEM certificate: the server's certificate first, then any intermediates. Requires --tls-key.",
            valueName: "file"))
    var tlsCertificate: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The unencrypted PEM private key of --tls-certificate. Requires --tls-certificate.", valueName: "file"))
    var tlsKey: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long an asset content no record references (and a cut upload's partial copy) is kept before it is deleted.",
            valueName: "seconds"))
    var assetHorizon = 7 * 86_400.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How often unreferenced asset contents older than --asset-horizon are deleted; 0: never (run `logsync-server collect-assets` instead).",
            valueName: "seconds"))
    var assetCollectionInterval = 3600.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The largest support bundle (its data.mdb) a user may upload (PUT /v1/bundles/{id}); Docs/Deployment.md, \"Support bundles\".",
            valueName: "bytes"))
    var maxBundleBytes: Int64 = 64 << 20

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long an uploaded support bundle is kept; older ones are removed at start and then hourly.",
            valueName: "days"))
    var bundleRetentionDays = 30.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A JSON file of the identity providers whose tokens (JWTs) the server trusts: issuers, audiences, key sources (Docs/Deployment.md, \"Identity tokens\"). Checked at start; `logsync-server dev-issuer init` prints one for a local issuer.",
            valueName: "file"))
    var identityConfig: String?

    /// The identity configuration of --identity-config, read and checked by `validate()`.
    private var identity: IdentityConfiguration? {
        get throws {
            guard let identityConfig else { return nil }
            do {
                return try IdentityConfiguration.load(from: URL(fileURLWithPath: identityConfig))
            } catch {
                throw ValidationError("--identity-config \(identityConfig): \(error)")
            }
        }
    }

    /// The verifier of identity tokens that --identity-config describes, or nil without it.
    private func identityVerifier() throws -> JWTIdentityVerifier? {
        guard let identityConfig, let identity = try identity else { return nil }
        let directory = URL(fileURLWithPath: identityConfig).deletingLastPathComponent()
        do {
            return try identity.verifier(relativeTo: directory)
        } catch {
            throw ValidationError("--identity-config \(identityConfig): \(error)")
        }
    }

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The admin token file (`logsync-server admin-token add`): its tokens open the admin routes under /v1/admin and the metrics at /metrics. Without it there are none.",
            valueName: "path"))
    var adminTokenFile: String?

    @Flag(
        name: .long, inversion: .prefixedNo,
        help: "With --admin-token-file: serve the read-only console at /console behind the admin credential.")
    var console = true

    /// The admin credential of --admin-token-file, or nil without it.
    private func adminCredential() throws -> AdminCredential? {
        guard let adminTokenFile else { return nil }
        do {
            return try AdminCredential(contentsOf: URL(fileURLWithPath: adminTokenFile))
        } catch {
            throw ValidationError("--admin-token-file: \(error)")
        }
    }

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a session's access token is accepted (a device then refreshes its session).",
            valueName: "seconds"))
    var accessTokenLifetime = 900.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a session's refresh token may be used, from the sign-in or the last refresh (a device then signs in again).",
            valueName: "seconds"))
    var refreshTokenLifetime = 60 * 86_400.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The least severe log level written: trace, debug (one line per request), info, notice, warning, error, critical.",
            valueName: "level"))
    var logLevel = "info"

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0 to 65535, not \(port)") }
        guard maxBodyBytes >= 1024 else { throw ValidationError("--max-body-bytes must be at least 1024") }
        guard shutdownGracePeriod >= 0, shutdownGracePeriod.isFinite else {
            throw ValidationError("--shutdown-grace-period must be a number of seconds, 0 or more")
        }
        for (flag, seconds) in [
            ("--idle-timeout", idleTimeout), ("--request-head-timeout", requestHeadTimeout),
            ("--request-body-timeout", requestBodyTimeout), ("--push-ping-interval", pushPingInterval),
            ("--response-write-timeout", responseWriteTimeout),
        ] {
            guard seconds > 0, seconds.isFinite else {
                throw ValidationError("\(flag) must be a number of seconds above 0, not \(seconds)")
            }
        }
        guard assetHorizon >= 0, assetHorizon.isFinite else {
            throw ValidationError("--asset-horizon must be a number of seconds, 0 or more")
        }
        guard maxBundleBytes >= 1 else {
            throw ValidationError("--max-bundle-bytes must be at least 1, not \(maxBundleBytes)")
        }
        guard bundleRetentionDays > 0, bundleRetentionDays.isFinite else {
            throw ValidationError(
                "--bundle-retention-days must be a number of days above 0, not \(bundleRetentionDays)")
        }
        guard assetCollectionInterval >= 0, assetCollectionInterval.isFinite else {
            throw ValidationError("--asset-collection-interval must be a number of seconds, 0 or more")
        }
        if let maxConnections, maxConnections < 1 {
            throw ValidationError("--max-connections must be at least 1, not \(maxConnections)")
        }
        guard requestBodyMinRate >= 0 else {
            throw ValidationError(
                "--request-body-min-rate must be 0 or more bytes per second, not \(requestBodyMinRate)")
        }
        guard listenBacklog >= 1 else {
            throw ValidationError("--listen-backlog must be at least 1, not \(listenBacklog)")
        }
        guard requestMemoryBudget >= 1 << 20 else {
            throw ValidationError("--request-memory-budget must be at least 1048576 bytes, not \(requestMemoryBudget)")
        }
        guard maxRequestsWaiting >= 0 else {
            throw ValidationError("--max-requests-waiting must be 0 or more, not \(maxRequestsWaiting)")
        }
        for (flag, rate) in [("--user-request-rate", userRequestRate), ("--address-request-rate", addressRequestRate)] {
            guard rate >= 0, rate.isFinite else {
                throw ValidationError("\(flag) must be a number of requests per second, 0 or more, not \(rate)")
            }
        }
        for (flag, burst) in [
            ("--user-request-burst", userRequestBurst), ("--address-request-burst", addressRequestBurst),
        ] {
            guard burst >= 1 else { throw ValidationError("\(flag) must be at least 1, not \(burst)") }
        }
        for (flag, count) in [
            ("--user-concurrent-requests", userConcurrentRequests),
            ("--address-concurrent-requests", addressConcurrentRequests),
        ] {
            guard count >= 0 else { throw ValidationError("\(flag) must be 0 or more, not \(count)") }
        }
        for (flag, seconds) in [
            ("--access-token-lifetime", accessTokenLifetime), ("--refresh-token-lifetime", refreshTokenLifetime),
        ] {
            guard seconds >= 1, seconds.isFinite else {
                throw ValidationError("\(flag) must be a number of seconds, 1 or more, not \(seconds)")
            }
        }
        guard refreshTokenLifetime >= accessTokenLifetime else {
            throw ValidationError("--refresh-token-lifetime must be at least --access-token-lifetime")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError(
                "--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if tlsCertificate != nil, tlsKey == nil {
            throw ValidationError("--tls-certificate needs --tls-key (the certificate's private key)")
        }
        if tlsKey != nil, tlsCertificate == nil {
            throw ValidationError("--tls-key needs --tls-certificate (the key's certificate chain)")
        }
        _ = try identityVerifier()  // a wrong field fails here, named, before anything starts
        _ = try adminCredential()
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "logsync-server")
        let traces = TraceExport.start(logger: logger)  // bootstraps the tracer before the server is made
        let metricsRegistry = Self.bootstrapMetrics()  // and the metrics
        let tokens: TokenStore
        let server: SyncServer
        // The identity providers' tokens (--identity-config), checked by LogSyncIdentity; sign-in
        // takes it from here.
        let identityVerifier: JWTIdentityVerifier?
        let adminCredential: AdminCredential?
        var httpConfiguration = HTTPSyncServer.Configuration(host: host, port: port, maxRequestBodyBytes: maxBodyBytes)
        httpConfiguration.shutdownGracePeriod = .milliseconds(Int64(shutdownGracePeriod * 1000))
        httpConfiguration.idleTimeout = .seconds(idleTimeout)
        httpConfiguration.requestHeadTimeout = .seconds(requestHeadTimeout)
        httpConfiguration.requestBodyTimeout = .seconds(requestBodyTimeout)
        httpConfiguration.requestBodyMinimumRate = requestBodyMinRate
        httpConfiguration.responseWriteTimeout = .seconds(responseWriteTimeout)
        httpConfiguration.pushPingInterval = .seconds(pushPingInterval)
        if let maxConnections { httpConfiguration.maxConnections = maxConnections }
        httpConfiguration.listenBacklog = listenBacklog
        httpConfiguration.requestMemoryBudget = requestMemoryBudget
        httpConfiguration.maxRequestsWaiting = maxRequestsWaiting
        httpConfiguration.userLimits = HTTPSyncServer.ClientLimits(
            requestsPerSecond: userRequestRate, burst: userRequestBurst, concurrentRequests: userConcurrentRequests)
        httpConfiguration.addressLimits = HTTPSyncServer.ClientLimits(
            requestsPerSecond: addressRequestRate, burst: addressRequestBurst,
            concurrentRequests: addressConcurrentRequests)
        do {
            if let tlsCertificate, let tlsKey {
                httpConfiguration.tlsConfiguration = try HTTPSyncServer.tlsConfiguration(
                    certificateChainFile: URL(fileURLWithPath: tlsCertificate),
                    privateKeyFile: URL(fileURLWithPath: tlsKey))
            }
            (server, tokens) = try data.server(
                sessionLifetimes: SessionStore.Lifetimes(
                    access: .milliseconds(Int64(accessTokenLifetime * 1000)),
                    refresh: .milliseconds(Int64(refreshTokenLifetime * 1000))),
                logger: logger
            ) { [maxBundleBytes, bundleRetentionDays] configuration in
                configuration.maxSupportBundleBytes = maxBundleBytes
                configuration.supportBundleRetention = bundleRetentionDays * 86_400
            }
            identityVerifier = try self.identityVerifier()
            adminCredential = try self.adminCredential()
        } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
        if tokens.count == 0 {
            logger.warning(
                "no users yet: every request will get 401; add one with `logsync-server user add USER`",
                metadata: ["tokens": "\(tokens.file?.path ?? "in the store")"])
        }
        logger.info(
            "starting",
            metadata: [
                "store": "\((try? data.location)?.description ?? "")",
                "tokens": "\(tokens.file?.path ?? "in the store")",
                "users": "\(tokens.count)",
                "max-connections": "\(httpConfiguration.maxConnections)",
            ])
        if let identityVerifier {
            // Keys load now, so that a wrong URL shows at start; an issuer whose keys fail to
            // load is retried on its first token (after the refetch floor).
            for failure in await identityVerifier.loadKeys() {
                logger.warning("identity keys not loaded", metadata: ["reason": "\(failure.reason)"])
            }
            logger.info(
                "identity tokens",
                metadata: ["issuers": "\(identityVerifier.issuers.map(\.name).joined(separator: ","))"])
        }
        var http = HTTPSyncServer(
            server: server, tokens: tokens, configuration: httpConfiguration, identityVerifier: identityVerifier,
            adminCredential: adminCredential, logger: logger, metrics: ServerMetrics(registry: metricsRegistry))
        if console, adminCredential != nil { ServeConsole.add(to: &http) }
        let collection =
            assetCollectionInterval > 0
            ? Task { [assetHorizon, assetCollectionInterval] in
                await CollectAssets.periodically(
                    server, every: assetCollectionInterval, horizon: assetHorizon, logger: logger)
            }
            : nil
        defer { collection?.cancel() }
        let bundleSweep = Task { await Bundles.sweepPeriodically(server, every: 3600, logger: logger) }
        defer { bundleSweep.cancel() }
        do {
            try await http.runUntilSignalled()
        } catch {
            logger.critical("stopped on an error", metadata: ["error": "\(error)"])
            server.shutdown()
            await traces.stop()
            throw ExitCode.failure
        }
        collection?.cancel()
        bundleSweep.cancel()
        server.shutdown()
        await traces.stop()
        logger.info("stopped")
    }
}
