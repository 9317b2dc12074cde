import Foundation
import SyncModel

extension Asset {
    /// Whether the asset's content is on this machine: its local file exists with the asset's
    /// size.
    public var isCached: Bool {
        guard let fileURL, let attributes = try? FileManager.default.attributesOfItem(atPath: fileURL.path),
            let bytes = attributes[.size] as? NSNumber
        else { return false }
        return size.map { bytes.int64Value == $0 } ?? true
    }
}

extension Asset {
    /// The asset in one word, as dumps and state reports show it: `<digest>/<size>B`, then the
    /// cache state where a device could hold the content (`withCacheState`): `cached`, `missing`
    /// (named by a file that is gone) or `not-cached`; as in `sha256:1f2e3d4c5b6a…/48213B/cached`.
    func compactDescription(withCacheState: Bool) -> String {
        var parts = [digest?.short ?? "not-uploaded"]
        if let size { parts.append("\(size)B") }
        if withCacheState { parts.append(isCached ? "cached" : fileURL == nil ? "not-cached" : "missing") }
        return parts.joined(separator: "/")
    }
}

extension Record {
    /// The record's assets as dumps list them: `<record>.<field>:<compact description>`, as in
    /// `n1.photo:sha256:1f2e3d4c5b6a…/48213B/cached`.
    func listedAssets(withCacheState: Bool) -> [String] {
        assets.map { key, asset in
            recordID.recordName + "." + key + ":" + asset.compactDescription(withCacheState: withCacheState)
        }
    }
}
