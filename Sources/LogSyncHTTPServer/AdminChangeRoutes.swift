import Foundation
import HTTPTypes
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import NIOCore
import ServiceLifecycle
import SyncModel

/// The admin change stream (Docs/Protocol.md, "Admin change stream"), behind the admin
/// credential: the app's backend reads any user's database as that user's devices do, with the
/// same bodies and tokens, and follows which databases change on the whole server.
///
/// - `POST /v1/admin/databases/{user}/{scope}/{operation}`: a read operation
///   (`WireAdminChanges.readOperations`) on the user's database, run by the device routes' own
///   steps (``OperationRoutes/run(_:on:request:answerFormat:logger:since:footprint:)``: body
///   limits, memory budget, formats). It never registers a user: an unknown one is a 404.
/// - `GET /v1/admin/changes`: one JSON line per database holding anything with its current
///   token (the catalogue, read after the listener is registered, so that no commit falls between
///   the two), `{"caughtUp":true}`, then a line per database each time it commits, on any node
///   sharing the storage. An empty line every ``keepAliveInterval`` tells a reader the stream is
///   alive and the server that the reader still is. When notices may have been lost between
///   nodes, the stream ends: the reader reconnects and compares the catalogue with its tokens.
struct AdminChangeRoutes: Sendable {
    let admin: AdminRoutes
    var http: HTTPSyncServer { admin.http }

    /// How often an idle stream sends an empty line.
    static let keepAliveInterval: Duration = .seconds(15)

    static func register(on router: Router<ServerRequestContext>, admin: AdminRoutes) {
        let routes = AdminChangeRoutes(admin: admin)
        router.post("/:version/admin/databases/:user/:scope/:operation") { request, context in
            await routes.read(request, context: context)
        }
        router.get("/:version/admin/changes") { request, context in
            await routes.changes(request, context: context)
        }
    }

    // MARK: Reads

    func read(_ request: Request, context: ServerRequestContext) async -> Response {
        var footprint = OperationRoutes.Footprint()
        let response = await handleRead(request, context: context, footprint: &footprint)
        http.memoryReturn.ended(began: footprint.large, large: footprint.largeAnswer)
        return response
    }

    private func handleRead(
        _ request: Request, context: ServerRequestContext, footprint: inout OperationRoutes.Footprint
    ) async -> Response {
        let format = WireFormat.forResponse(accept: request.headers[.accept])
        let started = ContinuousClock.now
        var logger = context.logger
        logger[metadataKey: "route"] = "admin read"
        do throws(HTTPFailure) {
            try OperationRoutes.checkVersion(context)
            try admin.authorize(request, logger: logger)
            let user = try AdminRoutes.user(parameter: context)
            let operations = OperationRoutes(http: http)
            let (scope, operation) = try operations.route(context)
            logger[metadataKey: "operation"] = "\(operation)"
            logger[metadataKey: "scope"] = "\(scope)"
            logger[metadataKey: "user"] = "\(user.rawValue)"
            guard WireAdminChanges.readOperations.contains(operation) else {
                throw HTTPFailure(
                    403,
                    SyncError(
                        .permissionFailure,
                        "the admin routes only read a user's database: \(operation) is not one of \(WireAdminChanges.readOperations.map(\.rawValue).joined(separator: ", "))"
                    ))
            }
            let server = http.server
            guard try await admin.json.run("user registry", { try server.isRegistered(user) }) else {
                throw HTTPFailure(404, SyncError(.unknownItem, "there is no user \"\(user.rawValue)\" on this server"))
            }
            return try await operations.run(
                operation, on: server.database(for: user, scope: scope), request: request, answerFormat: format,
                logger: logger, since: started, footprint: &footprint)
        } catch {
            return OperationRoutes.refusal(
                error, closing: error.closeConnection, logger: logger, since: started, context: context, format: format)
        }
    }

    // MARK: The stream

    func changes(_ request: Request, context: ServerRequestContext) async -> Response {
        let started = ContinuousClock.now
        var logger = context.logger
        logger[metadataKey: "route"] = "admin changes"
        let server = http.server
        let events: DatabaseChanges
        let catalogue: [ChangedDatabase]
        do throws(HTTPFailure) {
            try OperationRoutes.checkVersion(context)
            try admin.authorize(request, logger: logger)
            // Listening first: a commit after the catalogue's reading is in `events`.
            events = server.databaseChanges()
            catalogue = try await admin.json.run("store") { try server.databaseCatalogue() }
        } catch {
            return OperationRoutes.refusal(
                error, closing: error.closeConnection, logger: logger, since: started, context: context, format: .json)
        }
        logger.info("admin change stream open", metadata: ["databases": "\(catalogue.count)"])
        var headers = HTTPFields()
        headers[.contentType] = WireAdminChanges.mediaType
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name(WireProtocol.versionHeader)!] = "\(WireProtocol.version)"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { [logger] writer in
                defer { events.cancel() }
                var buffer = ByteBuffer()
                for database in catalogue {
                    buffer.writeBytes(Self.line(database).encoded)
                    if buffer.readableBytes >= 64 << 10 {
                        try await writer.write(buffer)
                        buffer.clear()
                    }
                }
                buffer.writeBytes(WireAdminChanges.Line(caughtUp: true).encoded)
                try await writer.write(buffer)
                // A graceful shutdown ends the stream, as a finished answer, so that the
                // connection closes at once rather than at the end of the grace period.
                try await withGracefulShutdownHandler {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            while true {
                                try await Task.sleep(for: Self.keepAliveInterval)
                                events.wake()
                            }
                        }
                        defer { group.cancelAll() }
                        while let event = await events.next() {
                            switch event {
                            case .changed(let databases):
                                var buffer = ByteBuffer()
                                for database in databases { buffer.writeBytes(Self.line(database).encoded) }
                                if databases.isEmpty { buffer.writeBytes([0x0A]) }
                                try await writer.write(buffer)
                            case .missed:
                                logger.info("admin change stream ended: changes may have been missed between nodes")
                                return
                            }
                        }
                    }
                } onGracefulShutdown: {
                    events.cancel()
                }
                try await writer.finish(nil)
            })
    }

    static func line(_ database: ChangedDatabase) -> WireAdminChanges.Line {
        WireAdminChanges.Line(user: database.user, scope: database.scope, token: database.token)
    }
}
