import Foundation

/// How much of a support bundle the server holds (`GET /v1/bundles/{id}/upload` and the answer
/// of each `PUT`, in JSON): the bytes received, the size announced, and once it is verified and stored,
/// its ID.
public struct SupportBundleUploadStatus: Sendable, Hashable, Codable {
    public var received: Int64
    public var size: Int64
    /// The stored bundle's ID, once stored.
    public var bundle: String?

    public init(received: Int64, size: Int64, bundle: String?) {
        self.received = received
        self.size = size
        self.bundle = bundle
    }
}
