import Foundation

/// The device's view of one server database: what the sync engine needs from a server.
///
/// One requirement per server operation, each taking a request value and returning a response
/// value, so a transport (in-process, HTTP) only moves these values; the extension adds
/// CloudKit-style conveniences such as ``modifyRecords(saving:deleting:savePolicy:atomically:requestID:)``.
///
/// Contract for every conformer:
/// - Methods throw ``SyncError`` only, for failures of the whole request (network, throttling
///   with ``SyncError/retryAfter``, `changeTokenExpired`, `limitExceeded` for the request, …).
///   Per-item failures are in the response, never thrown; `partialFailure` is never thrown here.
/// - Cancellation of the calling task gives `operationCancelled`.
/// - Every response entry corresponds to one item of the request, and every item has one entry.
///
/// ```swift
/// let response = try await database.modifyRecords(saving: [note], deleting: [], requestID: "dev1-7")
/// switch response.saveResults[note.recordID] {
/// case .success(let saved)?: archive(saved.systemFieldsCopy())
/// case .failure(let error)?: handle(error)
/// case nil: break
/// }
/// ```
public protocol CloudDatabase: Sendable {
    /// Which of the user's databases this is.
    var databaseScope: DatabaseScope { get }

    /// Which database of which server this value reaches, as which user: what the engine's
    /// one-engine-per-database check compares (F118). `nil` (the default) when the conformer
    /// cannot tell; such a database is never refused.
    var databaseIdentity: DatabaseIdentity? { get }

    /// Saves and deletes zones, with a result per zone (F147, F149, F156).
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse

    /// Fetches zones with their capabilities and share references (F156).
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse

    /// Saves and deletes records, with a result per record (F145–F148, F151, F158–F160).
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request, such as `limitExceeded`.
    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse

    /// Fetches one page of the database's change feed (F140).
    ///
    /// - Throws: ``SyncError``: `invalidArguments` for a bad token, `changeTokenExpired` (F144).
    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse

    /// Fetches one page of a zone's change feed (F141–F144).
    ///
    /// - Throws: ``SyncError``: `zoneNotFound`, `userDeletedZone`, `invalidArguments` for a token
    ///   of the wrong kind, zone or incarnation, `changeTokenExpired` (F144).
    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse

    /// Saves and deletes subscriptions, with a result per subscription (F155).
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse

    /// Fetches every subscription of this user in this database (F111, F155).
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    func allSubscriptions() async throws -> [Subscription]

    /// Fetches the record ID that stands for the signed-in user (F104–F110).
    ///
    /// - Throws: ``SyncError``: `notAuthenticated` when no user is signed in.
    func currentUserRecordID() async throws -> Record.ID

    /// Uploads an asset's content for the records of `request.zoneID` before a record
    /// referencing it is saved (F134): streamed from the file in pieces, never whole in memory;
    /// resumed where the server's copy of a cut upload of the same content for the zone ends;
    /// nothing sent when the zone has it already. A content the owner keeps for other zones only
    /// is sent whole, as a new one (a zone learns nothing of another's contents).
    ///
    /// - Throws: ``SyncError``: `assetFileNotFound` / `assetFileModified` when the file has gone
    ///   or no longer has the request's size or digest; `limitExceeded` over
    ///   ``Limits/maxAssetBytes``; `quotaExceeded`; `zoneNotFound` for a zone the database cannot
    ///   write; transport errors (then a later upload resumes).
    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse

    /// Downloads an asset's content into a local file, streamed in pieces and resumed from the
    /// partial file of a cut download; the destination appears only once every byte is there
    /// and matches the digest.
    ///
    /// - Throws: ``SyncError``: `assetNotAvailable` when the server keeps no such asset for the
    ///   zone; `zoneNotFound`; transport errors (then a later download resumes).
    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse

    /// The metadata of the share at `url`, as the signed-in user would join it (F119;
    /// `CKFetchShareMetadataOperation`). A default implementation refuses it (``ShareOperations``).
    ///
    /// - Throws: ``SyncError``: `invalidArguments` for a URL that is not a share URL;
    ///   `unknownItem` naming the URL for a share that does not exist, was deleted, or is not open
    ///   to this user (the same answer for each, so a URL tells nothing to who may not use it);
    ///   `badDatabase` from a database that does not implement sharing.
    func fetchShareMetadata(url: URL) async throws -> Share.Metadata

    /// Accepts shares, with a result per URL (F119, F120; `CKAcceptSharesOperation`). A default
    /// implementation refuses it (``ShareOperations``).
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request (`badDatabase` from a database
    ///   that does not implement sharing); per-share failures (the errors of
    ///   ``fetchShareMetadata(url:)``) are in the response, and change nothing.
    func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse

    /// Looks up users to invite to a share, with a result per lookup info (F119;
    /// `CKFetchShareParticipantsOperation`). A default implementation refuses it
    /// (``ShareOperations``).
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request: `limitExceeded` past 400
    ///   lookups, `invalidArguments` for one named twice, `badDatabase` from a database that does
    ///   not implement sharing. Per-lookup failures are in the response: `invalidArguments` for a
    ///   malformed lookup info, `unknownItem` for a user the server does not know.
    func fetchShareParticipants(_ request: FetchShareParticipantsRequest) async throws -> FetchShareParticipantsResponse

    /// A new stream of push hints for this database (F113, F117, F154).
    ///
    /// Each call returns an independent stream; hints may be coalesced or dropped. The stream
    /// finishes when the connection to the server ends; call again to resubscribe.
    func pushHints() -> AsyncStream<PushHint>
}

extension CloudDatabase {
    /// `nil`: the database cannot tell which server and user it reaches.
    public var databaseIdentity: DatabaseIdentity? { nil }

