import Foundation

/// The changes a zone change feed reports about records (F39, F141).
public enum RecordZoneChange {
    /// A record created or changed since the token, in its current full state (F141, F143).
    public struct Modification: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The record with its system fields (and only the desired keys, if some were asked for).
        public var record: Record

        /// Creates a modification.
        public init(record: Record) { self.record = record }

        /// A one-line rendering, such as `modified record "n1" in zone "Notes"`.
        public var description: String { "modified \(record.recordID)" }
    }

    /// A record deleted since the token, with its type (F139).
    public struct Deletion: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The deleted record's ID.
        public var recordID: Record.ID
        /// The deleted record's type.
        public var recordType: Record.RecordType

        /// Creates a deletion.
        public init(recordID: Record.ID, recordType: Record.RecordType) {
            self.recordID = recordID
            self.recordType = recordType
        }

        /// A one-line rendering, such as `deleted Note record "n1" in zone "Notes"`.
        public var description: String { "deleted \(recordType) \(recordID)" }
    }
}

/// A request for one page of a zone's change feed (F141).
public struct FetchZoneChangesRequest: Sendable, Hashable, Codable {
    /// The zone.
    public var zoneID: RecordZone.ID
    /// Where the previous fetch of this zone ended, or `nil` for the zone's full contents.
    public var since: ZoneChangeToken?
    /// The most record changes wanted in this page, or `nil` for the server's choice; the server
    /// may return fewer.
    public var resultsLimit: Int?
    /// The fields wanted in each record, or `nil` for all; `[]` returns system fields only.
    public var desiredKeys: [String]?
    /// The operation group the request belongs to, for the server's telemetry (F69), or `nil`.
    public var operationGroup: OperationGroup?

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - zoneID: The zone.
    ///   - since: Where the previous fetch ended, or `nil` for the zone's full contents.
    ///   - resultsLimit: The most record changes wanted, or `nil` for the server's choice.
    ///   - desiredKeys: The fields wanted, or `nil` for all.
    ///   - operationGroup: The operation group the request belongs to (F69).
    public init(
        zoneID: RecordZone.ID, since: ZoneChangeToken? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil,
        operationGroup: OperationGroup? = nil
    ) {
        self.operationGroup = operationGroup
        self.zoneID = zoneID
        self.since = since
        self.resultsLimit = resultsLimit
        self.desiredKeys = desiredKeys
    }

    /// Checks the zone ID, that the token belongs to the zone, the results limit (F142) and the
    /// desired keys (``Identifier/fieldKey``), and the operation group.
    ///
    /// The server also rejects a token of a deleted incarnation, which only it can know.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the zone.
    public func validate() throws(SyncError) {
        try zoneID.validate()
        if let since, since.zoneID != zoneID {
            throw SyncError(
                .invalidArguments, "fetchZoneChanges got a token of \(since.zoneID) for \(zoneID)",
                item: .zone(zoneID))
        }
        try RequestChecks.checkResultsLimit(resultsLimit, operation: "fetchZoneChanges")
        for key in desiredKeys ?? [] {
            try Identifier.fieldKey.validate(key, item: .zone(zoneID), context: " among the desired keys")
        }
        try operationGroup?.validate()
    }
}

/// One page of a zone's change feed (F141, F143).
///
/// Each record appears at most once, in its latest state, and never as modified after it was
/// deleted. ``changeToken`` is a safe resume point; if ``moreComing`` is `true`, fetch again
/// from it.
public struct FetchZoneChangesResponse: Sendable, Hashable, Codable {
    /// The zone.
    public var zoneID: RecordZone.ID
    /// Records created or changed, in their current state.
    public var modifications: [RecordZoneChange.Modification]
    /// Records deleted, with their types.
    public var deletions: [RecordZoneChange.Deletion]
    /// Where this page ends.
    public var changeToken: ZoneChangeToken
    /// Whether more changes follow the token.
    public var moreComing: Bool
    /// The ``ModifyRecordsRequest/clientChangeToken`` of this client's latest write to the zone
    /// the server has applied, if it sent one (F159).
    public var clientChangeToken: Data?

    /// Creates a response.
    public init(
        zoneID: RecordZone.ID, modifications: [RecordZoneChange.Modification] = [],
        deletions: [RecordZoneChange.Deletion] = [], changeToken: ZoneChangeToken, moreComing: Bool = false,
        clientChangeToken: Data? = nil
    ) {
        self.zoneID = zoneID
        self.modifications = modifications
        self.deletions = deletions
        self.changeToken = changeToken
        self.moreComing = moreComing
        self.clientChangeToken = clientChangeToken
    }
}

/// A page of a zone's change feed with the bytes each of its records was read from
/// (``RecordBytesFetching``).
package struct FetchedZoneChanges: Sendable {
    /// The page.
    package var response: FetchZoneChangesResponse
    /// For each record of `response.modifications`, in order, the `Record` protobuf bytes it was
    /// read from (a server log's stored record, as the server keeps and sends it), which decode to
    /// exactly that record; `nil` when they were not kept.
    package var recordBytes: [ArraySlice<UInt8>]?

    package init(response: FetchZoneChangesResponse, recordBytes: [ArraySlice<UInt8>]?) {
        self.response = response
        self.recordBytes = recordBytes
    }
}

/// A database that can hand over a fetched page's records with the bytes they were read from, so
/// that a device that logs the page writes those bytes instead of encoding each record again
/// (the in-process server, the HTTP client). The page is the one `fetchZoneChanges` returns.
package protocol RecordBytesFetching: CloudDatabase {
    /// `fetchZoneChanges`, with each record's bytes where they can be kept.
    func fetchZoneChangesKeepingRecordBytes(_ request: FetchZoneChangesRequest) async throws -> FetchedZoneChanges
}
