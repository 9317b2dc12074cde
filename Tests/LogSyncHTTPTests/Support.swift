import AsyncHTTPClient
import ChildProcesses
import Foundation
import LogStore
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import NIOCore
import NIOHTTP1
import NIOPosix
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// A server on a loopback port with two users, alice and bob, each with a token.
struct LiveServer: Sendable {
    static let aliceToken = "lsk_alice-token-0123456789abcdef"
    static let bobToken = "lsk_bob-token-0123456789abcdefgh"

    let server: SyncServer
    let tokens: TokenStore
    let running: RunningHTTPSyncServer

    var port: Int { running.port }
    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Starts a server storing its data in `directory`, on `port` (0: any free port).
    static func start(
        in directory: URL, port: Int = 0, durability: Durability = .fast,
        configuration: HTTPSyncServer.Configuration = .init()
    ) async throws -> LiveServer {
        let server = try SyncServer(SyncServer.Configuration(directory: directory, durability: durability))
        let tokens = TokenStore()
        try tokens.add(token: aliceToken, for: "alice")
        try tokens.add(token: bobToken, for: "bob")
        var configuration = configuration
        configuration.port = port
        let running = try await RunningHTTPSyncServer.start(
            HTTPSyncServer(server: server, tokens: tokens, configuration: configuration))
        return LiveServer(server: server, tokens: tokens, running: running)
    }

    /// A client of `user` on `device`.
    func client(_ token: String, device: DeviceID? = nil, format: WireFormat = .protobuf) -> HTTPSyncClient {
        HTTPSyncClient(
            .init(
                serverURL: baseURL, credentials: .token(token), device: device, format: format,
                reconnect: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200))))
    }

    /// The end of `user`'s database log: equal before and after means nothing was written.
    func lastOffset(of user: UserID, scope: DatabaseScope = .private) throws -> LogOffset {
        try server.admin.log(of: user, scope: scope).lastOffset
    }

    func stop() async throws {
        try await running.stop()
        server.shutdown()
    }
}

/// Runs `body` with a live server, stopping it afterwards (also when `body` throws).
func withLiveServer(
    configuration: HTTPSyncServer.Configuration = .init(), _ body: (LiveServer, URL) async throws -> Void
) async throws {
    try await withTemporaryDirectory { directory in
        let live = try await LiveServer.start(
            in: directory.appendingPathComponent("server"), configuration: configuration)
        do {
            try await body(live, directory)
        } catch {
            try? await live.stop()
            throw error
        }
        try await live.stop()
    }
}

/// What a raw HTTP exchange returned.
struct RawResponse: CustomStringConvertible {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// The error the body carries.
    func error() throws -> SyncError {
        let format = header("Content-Type").flatMap(WireFormat.init(contentType:)) ?? .protobuf
        return try Wire.decode(SyncError.self, from: body, as: format)
    }

    var description: String { "HTTP \(status) \(String(decoding: body.prefix(300), as: UTF8.self))" }
}

/// Sends one request with AsyncHTTPClient exactly as given: any path, headers and body.
func rawRequest(
    _ live: LiveServer, _ path: String, method: HTTPMethod = .POST, headers: [(String, String)] = [],
    body: [UInt8]? = nil
) async throws -> RawResponse {
    var request = HTTPClientRequest(url: live.baseURL.absoluteString + path)
    request.method = method
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
    // A guard against a hung server, not a measure: a full suite on two busy cores has kept a
    // request waiting for the cooperative pool past 30 s.
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
    var buffer = try await response.body.collect(upTo: 16 << 20)
    return RawResponse(
        status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
        body: buffer.readBytes(length: buffer.readableBytes) ?? [])
}

/// The headers of an authenticated protobuf request of alice's.
func aliceHeaders(_ extra: [(String, String)] = []) -> [(String, String)] {
    [("Authorization", "Bearer \(LiveServer.aliceToken)"), ("Content-Type", "application/x-protobuf")] + extra
}

/// A failure of a test's own machinery.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A loopback port free now and below Linux's ephemeral range (32768–60999 by default), for a
/// server that a test stops and starts again on the same port: servers on port 0 and clients
/// get their ports from the ephemeral range, so none of them takes this one meanwhile.
func portOutsideEphemeralRange() throws -> Int {
    var random = SystemRandomNumberGenerator()
    for _ in 0..<200 {
        let port = Int.random(in: 20_000..<32_000, using: &random)
        let socket = try LoopbackSocket(port: port)
        if socket != nil { return port }
    }
    throw TestFailure("no free loopback port in 20000..<32000")
}

