import Foundation
import Logging
import SyncModel

/// The asset side of a fetch (F72, F129, F134): a fetched record's assets come with digest and
/// size; their contents are downloaded into the engine's asset cache before the records are
/// delivered, unless the zone's configuration says not to, and one is fetched later on demand
/// (``SyncEngine/fetchAssetContents(_:in:)``).
struct AssetDownloads: Sendable {
    /// The database the contents are downloaded from.
    let database: any CloudDatabase
    /// Where this device's own saves are found: a content it uploaded is copied from the app's
    /// file rather than downloaded.
    let deviceLog: DeviceLog
    /// Where the contents are kept.
    let assetCache: AssetCache
    let logger: Logger

    /// The content of `asset` (of a record in `zoneID`) in the asset cache, fetched first
    /// unless it is there already: `asset` with ``Asset/fileURL`` set to the cached file.
    ///
    /// - Throws: ``SyncError``: `invalidArguments` for an asset without digest or size (one not
    ///   sent yet); the database's `assetNotAvailable`, `zoneNotFound`; transport errors, after
    ///   which a later call resumes the download; `operationCancelled`.
    func contents(of asset: Asset, in zoneID: RecordZone.ID) async throws(SyncError) -> Asset {
        guard let digest = asset.digest, let size = asset.size else {
            throw SyncError(
                .invalidArguments,
                "\(asset) has no digest and size: only a fetched or sent asset has content on the server",
                item: .zone(zoneID))
        }
        let url = try await assetCache.file(for: digest, size: size, zoneID: zoneID, database: database)
        return Asset(digest: digest, size: size, fileURL: url)
    }

    /// The records of a fetched page with each asset's ``Asset/fileURL`` set to its content in
    /// the asset cache, downloaded first when missing (F72 `shouldFetchAssetContents`) — or,
    /// for a record this device saved, copied from the app's file its saved record points at,
    /// when that file still holds the content.
    ///
    /// An asset the server no longer keeps (`assetNotAvailable`: nothing any fetch could
    /// change) is delivered without a file rather than stall the zone; ``fetchAssetContents(_:in:)``
    /// reports it again if the app asks.
    ///
    /// - Throws: ``SyncError``: the first other download failure (transient ones, F89,
    ///   `operationCancelled`, a cache that cannot be written). The fetch then treats the zone as
    ///   failed: the page is neither logged nor delivered, so the zone's token stays before it
    ///   and the zone stays unfetched, and the next fetch gets the page again.
    func withAssetContents(
        _ modifications: [RecordZoneChange.Modification], in zoneID: RecordZone.ID, group: OperationGroup? = nil
    ) async throws(SyncError) -> [RecordZoneChange.Modification] {
        var files: [AssetDigest: URL] = [:]
        var unavailable: Set<AssetDigest> = []
        for modification in modifications where modification.record.hasAssets {
            // The files this device saved the record's assets from (its own save, fetched back).
            var local: [AssetDigest: URL] = [:]
            if let known = try? deviceLog.lastKnownServerRecord(for: modification.record.recordID) {
                for (_, asset) in known.assets {
                    guard let digest = asset.digest, let url = asset.fileURL,
                        url.deletingLastPathComponent().path != assetCache.directory.path
                    else { continue }
                    local[digest] = url
                }
            }
            for (key, asset) in modification.record.assets {
                guard let digest = asset.digest, let size = asset.size, files[digest] == nil,
                    !unavailable.contains(digest)
                else {
                    continue
                }
                if Task.isCancelled { throw .cancelled("fetchChanges") }
                if let source = local[digest],
                    let copied = await assetCache.copy(from: source, digest: digest, size: size)
                {
                    files[digest] = copied
                    continue
                }
                do throws(SyncError) {
                    files[digest] = try await assetCache.file(
                        for: digest, size: size, zoneID: zoneID, database: database, operationGroup: group)
                } catch  where error.code == .assetNotAvailable {
                    logger.warning(
                        "\(modification.record.recordID) field \(quoted(key)): \(error); delivered without its file")
                    unavailable.insert(digest)
                } catch {
                    var error = error
                    error.message =
                        "\(modification.record.recordID) field \(quoted(key)), asset \(digest.short): \(error.message)"
                    throw error
                }
            }
        }
        guard !files.isEmpty else { return modifications }
        return modifications.map { modification in
            var modification = modification
            modification.record = modification.record.mappingAssets { _, asset in
                guard let digest = asset.digest, let url = files[digest] else { return asset }
                var cached = asset
                cached.fileURL = url
                return cached
            }
            return modification
        }
    }
}

extension AssetDownloads {
    /// The downloads of a fetch, from the engine's context.
    init(_ context: EngineContext) {
        self.init(
            database: context.database, deviceLog: context.deviceLog, assetCache: context.assetCache,
            logger: context.logger)
    }
}
