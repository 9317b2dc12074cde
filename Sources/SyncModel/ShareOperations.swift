import Foundation

/// The sharing operations, which CloudKit keeps on `CKContainer`: reading a share's metadata
/// from its URL, accepting shares (F119), and looking up the users to invite
/// (`CKFetchShareParticipantsOperation`). They are requirements of ``CloudDatabase``, so an
/// engine's database reaches them without a cast (`engine.database.acceptShares(…)`); a
/// database that does not implement them (a third-party ``CloudDatabase`` written before they
/// existed, say) gets the default implementations, which throw ``SyncError`` `badDatabase`
/// naming the operation and the database. A database that implements them also declares
/// ``ShareOperations``.
///
/// A user who accepts a share becomes a participant: the shared zone appears in their shared
/// database, named with the owner's user record name (F120), and stays there until they leave,
/// the owner removes them or the owner deletes the share (F124). The in-process database and
/// the HTTP one implement them, whatever their scope.
///
/// ```swift
/// let metadata = try await engine.database.fetchShareMetadata(url: url)
/// let response = try await engine.database.acceptShares([metadata])
/// if case .success(let share)? = response.results[url] { print("joined \(share.zoneID)") }
/// ```
public protocol ShareOperations: CloudDatabase {}

extension CloudDatabase {
    /// The metadata of the share at `url`: by default, refused.
    ///
    /// - Throws: ``SyncError`` `badDatabase`: this database does not implement sharing.
    public func fetchShareMetadata(url: URL) async throws -> Share.Metadata {
        throw sharingUnsupported("fetchShareMetadata")
    }

    /// Accepts shares: by default, refused.
    ///
    /// - Throws: ``SyncError`` `badDatabase`: this database does not implement sharing.
    public func acceptShares(_ request: AcceptSharesRequest) async throws -> AcceptSharesResponse {
        throw sharingUnsupported("acceptShares")
    }

    /// Looks up users to invite: by default, refused.
    ///
    /// - Throws: ``SyncError`` `badDatabase`: this database does not implement sharing.
    public func fetchShareParticipants(
        _ request: FetchShareParticipantsRequest
    ) async throws -> FetchShareParticipantsResponse {
        throw sharingUnsupported("fetchShareParticipants")
    }

    /// Accepts the shares of `metadata`, as `CKAcceptSharesOperation` does.
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func acceptShares(_ metadata: [Share.Metadata]) async throws -> AcceptSharesResponse {
        try await acceptShares(AcceptSharesRequest(shareURLs: metadata.compactMap(\.url)))
    }

    /// Looks up the users with these lookup infos, as `CKFetchShareParticipantsOperation` does.
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request.
    public func fetchShareParticipants(
        _ lookupInfos: [UserIdentity.LookupInfo]
    ) async throws -> FetchShareParticipantsResponse {
        try await fetchShareParticipants(FetchShareParticipantsRequest(lookupInfos: lookupInfos))
    }

    private func sharingUnsupported(_ operation: String) -> SyncError {
        SyncError(
            .badDatabase,
            "\(operation) is not supported by \(databaseIdentity?.description ?? "this \(databaseScope) database") (\(type(of: self))): it does not implement the sharing operations"
        )
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

/// A request to look up users by what the inviting user knows of them (F119;
/// `CKFetchShareParticipantsOperation`): each answer is a participant to add to a share.
public struct FetchShareParticipantsRequest: Sendable, Hashable, Codable {
    /// The users to look up, at most 400, none twice.
    public var lookupInfos: [UserIdentity.LookupInfo]

    /// Creates a request.
    public init(lookupInfos: [UserIdentity.LookupInfo]) {
        self.lookupInfos = lookupInfos
    }

    /// Checks the request's size and that no lookup info appears twice (each one's own rules
    /// are checked per item, ``UserIdentity/LookupInfo/validate()``).
    ///
    /// - Throws: ``SyncError`` `limitExceeded` past 400 lookup infos, `invalidArguments` for one
    ///   named twice.
    public func validate() throws(SyncError) {
        guard lookupInfos.count <= Limits.maxItemsPerRequest else {
            throw SyncError(
                .limitExceeded,
                "the request looks up \(lookupInfos.count) users, more than \(Limits.maxItemsPerRequest)")
        }
        var seen = Set<UserIdentity.LookupInfo>()
        for info in lookupInfos where !seen.insert(info).inserted {
            throw SyncError(.invalidArguments, "the request names \(info) twice")
        }
    }
}

/// The outcome of each lookup of a ``FetchShareParticipantsRequest``: a participant to add to a
/// share (a ``Share/Participant/Role/privateUser``, read-only and pending until the owner changes
/// it and the user accepts), or the lookup's error.
///
/// A user the server does not know fails with `unknownItem`; so does every other user the
/// asker may not find, in the same words, so an answer tells nothing of who is registered
/// beyond what an invitation needs.
public struct FetchShareParticipantsResponse: Sendable, Equatable {
    /// The outcome for each lookup info of the request.
    public var results: [UserIdentity.LookupInfo: Result<Share.Participant, SyncError>]

    /// Creates a response.
    public init(results: [UserIdentity.LookupInfo: Result<Share.Participant, SyncError>] = [:]) {
        self.results = results
    }
}

extension UserIdentity {
    /// What a user knows of another to find them (`CKUserIdentity.LookupInfo`): an e-mail address
    /// the server knows, or a user record name (what `currentUserRecordID()` returns). Exactly
    /// one is set.
    public struct LookupInfo: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The e-mail address to look up.
        public let emailAddress: String?
        /// The user record name to look up.
        public let userRecordName: String?

        /// Looks a user up by e-mail address (compared without case).
        public init(emailAddress: String) {
            self.emailAddress = emailAddress
            self.userRecordName = nil
        }

        /// Looks a user up by user record name.
        public init(userRecordName: String) {
            self.emailAddress = nil
            self.userRecordName = userRecordName
        }

        /// Looks a user up by user record ID (its record name).
        public init(userRecordID: Record.ID) {
            self.init(userRecordName: userRecordID.recordName)
        }

        /// A lookup info as decoded, either part possibly missing (``validate()`` refuses it).
        package init(unchecked emailAddress: String?, userRecordName: String?) {
            self.emailAddress = emailAddress
            self.userRecordName = userRecordName
        }

        /// Checks that exactly one part is set, and that it is well formed: an e-mail address
        /// by ``UserIdentity/validate(emailAddress:)``, a user record name by the rules of an
        /// owner name (F127), which user record names are.
        ///
        /// - Throws: ``SyncError`` `invalidArguments` naming the lookup info and the rule.
        public func validate() throws(SyncError) {
            switch (emailAddress, userRecordName) {
            case (let email?, nil):
                try UserIdentity.validate(emailAddress: email)
            case (nil, let name?):
                // A user record name (`_user2`) starts with "_", as an owner name may: its rules.
                if let problem = Identifier.ownerName.violation(name) {
                    throw SyncError(.invalidArguments, "invalid user record name \(quoted(name)): \(problem)")
                }
            case (nil, nil):
                throw SyncError(.invalidArguments, "a lookup info names no e-mail address and no user record name")
            case (.some, .some):
                throw SyncError(
                    .invalidArguments, "a lookup info names both an e-mail address and a user record name; give one")
            }
        }

        /// A one-line rendering: `<bob@example.com>` or `user "_user2"`.
        public var description: String {
            UserIdentity(userRecordName: userRecordName, emailAddress: emailAddress).description
        }
    }
}
