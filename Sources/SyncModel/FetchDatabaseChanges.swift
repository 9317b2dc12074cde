/// The changes a database change feed reports about zones (F37, F140).
public enum DatabaseChange {
    /// A zone that is new, changed, or holds changed records since the token.
    public struct Modification: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The zone.
        public var zoneID: RecordZone.ID

        /// Creates a modification.
        public init(zoneID: RecordZone.ID) { self.zoneID = zoneID }

        /// A one-line rendering, such as `modified zone "Notes"`.
        public var description: String { "modified \(zoneID)" }
    }

    /// A zone deleted since the token, and why (F49, F150).
    public struct Deletion: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The zone.
        public var zoneID: RecordZone.ID
        /// Why the zone is gone.
        public var reason: ZoneDeletionReason

        /// Creates a deletion.
        public init(zoneID: RecordZone.ID, reason: ZoneDeletionReason = .deleted) {
            self.zoneID = zoneID
            self.reason = reason
        }

        /// A one-line rendering, such as `deleted zone "Notes" (purged)`.
        public var description: String { "deleted \(zoneID) (\(reason))" }
    }
}

/// A request for one page of a database's change feed (F140).
public struct FetchDatabaseChangesRequest: Sendable, Hashable, Codable {
    /// Where the previous fetch ended, or `nil` for all history.
    public var since: DatabaseChangeToken?
    /// The most zone changes wanted in this page, or `nil` for the server's choice; the server
    /// may return fewer.
    public var resultsLimit: Int?
    /// The operation group the request belongs to, for the server's telemetry (F69), or `nil`.
    public var operationGroup: OperationGroup?

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - since: Where the previous fetch ended, or `nil` for all history.
    ///   - resultsLimit: The most zone changes wanted, or `nil` for the server's choice.
    ///   - operationGroup: The operation group the request belongs to (F69).
    public init(since: DatabaseChangeToken? = nil, resultsLimit: Int? = nil, operationGroup: OperationGroup? = nil) {
        self.since = since
        self.resultsLimit = resultsLimit
        self.operationGroup = operationGroup
    }

    /// Checks the operation group, and that the results limit, if any, is at least 1.
    ///
    /// - Throws: ``SyncError`` `invalidArguments`.
    public func validate() throws(SyncError) {
        try operationGroup?.validate()
        try RequestChecks.checkResultsLimit(resultsLimit, operation: "fetchDatabaseChanges")
    }
}

/// One page of a database's change feed (F140).
///
/// Each zone appears at most once. ``changeToken`` is a safe resume point; if ``moreComing`` is
/// `true`, fetch again from it.
public struct FetchDatabaseChangesResponse: Sendable, Hashable, Codable {
    /// Zones new, changed, or holding changed records.
    public var modifications: [DatabaseChange.Modification]
    /// Zones deleted, with the reason.
    public var deletions: [DatabaseChange.Deletion]
    /// Where this page ends.
    public var changeToken: DatabaseChangeToken
    /// Whether more changes follow the token.
    public var moreComing: Bool

    /// Creates a response.
    public init(
        modifications: [DatabaseChange.Modification] = [], deletions: [DatabaseChange.Deletion] = [],
        changeToken: DatabaseChangeToken, moreComing: Bool = false
    ) {
        self.modifications = modifications
        self.deletions = deletions
        self.changeToken = changeToken
        self.moreComing = moreComing
    }
}
