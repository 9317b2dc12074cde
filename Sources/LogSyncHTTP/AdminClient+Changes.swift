import AsyncHTTPClient
import Foundation
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel
import Synchronization

/// One event of ``AdminClient/changeHints(silenceLimit:)``.
public enum AdminChangeEvent: Sendable, Hashable {
    /// A database holds changes up to the hint's token.
    case changed(ChangedDatabase)
    /// Every database that held anything when the stream began has been named.
    case caughtUp
}

extension AdminClient {
    /// `fetchDatabaseChanges` on `user`'s database of `scope`, as that user's devices call it:
    /// the same request, answer and tokens (Docs/Protocol.md, "Admin change stream").
    ///
    /// - Throws: `SyncError`: the server's (`unknownItem` for a user the server does not know,
    ///   `notAuthenticated` for a token that is not an admin token), or a transport failure.
    public func fetchDatabaseChanges(
        user: String, scope: DatabaseScope, _ request: FetchDatabaseChangesRequest
    ) async throws(SyncError) -> FetchDatabaseChangesResponse {
        try await read(
            .fetchDatabaseChanges, user: user, scope: scope, Wire.encode(request, as: .protobuf), Wire.decode)
    }

    /// `fetchZoneChanges` on `user`'s database of `scope`, as that user's devices call it.
    ///
    /// - Throws: as ``fetchDatabaseChanges(user:scope:_:)``.
    public func fetchZoneChanges(
        user: String, scope: DatabaseScope, _ request: FetchZoneChangesRequest
    ) async throws(SyncError) -> FetchZoneChangesResponse {
        try await read(.fetchZoneChanges, user: user, scope: scope, Wire.encode(request, as: .protobuf), Wire.decode)
    }

    /// `fetchZones` on `user`'s database of `scope`, as that user's devices call it.
    ///
    /// - Throws: as ``fetchDatabaseChanges(user:scope:_:)``.
    public func fetchZones(
        user: String, scope: DatabaseScope, _ request: FetchZonesRequest
    ) async throws(SyncError) -> FetchZonesResponse {
        try await read(.fetchZones, user: user, scope: scope, Wire.encode(request, as: .protobuf), Wire.decode)
    }

    /// The admin change stream (`GET /v1/admin/changes`): one ``AdminChangeEvent/changed(_:)``
    /// per database holding anything, with its current token, then
    /// ``AdminChangeEvent/caughtUp``, then one per database each time it changes, on one
    /// connection.
    ///
    /// The stream finishes when the server ends it (it shuts down, or changes may have been
    /// lost between its nodes) and throws when the connection fails or falls silent: reconnecting is the
    /// caller's, who then compares the catalogue with its saved tokens again. Stop iterating, or
    /// cancel, to close the connection.
    ///
    /// - Parameter silenceLimit: How long the stream may send nothing before it fails with
    ///   `networkFailure` (a connection gone without a word); the server sends an empty line every
    ///   15 seconds when it has nothing else.
    public func changeHints(
        silenceLimit: Duration = .seconds(45)
    ) -> AsyncThrowingStream<AdminChangeEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: AdminChangeEvent.self)
        let task = Task {
            do throws(SyncError) {
                try await follow(silenceLimit: silenceLimit) { event in continuation.yield(event) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Reads the change stream, giving each event to `yield`, until the server ends it.
    private func follow(
        silenceLimit limit: Duration, _ yield: @escaping @Sendable (AdminChangeEvent) -> Void
    ) async throws(SyncError) {
        let operation = "admin changes"
        var request = HTTPClientRequest(url: serverURL.route(WireAdminChanges.changesPath))
        request.method = .GET
        request.headers.add(name: WireProtocol.authorizationHeader, value: "Bearer \(adminToken)")
        request.headers.add(name: "Accept", value: WireAdminChanges.mediaType)
        request.tlsConfiguration = tlsConfiguration
        do {
            // The timeout bounds the wait for the answer's head; the body streams for as long as
            // the server sends it.
            let response = try await HTTPSyncClient.httpClient.execute(
                request, timeout: .nanoseconds(requestTimeout.nanoseconds))
            guard response.status == .ok else {
                var buffer = try await response.body.collect(upTo: 1 << 20)
                throw HTTPSyncClient.error(
                    status: Int(response.status.code), headers: response.headers,
                    body: buffer.readBytes(length: buffer.readableBytes) ?? [], doing: operation)
            }
            // The server sends at least an empty line every 15 seconds: a stream silent for
            // longer than the limit is a connection gone without a word (a peer that vanished).
            let lastRead = LastRead()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    var pending: [UInt8] = []
                    for try await chunk in response.body {
                        lastRead.instant.withLock { $0 = .now }
                        pending.append(contentsOf: chunk.readableBytesView)
                        while let newline = pending.firstIndex(of: 0x0A) {
                            let line = Array(pending[..<newline])
                            pending.removeSubrange(...newline)
                            if let event = try Self.event(line) { yield(event) }
                        }
                        guard pending.count <= 1 << 20 else {
                            throw SyncError(.internalError, "the admin change stream sent a line longer than 1 MiB")
                        }
                    }
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: limit / 4)
                        if ContinuousClock.now - lastRead.instant.withLock({ $0 }) > limit {
                            throw SyncError(
                                .networkFailure, "the admin change stream sent nothing for \(limit); it is gone")
                        }
                    }
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch let error as SyncError {
            throw error
        } catch {
            throw TransportFailure.map(error, doing: operation, mayHaveApplied: false, server: serverURL)
        }
    }

    /// The event of one line of the stream; `nil` for an empty line (the server's keep-alive).
    static func event(_ line: [UInt8]) throws(SyncError) -> AdminChangeEvent? {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) { return nil }
        let problem = "the admin change stream sent a line that is not the JSON expected"
        let decoded: WireAdminChanges.Line
        do {
            decoded = try WireSessions.decode(WireAdminChanges.Line.self, from: line)
        } catch {
            throw SyncError(.internalError, problem, cause: "\(error)")
        }
        if decoded.caughtUp == true { return .caughtUp }
        guard let user = decoded.user, let scopeName = decoded.scope, let tokenText = decoded.token,
            let tokenData = Data(base64Encoded: tokenText)
        else {
            throw SyncError(.internalError, problem, cause: String(decoding: line, as: UTF8.self))
        }
        let scope = try WireProtocol.scope(named: scopeName)
        return .changed(ChangedDatabase(user: user, scope: scope, token: try DatabaseChangeToken(data: tokenData)))
    }

    /// Sends a read of `user`'s database in Protocol Buffers and decodes its answer.
    private func read<Answer>(
        _ operation: WireOperation, user: String, scope: DatabaseScope, _ body: [UInt8],
        _ decode: (Answer.Type, [UInt8], WireFormat) throws(SyncError) -> Answer
    ) async throws(SyncError) -> Answer {
        let doing = "admin \(operation)"
        let answer = try await requests.send(
            .POST, WireAdminChanges.databasePath(user: user, scope: scope, operation: operation), token: adminToken,
            body: body, doing: doing, format: .protobuf, mayHaveApplied: false)
        do {
            return try decode(Answer.self, answer, .protobuf)
        } catch {
            throw SyncError(
                .internalError, "the server's answer to \(doing) could not be decoded", cause: error.message)
        }
    }
}

/// When the change stream last sent a byte.
private final class LastRead: Sendable {
    let instant = Mutex(ContinuousClock.now)
}
