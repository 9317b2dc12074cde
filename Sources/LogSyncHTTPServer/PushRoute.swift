import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import NIOHTTP1
import SyncModel

/// `GET /v1/databases/{scope}/push`, upgraded to a WebSocket: one push channel per device.
///
/// The channel registers with the database's push hub before anything else, then sends a
/// `subscribed` frame: every commit after that frame is hinted. Hints coalesce in the hub (a
/// channel holds only the newest hint not yet written), never carry data, and skip the device
/// that made the commit unless the upgrade request sets `LogSync-Receives-Own-Changes: true`
/// (F113, F114, F154). So the upgrade request must name its device (`LogSync-Device`). The channel
/// ends when the client disconnects, when the server shuts down, when a write fails, or when its
/// token is revoked (``TokenStore/untilRevoked(token:user:)``: the channel closes with code 1008,
/// policy violation). Frames are binary Protocol Buffers, or JSON text frames when the upgrade
/// request accepts `application/json`.
///
/// A request that cannot be upgraded (no or a bad token, an unknown path, no or a bad device
/// name) is left to the router, which answers it with 401, 404 or 400 and an error body:
/// `PushUpgradeGate` hides its `Upgrade` header from the WebSocket upgrader, which would answer
/// an empty 400.
struct PushRoute: Sendable {
    let http: HTTPSyncServer

    func shouldUpgrade(
        _ head: HTTPRequest
    ) -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        guard
            case .accepted(let scope, let user, let device, let token) = screen(
                path: head.path ?? "", authorization: head.headerFields[.authorization],
                device: head.headerFields[HTTPField.Name(WireProtocol.deviceHeader)!])
        else {
            return .dontUpgrade
        }
        var database = http.server.database(for: user, scope: scope, device: device)
        database.receivesOwnChanges =
            head.headerFields[HTTPField.Name(WireProtocol.receivesOwnChangesHeader)!]?.lowercased() == "true"
        let format = WireFormat.forResponse(accept: head.headerFields[.accept])
        var logger = http.logger
        logger[metadataKey: "scope"] = "\(scope)"
        logger[metadataKey: "device"] = "\(device.rawValue)"
        let end = ChannelEnd()
        let revoked = http.tokens.untilRevoked(token: token, user: user, end: end)
        let open = http.metrics.pushChannelsOpen
        return .upgrade([:]) { [database, logger] inbound, outbound, _ in
            open.increment()
            defer { open.decrement() }
            await Self.serve(
                database: database, format: format, inbound: inbound, outbound: outbound, revoked: revoked,
                end: end, logger: logger)
        }
    }

    /// What the gate decides for an upgrade request, without waiting: the scope, user, device
    /// and token of one that may be upgraded, or one the router must answer instead (404, 401
    /// or 400, see `OperationRoutes.refusePush`).
    ///
    /// It runs on the connection's event loop, which must never wait: a token that only the
    /// server's storage knows (PostgreSQL, a token this node has not seen) is not waited for.
    /// The request goes to the router marked with ``deferredHeader``, which answers 503 with a
    /// retry-after while the token is fetched; the client's next attempt finds it in memory.
    enum Screening {
        case accepted(DatabaseScope, UserID, DeviceID, token: String)
        case refused
        case tokenNotYetKnown
    }

    /// The header the gate adds to an upgrade request whose token was not yet known.
    static let deferredHeader = "LogSync-Push-Deferred"

    /// The path, device and token of an upgrade request checked as the router would check them,
    /// with the token looked up only where that needs no wait (``Screening``).
    func screen(path: String, authorization: String?, device: String?) -> Screening {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard components.count == 5, components[0].isEmpty, components[1] == WireProtocol.versionPath,
            components[2] == "databases", components[4] == "push",
            let scope = try? WireProtocol.scope(named: String(components[3])),
            let device = try? OperationRoutes.pushDevice(header: device),
            let token = try? OperationRoutes.bearerToken(authorization)
        else {
            return .refused
        }
        switch http.tokens.lookUpWithoutWaiting(token) {
        case .known(let user, let sessionDevice):
            // A session is bound to its device: another device's header is for the router to refuse.
            if let sessionDevice, sessionDevice != device { return .refused }
            return .accepted(scope, user, device, token: token)
        case .unknown: return .refused
        case .notYetKnown: return .tokenNotYetKnown
        }
    }

    /// Runs one channel until the client goes, the hub finishes, a write fails, or `revoked`
    /// ends (its token was revoked: the channel is closed with code 1008, policy violation).
    static func serve(
        database: InProcessDatabase, format: WireFormat, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter, revoked: AsyncStream<Void>, end: ChannelEnd? = nil, logger: Logger
    ) async {
        let hints = database.pushHints()  // registered before the subscribed frame
        do {
            try await write(.subscribed(protocolVersion: WireProtocol.version), format: format, to: outbound)
        } catch {
            logger.debug("push channel closed before it was subscribed", metadata: ["error": "\(error)"])
            return
        }
        logger.debug("push channel open")
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // The client sends nothing but control frames; the stream ends when it leaves.
                do {
                    for try await _ in inbound {}
                } catch {
                    logger.debug("push channel read failed", metadata: ["error": "\(error)"])
                }
            }
            group.addTask {
                for await hint in hints {
                    // Revoked already, though the task below has not run yet: no hint goes out.
                    if end?.isEnded == true { return }
                    do {
                        try await write(.hint(hint), format: format, to: outbound)
                    } catch {
                        logger.debug("push channel write failed", metadata: ["error": "\(error)"])
                        return
                    }
                }
            }
            group.addTask {
                for await _ in revoked {}
                guard !Task.isCancelled else { return }
                logger.debug("push channel's token revoked")
                try? await outbound.close(.policyViolation, reason: "the token was revoked")
            }
            await group.next()
            group.cancelAll()
        }
        logger.debug("push channel closed")
    }

    static func write(_ frame: PushFrame, format: WireFormat, to outbound: WebSocketOutboundWriter) async throws {
        let bytes = Wire.encode(frame, as: format)
        switch format {
        case .protobuf: try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
        case .json: try await outbound.write(.text(String(decoding: bytes, as: UTF8.self)))
        }
    }
}

