import Foundation
import LogSyncWire
import SyncModel

/// One of the user's databases on a LogSync server, over HTTP: a `CloudDatabase` that moves
/// each request and response as a body of the wire format (Docs/Protocol.md, "HTTP"), and asset
/// contents as raw bodies streamed from and to files, resumed where a cut transfer ended
/// (``uploadAsset(_:)``, ``downloadAsset(_:)``).
///
/// Whole-request errors are the server's `SyncError`s, unchanged; transport failures are mapped
/// as ``HTTPSyncClient`` describes. ``pushHints()`` opens a WebSocket to the server that
/// reconnects on its own; see its documentation.
public struct HTTPCloudDatabase: CloudDatabase, ShareOperations, ZoneKeyDirectory {
    /// The connection this database uses.
    public let client: HTTPSyncClient
    public let databaseScope: DatabaseScope

    /// The server's URL, who signs in (the bearer token, which names the user, or the
    /// provider's account) and the scope (F118).
    public var databaseIdentity: DatabaseIdentity? {
        let credentials = client.configuration.credentials
        let who: String
        switch credentials.source {
        case .token: who = "one bearer token"
        case .provider(let account, _): who = "account \(account)"
        }
        return DatabaseIdentity(
            key:
                "http \(client.configuration.serverURL.absoluteString) \(credentials.identity) \(databaseScope.rawValue)",
            description: "the \(databaseScope) database at \(client.configuration.serverURL.absoluteString), for \(who)"
        )
    }

    public func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await call(.modifyZones, Wire.encode(request, as: format), Wire.decode)
    }

    public func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await call(.fetchZones, Wire.encode(request, as: format), Wire.decode)
    }

    public func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await call(.modifyRecords, Wire.encode(request, as: format), Wire.decode)
    }

    public func fetchDatabaseChanges(
        _ request: FetchDatabaseChangesRequest
    ) async throws -> FetchDatabaseChangesResponse {
        try await call(.fetchDatabaseChanges, Wire.encode(request, as: format), Wire.decode)
    }

    public func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try await call(.fetchZoneChanges, Wire.encode(request, as: format), Wire.decode)
    }

    /// `fetchZoneChanges`, each record with its bytes in the answer (where the page is read
    /// directly), for a device that logs the page to copy instead of encoding each record again.
    package func fetchZoneChangesKeepingRecordBytes(
        _ request: FetchZoneChangesRequest
    ) async throws -> FetchedZoneChanges {
        try await call(.fetchZoneChanges, Wire.encode(request, as: format)) {
            (_: FetchedZoneChanges.Type, answer, format) throws(SyncError) in
            try Wire.decodeKeepingRecordBytes(FetchZoneChangesResponse.self, from: answer, as: format)
        }
    }

    public func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try await call(.modifySubscriptions, Wire.encode(request, as: format), Wire.decode)
    }

    public func allSubscriptions() async throws -> [Subscription] {
        try await call(.allSubscriptions, [], Wire.decode)
    }

    public func currentUserRecordID() async throws -> Record.ID {
        try await call(.currentUserRecordID, [], Wire.decode)
    }

    public func fetchShareMetadata(url: URL) async throws -> Share.Metadata {
        try await call(.fetchShareMetadata, Wire.encode(shareMetadataRequest: url, as: format), Wire.decode)
    }

    public func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse {
        try await call(.acceptShares, Wire.encode(request, as: format), Wire.decode)
    }

    public func fetchShareParticipants(
        _ request: FetchShareParticipantsRequest
    ) async throws -> FetchShareParticipantsResponse {
        try await call(.fetchShareParticipants, Wire.encode(request, as: format), Wire.decode)
    }

    public func registerDeviceKey(_ key: DevicePublicKey) async throws {
        try await call(.registerDeviceKey, Wire.encode(key, as: format)) {
            (_: Void.Type, answer, format) throws(SyncError) in
            try Wire.decodeRegisterDeviceKeyResponse(answer, as: format)
        }
    }

    public func fetchZoneKeys(_ request: FetchZoneKeysRequest) async throws -> FetchZoneKeysResponse {
        try await call(.fetchZoneKeys, Wire.encode(request, as: format), Wire.decode)
    }

    public func saveZoneKeys(_ request: SaveZoneKeysRequest) async throws -> SaveZoneKeysResponse {
        try await call(.saveZoneKeys, Wire.encode(request, as: format), Wire.decode)
    }

    /// Uploads the asset's file to the server (`PUT …/assets/{digest}`, Docs/Protocol.md,
    /// "Assets"), streamed from the file a piece at a time, never whole in memory.
    ///
    /// It first asks the server how much of the content it holds: nothing is sent when it keeps
    /// the content already (`bytesSent` 0), and a cut upload of the same content, by this
    /// device or another, resumes from the server's last byte. When the connection drops or
    /// stalls (``HTTPSyncClient/Configuration/assetStallTimeout``) it asks again and sends from
    /// there, up to ``HTTPSyncClient/Configuration/assetResumeAttempts`` times in a row without
    /// progress, then throws `networkFailure`; a later call resumes. `bytesSent` counts the bytes
    /// this call added to the server's copy: the size less what the server held when it began.
    ///
    /// - Throws: `SyncError`: the server's, exactly as in process (`limitExceeded` over
    ///   `Limits/maxAssetBytes`, `quotaExceeded`, `zoneNotFound`, `zoneBusy` while another
    ///   request uploads the same content, `assetFileModified` when the bytes that arrived hash
    ///   to another digest); `assetFileNotFound` or `assetFileModified` when the file has gone or
    ///   changed during the upload; transport failures as ``HTTPSyncClient`` maps them.
    public func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await transferUpload(request)
    }

    /// Downloads the asset's content (`GET …/assets/{digest}`, Docs/Protocol.md, "Assets")
    /// into the request's destination, streamed a piece at a time into its partial file
    /// (`AssetDownloadFile`): a partial file an earlier download left is resumed with
    /// `Range: bytes=N-`, and so is the download after a dropped or stalled connection, up to
    /// ``HTTPSyncClient/Configuration/assetResumeAttempts`` times in a row without progress.
    /// The destination appears once every byte is there and matches the digest.
    ///
    /// - Throws: `SyncError`: the server's, exactly as in process (`assetNotAvailable` when
    ///   the server keeps no such content for the zone, `zoneNotFound`, `invalidArguments` when
    ///   the server's size is not the request's); `networkFailure` when the bytes do not match
    ///   the digest (the partial file is removed) or the transport fails.
    public func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try await transferDownload(request)
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

    private var format: WireFormat { client.configuration.format }

    /// Sends `body` and decodes the 200 answer with `decode` (one of `Wire`'s); an answer that
    /// does not decode is the server's fault.
    private func call<Answer>(
        _ operation: WireOperation, _ body: [UInt8],
        _ decode: (Answer.Type, [UInt8], WireFormat) throws(SyncError) -> Answer
    ) async throws -> Answer {
        let answer = try await client.send(operation, scope: databaseScope, body: body)
        do {
            return try decode(Answer.self, answer, format)
        } catch {
            throw SyncError(
                .internalError, "the server's answer to \(operation) could not be decoded", cause: error.message)
        }
    }
}

extension HTTPCloudDatabase: RecordBytesFetching {}
