import Foundation
import SyncModel
import Tracing

/// `CloudDatabase` implemented directly on a `SyncServer` in the same process: what an app that
/// embeds its server uses, and what the engine's tests use.
///
/// Requests run synchronously against the server's logs; errors are exactly the server's.
public struct InProcessDatabase: CloudDatabase, ShareOperations, ZoneKeyDirectory {
    public let server: SyncServer
    public let user: UserID
    public let databaseScope: DatabaseScope
    /// The device making the requests: excluded from its own push hints (F114).
    public let device: DeviceID?
    /// Whether this device's push stream also gets hints for its own changes.
    public var receivesOwnChanges = false

    /// This server (the object), the user and the scope (F118).
    public var databaseIdentity: DatabaseIdentity? {
        DatabaseIdentity(
            key:
                "in-process \(UInt(bitPattern: ObjectIdentifier(server))) \(user.rawValue.utf8.count):\(user.rawValue) \(databaseScope.rawValue)",
            description: "the \(databaseScope) database of user \(quoted(user.rawValue)) on an in-process server")
    }

    init(server: SyncServer, user: UserID, scope: DatabaseScope, device: DeviceID?) {
        self.server = server
        self.user = user
        self.databaseScope = scope
        self.device = device
    }

    /// Runs one operation: the user and device IDs checked, the server's request hooks (injected
    /// failures; none in production), the request's operation group noted in the database's log
    /// the first time it is seen (F69), then the operation, with any unexpected error (storage,
    /// corrupt log) reported as `internalError` naming its cause.
    ///
    /// An operation that `commits` runs in a `server.commit` span (`CommitTrace`), tagged with
    /// the offsets it wrote to this database; the span context of the caller (or of the commit)
    /// is bound in the storage's `perform`, whichever thread that runs on.
    private func perform<R: Sendable>(
        _ operation: String, group: OperationGroup? = nil, requestID: RequestID? = nil, commits: Bool = false,
        _ body: @escaping @Sendable (ServerDatabase) throws -> R
    ) async throws -> R {
        try checkCancellation(operation)
        try user.validate()
        try device?.validate()
        try server.context.requestHooks.beforeRequest(of: user)
        let (server, user, scope, device) = (server, user, databaseScope, device)
        let tracer = server.context.tracer
        let span =
            commits
            ? tracer.startSpan(CommitTrace.commitSpan, context: InstrumentationContext.current ?? .topLevel) : nil
        defer { span?.end() }
        let commit = span.map { _ in CommitTrace(user: user, scope: scope) }
        let spanContext = span?.context ?? InstrumentationContext.current
        do {
            let result = try await server.storage.perform {
                try InstrumentationContext.$current.withValue(spanContext) {
                    try CommitTrace.$current.withValue(commit) {
                        let database = try server.store(user, scope)
                        try database.noteOperationGroup(group, request: operation, device: device, requestID: requestID)
                        guard commits else { return try body(database) }
                        let metrics = server.context.metrics
                        return try metrics.commitDuration.measure { try body(database) }
                    }
                }
            }
            if let span, let commit {
                CommitTrace.tag(span, user: user, scope: scope, first: commit.range?.first, last: commit.range?.last)
                if let requestID { span.attributes[CommitTrace.requestID] = requestID.rawValue }
            }
            return result
        } catch let error as SyncError {
            span?.recordError(error)
            throw error
        } catch {
            span?.recordError(error)
            throw SyncError(.internalError, "\(operation) failed on the server", cause: "\(error)")
        }
    }

    private func checkCancellation(_ operation: String) throws(SyncError) {
        if Task.isCancelled {
            throw SyncError(.operationCancelled, "\(operation) was cancelled before it reached the server")
        }
    }

