import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import LogSyncServer
import LogSyncWire
import NIOCore
import SyncModel

/// `GET /v1/databases/{scope}/push`, upgraded to a WebSocket: one push channel per device.
///
/// The channel registers with the database's push hub before anything else, then sends a
/// `subscribed` frame: every commit after that frame is hinted. Hints coalesce in the hub (a
/// channel holds only the newest hint not yet written), never carry data, and skip the device
/// that made the commit unless the upgrade request sets `LogSync-Receives-Own-Changes: true`
/// (F113, F114, F154). The channel ends when the client disconnects, when the server shuts down,
/// or when a write fails. Frames are binary Protocol Buffers, or JSON text frames when the
/// upgrade request accepts `application/json`.
///
/// A request that cannot be upgraded (no or a bad token, an unknown path) is left to the router,
/// which answers it with 401, 404 or 400 and an error body.
struct PushRoute: Sendable {
    let http: HTTPSyncServer

    func shouldUpgrade(_ head: HTTPRequest) -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        let path = (head.path ?? "").split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard components.count == 5, components[0].isEmpty, components[1] == WireProtocol.versionPath,
              components[2] == "databases", components[4] == "push",
              let scope = try? WireProtocol.scope(named: String(components[3])),
              let user = try? OperationRoutes.authenticate(authorization: head.headerFields[.authorization], tokens: http.tokens)
        else {
            return .dontUpgrade
        }
        let device: DeviceID?
        do {
            device = try OperationRoutes.device(header: head.headerFields[HTTPField.Name(WireProtocol.deviceHeader)!])
        } catch {
            return .dontUpgrade
        }
        var database = http.server.database(for: user, scope: scope, device: device)
        database.receivesOwnChanges =
            head.headerFields[HTTPField.Name(WireProtocol.receivesOwnChangesHeader)!]?.lowercased() == "true"
        let format = WireFormat.forResponse(accept: head.headerFields[.accept])
        var logger = http.logger
        logger[metadataKey: "scope"] = "\(scope)"
        if let device { logger[metadataKey: "device"] = "\(device.rawValue)" }
        return .upgrade([:]) { [database, logger] inbound, outbound, _ in
            await Self.serve(database: database, format: format, inbound: inbound, outbound: outbound, logger: logger)
        }
    }

    /// Runs one channel until the client goes, the hub finishes, or a write fails.
    static func serve(
        database: InProcessDatabase, format: WireFormat, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter, logger: Logger
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
                    do {
                        try await write(.hint(hint), format: format, to: outbound)
                    } catch {
                        logger.debug("push channel write failed", metadata: ["error": "\(error)"])
                        return
                    }
                }
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
