import Foundation
import Logging
import SyncModel

/// The asset side of a send (F129, F134): before a batch's records are logged and sent, the file
/// of each asset is hashed and its content uploaded, and the records go with digest and size.
struct AssetUploads: Sendable {
    /// The database the contents are uploaded to.
    let database: any CloudDatabase
    let logger: Logger

    /// What one batch's preparation has done so far: files hashed and contents uploaded (each
    /// once per batch), and the transient failure after which no more uploads are tried.
    private struct Uploads {
        var hashed: [String: (digest: AssetDigest, size: Int64)] = [:]
        var uploaded: Set<UploadKey> = []
        var halted: SyncError?
        /// The operation group of the send, carried by each upload (F69).
        var group: OperationGroup?

        struct UploadKey: Hashable {
            var zoneID: RecordZone.ID
            var digest: AssetDigest
        }
    }

    /// Uploads the assets of `batch`'s records and fills in their digests and sizes.
    ///
    /// For each asset with a local file, in a key the record changes (or without a digest yet):
    /// the file's size is checked against ``Limits/maxAssetBytes`` (`limitExceeded`), its
    /// digest and size computed, and its content uploaded to the record's zone (the server keeps
    /// one copy per content; a content the zone has already costs nothing). An asset in a key the record
    /// does not change, with its digest, is the server's already and goes as it is. A record
    /// whose file is gone fails with `assetFileNotFound`, one whose file changed while it was
    /// read or uploaded with `assetFileModified`, one whose upload failed with the upload's
    /// error; each names the record, the field and the file, and the batch's other items still
    /// go. After a transient upload failure (F89) no more uploads are tried in this batch: the
    /// items left fail with that error, and stay pending. With ``SyncEngine/RecordZoneChangeBatch/atomicByZone``
    /// the other items of a zone with a failure are not sent either (F55): they fail with
    /// `batchRequestFailed`, or with the transient error when the failure keeps its change
    /// pending.
    func prepareAssets(_ batch: SyncEngine.RecordZoneChangeBatch, group: OperationGroup? = nil) async -> PreparedBatch {
        guard batch.recordsToSave.contains(where: \.hasAssets) else {
            return PreparedBatch(batch: batch, recordsToReport: batch.recordsToSave)
        }
        var uploads = Uploads(group: group)
        var prepared = PreparedBatch(
            batch: SyncEngine.RecordZoneChangeBatch(
                recordIDsToDelete: batch.recordIDsToDelete, atomicByZone: batch.atomicByZone),
            recordsToReport: [])
        for record in batch.recordsToSave {
            do throws(SyncError) {
                let ready = try await prepare(record, &uploads)
                prepared.batch.recordsToSave.append(ready)
                prepared.recordsToReport.append(ready)
            } catch {
                prepared.failedSaves[record.recordID] = error
                prepared.recordsToReport.append(record)
            }
        }
        if batch.atomicByZone { prepared.failZoneMates() }
        return prepared
    }

    /// `record` with the digest and size of each asset it sends, after uploading their contents.
    ///
    /// - Throws: ``SyncError`` naming the record, the field and the file.
    private func prepare(_ record: Record, _ uploads: inout Uploads) async throws(SyncError) -> Record {
        guard record.hasAssets else { return record }
        let changed = Set(record.changedKeys())
        var resolved: [String: (digest: AssetDigest, size: Int64)] = [:]
        for (key, asset) in record.assets {
            guard let url = asset.fileURL else { continue }
            if !changed.contains(key), asset.digest != nil, asset.size != nil { continue }
            let path = url.path
            if resolved[path] != nil { continue }
            func failure(_ error: SyncError) -> SyncError {
                var error = error
                error.message = "\(record.recordID) field \(quoted(key)), file \(path): \(error.message)"
                error.item = .record(record.recordID)
                return error
            }
            if let halted = uploads.halted {
                throw failure(
                    SyncError(
                        halted.code, "not uploaded after an earlier upload of the batch failed: \(halted.message)",
                        retryAfter: halted.retryAfter))
            }
            if Task.isCancelled { throw failure(.cancelled("sendChanges")) }
            let content: (digest: AssetDigest, size: Int64)
            if let known = uploads.hashed[path] {
                content = known
            } else {
                if let size = Self.fileSize(path), size > Limits.maxAssetBytes {
                    throw failure(
                        SyncError(.limitExceeded, "the file holds \(size) bytes, more than \(Limits.maxAssetBytes)"))
                }
                do throws(SyncError) {
                    content = try AssetDigest.ofFile(at: url)
                } catch {
                    throw failure(error)
                }
                if content.size > Limits.maxAssetBytes {
                    throw failure(
                        SyncError(
                            .limitExceeded, "the file holds \(content.size) bytes, more than \(Limits.maxAssetBytes)"))
                }
                uploads.hashed[path] = content
            }
            let uploadKey = Uploads.UploadKey(zoneID: record.recordID.zoneID, digest: content.digest)
            if !uploads.uploaded.contains(uploadKey) {
                do {
                    let response = try await database.uploadAsset(
                        AssetUploadRequest(
                            zoneID: record.recordID.zoneID, digest: content.digest, size: content.size, fileURL: url,
                            operationGroup: uploads.group))
                    logger.debug(
                        "uploaded \(content.digest.short) for \(record.recordID): \(response.bytesSent) bytes sent")
                } catch {
                    let error = SyncError.from(error, during: "uploadAsset")
                    if error.keepsChangePending { uploads.halted = error }
                    throw failure(error)
                }
                uploads.uploaded.insert(uploadKey)
            }
            resolved[path] = content
        }
        return record.mappingAssets { _, asset in
            guard let url = asset.fileURL, let content = resolved[url.path] else { return asset }
            return Asset(digest: content.digest, size: content.size, fileURL: URL(fileURLWithPath: url.path))
        }
    }

    /// The size of the regular file at `path`, or `nil` when there is none.
    private static func fileSize(_ path: String) -> Int64? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            attributes[.type] as? FileAttributeType == .typeRegular,
            let size = attributes[.size] as? NSNumber
        else { return nil }
        return size.int64Value
    }
}

extension AssetUploads {
    /// The uploads of a send, from the engine's context.
    init(_ context: EngineContext) {
        self.init(database: context.database, logger: context.logger)
    }
}
