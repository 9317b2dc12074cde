extension SyncError {
    /// The item a per-item error concerns: a record, a zone or a subscription.
    ///
    /// The key of ``SyncError/partialErrors``, the analogue of the keys of
    /// `CKPartialErrorsByItemIDKey` (F101).
    public enum ItemID: Sendable, Hashable, Codable, CustomStringConvertible {
        /// A record.
        case record(Record.ID)
        /// A record zone.
        case zone(RecordZone.ID)
        /// A subscription.
        case subscription(Subscription.ID)

        /// A one-line rendering, such as `record "n1" in zone "Notes"`.
        public var description: String {
            switch self {
            case .record(let id): id.description
            case .zone(let id): id.description
            case .subscription(let id): "subscription \(quoted(id.rawValue))"
            }
        }
    }
}