    public func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        try await perform("modifyZones", group: request.operationGroup, commits: true) {
            try $0.modifyZones(request, from: device)
        }
    }

    public func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse {
        try await perform("fetchZones", group: request.operationGroup) { try $0.fetchZones(request) }
    }

    public func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        let response = try await perform(
            "modifyRecords", group: request.operationGroup, requestID: request.requestID, commits: true
        ) {
            try $0.modifyRecords(request, from: device)
        }
        let metrics = server.context.metrics
        metrics.recordsSaved.increment(by: response.saveResults.values.count { (try? $0.get()) != nil })
        metrics.recordsDeleted.increment(by: response.deleteResults.values.count { (try? $0.get()) != nil })
        return response
    }

    public func fetchDatabaseChanges(
        _ request: FetchDatabaseChangesRequest
    ) async throws -> FetchDatabaseChangesResponse {
        try await perform("fetchDatabaseChanges", group: request.operationGroup) {
            try $0.fetchDatabaseChanges(request)
        }
    }

    public func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        let response = try await perform("fetchZoneChanges", group: request.operationGroup) {
            try $0.fetchZoneChanges(request, for: device)
        }
        server.context.metrics.recordsFetched.increment(by: response.modifications.count)
        return response
    }

    public func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try await perform("modifySubscriptions", commits: true) { try $0.modifySubscriptions(request) }
    }

    public func allSubscriptions() async throws -> [Subscription] {
        try await perform("allSubscriptions") { try $0.allSubscriptions() }
    }

    public func currentUserRecordID() async throws -> Record.ID {
        // An account query, not a database request: injected request failures (F152) do not
        // apply; account problems are simulated by the caller's account, not the server.
        try checkCancellation("currentUserRecordID")
        let (server, user) = (server, user)
        return try await server.storage.perform { try server.userRecordID(for: user) }
    }

    public func fetchShareMetadata(url: URL) async throws -> Share.Metadata {
        try await perform("fetchShareMetadata") { database in
            try ShareAcceptance(context: database.context, user: database.user).metadata(url: url)
        }
    }

    public func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse {
        try await perform("acceptShares", commits: true) { database in
            try ShareAcceptance(context: database.context, user: database.user).accept(request, device: device)
        }
    }

    public func fetchShareParticipants(
        _ request: FetchShareParticipantsRequest
    ) async throws -> FetchShareParticipantsResponse {
        try await perform("fetchShareParticipants") { database in
            try ShareParticipantLookup(users: database.context.users).participants(request)
        }
    }

    /// Registers the device's key for the user, whichever database this is: a user's keys are
    /// kept in their private database (F129).
    public func registerDeviceKey(_ key: DevicePublicKey) async throws {
        try await perform("registerDeviceKey", commits: true) { try $0.registerDeviceKey(key) }
    }

    public func fetchZoneKeys(_ request: FetchZoneKeysRequest) async throws -> FetchZoneKeysResponse {
        try await perform("fetchZoneKeys") { try $0.fetchZoneKeys(request) }
    }

    public func saveZoneKeys(_ request: SaveZoneKeysRequest) async throws -> SaveZoneKeysResponse {
        try await perform("saveZoneKeys", commits: true) { try $0.saveZoneKeys(request) }
    }

    /// Streams the file into the server's asset store piece by piece (never whole in memory),
    /// from where a cut upload of the same content left off.
    public func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try checkCancellation("uploadAsset")
        let upload = try await server.beginAssetUpload(
            user: user, scope: databaseScope, zoneID: request.zoneID, digest: request.digest, size: request.size,
            device: device,
            operationGroup: request.operationGroup)
        defer { upload.close() }
        if upload.isStored {
            return AssetUploadResponse(asset: Asset(digest: request.digest, size: request.size), bytesSent: 0)
        }
        let start = upload.received
        let reader = try AssetFileReader(url: request.fileURL, expectedSize: request.size, from: start)
        while let piece = try reader.read({ Array($0) }) {
            try checkCancellation("uploadAsset")
            try await upload.write(piece, at: upload.received)
        }
        try reader.checkUnchanged()
        let asset = try await upload.finish()
        return AssetUploadResponse(asset: asset, bytesSent: request.size - start)
    }

    /// Copies the content from the server's asset store into the destination piece by piece,
    /// resuming a partial file a cut download left.
    public func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try checkCancellation("downloadAsset")
        let download = try await server.openAssetDownload(
            user: user, scope: databaseScope, zoneID: request.zoneID, digest: request.digest, device: device,
            operationGroup: request.operationGroup)
        guard download.size == request.size else {
            throw SyncError(
                .invalidArguments,
                "asset \(request.digest) has \(download.size) bytes on the server, not \(request.size)")
        }
        let file = try AssetDownloadFile(destination: request.destination, digest: request.digest, size: request.size)
        let start = file.offset
        while file.offset < download.size {
            try checkCancellation("downloadAsset")
            try file.write(try await download.read(from: file.offset))
        }
        return AssetDownloadResponse(fileURL: try file.finish(), bytesReceived: download.size - start)
    }

    public func pushHints() -> AsyncStream<PushHint> {
        server.pushHub.subscribe(
            PushHub.Key(user: user, scope: databaseScope), device: device, receivesOwnChanges: receivesOwnChanges)
    }
}

extension InProcessDatabase {
    /// `fetchZoneChanges` for a wire encoder: where the records are returned exactly as the log
    /// stores them, their stored bytes instead of decoded records (`ZoneChangesPage`), so that
    /// the encoder copies them rather than decoding and encoding each record again.
    package func fetchZoneChangesPage(_ request: FetchZoneChangesRequest) async throws -> ZoneChangesPage {
        let page = try await perform("fetchZoneChanges", group: request.operationGroup) {
            try $0.fetchZoneChangesPage(request, for: device)
        }
        server.context.metrics.recordsFetched.increment(
            by: page.storedRecords?.count ?? page.response.modifications.count)
        return page
    }
}

extension InProcessDatabase: RecordBytesFetching {
    /// `fetchZoneChanges`, each record also as the bytes the log stores it in, where the page
    /// returns the records exactly as stored (`ZoneChangesPage`): a device logging the page
    /// copies them instead of encoding each record again.
    package func fetchZoneChangesKeepingRecordBytes(
        _ request: FetchZoneChangesRequest
    ) async throws -> FetchedZoneChanges {
        let page = try await perform("fetchZoneChanges", group: request.operationGroup) {
            try $0.fetchZoneChangesPage(request, for: device, decodingToo: true)
        }
        server.context.metrics.recordsFetched.increment(by: page.response.modifications.count)
        return FetchedZoneChanges(response: page.response, recordBytes: page.storedRecords)
    }
}
