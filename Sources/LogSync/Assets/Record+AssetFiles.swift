import Foundation
import SyncModel

extension Record {
    /// This record (as the server answered it) with the local file of each asset `sent` had at
    /// the same place (key, and position in a list) with the same digest, so that a saved record
    /// still points at the app's file.
    func restoringAssetFiles(from sent: Record) -> Record {
        guard hasAssets, sent.hasAssets else { return self }
        var files: [String: [Asset]] = [:]
        for (key, asset) in sent.assets { files[key, default: []].append(asset) }
        var positions: [String: Int] = [:]
        return mappingAssets { key, asset in
            let position = positions[key, default: 0]
            positions[key] = position + 1
            guard asset.fileURL == nil, let sentAssets = files[key], position < sentAssets.count,
                let url = sentAssets[position].fileURL, sentAssets[position].digest == asset.digest
            else { return asset }
            var restored = asset
            restored.fileURL = url
            return restored
        }
    }
}
