import Foundation

/// The sharing operations of a server, which CloudKit keeps on `CKContainer`: reading a share's
/// metadata from its URL, and accepting shares (F119).
///
/// A user who accepts a share becomes a participant: the shared zone appears in their shared
/// database, named with the owner's user record name (F120), and stays there until they leave,
/// the owner removes them or the owner deletes the share (F124). Both the in-process database and
/// the HTTP one conform, whatever their scope.
///
/// ```swift
/// let metadata = try await database.fetchShareMetadata(url: url)
/// let response = try await database.acceptShares([metadata])
/// if case .success(let share)? = response.results[url] { print("joined \(share.zoneID)") }
/// ```
public protocol ShareOperations: Sendable {
    /// The metadata of the share at `url`, as the signed-in user would join it.
    ///
    /// - Throws: ``SyncError``: `invalidArguments` for a URL that is not a share URL;
    ///   `unknownItem` naming the URL for a share that does not exist, was deleted, or is not open
    ///   to this user (the same answer for each, so a URL tells nothing to who may not use it).
    func fetchShareMetadata(url: URL) async throws -> Share.Metadata

    /// Accepts shares, with a result per URL.
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request; per-share failures (the errors
    ///   of ``fetchShareMetadata(url:)``) are in the response, and change nothing.
    func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse
}

extension ShareOperations {
    /// Accepts the shares of `metadata`, as `CKAcceptSharesOperation` does.
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func acceptShares(_ metadata: [Share.Metadata]) async throws -> AcceptSharesResponse {
        try await acceptShares(AcceptSharesRequest(shareURLs: metadata.compactMap(\.url)))
    }
}

/// A request to accept the shares at some URLs.
public struct AcceptSharesRequest: Sendable, Hashable, Codable {
    /// The share URLs, at most 400, none twice.
    public var shareURLs: [URL]

    /// Creates a request.
    public init(shareURLs: [URL]) {
        self.shareURLs = shareURLs
    }

    /// Checks the request's size and that no URL appears twice.
    ///
    /// - Throws: ``SyncError`` `limitExceeded` past 400 URLs, `invalidArguments` for a URL named twice.
    public func validate() throws(SyncError) {
        guard shareURLs.count <= Limits.maxItemsPerRequest else {
            throw SyncError(
                .limitExceeded, "the request accepts \(shareURLs.count) shares, more than \(Limits.maxItemsPerRequest)")
        }
        var seen = Set<URL>()
        for url in shareURLs where !seen.insert(url).inserted {
            throw SyncError(.invalidArguments, "the request names share URL \(quoted(url.absoluteString)) twice")
        }
    }
}

/// The outcome of accepting each share of an ``AcceptSharesRequest``: the share as the
/// participant sees it, or the share's error.
public struct AcceptSharesResponse: Sendable, Equatable {
    /// The outcome for each URL of the request.
    public var results: [URL: Result<Share, SyncError>]

    /// Creates a response.
    public init(results: [URL: Result<Share, SyncError>] = [:]) {
        self.results = results
    }
}
