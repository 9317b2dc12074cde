/// A request for zones with their capabilities and share references (F156).
public struct FetchZonesRequest: Sendable, Hashable, Codable {
    /// The zones to fetch, or `nil` for every zone of the database.
    public var zoneIDs: [RecordZone.ID]?
    /// The operation group the request belongs to, for the server's telemetry (F69), or `nil`.
    public var operationGroup: OperationGroup?

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - zoneIDs: The zones to fetch, or `nil` for every zone of the database.
    ///   - operationGroup: The operation group the request belongs to (F69).
    public init(zoneIDs: [RecordZone.ID]? = nil, operationGroup: OperationGroup? = nil) {
        self.zoneIDs = zoneIDs
        self.operationGroup = operationGroup
    }
}

/// The zones a ``FetchZonesRequest`` asked for.
///
/// For named zones, every zone has an entry: the zone, or its error (such as `zoneNotFound`).
/// For all zones, every entry is a success.
public struct FetchZonesResponse: Sendable, Equatable, Codable {
    /// The outcome for each zone.
    public var results: [RecordZone.ID: Result<RecordZone, SyncError>]

    /// Creates a response.
    public init(results: [RecordZone.ID: Result<RecordZone, SyncError>] = [:]) {
        self.results = results
    }

    private enum CodingKeys: String, CodingKey { case results }

    /// Decodes a response whose results are arrays of `{id, value}` or `{id, error}` entries.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        results = try ResultCoding.results(
            container.decode([ResultEntry<RecordZone.ID, RecordZone>].self, forKey: .results),
            codingPath: container.codingPath)
    }

    /// Encodes the results as arrays of `{id, value}` or `{id, error}` entries.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ResultCoding.entries(results), forKey: .results)
    }
}