/// Answers push upgrade requests that will not be upgraded through the router, with the status
/// Docs/Protocol.md gives (401 without a valid token, 404 for an unknown path, 400 for a bad
/// device name) and an error body.
///
/// Hummingbird's WebSocket upgrader answers every refused upgrade with an empty 400. This
/// channel puts ``PushUpgradeGate`` in front of the upgrader: it removes the `Upgrade` and
/// `Connection` headers of a first request that ``PushRoute`` would refuse, so that the request
/// reaches the router as a plain GET.
struct PushUpgradeGateChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value
    let base: HTTP1WebSocketUpgradeChannel
    let push: PushRoute

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { [push] value in
            let upgrader = try channel.pipeline.syncOperations.handler(
                type: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self)
            try channel.pipeline.syncOperations.addHandler(PushUpgradeGate(push: push), position: .before(upgrader))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// See ``PushUpgradeGateChannel``. Only the connection's first request can be an upgrade; the
/// gate leaves the pipeline after it.
final class PushUpgradeGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    let push: PushRoute

    init(push: PushRoute) { self.push = push }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        if head.headers.contains(name: "upgrade") {
            let screening = push.screen(
                path: head.uri, authorization: head.headers.first(name: "authorization"),
                device: head.headers.first(name: WireProtocol.deviceHeader))
            if case .accepted(_, let user, _, _) = screening {
                // An upgrade counts against its user's and address's request rates, not as a
                // request in progress: the channel lasts as long as its device is connected.
                switch push.http.clientLimiter.admit(
                    user: user, address: Client(remoteAddress: context.channel.remoteAddress), counted: false)
                {
                case .success:
                    context.fireChannelRead(data)
                case .failure(let refusal):
                    head.headers.remove(name: "upgrade")
                    head.headers.remove(name: "connection")
                    // The wait, in milliseconds rounded up, for the router's answer.
                    let wait =
                        refusal.retryAfter.map {
                            $0.components.seconds * 1000 + ($0.components.attoseconds + 999_999_999_999_999)
                                / 1_000_000_000_000_000
                        } ?? 1000
                    head.headers.replaceOrAdd(name: ClientLimitMiddleware.refusedHeader, value: "\(wait)")
                    context.fireChannelRead(wrapInboundOut(.head(head)))
                }
            } else {
                head.headers.remove(name: "upgrade")
                head.headers.remove(name: "connection")
                head.headers.remove(name: PushRoute.deferredHeader)
                if case .tokenNotYetKnown = screening { head.headers.add(name: PushRoute.deferredHeader, value: "1") }
                context.fireChannelRead(wrapInboundOut(.head(head)))
            }
        } else {
            context.fireChannelRead(data)
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
