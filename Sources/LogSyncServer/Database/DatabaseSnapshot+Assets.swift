import Foundation
import LogStore
import SyncModel

// What a database's index says of asset contents (F134; Docs/Protocol.md, "Assets").

extension DatabaseSnapshot {
    /// Throws `quotaExceeded` when storing the content `digest` of `size` bytes would take the
    /// database's usage over `quota` (`nil`: unlimited).
    func checkQuota(_ quota: Int?, storing digest: AssetDigest, size: Int64) throws {
        guard let quota else { return }
        let usage = try state(IndexKey.usage)
        if usage + UInt64(size) > UInt64(max(0, quota)) {
            throw SyncError(
                .quotaExceeded,
                "storing asset \(digest) (\(size) bytes) would use \(usage + UInt64(size)) bytes, over \(user)'s quota of \(quota)"
            )
        }
    }

    /// The state of the asset content `digest`, if this database keeps it (for any zone).
    func asset(_ digest: AssetDigest) throws -> AssetState? {
        try index.value(forKey: digest.bytes, in: "assets").map { (bytes) throws(LogStoreError) in
            try AssetState(decoding: bytes)
        }
    }

    /// The state of the asset content `digest` if the zone incarnation `incarnation` has it:
    /// uploaded for the zone, or referenced by one of its live records. `nil` otherwise, whether
    /// or not the database keeps it for other zones: nothing tells those apart.
    func asset(_ digest: AssetDigest, inZone incarnation: UInt64) throws -> AssetState? {
        guard let state = try asset(digest) else { return nil }
        if try index.value(forKey: IndexKey.assetGrant(incarnation: incarnation, digest.bytes), in: "assetGrants")
            != nil
            || index.value(forKey: IndexKey.assetZone(digest.bytes, incarnation: incarnation), in: "assetZones") != nil
        {
            return state
        }
        return nil
    }

    /// The failure of a record whose assets its zone (the live incarnation `zone`) does not have
    /// (never uploaded for the zone nor referenced by its live records, or deleted since, whether
    /// or not the database keeps them for other zones), or has with another size; `nil` when
    /// every one is there.
    func checkAssets(of record: Record, zone: ZoneState) throws -> SyncError? {
        for (key, asset) in record.assets {
            guard let digest = asset.digest, let size = asset.size else { continue }  // validate() refused these
            guard let state = try self.asset(digest, inZone: zone.incarnation) else {
                return SyncError(
                    .assetNotAvailable,
                    "\(record.recordID) field \(quoted(key)): asset \(digest) was never uploaded for its zone (or was deleted); upload its content for the zone before saving the record",
                    item: .record(record.recordID))
            }
            guard state.size == UInt64(size) else {
                return SyncError(
                    .invalidArguments,
                    "\(record.recordID) field \(quoted(key)): asset \(digest) has \(state.size) bytes on the server, not \(size)",
                    item: .record(record.recordID))
            }
        }
        return nil
    }
}
