import Foundation
import SyncModel

// Assets on the server (F134): the public face of `ServerAssets`, for the HTTP server's asset
// routes and for embedding apps; `InProcessDatabase` uploads and downloads through it too.

extension SyncServer {
    /// Begins an upload of an asset's content for the records of `zoneID`, or resumes the cut
    /// upload of the same content for that zone: the returned upload's ``AssetUpload/received``
    /// says from which byte to send. An upload of a content the zone has already (uploaded for
    /// it, or referenced by its live records) is stored at once; a content the owner keeps for
    /// other zones only is uploaded whole, as one the owner does not keep, and the zone gains it
    /// without a second copy of its bytes (Docs/Protocol.md, "Assets").
    ///
    /// A new upload from the same user and named device as one still held (a client retrying
    /// after its connection dropped, before the server noticed) takes that one over: it waits for
    /// the piece the old one is writing, if any, and the old one's later steps fail with
    /// `zoneBusy`.
    ///
    /// - Parameters:
    ///   - user: The user uploading.
    ///   - scope: The database the request reached: `.private` for the user's own zones, `.shared`
    ///     for a zone shared with them with read-write permission.
    ///   - zoneID: The zone whose records will reference the asset, named as in that database.
    ///   - digest: The SHA-256 the content must have.
    ///   - size: The content's size in bytes.
    ///   - device: The device uploading.
    ///   - operationGroup: The group the upload belongs to (F69), noted in the database's log the
    ///     first time it is seen.
    /// - Throws: `SyncError`: `limitExceeded` over `Limits/maxAssetBytes`, `quotaExceeded`,
    ///   `zoneNotFound` for a zone the user cannot write, `zoneBusy` (with a retry-after) while
    ///   another user or device (or a request naming no device) uploads the same content for the
    ///   zone, `invalidArguments` for bad IDs, a malformed operation group, or a size other than
    ///   that of the content the zone has.
    public func beginAssetUpload(
        user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, digest: AssetDigest, size: Int64,
        device: DeviceID? = nil,
        operationGroup: OperationGroup? = nil
    ) async throws -> AssetUpload {
        try await assets.beginUpload(
            user: user, scope: scope, zoneID: zoneID, digest: digest, size: size, device: device,
            operationGroup: operationGroup)
    }

    /// Opens an asset's stored content for reading, for a record of `zoneID`; its
    /// `operationGroup` (F69) is noted in the database's log the first time it is seen.
    ///
    /// - Throws: `SyncError`: `assetNotAvailable` when the zone has no such content (it was
    ///   never uploaded for the zone nor referenced by its live records, or was collected),
    ///   whether or not the owner keeps it for another zone; `zoneNotFound` for a zone the user
    ///   cannot read, `invalidArguments` for bad IDs or a malformed operation group.
    public func openAssetDownload(
        user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, digest: AssetDigest, device: DeviceID? = nil,
        operationGroup: OperationGroup? = nil
    ) async throws -> AssetDownload {
        try await assets.openDownload(
            user: user, scope: scope, zoneID: zoneID, digest: digest, device: device, operationGroup: operationGroup)
    }

    /// Deletes the asset contents of `user`'s records that no live record has referenced since
    /// before `cutoff` (the horizon: a device that fetched a record just before its asset went
    /// still finds it until then), then what no log entry accounts for: contents stored by an
    /// upload cut before its `assetStored` entry, and partial uploads last written before
    /// `cutoff`.
    @discardableResult
    public func collectAssets(of user: UserID, unreferencedBefore cutoff: Date) async throws -> AssetCollection {
        try await assets.collect(of: user, unreferencedBefore: cutoff)
    }

    /// ``collectAssets(of:unreferencedBefore:)`` for every registered user: what `logsync-server
    /// serve` runs periodically and `logsync-server collect-assets` once. Returns what was removed,
    /// for the users where anything was.
    @discardableResult
    public func collectAssets(unreferencedBefore cutoff: Date) async throws -> [UserID: AssetCollection] {
        try await assets.collectAll(unreferencedBefore: cutoff)
    }

    /// The zone of an asset request, `zoneID` as `user` names it in `scope`, as its owner's
    /// database keeps it (see `ServerAssets.zone`).
    func assetZone(user: UserID, scope: DatabaseScope, zoneID: RecordZone.ID, writing: Bool) throws -> AssetZone {
        try assets.zone(user: user, scope: scope, zoneID: zoneID, writing: writing)
    }
}