    /// Saves and deletes zones, with a result per zone.
    ///
    /// - Parameters:
    ///   - saving: The zones to create (or save again).
    ///   - deleting: The zones to delete.
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func modifyZones(saving: [RecordZone], deleting: [RecordZone.ID]) async throws -> ModifyZonesResponse {
        try await modifyZones(ModifyZonesRequest(zonesToSave: saving, zoneIDsToDelete: deleting))
    }

    /// Fetches the named zones.
    ///
    /// - Parameter zoneIDs: The zones to fetch.
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func fetchZones(_ zoneIDs: [RecordZone.ID]) async throws -> FetchZonesResponse {
        try await fetchZones(FetchZonesRequest(zoneIDs: zoneIDs))
    }

    /// Fetches every zone of the database.
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func fetchAllZones() async throws -> [RecordZone] {
        try await fetchZones(FetchZonesRequest(zoneIDs: nil)).results.values.compactMap { try? $0.get() }
    }

    /// Saves and deletes records, with a result per record.
    ///
    /// - Parameters:
    ///   - saving: The records to save.
    ///   - deleting: The records to delete.
    ///   - savePolicy: How change tags are compared; defaults to `ifServerRecordUnchanged`.
    ///   - atomically: Whether each zone's changes commit all-or-nothing; defaults to `true`.
    ///   - requestID: The client's ID for the request, which makes retries idempotent.
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func modifyRecords(
        saving: [Record], deleting: [Record.ID], savePolicy: SavePolicy = .ifServerRecordUnchanged,
        atomically: Bool = true, requestID: RequestID? = nil
    ) async throws -> ModifyRecordsResponse {
        try await modifyRecords(
            ModifyRecordsRequest(
                recordsToSave: saving, recordIDsToDelete: deleting, savePolicy: savePolicy,
                atomically: atomically, requestID: requestID))
    }

    /// Fetches one page of the database's change feed.
    ///
    /// - Parameters:
    ///   - since: Where the previous fetch ended, or `nil` for all history.
    ///   - resultsLimit: The most zone changes wanted, or `nil` for the server's choice.
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func fetchDatabaseChanges(
        since: DatabaseChangeToken?, resultsLimit: Int? = nil
    ) async throws -> FetchDatabaseChangesResponse {
        try await fetchDatabaseChanges(FetchDatabaseChangesRequest(since: since, resultsLimit: resultsLimit))
    }

    /// Fetches one page of a zone's change feed.
    ///
    /// - Parameters:
    ///   - zoneID: The zone.
    ///   - since: Where the previous fetch ended, or `nil` for the zone's full contents.
    ///   - resultsLimit: The most record changes wanted, or `nil` for the server's choice.
    ///   - desiredKeys: The fields wanted, or `nil` for all; `[]` for system fields only.
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func fetchZoneChanges(
        zoneID: RecordZone.ID, since: ZoneChangeToken?, resultsLimit: Int? = nil, desiredKeys: [String]? = nil
    ) async throws -> FetchZoneChangesResponse {
        try await fetchZoneChanges(
            FetchZoneChangesRequest(
                zoneID: zoneID, since: since, resultsLimit: resultsLimit, desiredKeys: desiredKeys))
    }

    /// Saves and deletes subscriptions, with a result per subscription.
    ///
    /// - Parameters:
    ///   - saving: The subscriptions to save.
    ///   - deleting: The subscriptions to delete.
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func modifySubscriptions(
        saving: [Subscription], deleting: [Subscription.ID]
    ) async throws -> ModifySubscriptionsResponse {
        try await modifySubscriptions(
            ModifySubscriptionsRequest(
                subscriptionsToSave: saving, subscriptionIDsToDelete: deleting))
    }
}

/// Which database of which server a ``CloudDatabase`` reaches, as which user (F118): two
/// identities are equal when their keys are, whatever their descriptions.
///
/// ```swift
/// DatabaseIdentity(key: "https://sync.example.com|<token>|private", description: "the private database at https://sync.example.com")
/// ```
public struct DatabaseIdentity: Sendable, Hashable, CustomStringConvertible {
    /// What is compared: the server, the user (or their credential) and the scope. Never shown.
    public let key: String
    /// The database in words, for messages: such as `the private database of user "alice"`.
    public let description: String

    /// An identity.
    ///
    /// - Parameters:
    ///   - key: What is compared; it may hold a credential, and is never shown.
    ///   - description: The database in words, for messages.
    public init(key: String, description: String) {
        self.key = key
        self.description = description
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.key == rhs.key }
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }
}
