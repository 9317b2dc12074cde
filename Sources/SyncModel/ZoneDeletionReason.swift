/// Why a zone disappeared, as reported by the database change feed (F49, F140, F150).
///
/// Raw values match `CKSyncEngineZoneDeletionReason`.
public enum ZoneDeletionReason: Int, Sendable, Hashable, Codable, CaseIterable {
    /// An app deleted the zone: remove the zone's local data.
    case deleted = 0
    /// The user removed the app's data from settings: remove local data and do not re-upload it.
    case purged = 1
    /// The user reset encrypted data during account recovery: re-upload local data.
    case encryptedDataReset = 2
}
