import HummingbirdCore
import LogSyncWire
import Logging
import NIOCore

/// Hummingbird's child channel with ``ConnectionShutdownHandler`` in front of it, so that a
/// graceful shutdown closes every connection: at once when it is idle, after its request when one
/// is in flight, and after ``HTTPSyncServer/Configuration/shutdownGracePeriod`` at the latest.
///
/// Hummingbird's graceful shutdown stops accepting connections and then waits for every open one
/// to close, telling each with a `ChannelShouldQuiesceEvent`. Its WebSocket-upgrade channel
/// (`HTTP1WebSocketUpgradeChannel`) only installs the handler that acts on that event once the
/// connection's first request has been read and not upgraded: a connection that has not sent a
/// request yet ignores it, and the server waits until the client closes it. AsyncHTTPClient makes
/// such connections: its pool opens one for a request that another connection, freed meanwhile,
/// then takes, and parks the new one idle, unused, for its 60-second idle timeout.
struct ShutdownAwareChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let gracePeriod: Duration
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let handler = channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionShutdownHandler(gracePeriod: gracePeriod, logger: self.logger))
        }
        return handler.flatMap { base.setup(channel: channel, logger: logger) }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Sits in front of Hummingbird's handlers on one connection (behind TLS, so it sees the bytes of
/// requests only) and makes its graceful shutdown end:
///
/// - a connection that has not sent a byte of a request is closed at once;
/// - a connection whose first request arrived before Hummingbird installed its own handler gets
///   the quiesce event again once it answers, so that it closes after that answer (a WebSocket
///   upgrade ignores it: push channels close on their own at shutdown, with a close frame);
/// - any connection still open `gracePeriod` after the shutdown began (a request still being
///   sent or answered, a client that stalled halfway through one) is closed then.
final class ConnectionShutdownHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let gracePeriod: Duration
    private let logger: Logger
    private var hasRead = false
    private var hasWritten = false
    private var quiescing = false
    /// Whether to pass the quiesce event on again with the connection's next write.
    private var repeatQuiesce = false
    private var deadline: Scheduled<Void>?

    init(gracePeriod: Duration, logger: Logger) {
        self.gracePeriod = gracePeriod
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        hasRead = true
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        hasWritten = true
        context.write(data, promise: promise)
        if repeatQuiesce {
            // The answer has begun, so Hummingbird's handler (or the WebSocket) is in place now.
            // Passed on after this write returns, not from inside it.
            repeatQuiesce = false
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.execute {
                loopBound.value.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, !quiescing else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        quiescing = true
        guard hasRead else {
            // Nothing asked: nothing to finish. Told as the end of the input, which the upgrade
            // handler waiting for a first request takes quietly (closing the connection itself),
            // where a bare close would be logged as an error of the upgrade.
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            context.close(promise: nil)
            return
        }
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: .nanoseconds(gracePeriod.nanoseconds)) {
            loopBound.value.handler.closeAtDeadline(context: loopBound.value.context)
        }
        if !hasHTTPHandler(context) {
            // The first request is being read or judged; Hummingbird's handler is not there yet.
            repeatQuiesce = true
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func closeAtDeadline(context: ChannelHandlerContext) {
        deadline = nil
        logger.notice(
            "closing a connection still busy at the end of the shutdown grace period",
            metadata: ["grace.ms": "\(gracePeriod.nanoseconds / 1_000_000)"])
        if !hasWritten, !hasHTTPHandler(context) {
            // Still sending its first request: the end of its input, for the upgrade handler
            // waiting for that request to take quietly.
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
        context.close(promise: nil)
    }

    /// Whether Hummingbird's handler of HTTP/1 connections, which acts on quiesce events, is in
    /// place: from the first request that is not a WebSocket upgrade on.
    private func hasHTTPHandler(_ context: ChannelHandlerContext) -> Bool {
        (try? context.pipeline.syncOperations.context(handlerType: HTTPConnectionStateHandler.self)) != nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelDeadline()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelDeadline()
    }

    private func cancelDeadline() {
        deadline?.cancel()
        deadline = nil
    }
}
