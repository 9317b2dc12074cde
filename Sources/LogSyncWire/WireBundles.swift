import Foundation
import SyncModel

/// The paths and JSON bodies of support bundle uploads (Docs/Protocol.md, "Support bundles"):
/// a user uploads their bundle's `data.mdb` with their bearer token, as asset contents are
/// uploaded (status, then pieces from where the server stands); only the operator lists and
/// downloads bundles, on the admin routes. Bodies are encoded and decoded with
/// `WireSessions.encode(_:)` and `WireSessions.decode(_:from:)`.
public enum WireBundles {
    /// `PUT /v1/bundles/{id}?size=N&offset=K`: the bytes of the bundle from `offset`; `id` is
    /// the SHA-256 of its `data.mdb` in hex.
    public static func uploadPath(_ id: String) -> String { "/\(WireProtocol.versionPath)/bundles/\(id)" }

    /// `GET /v1/bundles/{id}/upload?size=N`: how much of it the server holds.
    public static func uploadStatusPath(_ id: String) -> String { uploadPath(id) + "/upload" }

    /// `GET /v1/admin/bundles[?user=U]`: the bundles stored (admin token).
    public static var adminBundlesPath: String { "/\(WireProtocol.versionPath)/admin/bundles" }

    /// `GET /v1/admin/bundles?user=U`, the user percent-encoded.
    public static func adminBundlesPath(user: String?) -> String {
        guard let user else { return adminBundlesPath }
        return adminBundlesPath + "?user=" + WireAdmin.percentEncoded(user)
    }

    /// `GET /v1/admin/bundles/{id}`: the stored bundle's `data.mdb` (admin token).
    public static func adminBundlePath(_ id: String) -> String { adminBundlesPath + "/" + WireAdmin.percentEncoded(id) }

    /// The answer of the status route and of each `PUT`: the server's own status, as JSON.
    public typealias UploadStatus = SupportBundleUploadStatus

    /// A stored bundle, as the admin routes list it.
    public struct Bundle: Sendable, Hashable, Codable {
        /// The SHA-256 of its `data.mdb`, in hex.
        public var id: String
        /// Who uploaded it.
        public var user: String
        public var size: Int64
        public var uploaded: Date
        public var appVersion: String?
        public var libraryVersion: String
        public var keyID: String
        public var firstOffset: UInt64
        public var lastOffset: UInt64
        public var baseOffset: UInt64
        /// The engine's database scope the manifest names, if any.
        public var database: String?

        public init(
            id: String, user: String, size: Int64, uploaded: Date, appVersion: String?, libraryVersion: String,
            keyID: String, firstOffset: UInt64, lastOffset: UInt64, baseOffset: UInt64, database: String?
        ) {
            self.id = id
            self.user = user
            self.size = size
            self.uploaded = uploaded
            self.appVersion = appVersion
            self.libraryVersion = libraryVersion
            self.keyID = keyID
            self.firstOffset = firstOffset
            self.lastOffset = lastOffset
            self.baseOffset = baseOffset
            self.database = database
        }
    }

    /// `GET /v1/admin/bundles`: the bundles, oldest first.
    public struct Bundles: Sendable, Hashable, Codable {
        public var bundles: [Bundle]
        public init(bundles: [Bundle]) { self.bundles = bundles }
    }
}
