/// The per-item outcomes of a modify request (zones, records or subscriptions).
///
/// Every item of the request has exactly one entry: the saved item as the server now holds it,
/// or its error; and for each deletion, success or its error. A failure of the whole request is
/// thrown instead. Used through ``ModifyZonesResponse``, ``ModifyRecordsResponse`` and
/// ``ModifySubscriptionsResponse``.
public struct ModifyResponse<ID: Hashable & Sendable & Codable, Saved: Hashable & Sendable & Codable>: Sendable,
    Equatable,
    Codable
{
    /// The outcome of each save.
    public var saveResults: [ID: Result<Saved, SyncError>]
    /// The outcome of each deletion.
    public var deleteResults: [ID: Result<Void, SyncError>]

    /// Creates a response.
    public init(saveResults: [ID: Result<Saved, SyncError>] = [:], deleteResults: [ID: Result<Void, SyncError>] = [:]) {
        self.saveResults = saveResults
        self.deleteResults = deleteResults
    }

    /// Whether two responses hold the same items with the same outcomes.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.saveResults == rhs.saveResults && ResultCoding.equal(lhs.deleteResults, rhs.deleteResults)
    }

    private enum CodingKeys: String, CodingKey { case saveResults, deleteResults }

    /// Decodes a response whose results are arrays of `{id, value}` or `{id, error}` entries.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        saveResults = try ResultCoding.results(
            container.decode([ResultEntry<ID, Saved>].self, forKey: .saveResults), codingPath: container.codingPath)
        deleteResults = try ResultCoding.voidResults(
            container.decode([ResultEntry<ID, Bool>].self, forKey: .deleteResults), codingPath: container.codingPath)
    }

    /// Encodes the results as arrays of `{id, value}` or `{id, error}` entries.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ResultCoding.entries(saveResults), forKey: .saveResults)
        try container.encode(ResultCoding.entries(deleteResults), forKey: .deleteResults)
    }
}
