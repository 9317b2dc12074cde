import HummingbirdCore
import LogSyncWire
import Logging
import NIOCore
import NIOHTTP1
import SyncModel

/// The read timeouts of one connection (``HTTPSyncServer/Configuration``).
struct ConnectionTimeouts: Sendable {
    var idle: Duration
    var requestHead: Duration
    var requestBody: Duration
    /// The bytes a request body must bring within each ``requestBody`` the server waits for it
    /// (``HTTPSyncServer/Configuration/requestBodyMinimumRate`` times the timeout, at least 1):
    /// fewer count as no progress, so a body trickling in is cut off like one that stopped.
    var requestBodyProgress: Int

    /// How long the server waits for its client to take more of an answer it is writing.
    var responseWrite: Duration

    init(
        idle: Duration, requestHead: Duration, requestBody: Duration, requestBodyMinimumRate: Int = 0,
        responseWrite: Duration = .seconds(60)
    ) {
        self.idle = idle
        self.requestHead = requestHead
        self.requestBody = requestBody
        self.responseWrite = responseWrite
        let seconds = Double(requestBody.nanoseconds) / 1e9
        requestBodyProgress = max(1, Int((Double(max(0, requestBodyMinimumRate)) * seconds).rounded(.up)))
    }
}

/// Hummingbird's child channel with ``ConnectionGuard`` in front of it and ``HTTPPartObserver``
/// right after the HTTP decoder, so that a connection can hold the server only as long as its
/// client keeps it busy honestly:
///
/// - a connection with no request in progress (a new one that sent nothing, or a keep-alive one
///   between requests) closes after the idle timeout;
/// - a request head must arrive whole within the head timeout of its first byte (a slowloris
///   client sending one byte at a time gains nothing);
/// - a request body must keep coming: a pause longer than the body timeout, while the server
///   waits for it, closes the connection, and so does a body that brings less than
///   ``ConnectionTimeouts/requestBodyProgress`` bytes in that time (a slow trickle holding an
///   asset upload open for days);
/// - an answer must be taken: when the client stops reading one (an asset download, say) and
///   the connection stays unwritable for the response write timeout, it is closed;
/// - what the HTTP parser refuses (a control character in a header, a NUL in the path, TLS sent to
///   a plain port) gets a 400 with an error body naming what was wrong, and the connection closes.
///
/// Hummingbird's WebSocket-upgrade channel installs its own HTTP handlers only after the first
/// request has been read, and its upgrade handler ignores parser errors: without this, such a
/// connection got no answer and stayed open until its client closed it. A connection upgraded
/// to a push channel is no longer timed here: WebSocket pings
/// (``HTTPSyncServer/Configuration/pushPingInterval``) find its dead clients.
struct GuardedChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let timeouts: ConnectionTimeouts
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // Called on the channel's event loop, by the server's child channel initializer.
        let connectionGuard = ConnectionGuard(timeouts: timeouts, logger: self.logger)
        do {
            try channel.pipeline.syncOperations.addHandler(connectionGuard)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return base.setup(channel: channel, logger: logger).assumeIsolated().flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.handler(
                type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(
                HTTPPartObserver(connectionGuard: connectionGuard), position: .after(decoder))
            return value
        }.nonisolated()
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// The first handler of a connection (behind TLS, so it sees the bytes of requests only): it
/// times the connection's reads and closes it when a timeout of ``ConnectionTimeouts`` passes,
/// and writes the 400 of a request the parser refused. ``HTTPPartObserver`` tells it where each
/// request begins and ends.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private enum Reading {
        /// No request is being read: the next byte begins one.
        case between
        /// A request's head is being read; it must be whole by the deadline.
        case head(deadline: NIODeadline)
        /// A request's body is being read.
        case body
    }

    private let timeouts: ConnectionTimeouts
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var reading = Reading.between
    /// Requests whose head was read and whose answer has not been written to its end.
    private var answersOwed = 0
    /// The last time a request was read or an answer ended: when idleness began.
    private var lastActivity = NIODeadline.now()
    /// Since when the server has asked to read and got nothing, or less of a body than
    /// ``ConnectionTimeouts/requestBodyProgress``, if it is waiting.
    private var waitingForPeerSince: NIODeadline?
    /// The body bytes that arrived since ``waitingForPeerSince`` was last cleared.
    private var bodyBytesSinceProgress = 0
    /// Since when the connection has been unwritable (the client not taking the answer), if it is.
    private var unwritableSince: NIODeadline?
    /// A WebSocket now: not timed here.
    private var upgraded = false
    private var closing = false
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// The context of the ``HTTPPartObserver``, where the end of input is told to the handler
    /// waiting for the first request.
    var observerContext: ChannelHandlerContext?

    init(timeouts: ConnectionTimeouts, logger: Logger) {
        self.timeouts = timeouts
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        lastActivity = .now()
        rearm()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing = true
        cancelTimer()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = NIODeadline.now()
        if case .body = reading {
            // A body makes progress only with enough bytes: a trickle leaves the clock running.
            bodyBytesSinceProgress += unwrapInboundIn(data).readableBytes
            if bodyBytesSinceProgress >= timeouts.requestBodyProgress {
                waitingForPeerSince = nil
                bodyBytesSinceProgress = 0
            }
        } else {
            waitingForPeerSince = nil
            bodyBytesSinceProgress = 0
        }
        if case .between = reading, !upgraded {
            reading = .head(deadline: now + .nanoseconds(timeouts.requestHead.nanoseconds))
        }
        // The decoder behind reports the heads and ends of what these bytes complete.
        context.fireChannelRead(data)
        rearm()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableSince = nil
        } else if unwritableSince == nil {
            unwritableSince = .now()
        }
        rearm()
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if waitingForPeerSince == nil { waitingForPeerSince = .now() }
        context.read()
        rearm()
    }

    // MARK: What the observer reports

    func headRead() {
        reading = .body
        bodyBytesSinceProgress = 0
        answersOwed += 1
    }

    func requestEnded() {
        reading = .between
        lastActivity = .now()
    }

    func answerEnded() {
        answersOwed = max(0, answersOwed - 1)
        lastActivity = .now()
        rearm()
    }

    func didUpgrade() {
        upgraded = true
        cancelTimer()
    }

    /// The parser refused the connection's input. With no answer being written, answers 400
    /// naming the fault and closes: returns `true`. Otherwise returns `false`, and Hummingbird,
    /// whose answer is under way, answers it after that one.
    func parserRefused(_ error: HTTPParserError) -> Bool {
        guard let context, !closing else { return true }
        // The input ended halfway through a request (the client left, or a shutdown ended it):
        // no one to answer, and whoever ended it closes the connection.
        if error == .invalidEOFState { return true }
        guard answersOwed == 0 else { return false }
        let message = "malformed HTTP request (\(error)): \(Self.explanation(of: error)); the connection is closed"
        logger.debug(
            "refused a malformed request",
            metadata: ["error": "\(error)", "remote": "\(context.remoteAddress.map { "\($0)" } ?? "?")"])
        closing = true
        cancelTimer()
        let body = Wire.encode(SyncError(.invalidArguments, message), as: .protobuf)
        var buffer = context.channel.allocator.buffer(capacity: body.count + 200)
        buffer.writeString(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: \(WireFormat.protobuf.mediaType)\r\n"
                + "\(WireProtocol.versionHeader): \(WireProtocol.version)\r\nContent-Length: \(body.count)\r\n"
                + "Connection: close\r\n\r\n")
        buffer.writeBytes(body)
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer)), promise: written)
        written.futureResult.assumeIsolated().whenComplete { _ in
            self.endInputAndClose()
        }
        return true
    }

    static func explanation(of error: HTTPParserError) -> String {
        switch error {
        case .invalidHeaderToken, .invalidCharactersUsed, .invalidConstant, .lfExpected:
            "a request line or header holds a character not allowed there (a control character, say)"
        case .invalidURL, .invalidPath, .invalidQueryString, .invalidFragment, .invalidHost, .invalidPort:
            "the request target is not a valid URL path (a NUL or a control character in it, say)"
        case .invalidMethod:
            "the request does not begin with an HTTP method (TLS sent to a plain HTTP port, say)"
        case .invalidVersion: "the request line does not end with HTTP/1.0 or HTTP/1.1"
        case .headerOverflow: "the request head is larger than the server accepts"
        case .invalidContentLength, .unexpectedContentLength: "the Content-Length header is not valid"
        case .invalidChunkSize: "a chunk of the chunked body has an invalid size"
        default: "the HTTP parser refused it"
        }
    }

    // MARK: Timing

    /// When the connection is to be closed unless something happens first; `nil` while the
    /// server, not the client, is the one to act (an answer is being made, or the server is not
    /// reading), and for push channels.
    private var deadline: NIODeadline? {
        guard !upgraded, !closing else { return nil }
        let reading = readingDeadline
        guard let writing = writingDeadline else { return reading }
        return reading.map { min($0, writing) } ?? writing
    }

    /// When the client, not taking the answer being written, has kept the server waiting too long.
    private var writingDeadline: NIODeadline? {
        unwritableSince.map { $0 + .nanoseconds(timeouts.responseWrite.nanoseconds) }
    }

    /// When the client has kept the server waiting too long for what it reads: a head, a body,
    /// or the next request.
    private var readingDeadline: NIODeadline? {
        switch reading {
        case .head(let deadline):
            return deadline
        case .body:
            return waitingForPeerSince.map { $0 + .nanoseconds(timeouts.requestBody.nanoseconds) }
        case .between:
            return answersOwed == 0 ? lastActivity + .nanoseconds(timeouts.idle.nanoseconds) : nil
        }
    }

    /// Makes sure a check runs no later than ``deadline``. A later deadline leaves the scheduled
    /// check alone: it runs early, finds the new deadline and schedules itself again.
    private func rearm() {
        guard let context, let deadline else { return }
        if let timerDeadline, timerDeadline <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.timerFired()
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }

    private func timerFired() {
        timer = nil
        timerDeadline = nil
        guard let deadline else { return }
        guard deadline <= .now() else {
            rearm()
            return
        }
        let reason: String
        let timeout: Duration
        if let writingDeadline, writingDeadline <= .now() {
            (reason, timeout) = ("the client stopped taking the answer", timeouts.responseWrite)
        } else {
            switch reading {
            case .head: (reason, timeout) = ("the request head did not arrive in time", timeouts.requestHead)
            case .body:
                (reason, timeout) = ("the request body stopped arriving, or came too slowly", timeouts.requestBody)
            case .between: (reason, timeout) = ("the connection was idle", timeouts.idle)
            }
        }
        logger.debug(
            "closing a connection", metadata: ["reason": "\(reason)", "timeout.ms": "\(timeout.milliseconds)"])
        closing = true
        endInputAndClose()
    }

    /// Closes the connection. When Hummingbird's handler of the first request is not in place
    /// yet, the handler waiting for that request is first told of the end of the input, which it
    /// takes quietly, where a bare close would be logged as an error of the upgrade.
    private func endInputAndClose() {
        guard let context else { return }
        if !upgraded,
            (try? context.pipeline.syncOperations.context(handlerType: HTTPConnectionStateHandler.self)) == nil
        {
            (observerContext ?? context).fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
        context.close(promise: nil)
    }
}

