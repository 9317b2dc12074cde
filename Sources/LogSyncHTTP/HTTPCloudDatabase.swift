import Foundation
import LogSyncWire
import SyncModel

/// One of the user's databases on a LogSync server, over HTTP: a `CloudDatabase` that moves
/// each request and response as a body of the wire format (Docs/Protocol.md, "HTTP").
///
/// Whole-request errors are the server's `SyncError`s, unchanged; transport failures are mapped
/// as ``HTTPSyncClient`` describes. ``pushHints()`` opens a WebSocket to the server that
/// reconnects on its own; see its documentation.
public struct HTTPCloudDatabase: CloudDatabase {
    /// The connection this database uses.
    public let client: HTTPSyncClient
    public let databaseScope: DatabaseScope

    public func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        let answer = try await client.send(.modifyZones, scope: databaseScope, body: Wire.encode(request, as: client.configuration.format))
        return try decode(.modifyZones) { () throws(SyncError) in try Wire.decode(ModifyZonesResponse.self, from: answer, as: client.configuration.format) }
    }

    public func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        let answer = try await client.send(.fetchZones, scope: databaseScope, body: Wire.encode(request, as: client.configuration.format))
        return try decode(.fetchZones) { () throws(SyncError) in try Wire.decode(FetchZonesResponse.self, from: answer, as: client.configuration.format) }
    }

    public func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        let answer = try await client.send(.modifyRecords, scope: databaseScope, body: Wire.encode(request, as: client.configuration.format))
        return try decode(.modifyRecords) { () throws(SyncError) in
            try Wire.decode(ModifyRecordsResponse.self, from: answer, as: client.configuration.format)
        }
    }

    public func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        let answer = try await client.send(
            .fetchDatabaseChanges, scope: databaseScope, body: Wire.encode(request, as: client.configuration.format))
        return try decode(.fetchDatabaseChanges) { () throws(SyncError) in
            try Wire.decode(FetchDatabaseChangesResponse.self, from: answer, as: client.configuration.format)
        }
    }

    public func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        let answer = try await client.send(
            .fetchZoneChanges, scope: databaseScope, body: Wire.encode(request, as: client.configuration.format))
        return try decode(.fetchZoneChanges) { () throws(SyncError) in
            try Wire.decode(FetchZoneChangesResponse.self, from: answer, as: client.configuration.format)
        }
    }

    public func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        let answer = try await client.send(
            .modifySubscriptions, scope: databaseScope, body: Wire.encode(request, as: client.configuration.format))
        return try decode(.modifySubscriptions) { () throws(SyncError) in
            try Wire.decode(ModifySubscriptionsResponse.self, from: answer, as: client.configuration.format)
        }
    }

    public func allSubscriptions() async throws -> [Subscription] {
        let answer = try await client.send(.allSubscriptions, scope: databaseScope, body: [])
        return try decode(.allSubscriptions) { () throws(SyncError) in
            try Wire.decode([Subscription].self, from: answer, as: client.configuration.format)
        }
    }

    public func currentUserRecordID() async throws -> Record.ID {
        let answer = try await client.send(.currentUserRecordID, scope: databaseScope, body: [])
        return try decode(.currentUserRecordID) { () throws(SyncError) in
            try Wire.decode(Record.ID.self, from: answer, as: client.configuration.format)
        }
    }

    /// A stream of this database's push hints, over a WebSocket of its own.
    ///
    /// The stream lives until the consumer stops iterating (or cancels), or ``HTTPSyncClient/close()``.
    /// When the connection drops it reconnects with exponential backoff (``ReconnectPolicy``), and
    /// after each reconnection it yields one hint naming no zone and no token: hints may have
    /// been missed while disconnected, so the consumer fetches once. Like the server's, the
    /// stream keeps only the newest undelivered hint.
    public func pushHints() -> AsyncStream<PushHint> {
        client.pushChannels.open(client: client, scope: databaseScope)
    }

    /// Decodes a 200 answer; an answer that does not decode is the server's fault.
    private func decode<T>(_ operation: WireOperation, _ body: () throws(SyncError) -> T) throws(SyncError) -> T {
        do {
            return try body()
        } catch {
            throw SyncError(.internalError, "the server's answer to \(operation) could not be decoded", cause: error.message)
        }
    }
}