/// A TCP socket bound to 127.0.0.1 and never listening: connections to its port are refused,
/// and no other socket can bind the port while it is open.
final class LoopbackSocket: Sendable {
    let port: Int
    private let descriptor: Int32

    /// Binds `port` (0: any free port); `nil` if that port is taken.
    init?(port: Int = 0) throws {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw TestFailure("socket failed: \(errno)") }
        let bound = withLoopbackAddress(port: port) { bind(descriptor, $0, $1) }
        guard bound == 0 else {
            let failure = errno  // before close, which may set it
            close(descriptor)
            if failure == EADDRINUSE { return nil }
            throw TestFailure("bind to port \(port) failed: \(failure)")
        }
        self.descriptor = descriptor
        self.port = boundPort(descriptor)
    }

    deinit { close(descriptor) }
}

/// A bare TCP connection to a live server, for clients that send half a request or nothing:
/// what it has received, and whether the server has closed it.
final class RawConnection: Sendable {
    private let channel: any Channel
    private let received: Received

    private final class Received: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let state = Mutex((bytes: ByteBuffer(), closed: false))

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            state.withLock { _ = $0.bytes.writeBuffer(&buffer) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            state.withLock { $0.closed = true }
        }
    }

    private init(channel: any Channel, received: Received) {
        self.channel = channel
        self.received = received
    }

    /// Connects to `live`; sends nothing.
    static func open(to live: LiveServer) async throws -> RawConnection {
        try await open(port: live.port)
    }

    /// Sends its text the moment the connection is up, on the connection's event loop.
    private final class SendOnConnect: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let text: String

        init(_ text: String) { self.text = text }

        func channelActive(context: ChannelHandlerContext) {
            context.writeAndFlush(NIOAny(ByteBuffer(string: text)), promise: nil)
            context.fireChannelActive()
        }
    }

    /// Connects to a server on a loopback port; sends nothing.
    static func open(port: Int) async throws -> RawConnection {
        try await open(port: port, sendingOnConnect: nil)
    }

    /// Connects to `live` and sends `request` as soon as the connection is up, from the
    /// connection's event loop: a test task that waits its turn on a busy machine does not leave
    /// a gap between the server's accept and the request for a short idle timeout to fall into.
    static func open(to live: LiveServer, sendingOnConnect request: String) async throws -> RawConnection {
        try await open(port: live.port, sendingOnConnect: request)
    }

    private static func open(port: Int, sendingOnConnect request: String?) async throws -> RawConnection {
        let received = Received()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(received)
                    if let request { try channel.pipeline.syncOperations.addHandler(SendOnConnect(request)) }
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return RawConnection(channel: channel, received: received)
    }

    func send(_ text: String) async throws {
        try await channel.writeAndFlush(ByteBuffer(string: text))
    }

    /// Sends bytes as they are, valid UTF-8 or not.
    func send(bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    /// What the server has sent so far.
    var text: String { received.state.withLock { String(buffer: $0.bytes) } }

    /// What the server has sent so far, as bytes.
    var bytes: [UInt8] { received.state.withLock { Array($0.bytes.readableBytesView) } }

    /// Whether the server has closed the connection.
    var isClosed: Bool { received.state.withLock { $0.closed } }

    func close() {
        channel.close(promise: nil)
    }

    /// Waits until `condition` holds (checked every few milliseconds); fails after `limit`.
    func waitUntil(
        _ what: String, limit: Duration = .seconds(30), _ condition: @Sendable (RawConnection) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + limit
        while !condition(self) {
            guard ContinuousClock.now < deadline else {
                throw TestFailure("timed out waiting until \(what); received: \(text.prefix(500))")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// Stops `live` and returns how long that took. A stop still waiting after `limit` fails the
/// test: `release` is then called to let it end (by closing the connections holding it up). The
/// limit is generous, for a loaded machine: what it catches is a stop that never ends on its own.
func stopTimed(
    _ live: LiveServer, limit: Duration = .seconds(60), release: @escaping @Sendable () -> Void
) async throws -> Duration {
    let start = ContinuousClock.now
    let stoppedInTime = try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            try await live.stop()
            return true
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return false
        }
        let first = try await group.next() ?? false
        if !first { release() }
        group.cancelAll()
        try await group.waitForAll()
        return first
    }
    let elapsed = ContinuousClock.now - start
    #expect(stoppedInTime, "the server's stop was still waiting after \(limit)")
    return elapsed
}

/// Writes `bytes` to a new connection to `port` on 127.0.0.1, from the loopback address `source`
/// (any of 127.0.0.0/8; by default the system's choice), then reads until the server closes it;
/// returns what was read. The read gives up after 10 seconds, reporting what it got.
func exchange(port: Int, from source: String? = nil, send bytes: [UInt8]) async throws -> String {
    var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
    let channel =
        try await bootstrap
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
    return try await channel.executeThenClose { inbound, outbound in
        try await outbound.write(ByteBuffer(bytes: bytes))
        let received = ReceivedBytes()
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                for try await var chunk in inbound { received.bytes.withLock { $0.writeBuffer(&chunk) } }
                return received.bytes.withLock { String(buffer: $0) }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                return nil
            }
            defer { group.cancelAll() }
            guard let answer = try await group.next() ?? nil else {
                throw TestFailure(
                    "the server did not close the connection within 10 seconds; it sent: \(received.bytes.withLock { String(buffer: $0) })"
                )
            }
            return answer
        }
    }
}

