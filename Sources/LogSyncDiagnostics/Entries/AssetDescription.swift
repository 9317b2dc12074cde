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

    /// What dumps show of an asset (never its content): its short digest, its size, and whether
    /// its content is cached here (`cached`), only named by a file that is gone (`missing`), or
    /// not fetched (`not cached`), as in `sha256:1f2e3d4c5b6a… 48213 bytes cached`.
    public var shownFields: [String] {
        var fields: [String] = []
        fields.append(digest?.short ?? "not uploaded")
        if let size { fields.append("\(size) bytes") }
        if isCached {
            fields.append("cached")
        } else if fileURL != nil {
            fields.append("missing")
        } else {
            fields.append("not cached")
        }
        return fields
    }
}
