import Foundation
import SyncModel

/// A database that passes every request to its `base`: a test's wrapper implements only the
/// requests it changes or watches, and the rest reach the base as they were.
public protocol ForwardingDatabase: CloudDatabase {
    associatedtype Base: CloudDatabase
    var base: Base { get }
}

extension ForwardingDatabase {
    public var databaseScope: DatabaseScope { base.databaseScope }
    public func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await base.modifyZones(request)
    }
    public func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await base.fetchZones(request)
    }
    public func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await base.modifyRecords(request)
    }
    public func fetchDatabaseChanges(
        _ request: FetchDatabaseChangesRequest
    ) async throws -> FetchDatabaseChangesResponse {
        try await base.fetchDatabaseChanges(request)
    }
    public func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try await base.fetchZoneChanges(request)
    }
    public func modifySubscriptions(
        _ request: ModifySubscriptionsRequest
    ) async throws -> ModifySubscriptionsResponse {
        try await base.modifySubscriptions(request)
    }
    public func allSubscriptions() async throws -> [Subscription] { try await base.allSubscriptions() }
    public func currentUserRecordID() async throws -> Record.ID { try await base.currentUserRecordID() }
    public func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await base.uploadAsset(request)
    }
    public func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try await base.downloadAsset(request)
    }
    public func fetchShareMetadata(url: URL) async throws -> Share.Metadata {
        try await base.fetchShareMetadata(url: url)
    }
    public func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse {
        try await base.acceptShares(request)
    }
    public func fetchShareParticipants(
        _ request: FetchShareParticipantsRequest
    ) async throws -> FetchShareParticipantsResponse {
        try await base.fetchShareParticipants(request)
    }
    public func pushHints() -> AsyncStream<PushHint> { base.pushHints() }
}