/// The bytes a raw connection has received so far.
final class ReceivedBytes: Sendable {
    let bytes = Mutex(ByteBuffer())
}

/// Adds the user `name` to the server data in `data` with `logsync-server user add`; returns the
/// token it printed, the only time it is shown. Throws if the command fails.
func addUser(_ name: String, data: URL) async throws -> String {
    let added = try await ChildProcess.run(["user", "add", name, "--data", data.path])
    guard added.status == 0 else { throw TestFailure("user add \(name) failed: \(added)") }
    return added.output.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The data directory of a `logsync-server` (`--data`), not made yet, in a fresh temporary
/// directory removed when `body` returns.
@discardableResult
func withServerData<R>(_ body: (_ data: URL) async throws -> R) async throws -> R {
    try await withTemporaryDirectory { directory in try await body(directory.appendingPathComponent("data")) }
}

/// Makes the data directory `data` and returns its token file's path (the file is not made).
func tokenFile(in data: URL) throws -> URL {
    try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
    return data.appendingPathComponent("tokens")
}

/// Calls `body` (`bind`, `connect`) with the IPv4 loopback address on `port` and its length.
func withLoopbackAddress(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

/// The port a socket is bound to (`getsockname`).
func boundPort(_ descriptor: Int32) -> Int {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Serves `http` on a loopback port for `body`, then stops it and shuts its server down, whether
/// `body` threw or not.
func serving(_ http: HTTPSyncServer, _ body: (RunningHTTPSyncServer) async throws -> Void) async throws {
    let running = try await RunningHTTPSyncServer.start(http)
    do {
        try await body(running)
    } catch {
        try? await running.stop()
        http.server.shutdown()
        throw error
    }
    try await running.stop()
    http.server.shutdown()
}

/// A server a test serves on a loopback port, and the requests the test sends it.
protocol ServedOnLoopback: Sendable {
    var running: RunningHTTPSyncServer { get }
}

extension ServedOnLoopback {
    var url: URL { URL(string: "http://127.0.0.1:\(running.port)")! }

    /// A client presenting `token` as `device`, reconnecting its push channels quickly.
    func syncClient(_ token: String, device: DeviceID) -> HTTPSyncClient {
        HTTPSyncClient(
            .init(
                serverURL: url, credentials: .token(token), device: device,
                reconnect: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200))))
    }

    /// The status and body of a request sent as given, asking for JSON.
    func request(
        _ path: String, method: HTTPMethod = .POST, token: String? = nil, device: String? = nil,
        body: [UInt8]? = nil
    ) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: url.absoluteString + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let device { request.headers.add(name: WireProtocol.deviceHeader, value: device) }
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        let buffer = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(decoding: buffer.readableBytesView, as: UTF8.self))
    }
}