/// Sits right after the HTTP decoder and tells ``ConnectionGuard`` where requests begin and end,
/// when answers end, when the connection becomes a WebSocket, and what the parser refused.
final class HTTPPartObserver: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let connectionGuard: ConnectionGuard
    /// Everything passes untouched: the connection is a WebSocket.
    private var passThrough = false
    /// A request asked for an upgrade: check that the decoder is still there before reading
    /// parts, since an upgrade removes it and sends bytes this way.
    private var upgradeAsked = false
    private var refused = false

    init(connectionGuard: ConnectionGuard) {
        self.connectionGuard = connectionGuard
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionGuard.observerContext = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connectionGuard.observerContext = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if upgradeAsked, !passThrough,
            (try? context.pipeline.syncOperations.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self))
                == nil
        {
            becomeWebSocket()
        }
        guard !passThrough else {
            context.fireChannelRead(data)
            return
        }
        switch unwrapInboundIn(data) {
        case .head(let head):
            if head.headers.contains(name: "upgrade") { upgradeAsked = true }
            connectionGuard.headRead()
        case .body:
            break
        case .end:
            connectionGuard.requestEnded()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !passThrough else {
            context.write(data, promise: promise)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status == .switchingProtocols:
            becomeWebSocket()
        case .end:
            connectionGuard.answerEnded()
        default:
            break
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError, !passThrough {
            // Once refused, the decoder's later complaints about the same input are dropped.
            if refused { return }
            if connectionGuard.parserRefused(error) {
                refused = true
                return
            }
        }
        context.fireErrorCaught(error)
    }

    private func becomeWebSocket() {
        passThrough = true
        connectionGuard.didUpgrade()
    }
}

/// Hummingbird's connection limit, which stops accepting while `maximum` connections are open
/// (new ones wait in the listen backlog, holding no descriptor of the server's), logging when
/// the limit is reached.
struct ConnectionLimit: AvailableConnectionsDelegate {
    let maximum: Int
    let logger: Logger
    private var open = 0
    private var logged = false

    init(maximum: Int, logger: Logger) {
        self.maximum = maximum
        self.logger = logger
    }

    mutating func connectionOpened() {
        open += 1
        if open >= maximum, !logged {
            logged = true
            logger.notice(
                "connection limit reached; new connections wait in the listen backlog until open ones close",
                metadata: ["connections": "\(open)"])
        }
    }

    mutating func connectionClosed() {
        open -= 1
        if open <= maximum / 2 { logged = false }
    }

    func isAcceptingNewConnections() -> Bool {
        open < maximum
    }
}
